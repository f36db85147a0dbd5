#!/bin/bash
# parquet only: pq-ab.sh BIN ROUNDS CONFIG... (CONFIG as in throughput-ab.sh)
bin=$1; rounds=$2; shift 2
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%=*}; name=${name%%,*}; env=; spec=$c; b=$bin
  case $c in
    *@*:*) name=${c%%@*}; rest=${c#*@}; b=${rest%%:*}; spec=${rest#*:};;
    *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};;
  esac
  v=$(env $env $b/parquet --localities 2 --nc 64 --iterations 6 --coalescing $spec 2>&1 | grep "^phase" | tail -n +2 | grep -o "seconds=[0-9.]*" | cut -d= -f2 | med); echo "$name parquet $v"
done; done
