#!/bin/bash
# ab.sh ROUNDS "NAME|ENV...|SPEC|BIN" ...  -> NAME WORKLOAD VALUE
rounds=$1; shift
for r in $(seq 1 $rounds); do for c in "$@"; do
  IFS='|' read -r name envs spec b <<< "$c"
  v=$(env $envs $b/histo --updates 4000000 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o "mups_per_locality=[0-9.]*" | cut -d= -f2); echo "$name histo $v"
  v=$(env $envs $b/ig --reads 2000000 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o "mreads_per_locality=[0-9.]*" | cut -d= -f2); echo "$name ig $v"
  v=$(env $envs $b/randomaccess --log-table-size 19 --lookahead 0 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o " gups=[0-9.]*" | cut -d= -f2); echo "$name randomaccess $v"
  v=$(env $envs $b/toy --parcels 400000 --phases 3 --coalescing $spec 2>&1 | grep "^phase" | grep -o "calls_per_s=[0-9.]*" | cut -d= -f2 | sort -n | sed -n 2p); echo "$name toy $v"
done; done
