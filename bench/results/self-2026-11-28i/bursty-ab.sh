#!/bin/bash
# bursty-ab.sh ROUNDS SPEC...: the toy's bursty phases alone (toy --workload bursty --phases 6),
# each SPEC once a round, the order rotated each round; one line per phase: spec round phase mean p50 p99
ROUNDS=$1; shift; specs=("$@"); n=${#specs[@]}; BIN=${BIN:-/tmp/bin-s29a}
for r in $(seq 1 $ROUNDS); do
  for i in $(seq 0 $((n - 1))); do
    s=${specs[$(( (i + r) % n ))]}
    $BIN/toy --workload bursty --phases 6 --coalescing "$s" 2>&1 | sed -n "s/^phase \([0-9]*\): .*latency_us=\([0-9.]*\) p50_us=\([0-9.]*\) p99_us=\([0-9.]*\).*/$s $r \1 \2 \3 \4/p"
  done
done
