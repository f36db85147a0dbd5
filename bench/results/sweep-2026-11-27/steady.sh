#!/bin/bash
# steady.sh BIN ROUNDS CONFIG... : bursty alone, 3 phases of 600 ms, mean latency per phase
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  name=${c%%@*}; spec=${c#*@}; env=
  case $spec in *=*:*) env=${spec%%:*}; spec=${spec#*:};; esac
  [ "$name" = "$c" ] && name=$spec
  env $env $bin/toy --localities 2 --workload bursty --phases 3 --phase-ms 600 --coalescing $spec 2>&1 | grep "^phase" | sed -E "s/.*latency_us=([0-9.]+).*/$name \1/"
done; done
