#!/bin/bash
# kdamond-ab.sh ROUNDS "NAME|SPEC|BIN" ... : every round runs each spec with the guest's DAMON
# monitor (kdamond.0, paging out) on and off, which first (alternated by round), builds rotated;
# lines `NAME-K toy_W MEAN P50 P99` with K = on/off. Needs root; leaves kdamond on. W and P as in
# ../self-2026-11-28e/phases-p50.sh (default: steady, 6 phases).
rounds=$1; shift
specs=("$@"); n=${#specs[@]}
st=/sys/kernel/mm/damon/admin/kdamonds/0/state
for r in $(seq 0 $((rounds - 1))); do
  for kk in 0 1; do
   if [ $(( (r + kk) % 2 )) = 0 ]; then k=off; else k=on; fi
   [ "$(cat $st)" = $k ] || echo $k > $st
   for j in $(seq 0 $((n - 1))); do
    c=${specs[$(( (r + j) % n ))]}
    IFS="|" read -r name spec b <<< "$c"
    $b/toy --workload ${W:-steady} --parcels 400000 --phases ${P:-6} --coalescing $spec 2>&1 | grep "^phase" | while read -r line; do
      w=$(grep -o "workload=[a-z]*" <<< "$line" | cut -d= -f2)
      if [ "$w" = batch ]; then
        echo "$name-$k toy_$w $(grep -o "calls_per_s=[0-9.]*" <<< "$line" | cut -d= -f2)"
      else
        f() { grep -o " $1=[0-9.]*" <<< "$line" | cut -d= -f2; }
        echo "$name-$k toy_$w $(f latency_us) $(f p50_us) $(f p99_us)"
      fi
    done
   done
  done
done
[ "$(cat $st)" = on ] || echo on > $st
