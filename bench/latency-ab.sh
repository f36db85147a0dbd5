#!/usr/bin/env bash
# Two builds side by side on the latency-bound workloads: each round runs
# the toy's ten phases (batch, bursty, steady, sparse, awaits, twice) and
# `pingpong --latency-only` under `on`, `off` and `adaptive`, each with
# build A then build B (B first in even rounds), interleaved; prints each
# workload's median per build and setting (calls/s for batch, mean µs
# from a call to its result for the other toy phases, median round trip
# for pingpong). A run that fails stops the script with its error.
#
#   bench/latency-ab.sh A_RELEASE_DIR B_RELEASE_DIR [ROUNDS] [OUT]
#   bench/latency-ab.sh /work/main/target/release target/release 5
#
# OUT (default /tmp/latency-ab.txt) gets one line per phase: build:setting
# workload figure (and, for the toy, the decisions it made). Unlike
# bench/toy-ab.sh (adaptive under two builds, off under A), every setting
# runs under both builds.
set -euo pipefail
a=$1
b=$2
rounds=${3:-5}
out=${4:-/tmp/latency-ab.txt}
: >"$out"
. "$(dirname "$0")/ab-lib.sh"
for round in $(seq 1 "$rounds"); do
    # A before B in odd rounds, B before A in even ones: a drift of the
    # machine over the run weighs on both builds alike.
    first=A second=B
    if [ $((round % 2)) = 0 ]; then first=B second=A; fi
    for spec in on off adaptive; do
        for build in $first $second; do
            cfg=$build:$spec
            dir=$a
            [ "$build" = B ] && dir=$b
            toy_rows "$cfg" "$dir" "$spec" >>"$out"
            pp=$(run "$dir/pingpong" --localities 2 --latency-only --iterations 2000 \
                --coalescing "$spec")
            grep -E '^phase' <<<"$pp" | while read -r line; do
                w=pp_$(grep -o 'pattern=[a-z_]*' <<<"$line" | cut -d= -f2)
                echo "$cfg $w $(field rtt_us "$line")" >>"$out"
            done
        done
    done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
figures = collections.defaultdict(list)
for line in open(sys.argv[1]):
    cfg, w, v = line.split()[:3]
    figures[(cfg, w)].append(float(v))
configs = ["A:on", "B:on", "A:off", "B:off", "A:adaptive", "B:adaptive"]
print("%-16s" % "workload" + "".join("%13s" % c for c in configs))
for w in sorted({w for _, w in figures}):
    cells = ("%13.4g" % statistics.median(figures[(c, w)]) if figures[(c, w)] else "%13s" % "-"
             for c in configs)
    print("%-16s" % w + "".join(cells))
PY
