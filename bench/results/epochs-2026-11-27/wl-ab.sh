#!/bin/bash
# alternated A/B of one toy workload under adaptive: wl-ab.sh WORKLOAD ROUNDS
for r in $(seq 1 ${2:-8}); do for b in m t; do
  /tmp/bin-$b/toy --localities 2 --workload $1 --phases 6 --coalescing adaptive 2>&1 | grep -o "latency_us=[0-9.]*\|decisions=[0-9]*" | paste - - | sed "s/^/$b /"
done; done
