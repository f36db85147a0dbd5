#!/bin/bash
# Bursty alone (6 phases), settings alternated in each round:
#   bursty-sweep.sh BIN ROUNDS SPEC...   (SPEC "pf" = adaptive with COURIER_POLL_FLUSH=1,
#   "frozen" = adaptive with COURIER_NO_TUNING=1: throwaway switches of the
#   pollflush experiment build, not committed; "noanswer" = frozen with
#   COURIER_NO_ANSWER_RUN=1: responses not sent with their run; "old",
#   "oldfrozen" = adaptive, frozen with COURIER_OLD_ALONE=1: a response sent
#   alone does not stamp its buffer, as before the fix)
bin=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for c in "$@"; do
  case $c in pf) env="COURIER_POLL_FLUSH=1"; spec=adaptive;; frozen) env="COURIER_NO_TUNING=1"; spec=adaptive;; noanswer) env="COURIER_NO_TUNING=1 COURIER_NO_ANSWER_RUN=1"; spec=adaptive;; old) env="COURIER_OLD_ALONE=1"; spec=adaptive;; oldfrozen) env="COURIER_NO_TUNING=1 COURIER_OLD_ALONE=1"; spec=adaptive;; pffrozen) env="COURIER_NO_TUNING=1 COURIER_POLL_FLUSH=1"; spec=adaptive;; *) env=; spec=$c;; esac
  env $env $bin/toy --localities 2 --workload bursty --phases 6 --coalescing $spec 2>&1 \
    | grep -o "workload=[a-z]* \|latency_us=[0-9.]*" | paste -sd' ' | sed "s/^/$c /"
done; done
