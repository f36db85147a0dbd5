#!/bin/bash
# Bursty after batch, settings alternated in each round:
#   settings-ab.sh BIN ROUNDS SPEC...
# each invocation: toy --workload batch,bursty --phases 6 (3 bursty phases);
# prints "SPEC latency_us" per bursty phase.
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for spec in "$@"; do
  $bin/toy --localities 2 --workload batch,bursty --phases 6 --parcels 400000 --coalescing $spec 2>&1 \
    | grep "workload=bursty" | grep -o "latency_us=[0-9.]*" | sed "s/^/$spec /"
done; done
