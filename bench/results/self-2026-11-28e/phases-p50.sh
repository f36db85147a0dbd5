#!/bin/bash
# phases-p50.sh ROUNDS "NAME|SPEC|BIN" ... : as ../self-2026-11-28b/phases-rot.sh (builds rotated
# by one every round), but one line a phase with both figures of a latency phase:
# `NAME toy_WORKLOAD MEAN_US P50_US P99_US` (batch: `NAME toy_batch CALLS_PER_S`).
# W=WORKLOADS and P=PHASES pick other phases (default: the matrix's toyphases).
rounds=$1; shift
specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds - 1))); do for j in $(seq 0 $((n - 1))); do
  c=${specs[$(( (r + j) % n ))]}
  IFS="|" read -r name spec b <<< "$c"
  $b/toy --workload ${W:-batch,bursty,steady,sparse,awaits} --parcels 400000 --phases ${P:-10} --coalescing $spec 2>&1 | grep "^phase" | while read -r line; do
    w=$(grep -o "workload=[a-z]*" <<< "$line" | cut -d= -f2)
    if [ "$w" = batch ]; then
      echo "$name toy_$w $(grep -o "calls_per_s=[0-9.]*" <<< "$line" | cut -d= -f2)"
    else
      f() { grep -o " $1=[0-9.]*" <<< "$line" | cut -d= -f2; }
      echo "$name toy_$w $(f latency_us) $(f p50_us) $(f p99_us)"
    fi
  done
done; done
