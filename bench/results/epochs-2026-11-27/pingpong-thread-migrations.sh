#!/bin/bash
rounds=${1:-4}
for r in $(seq 1 $rounds); do
  for c in "off /tmp/bin-m off" "adaptive /tmp/bin-m adaptive" "notune /tmp/bin-x adaptive" "idle /tmp/bin-x adaptive"; do
    set -- $c
    unset COURIER_NO_TUNING COURIER_TUNE_IDLE
    [ $1 = notune ] && export COURIER_NO_TUNING=1
    [ $1 = idle ] && export COURIER_TUNE_IDLE=1
    perf stat -e context-switches,cpu-migrations,task-clock -x, -o /tmp/exp/st.txt $2/pingpong --latency-only --iterations 20000 --coalescing $3 > /tmp/exp/out.txt 2>&1
    echo "$1 sparse $(grep 'pattern=sparse' /tmp/exp/out.txt | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) b2b $(grep 'back_to_back' /tmp/exp/out.txt | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2) $(grep -v '^#' /tmp/exp/st.txt | grep -v '^$' | cut -d, -f1,3 | tr '\n' ' ')"
  done
done
