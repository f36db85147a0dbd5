#!/bin/bash
# ig and parquet under adaptive with and without a throwaway switch,
# alternated in each round (ig: M reads/s per locality; parquet: the median
# phase's seconds): apps-ab.sh BIN ROUNDS CONFIG... (CONFIG as in phases-ab.sh)
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; env=; spec=$c
  case $c in *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};; esac
  ig=$(env $env $bin/ig --localities 2 --reads 2000000 --runs 1 --coalescing $spec 2>&1 | grep -o "median mreads_per_locality=[0-9.]*" | cut -d= -f2)
  pq=$(env $env $bin/parquet --localities 2 --nc 64 --iterations 5 --coalescing $spec 2>&1 | grep "^phase" | grep -o "seconds=[0-9.]*" | cut -d= -f2 | sort -n | sed -n 3p)
  echo "$name ig=$ig parquet=$pq"
done; done
