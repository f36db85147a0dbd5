#!/bin/bash
# blocks4.sh BIN ROUNDS WORKLOADS NAME=ENV:SPEC... : bursty phases (12 blocks of 5 bursts) of a workload list
bin=$1; rounds=$2; wl=$3; shift 3
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; rest=${c#*=}; env=${rest%%:*}; spec=${rest#*:}
  env TOY_X_BLOCK=2500 $env $bin/toy --localities 2 --workload $wl --phases 4 --parcels 400000 --coalescing $spec 2>&1 | grep "^blocks" | awk 'NF==13' | sed "s/^blocks/$name/"
done; done
