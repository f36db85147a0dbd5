#!/bin/bash
for r in $(seq 1 ${1:-8}); do for b in m t; do
  /tmp/bin-$b/toy --localities 2 --workload batch --phases 6 --coalescing adaptive 2>&1 | grep -o "calls_per_s=[0-9]*\|decisions=[0-9]*" | paste - - | sed "s/^/$b /"
done; done
