#!/bin/bash
# Ping-pong (the matrix's command), configurations alternated each round:
#   pingpong-ab.sh ROUNDS NAME@DIR:SPEC...
# prints "NAME b2b_us sparse_us" per invocation.
rounds=$1; shift
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%@*}; rest=${c#*@}; b=${rest%%:*}; spec=${rest#*:}
  out=$($b/pingpong --latency-only --iterations 20000 --coalescing $spec 2>&1)
  b2b=$(echo "$out" | grep "^phase 1: pattern=back_to_back" | grep -o "rtt_us=[0-9.]*" | cut -d= -f2)
  sp=$(echo "$out" | grep "^phase 2: pattern=sparse" | grep -o "rtt_us=[0-9.]*" | cut -d= -f2)
  echo "$name $b2b $sp"
done; done
