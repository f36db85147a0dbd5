#!/bin/bash
# interleaved A/B of throughput apps + pingpong, adaptive; ROUNDS
rounds=${1:-5}
for r in $(seq 1 $rounds); do
 for b in m w; do
  B=/tmp/bin-$b
  echo "$b histo $($B/histo --updates 4000000 --runs 1 --coalescing adaptive 2>&1 | grep -o 'median mups_per_locality=[0-9.]*' | cut -d= -f2)"
  echo "$b ig $($B/ig --reads 2000000 --runs 1 --coalescing adaptive 2>&1 | grep -o 'median mreads_per_locality=[0-9.]*' | cut -d= -f2)"
  echo "$b ra $($B/randomaccess --log-table-size 19 --lookahead 0 --runs 1 --coalescing adaptive 2>&1 | grep -o 'median gups=[0-9.]*' | cut -d= -f2)"
  echo "$b parquet $($B/parquet --nc 64 --iterations 5 --coalescing adaptive 2>&1 | grep -o 'parcels_per_s=[0-9.]*' | cut -d= -f2 | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')"
  pp=$($B/pingpong --latency-only --iterations 20000 --coalescing adaptive 2>&1)
  echo "$b pp_b2b $(grep back_to_back <<<"$pp" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2)"
  echo "$b pp_sparse $(grep 'pattern=sparse' <<<"$pp" | grep -o 'rtt_us=[0-9.]*' | cut -d= -f2)"
 done
done
