#!/bin/bash
# Messages and flush reasons of toy's bursty phases, by difference of the
# cumulative counters of runs with one phase more:
#   phase-counters.sh BIN SPEC P...   (P: runs of P-1 and P phases of batch,bursty)
# prints "SPEC P locality counter value(P) - value(P-1)".
bin=$1; spec=$2; shift 2
args=(); for L in 0 1; do for c in flush-answered flush-bypass flush-idle flush-timer flush-count flush-bytes flush-split messages; do args+=(--print-counter "/coalescing{locality#$L/total}/count/$c@toy::get_cplx"); done; done
run() { $bin/toy --localities 2 --workload batch,bursty --phases $1 --parcels 400000 --coalescing $spec "${args[@]}" 2>&1 | grep "^/coalescing" | sed -E 's/^\/coalescing\{locality#([01])\/total\}\/count\/([a-z-]+)@[^,]*,[^,]*,[^,]*,[^,]*,([0-9.]+).*/\1 \2 \3/'; }
for p in "$@"; do
  paste <(run $((p-1))) <(run $p) | awk -v s="$spec" -v p=$p '{print s, p, $1, $2, $6 - $3}'
done
