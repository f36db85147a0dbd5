#!/bin/bash
# deciles.sh ROUNDS BIN "NAME|SPEC" ... : toy --workload ${W:-bursty,steady} --phases ${P:-2}
# under each setting in turn (order rotated each round), with a toy that prints the mean
# latency of each tenth of a phase's calls (in issue order) -> "NAME WORKLOAD d0=.. .. d9=..".
rounds=$1; b=$2; shift 2
specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds - 1))); do for j in $(seq 0 $((n - 1))); do
  IFS="|" read -r name spec <<< "${specs[$(( (r + j) % n ))]}"
  $b/toy --workload ${W:-bursty,steady} --parcels 400000 --phases ${P:-2} ${EXTRA:-} --coalescing $spec 2>&1 \
    | grep -a "^phase-start\|^slices" | awk -v n="$name" '/^phase-start/{w=$2} /^slices/{printf "%s %s", n, w; for (i=2;i<=NF;i++) printf " %s", $i; print ""}'
done; done
