#!/bin/bash
rounds=${1:-8}
for r in $(seq 1 $rounds); do
  for c in "off /tmp/bin-m off" "adaptive /tmp/bin-m adaptive" "notune /tmp/bin-x adaptive" "idle /tmp/bin-x adaptive"; do
    set -- $c
    unset COURIER_NO_TUNING COURIER_TUNE_IDLE
    [ $1 = notune ] && export COURIER_NO_TUNING=1
    [ $1 = idle ] && export COURIER_TUNE_IDLE=1
    out=$($2/pingpong --latency-only --iterations 20000 --coalescing $3 2>&1)
    echo "$1 b2b $(grep back_to_back <<<"$out" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) sparse $(grep 'pattern=sparse' <<<"$out" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) $(grep pattern=sparse <<<"$out" | grep -o 'coalescing=.*')"
  done
done
