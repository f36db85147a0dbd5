#!/bin/bash
# Paired A/B of the toy's steady phases: timer threads left to the OS (free)
# against each locality's timer (and monitor) thread kept on its own
# worker's CPU by taskset after start-up (pinned). ROUNDS rounds, order
# alternated. Prints one line per phase: variant round phase latency p50 p99.
ROUNDS=${1:-10}; BIN=${BIN:-/tmp/bin-s29a}; ARGS=${ARGS:---workload steady --phases 12 --coalescing adaptive}
one() {
  local variant=$1 round=$2
  "$BIN/toy" $ARGS > /tmp/s29/tp-out.txt 2>&1 &
  local tp=$!
  if [ "$variant" = pinned ]; then
    sleep 0.15
    for p in $(pgrep -x toy); do
      for t in /proc/$p/task/*; do
        c=$(cat $t/comm 2>/dev/null)
        case $c in courier-0-timer|courier-0-monit) taskset -p -c 0 ${t##*/} >/dev/null;;
                   courier-1-timer|courier-1-monit) taskset -p -c 1 ${t##*/} >/dev/null;; esac
      done
    done
  else
    sleep 0.15
    for p in $(pgrep -x toy); do for t in /proc/$p/task/*; do c=$(cat $t/comm 2>/dev/null); case $c in courier-*-timer|courier-*-monit) taskset -p -c 0,1 ${t##*/} >/dev/null;; esac; done; done
  fi
  wait $tp
  sed -n "s/^phase \([0-9]*\): .*latency_us=\([0-9.]*\) p50_us=\([0-9.]*\) p99_us=\([0-9.]*\).*/$variant $round \1 \2 \3 \4/p" /tmp/s29/tp-out.txt
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then one free $r; one pinned $r; else one pinned $r; one free $r; fi
done
