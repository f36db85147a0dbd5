#!/bin/bash
# Bursty after batch: adaptive with and without COURIER_POLL_FLUSH (a throwaway
# switch of the pollflush experiment build), and on, alternated in each round:
#   pollflush-ab.sh BIN ROUNDS
bin=$1; rounds=$2
for r in $(seq 1 $rounds); do for c in adaptive pf on; do
  case $c in pf) env="COURIER_POLL_FLUSH=1"; spec=adaptive;; *) env=; spec=$c;; esac
  env $env $bin/toy --localities 2 --workload batch,bursty --phases 6 --parcels 400000 --coalescing $spec 2>&1 \
    | grep -o "workload=[a-z]* .*calls_per_s=[0-9]*\|latency_us=[0-9.]*" | sed 's/seconds.*calls_per_s/calls_per_s/' | paste -sd' ' | sed "s/^/$c /"
done; done
