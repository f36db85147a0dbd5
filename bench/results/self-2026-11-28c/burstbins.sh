#!/bin/bash
# burstbins.sh ROUNDS BIN "NAME|ARGS" ...: with a toy that prints the mean latency by a call's
# place in its burst of 500 (tenths, TOY_BURST_BINS=500), per bursty phase -> "NAME p0=.. .. p9=..".
rounds=$1; b=$2; shift 2
specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds - 1))); do for j in $(seq 0 $((n - 1))); do
  IFS="|" read -r name args <<< "${specs[$(( (r + j) % n ))]}"
  TOY_BURST_BINS=500 $b/toy --parcels 400000 $args 2>&1 | grep -a "^phase-start\|^burstbins" \
    | awk -v n="$name" '/^phase-start/{w=$2} /^burstbins/ && w=="bursty" {printf "%s", n; for (i=2;i<=NF;i++) printf " %s", $i; print ""}'
done; done
