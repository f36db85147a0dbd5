#!/bin/bash
# IV_CAP A/B on one binary: iv-ab.sh WORKLOAD ROUNDS FIELD
for r in $(seq 1 ${2:-8}); do for c in base cap; do
  if [ $c = cap ]; then export IV_CAP=1; else unset IV_CAP; fi
  /tmp/bin-iv/toy --localities 2 --workload $1 --phases 6 --coalescing adaptive 2>&1 | grep -o "$3=[0-9.]*\|decisions=[0-9]*" | paste - - | sed "s/^/$c /"
done; done
