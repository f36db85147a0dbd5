#!/usr/bin/env bash
# Instructions per spawn + run + await of an empty task (one worker, fan-outs
# of 1,024), by callgrind: the marginal cost between a run of N spawns and
# one of 3N, so that start-up cancels out. Needs valgrind.
#
#   bench/callgrind-spawn.sh never      # queued tasks
#   bench/callgrind-spawn.sh adaptive   # the default: short children inline
set -euo pipefail
policy=${1:-never}
n=${N:-300000}
here=$(cd "$(dirname "$0")/.." && pwd)
(cd "$here" && cargo build --release -q -p courier --example spawn_fanout)
bin=$here/target/release/examples/spawn_fanout
# The clock's calibration at start-up (quanta) varies by millions of
# instructions from run to run: its count is left out.
instructions() {
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$policy" >/dev/null 2>&1
    callgrind_annotate --threshold=100 "$out" 2>/dev/null | tr -d , | awk '
        /PROGRAM TOTALS/ { total = $1 }
        /quanta::Calibration::calibrate/ { calibration += $1 }
        END { print total - calibration }'
    rm -f "$out"
}
a=$(instructions "$n")
b=$(instructions $((3 * n)))
echo "spawn ($policy): $(( (b - a) / (2 * n) )) instructions per spawn"
