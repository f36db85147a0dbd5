#!/bin/bash
# phases-ab.sh ROUNDS "NAME|SPEC|BIN" ... -> NAME toy_WORKLOAD VALUE (each phase of
# toy --workload batch,bursty,steady,sparse,awaits --parcels 400000 --phases 10, as the matrix
# runs it; batch: calls/s, the others: mean latency µs)
rounds=$1; shift
for r in $(seq 1 $rounds); do for c in "$@"; do
  IFS='|' read -r name spec b <<< "$c"
  $b/toy --workload batch,bursty,steady,sparse,awaits --parcels 400000 --phases 10 --coalescing $spec 2>&1 | grep "^phase" | while read -r line; do
    w=$(grep -o "workload=[a-z]*" <<< "$line" | cut -d= -f2)
    if [ "$w" = batch ]; then v=$(grep -o "calls_per_s=[0-9.]*" <<< "$line" | cut -d= -f2); else v=$(grep -o "latency_us=[0-9.]*" <<< "$line" | cut -d= -f2); fi
    echo "$name toy_$w $v"
  done
done; done
