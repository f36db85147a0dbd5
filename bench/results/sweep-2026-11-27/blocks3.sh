#!/bin/bash
# blocks3.sh BIN ROUNDS NAME=ENV:SPEC... : bursty after batch, per block of 5 bursts
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; rest=${c#*=}; env=${rest%%:*}; spec=${rest#*:}
  env TOY_X_BLOCK=2500 $env $bin/toy --localities 2 --workload batch,bursty --phases 4 --parcels 400000 --coalescing $spec 2>&1 | grep "^blocks" | sed "s/^blocks/$name/"
done; done
