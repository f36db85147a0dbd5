#!/bin/bash
# blocks.sh BIN ROUNDS SPEC... : per bursty phase (after batch), mean latency per block of 5 bursts
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  TOY_X_BLOCK=2500 $bin/toy --localities 2 --workload batch,bursty --phases 6 --parcels 400000 --coalescing $c 2>&1 | grep "^blocks" | sed "s/^blocks/$c/"
done; done
