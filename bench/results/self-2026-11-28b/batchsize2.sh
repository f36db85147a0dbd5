#!/bin/bash
# batchsize2.sh ROUNDS BIN [toy args...]: batchsize.sh, the pairings 250,250 and 1928,250 only,
# with extra toy arguments (e.g. --phase-ms 1200)
rounds=$1; b=$2; shift 2
pairs=(250,250 1928,250)
for r in $(seq 0 $((rounds - 1))); do for j in 0 1; do
  p=${pairs[$(( (r + j) % 2 ))]}
  v=$($b/toy --workload batch,bursty --parcels 400000 --phases 2 --phase-num-parcels $p --interval-us 10000 "$@" 2>&1 | grep "workload=bursty" | grep -o "latency_us=[0-9.]*" | cut -d= -f2)
  echo "$p toy_bursty $v"
done; done
