#!/bin/bash
# ra.sh BIN ROUNDS SPEC... : randomaccess gups per spec, alternated
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  v=$($bin/randomaccess --log-table-size 19 --lookahead 0 --runs 1 --coalescing $c 2>&1 | grep "^run" | grep -o " gups=[0-9.]*" | cut -d= -f2 | head -1); echo "$c $v"
done; done
