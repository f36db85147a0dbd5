#!/bin/bash
# phases-rot.sh ROUNDS "NAME|SPEC|BIN[|ENV]" ... : as phases-ab.sh, the order of the builds
# rotated by one every round (round r starts with the r-th), so that no build always
# runs first or last. W=WORKLOADS and P=PHASES pick other phases (default: the matrix's), EXTRA=".." adds toy arguments.
rounds=$1; shift
specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds - 1))); do for j in $(seq 0 $((n - 1))); do
  c=${specs[$(( (r + j) % n ))]}
  IFS="|" read -r name spec b envs <<< "$c"
  env $envs $b/toy --workload ${W:-batch,bursty,steady,sparse,awaits} --parcels 400000 --phases ${P:-10} ${EXTRA:-} --coalescing $spec 2>&1 | grep "^phase" | while read -r line; do
    w=$(grep -o "workload=[a-z]*" <<< "$line" | cut -d= -f2)
    if [ "$w" = batch ]; then v=$(grep -o "calls_per_s=[0-9.]*" <<< "$line" | cut -d= -f2); else v=$(grep -o "latency_us=[0-9.]*" <<< "$line" | cut -d= -f2); fi
    echo "$name toy_$w $v"
  done
done; done
