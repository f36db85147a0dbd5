#!/bin/bash
# usage: run.sh ROUNDS SETTINGS...
R=$1; shift
for r in $(seq 1 $R); do for s in "$@"; do
  rm -rf /tmp/diag; d=/tmp/diagrun/$(echo $s | tr ':/,=' '____')-$r; rm -rf $d
  /tmp/bin-diag/toy --workload sparse --phases 8 --coalescing $s > /tmp/diagrun/out.txt 2>&1
  mkdir -p $d; mv /tmp/diag/* $d/ 2>/dev/null; cp /tmp/diagrun/out.txt $d/
done; done
