#!/bin/bash
# blocks2.sh BIN ROUNDS WORKLOAD SPEC... : per bursty phase, mean latency per block of 5 bursts
bin=$1; rounds=$2; wl=$3; shift 3
for r in $(seq 1 $rounds); do for c in "$@"; do
  TOY_X_BLOCK=2500 $bin/toy --localities 2 --workload $wl --phases 2 --parcels 400000 --coalescing $c 2>&1 | grep "^blocks" | sed "s/^blocks/$c/"
done; done
