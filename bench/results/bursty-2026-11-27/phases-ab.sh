#!/bin/bash
# The matrix's toy phases, configurations alternated in each round:
#   phases-ab.sh BIN ROUNDS CONFIG...
# CONFIG is a --coalescing spec, or NAME=ENV:SPEC for a spec run with a
# throwaway switch of the experiment build (e.g. cap100=COURIER_AWAITED_CAP=100:adaptive).
# Prints one line per invocation: CONFIG workload=W value ... (batch: calls_per_s,
# others: latency_us).
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; env=; spec=$c
  case $c in *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};; esac
  env $env $bin/toy --localities 2 --workload batch,bursty,steady,sparse,awaits --parcels 400000 --phases 10 --coalescing $spec 2>&1 \
    | grep "^phase" | sed -E 's/.*workload=([a-z]+) .*calls_per_s=([0-9]+)( latency_us=([0-9.]+))?.*/\1 \2 \4/' \
    | awk -v n="$name" '{ v = ($1 == "batch") ? $2 : $3; printf "%s=%s ", $1, v } END { print "" }' | sed "s/^/$name /"
done; done
