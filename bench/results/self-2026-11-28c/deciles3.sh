#!/bin/bash
# dec3.sh ROUNDS BIN "NAME|ARGS" ...: deciles of toy phases, toy arguments per entry
rounds=$1; b=$2; shift 2
specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds - 1))); do for j in $(seq 0 $((n - 1))); do
  IFS="|" read -r name args <<< "${specs[$(( (r + j) % n ))]}"
  $b/toy --parcels 400000 $args 2>&1 \
    | grep -a "^phase-start\|^slices" | awk -v n="$name" '/^phase-start/{w=$2} /^slices/{printf "%s %s", n, w; for (i=2;i<=NF;i++) printf " %s", $i; print ""}'
done; done
