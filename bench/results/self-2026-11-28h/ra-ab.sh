#!/bin/bash
# ra-ab.sh ROUNDS SPEC... : randomaccess as the matrix runs it, the specs rotated by one each round; one line a run: SPEC GUPS
rounds=$1; shift; specs=("$@"); n=${#specs[@]}
for r in $(seq 0 $((rounds-1))); do for j in $(seq 0 $((n-1))); do
  s=${specs[$(( (r+j) % n ))]}
  g=$(${BIN:-/tmp/bin-s28a}/randomaccess --log-table-size 19 --lookahead 0 --runs 1 --coalescing $s 2>&1 | grep -o "^run 1: .*gups=[0-9.]*" | grep -o "gups=[0-9.]*" | cut -d= -f2)
  echo "$s $g"
done; done
