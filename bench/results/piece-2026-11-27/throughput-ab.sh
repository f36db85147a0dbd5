#!/bin/bash
# The throughput rows of bench/adapt-matrix.sh (histo, ig, randomaccess,
# parquet, toy: the same commands), configurations alternated in each round:
#   throughput-ab.sh BIN ROUNDS CONFIG...
# CONFIG is a --coalescing spec, NAME=ENV:SPEC (a spec run with a throwaway
# switch of an experiment build), or NAME@DIR:SPEC (the binaries of DIR).
# Prints one line per invocation: NAME WORKLOAD VALUE (higher is better for
# all but parquet's seconds per iteration; multi-phase apps: the median phase).
bin=$1; rounds=$2; shift 2
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; env=; spec=$c; b=$bin
  case $c in
    *@*:*) name=${c%%@*}; rest=${c#*@}; b=${rest%%:*}; spec=${rest#*:};;
    *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};;
  esac
  v=$(env $env $b/histo --updates 4000000 --runs 1 --coalescing $spec 2>&1 | grep -o "mups_per_locality=[0-9.]*" | cut -d= -f2 | med); echo "$name histo $v"
  v=$(env $env $b/ig --reads 2000000 --runs 1 --coalescing $spec 2>&1 | grep -o "mreads_per_locality=[0-9.]*" | cut -d= -f2 | med); echo "$name ig $v"
  v=$(env $env $b/randomaccess --log-table-size 19 --lookahead 0 --runs 1 --coalescing $spec 2>&1 | grep "^run" | grep -o " gups=[0-9.]*" | cut -d= -f2 | med); echo "$name randomaccess $v"
  v=$(env $env $b/parquet --nc 64 --iterations 5 --coalescing $spec 2>&1 | grep "^phase" | grep -o "seconds=[0-9.]*" | cut -d= -f2 | med); echo "$name parquet $v"
  v=$(env $env $b/toy --parcels 400000 --phases 3 --coalescing $spec 2>&1 | grep "^phase" | grep -o "calls_per_s=[0-9.]*" | cut -d= -f2 | med); echo "$name toy $v"
done; done
