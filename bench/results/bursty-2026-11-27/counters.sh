#!/bin/bash
# The responder's flushes in toy bursty (6 phases), per configuration:
#   counters.sh BIN CONFIG...   (CONFIG as in phases-ab.sh: SPEC or NAME=ENV:SPEC)
bin=$1; shift
for c in "$@"; do
  name=${c%%=*}; env=; spec=$c
  case $c in *=*:*) env=${c#*=}; env=${env%%:*}; spec=${c##*:};; esac
  echo "== $name"
  env $env $bin/toy --localities 2 --workload bursty --phases 6 --coalescing $spec \
    $(for n in flush-answered flush-bypass flush-idle flush-timer messages; do
        for l in 0 1; do echo --print-counter "/coalescing{locality#$l/total}/count/$n@toy::get_cplx"; done; done) 2>&1 \
    | grep "^/coalescing" | sed 's/,/ /g' | awk '{print $1, $NF}'
done
