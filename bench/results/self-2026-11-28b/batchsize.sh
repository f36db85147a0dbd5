#!/bin/bash
# batchsize.sh ROUNDS BIN: toy --workload batch,bursty --phases 2 under static counts per
# phase (--phase-num-parcels BATCH,BURSTY --interval-us 10000), the four pairings of 250
# and 1928 rotated each round -> "BATCH,BURSTY toy_bursty LATENCY_US".
rounds=$1; b=$2
pairs=(250,250 1928,250 250,1928 1928,1928)
for r in $(seq 0 $((rounds - 1))); do for j in 0 1 2 3; do
  p=${pairs[$(( (r + j) % 4 ))]}
  v=$($b/toy --workload batch,bursty --parcels 400000 --phases 2 --phase-num-parcels $p --interval-us 10000 2>&1 | grep "workload=bursty" | grep -o "latency_us=[0-9.]*" | cut -d= -f2)
  echo "$p toy_bursty $v"
done; done
