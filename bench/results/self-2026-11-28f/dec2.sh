#!/bin/bash
# as deciles.sh, but "NAME|SPEC|BIN" (a build per setting)
rounds=$1; shift
specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds - 1))); do for j in $(seq 0 $((n - 1))); do
  IFS="|" read -r name spec b <<< "${specs[$(( (r + j) % n ))]}"
  $b/toy --workload ${W:-bursty,steady} --parcels 400000 --phases ${P:-2} ${EXTRA:-} --coalescing $spec 2>&1 \
    | grep -a "^phase-start\|^slices" | awk -v n="$name" '/^phase-start/{w=$2} /^slices/{printf "%s %s", n, w; for (i=2;i<=NF;i++) printf " %s", $i; print ""}'
done; done
