#!/usr/bin/env bash
# Two builds of the toy side by side, interleaved: each round runs the
# toy's ten phases (batch, bursty, steady, sparse, awaits, twice) under
# `adaptive` with build A, then with build B, then under `off` with build
# A; prints each workload's median figure per configuration (calls/s for
# batch, mean µs from a call to its result for the others) and the most
# decisions a phase made.
#
#   bench/toy-ab.sh A_RELEASE_DIR B_RELEASE_DIR [ROUNDS] [OUT]
#   bench/toy-ab.sh /work/wt-base/target/release target/release 7
#
# OUT (default /tmp/toy-ab.txt) gets one line per phase: config workload
# figure decisions. A run that fails stops the script with its error.
# CONFIGS (default "A:adaptive B:adaptive A:off") lists the build:setting
# pairs each round runs, in order.
set -euo pipefail
a=$1
b=$2
rounds=${3:-7}
out=${4:-/tmp/toy-ab.txt}
: >"$out"
. "$(dirname "$0")/ab-lib.sh"
for _ in $(seq 1 "$rounds"); do
    for cfg in ${CONFIGS:-A:adaptive B:adaptive A:off}; do
        dir=$a
        [ "${cfg%%:*}" = B ] && dir=$b
        toy_rows "$cfg" "$dir" "${cfg##*:}" >>"$out"
    done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
figures, decisions = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    cfg, w, v, d = line.split()
    figures[(cfg, w)].append(float(v))
    decisions[(cfg, w)].append(int(d))
for w in ["batch", "bursty", "steady", "sparse", "awaits"]:
    print(w, "  ".join(
        f"{c}={statistics.median(figures[(c, w)]):.1f} (n={len(figures[(c, w)])}, most decisions {max(decisions[(c, w)])})"
        for c in sorted({c for c, _ in figures}) if (c, w) in figures))
PY
