#!/bin/bash
# Bursty after batch (toy --workload batch,bursty --phases 6: 3 bursty
# phases an invocation), configurations alternated in each round:
#   bursty-ab.sh BIN ROUNDS CONFIG...
# CONFIG is a --coalescing spec, NAME=ENV:SPEC (a throwaway switch of
# an experiment build) or NAME@DIR:SPEC (the binaries of DIR). Prints "NAME latency_us" per bursty phase and
# "NAME batch calls_per_s" per batch phase.
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; env=; spec=$c; b=$bin
  case $c in
    *@*:*) name=${c%%@*}; rest=${c#*@}; b=${rest%%:*}; spec=${rest#*:};;
    *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};;
  esac
  env $env $b/toy --localities 2 --workload batch,bursty --phases 6 --parcels 400000 --coalescing $spec 2>&1 \
    | grep "^phase" | sed -E 's/.*workload=([a-z]+) .*calls_per_s=([0-9]+)( latency_us=([0-9.]+))?.*/\1 \2 \4/' \
    | awk -v n="$name" '{ if ($1 == "batch") print n, "batch", $2; else print n, $3 }'
done; done
