#!/bin/bash
# ping-pong, /tmp/bin-s (21e1fc2, m) against /tmp/bin-e (1f87a7b, t), alternated: pingpong-ab.sh ROUNDS
rounds=${1:-8}
for r in $(seq 1 $rounds); do
  for c in "m-off /tmp/bin-s off" "m-adaptive /tmp/bin-s adaptive" "t-adaptive /tmp/bin-e adaptive" "t-off /tmp/bin-e off"; do
    set -- $c
    out=$($2/pingpong --latency-only --iterations 20000 --coalescing $3 2>&1)
    echo "$1 b2b $(grep back_to_back <<<"$out" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) sparse $(grep 'pattern=sparse' <<<"$out" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) $(grep pattern=sparse <<<"$out" | grep -o 'coalescing=.*')"
  done
done
