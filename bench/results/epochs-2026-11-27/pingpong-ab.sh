#!/bin/bash
rounds=${1:-8}
for r in $(seq 1 $rounds); do
  for c in "m-off /tmp/bin-m off" "m-adaptive /tmp/bin-m adaptive" "t-adaptive /tmp/bin-t adaptive" "t-off /tmp/bin-t off"; do
    set -- $c
    out=$($2/pingpong --latency-only --iterations 20000 --coalescing $3 2>&1)
    echo "$1 b2b $(grep back_to_back <<<"$out" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) sparse $(grep 'pattern=sparse' <<<"$out" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) $(grep pattern=sparse <<<"$out" | grep -o 'coalescing=.*')"
  done
done
