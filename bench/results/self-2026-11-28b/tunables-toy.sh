#!/bin/bash
# tunables-toy.sh ROUNDS BIN: toy --parcels 400000 --phases 3 (the middle phase's calls/s)
# under glibc malloc tunables, configurations alternated each round -> "NAME toy CALLS_PER_S".
rounds=$1; b=$2
G=1073741824
names=(none trim mmap toppad all)
envs=("" "glibc.malloc.trim_threshold=$G" "glibc.malloc.mmap_threshold=$G" "glibc.malloc.top_pad=67108864" "glibc.malloc.trim_threshold=$G:glibc.malloc.mmap_threshold=$G:glibc.malloc.top_pad=67108864")
for r in $(seq 1 $rounds); do for i in 0 1 2 3 4; do
  v=$(env GLIBC_TUNABLES="${envs[$i]}" $b/toy --parcels 400000 --phases 3 --coalescing adaptive 2>&1 | grep "^phase" | grep -o "calls_per_s=[0-9.]*" | cut -d= -f2 | sort -n | sed -n 2p)
  echo "${names[$i]} toy $v"
done; done
