#!/bin/bash
# ab.sh ROUNDS "NAME|ENV...|SPEC|BIN" ...  -> NAME WORKLOAD VALUE
rounds=$1; shift; W=${W:-histo ig randomaccess toy}
for r in $(seq 1 $rounds); do for c in "$@"; do
  IFS='|' read -r name envs spec b <<< "$c"
  [[ " $W " == *" histo "* ]] && v=$(env $envs $b/histo --updates 4000000 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o "mups_per_locality=[0-9.]*" | cut -d= -f2); [[ " $W " == *" histo "* ]] && echo "$name histo $v"
  [[ " $W " == *" ig "* ]] && v=$(env $envs $b/ig --reads 2000000 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o "mreads_per_locality=[0-9.]*" | cut -d= -f2); [[ " $W " == *" ig "* ]] && echo "$name ig $v"
  [[ " $W " == *" randomaccess "* ]] && v=$(env $envs $b/randomaccess --log-table-size 19 --lookahead 0 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o " gups=[0-9.]*" | cut -d= -f2); [[ " $W " == *" randomaccess "* ]] && echo "$name randomaccess $v"
  [[ " $W " == *" toy "* ]] && v=$(env $envs $b/toy --parcels 400000 --phases 3 --coalescing $spec 2>&1 | grep "^phase" | grep -o "calls_per_s=[0-9.]*" | cut -d= -f2 | sort -n | sed -n 2p); [[ " $W " == *" toy "* ]] && echo "$name toy $v"
done; done
