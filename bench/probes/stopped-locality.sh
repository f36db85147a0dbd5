#!/usr/bin/env bash
# Hostile-peer probe (issue #14): starts the toy on 2 local processes,
# stops locality 1 with SIGSTOP after 1.5 s, and says how long after the
# stop the root ended and what it said. Extra arguments go to the toy.
#
#   bench/probes/stopped-locality.sh --phases 100
#   bench/probes/stopped-locality.sh --phases 100 --peer-timeout 1
set -uo pipefail
toy=${TOY:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/toy}
out=$(mktemp)
"$toy" --localities 2 "$@" >"$out" 2>&1 &
root=$!
sleep 1.5
child=$(pgrep -P "$root" | head -1)
t0=$(date +%s.%N)
kill -STOP "$child"
wait "$root"
rc=$?
t1=$(date +%s.%N)
kill -KILL "$child" 2>/dev/null
echo "exit status $rc, $(echo "$t1 - $t0" | bc) s after the stop"
grep -E "sent nothing" "$out" | head -1
rm -f "$out"
