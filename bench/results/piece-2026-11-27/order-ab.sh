#!/bin/bash
# Bursty phases by their position in runs of different phase orders:
#   order-ab.sh BIN ROUNDS WORKLOADS SPEC...
# each invocation: toy --workload WORKLOADS --phases 6; prints
# "SPEC i latency_us" for the i-th bursty phase of the invocation.
bin=$1; rounds=$2; workloads=$3; shift 3
for r in $(seq 1 $rounds); do for spec in "$@"; do
  $bin/toy --localities 2 --workload $workloads --phases 6 --parcels 400000 --coalescing $spec 2>&1 \
    | grep "workload=bursty" | grep -o "latency_us=[0-9.]*" | cut -d= -f2 | awk -v s="$spec" '{print s, NR, $1}'
done; done
