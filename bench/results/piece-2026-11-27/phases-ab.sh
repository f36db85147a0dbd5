#!/bin/bash
# The phase matrix's toy phases (bench/adapt-matrix.sh toyphases: the same
# command), configurations alternated in each round:
#   phases-ab.sh BIN ROUNDS CONFIG...
# CONFIG is a --coalescing spec, NAME=ENV:SPEC (a spec run with a throwaway
# switch of an experiment build) or NAME@DIR:SPEC (the binaries of DIR).
# Prints one line per invocation: NAME workload=value ... (batch: calls_per_s,
# others: latency_us); read with ../bursty-2026-11-27/phases-paired.py.
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; env=; spec=$c; b=$bin
  case $c in
    *@*:*) name=${c%%@*}; rest=${c#*@}; b=${rest%%:*}; spec=${rest#*:};;
    *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};;
  esac
  env $env $b/toy --localities 2 --workload batch,bursty,steady,sparse,awaits --parcels 400000 --phases 10 --coalescing $spec 2>&1 \
    | grep "^phase" | sed -E 's/.*workload=([a-z]+) .*calls_per_s=([0-9]+)( latency_us=([0-9.]+))?.*decisions=([0-9]+).*/\1 \2 \4 \5/' \
    | awk -v n="$name" '{ v = ($1 == "batch") ? $2 : $3; printf "%s=%s ", $1, v; d = d " " $1 ":" $NF } END { print "decisions" d }' | sed "s/^/$name /"
done; done
