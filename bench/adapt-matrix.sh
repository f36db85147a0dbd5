#!/usr/bin/env bash
# The workload matrix of issue #15 (adaptive coalescing): every workload
# below, on 2 localities over TCP, under every coalescing SPEC of a list,
# RUNS invocations each, interleaved (round after round over the workloads
# and the settings, so that the machine's drift spreads over all of them;
# each round starts the settings one later, so that none always runs first),
# then a summary: per workload × setting the median, min, max and spread,
# each setting's cost against the best, and the decisions of adaptive
# coalescing per phase where the app reports them (toy, toyphases, parquet).
#
#   bench/adapt-matrix.sh [-n RUNS] [-o DIR] [--grid] [--top K RAW.csv] [SPEC ...]
#   bench/adapt-matrix.sh --summarize RAW.csv        # the summary again
#
# SPECs are --coalescing specs (`off`, `on`, `count:...`, `bytes:...`, or a
# later one such as `adaptive`); without any, $SPECS (space-separated), else
# the default list below (off, on and the best static settings of the
# 2026-11-25 baseline). --grid adds the static grid of that baseline (count
# num_parcels 16..16384 × interval_us 10,100,1000, bytes buffer_bytes
# 1024..65536, off, on); --top K RAW.csv adds the K best settings of every
# workload in an earlier run's raw.csv (the refinement of a coarse sweep).
# WORKLOADS (space-separated) picks a subset of: histo ig randomaccess
# parquet toy toyphases pingpong. BIN is the directory of the binaries (default
# target/release of this tree: cargo build --release -p courier-apps -p
# courier-cli). Writes DIR/raw.csv (one row per phase of every
# invocation, through `courier sweep`), DIR/runs.log (every invocation's
# whole output), DIR/specs.txt, DIR/meta.txt, DIR/summary.txt and
# DIR/summary.csv. A failed or timed-out invocation is recorded
# (failed=1) and the matrix goes on.
#
# The workloads and their figure (one invocation = one sample; for the
# multi-phase apps the sample is the median of the invocation's phases):
#   histo            histo --updates 4000000 --runs 1      M updates/s per locality (higher)
#   ig               ig --reads 2000000 --runs 1 (batch)   M reads/s per locality (higher)
#   randomaccess     randomaccess --log-table-size 19 --lookahead 0 --runs 1
#                    GUP/s (higher); --lookahead 0 lets the SPEC under test
#                    govern the update action (HPCC's 1024-update look-ahead
#                    would force count policies to 512 parcels)
#   parquet          parquet --nc 64 --iterations 5        seconds per iteration (lower)
#   toy              toy --parcels 400000 --phases 3       calls/s (higher): every call
#                    is made, then every result awaited in order
#   toy_batch, toy_bursty, toy_steady, toy_sparse, toy_awaits: one invocation
#                    (workload toyphases) of toy --workload
#                    batch,bursty,steady,sparse,awaits --parcels 400000
#                    --phases 10: the workload changes every phase, twice
#                    round; batch: calls/s (higher), the others: mean µs from
#                    a call to its result (lower); see apps/src/bin/toy.rs.
#                    PHASE_MS sets the paced phases' length (--phase-ms,
#                    default 300): a sparse phase of 300 ms holds 2,000
#                    calls, and one stall of the host of a millisecond
#                    moves its mean by several percent
#   pingpong_b2b     pingpong --latency-only --iterations 20000: 8-byte round
#   pingpong_sparse  trips back to back, and after a 300 µs pause each; median µs (lower).
#                    The app alternates blocks of iterations/5 of each; with blocks of
#                    400 the back-to-back median measured the switch from the sparse
#                    block (22 or 30 µs), with 4,000 the round trip (15–17 µs;
#                    BENCHMARKS.md, issue #15, tenth part)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
self="$here/$(basename "$0")"
root=$(cd "$here/.." && pwd)
bin=${BIN:-$root/target/release}

# off, on, and the settings that came out best for some workload in the
# 2026-11-25 baseline (bench/results/adapt-baseline-2026-11-25).
DEFAULT_SPECS="off on count:num_parcels=1024,interval_us=1000 count:num_parcels=4096,interval_us=1000 count:num_parcels=16384,interval_us=1000 bytes:buffer_bytes=65536"
ALL_WORKLOADS="histo ig randomaccess parquet toy toyphases pingpong"
TIMEOUT=${TIMEOUT:-300}

grid_specs() {
    local n i b
    for n in 16 64 256 1024 4096 16384; do
        for i in 10 100 1000; do
            # 4096 parcels, 100 µs is `on` (the default count policy).
            [ "$n/$i" = 4096/100 ] && continue
            echo "count:num_parcels=$n,interval_us=$i"
        done
    done
    for b in 1024 4096 16384 65536; do echo "bytes:buffer_bytes=$b"; done
    echo off
    echo on
}

# --one WORKLOAD INDEX SPECFILE: one invocation under the INDEX-th spec of
# SPECFILE (1-based), its figures as `phase N: workload=.. spec=.. value=..`
# lines for `courier sweep`; its whole output goes to runs.log beside SPECFILE.
run_one() {
    local w=$1 idx=$2 specfile=$3
    local spec log out status=0
    spec=$(sed -n "${idx}p" "$specfile")
    log="$(dirname "$specfile")/runs.log"
    local common=(--localities 2 --transport tcp --coalescing "$spec")
    local cmd
    case "$w" in
        histo) cmd=("$bin/histo" --updates 4000000 --runs 1) ;;
        ig) cmd=("$bin/ig" --reads 2000000 --runs 1) ;;
        randomaccess) cmd=("$bin/randomaccess" --log-table-size 19 --lookahead 0 --runs 1) ;;
        parquet) cmd=("$bin/parquet" --nc 64 --iterations 5) ;;
        toy) cmd=("$bin/toy" --parcels 400000 --phases 3) ;;
        toyphases) cmd=("$bin/toy" --workload batch,bursty,steady,sparse,awaits --parcels 400000 --phases 10 ${PHASE_MS:+--phase-ms "$PHASE_MS"}) ;;
        pingpong) cmd=("$bin/pingpong" --latency-only --iterations 20000) ;;
        *) echo "unknown workload $w" >&2; exit 2 ;;
    esac
    # The machine's 1-minute load average before the run: another job on
    # this 2-core machine shows in it (the run's own two processes do not
    # yet).
    local load1
    load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo nan)
    out=$(timeout "$TIMEOUT" "${cmd[@]}" "${common[@]}" 2>&1) || status=$?
    {
        echo "### $(date -u +%FT%TZ) workload=$w spec=$spec status=$status load1=$load1"
        echo "### ${cmd[*]} ${common[*]}"
        echo "$out"
    } >>"$log"
    if [ "$status" != 0 ]; then
        echo "phase 0: workload=$w spec=$spec failed=1 status=$status load1=$load1"
        return 0
    fi
    local tag="spec=$spec failed=0 load1=$load1"
    case "$w" in
        histo)
            echo "$out" | sed -n "s/^run \([0-9]*\): .*mups_per_locality=\([0-9.]*\).*/phase \1: workload=histo $tag metric=mups_per_locality better=higher value=\2/p" ;;
        ig)
            echo "$out" | sed -n "s/^run \([0-9]*\): .*mreads_per_locality=\([0-9.]*\).*/phase \1: workload=ig $tag metric=mreads_per_locality better=higher value=\2/p" ;;
        randomaccess)
            echo "$out" | sed -n "s/^run \([0-9]*\): .*gups=\([0-9.]*\).*/phase \1: workload=randomaccess $tag metric=gups better=higher value=\2/p" ;;
        parquet)
            echo "$out" | sed -n "s/^phase \([0-9]*\): seconds=\([0-9.]*\).* decisions=\([0-9]*\) .* n_oh=\([0-9.]*\).*/phase \1: workload=parquet $tag metric=seconds_per_iteration better=lower value=\2 decisions=\3 n_oh=\4/p" ;;
        toy)
            echo "$out" | sed -n "s/^phase \([0-9]*\): .*calls_per_s=\([0-9.]*\).* decisions=\([0-9]*\) .* n_oh=\([0-9.]*\).*/phase \1: workload=toy $tag metric=calls_per_s better=higher value=\2 decisions=\3 n_oh=\4/p" ;;
        toyphases)
            # One row per phase, named by its workload: batch by calls/s,
            # the paced and latency-bound kinds by µs from call to result.
            echo "$out" | sed -n \
                -e "s/^phase \([0-9]*\): workload=batch .*calls_per_s=\([0-9.]*\).* decisions=\([0-9]*\) .* n_oh=\([0-9.]*\).*/phase \1: workload=toy_batch $tag metric=calls_per_s better=higher value=\2 decisions=\3 n_oh=\4/p" \
                -e "s/^phase \([0-9]*\): workload=\([a-z]*\) .*latency_us=\([0-9.]*\).* decisions=\([0-9]*\) .* n_oh=\([0-9.]*\).*/phase \1: workload=toy_\2 $tag metric=latency_us better=lower value=\3 decisions=\4 n_oh=\5/p" ;;
        pingpong)
            echo "$out" | sed -n \
                -e "s/^phase 1: pattern=back_to_back.* rtt_us=\([0-9.]*\).*/phase 1: workload=pingpong_b2b $tag metric=rtt_us better=lower value=\1/p" \
                -e "s/^phase 2: pattern=sparse.* rtt_us=\([0-9.]*\).*/phase 2: workload=pingpong_sparse $tag metric=rtt_us better=lower value=\1/p" ;;
    esac
}

summarize() {
    python3 - "$@" <<'EOF'
import csv, statistics, sys, os
from collections import defaultdict

raw = sys.argv[1]
out_dir = os.path.dirname(os.path.abspath(raw))
rows = list(csv.DictReader(open(raw)))
order = ["histo", "ig", "randomaccess", "parquet", "toy", "toy_batch", "toy_bursty", "toy_steady",
         "toy_sparse", "toy_awaits", "pingpong_b2b", "pingpong_sparse"]
# One sample per invocation (w, s, run): the median of its phases.
inv = defaultdict(list)
meta = {}
failed = defaultdict(int)
for r in rows:
    if r.get("failed") == "1":
        failed[(r["workload"], r["spec"])] += 1
        continue
    key = (r["workload"], r["spec"], r["run"])
    inv[key].append(float(r["value"]))
    meta[r["workload"]] = (r["metric"], r["better"])
cells = defaultdict(list)
for (w, s, run), vals in inv.items():
    cells[(w, s)].append(statistics.median(vals))
sample = {k: statistics.median(v) for k, v in inv.items()}

def costs(w, s, b):
    """Per round, how many times longer the same work took under `s` than
    under `b` in the same round (>1: `s` is worse)."""
    hi = meta[w][1] == "higher"
    return [(sample[(w, b, k[2])] / sample[k]) if hi else (sample[k] / sample[(w, b, k[2])])
            for k in sample if k[0] == w and k[1] == s and (w, b, k[2]) in sample]

def med_range(r):
    return (statistics.median(r), min(r), max(r)) if r else None

def vs_on(w, s):
    """Paired gain over `on`: per round, the setting's performance over
    `on`'s in the same round (>1: better than on); median, min, max."""
    return med_range([1 / c for c in costs(w, s, "on")])

def vs_best(w, s, b):
    """Paired cost against the best static setting `b` (>1: worse), per
    round; median, min, max. Unlike the ratio of the medians, it leaves
    out the drift between rounds."""
    return med_range(costs(w, s, b))

def fmt_on(t):
    return f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]" if t else "–"

workloads = [w for w in order if w in meta] + sorted(w for w in meta if w not in order)
spec_order = []
for r in rows:
    if r["spec"] not in spec_order:
        spec_order.append(r["spec"])

def is_static(spec):
    return spec == "off" or spec == "on" or spec.startswith(("count", "bytes"))

lines, table = [], []
best = {}
for w in workloads:
    metric, better = meta[w]
    hi = better == "higher"
    stats = []
    for s in spec_order:
        v = cells.get((w, s))
        if not v:
            continue
        m = statistics.median(v)
        stats.append((s, m, min(v), max(v), len(v)))
    stats.sort(key=lambda t: -t[1] if hi else t[1])
    statics = [t for t in stats if is_static(t[0])]
    b = statics[0] if statics else stats[0]
    best[w] = b
    # cost against the best static: how many times longer the same work takes.
    cost = lambda m: (b[1] / m) if hi else (m / b[1])
    lines.append(f"## {w}: {metric} ({better} is better)")
    lines.append(f"{'setting':<44} {'n':>2} {'median':>12} {'min':>12} {'max':>12} {'spread':>7} {'cost_vs_best':>12}  paired gain over on")
    for s, m, lo, hi_, n in stats:
        spread = (hi_ - lo) / m if m else float("nan")
        g = vs_on(w, s)
        lines.append(f"{s:<44} {n:>2} {m:>12.5g} {lo:>12.5g} {hi_:>12.5g} {spread:>6.0%} {cost(m):>12.2f}  {fmt_on(g)}")
        table.append(dict(workload=w, metric=metric, better=better, spec=s, n=n, median=m,
                          min=lo, max=hi_, spread=round(spread, 4), cost_vs_best_static=round(cost(m), 4),
                          gain_over_on_paired=round(g[0], 4) if g else "",
                          gain_over_on_min=round(g[1], 4) if g else "",
                          gain_over_on_max=round(g[2], 4) if g else ""))
    for (fw, fs), k in sorted(failed.items()):
        if fw == w:
            lines.append(f"{fs:<44} {k} invocation(s) FAILED (see runs.log)")
    lines.append("")

# The matrix: best static, then on, off and any non-static setting.
focus = [s for s in spec_order if not is_static(s)]
cols = ["on", "off"] + focus
head = ["workload", "metric", "best static (spec)", "best static", "its paired gain over on"] + cols
mat = ["# Matrix: median [min, max] of the invocations; (×N) = cost against the best static",
       "# (how many times longer the same work takes); for adaptive settings also paired ×N",
       "# [min, max]: per round, that cost against the best static's run of the same round,",
       "# median [min, max]; paired gain over on = per round, the setting's performance over",
       "# on's in the same round (>1: better), median [min, max]",
       "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for w in workloads:
    metric, better = meta[w]
    b = best[w]
    hi = better == "higher"
    cell = [w, f"{metric} ({better})", f"`{b[0]}`", f"{b[1]:.4g} [{b[2]:.4g}, {b[3]:.4g}] n={b[4]}",
            fmt_on(vs_on(w, b[0]))]
    for s in cols:
        v = cells.get((w, s))
        if not v:
            cell.append("–")
            continue
        m = statistics.median(v)
        c = (b[1] / m) if hi else (m / b[1])
        paired = vs_best(w, s, b[0]) if s in focus else None
        paired = f"; paired ×{paired[0]:.2f} [{paired[1]:.2f}, {paired[2]:.2f}]" if paired else ""
        cell.append(f"{m:.4g} [{min(v):.4g}, {max(v):.4g}] (×{c:.2f}{paired})")
    mat.append("| " + " | ".join(cell) + " |")
loads = [float(r["load1"]) for r in rows if r.get("load1") not in (None, "", "nan")]
if loads:
    loads.sort()
    mat += ["", f"1-minute load average before the invocations: median {statistics.median(loads):.2f}, "
            f"90th percentile {loads[int(0.9 * (len(loads) - 1))]:.2f}, max {loads[-1]:.2f} "
            "(2 cores: the matrix's own runs keep it near 2; well above 2 is another job's load)"]
# Decisions of adaptive coalescing per phase, where the app reports them
# (`decisions`: the most any locality made during the phase). A phase is
# steady when the invocation's phase before it ran the same workload (the
# toy's and parquet's phases after the first; none of toyphases').
invocation = lambda r: (r.get("w"), r["spec"], r["run"])
workload_of = {(invocation(r), r["phase"]): r["workload"] for r in rows}
dec, steady = defaultdict(list), defaultdict(list)
for r in rows:
    if r.get("failed") != "1" and r.get("decisions") not in (None, "") and not is_static(r["spec"]):
        d = float(r["decisions"])
        dec[(r["workload"], r["spec"])].append(d)
        if workload_of.get((invocation(r), str(int(r["phase"]) - 1))) == r["workload"]:
            steady[(r["workload"], r["spec"])].append(d)
if dec:
    mat += ["", "# Decisions per phase, the most of any locality (non-static settings; the issue asks",
            "# for at most 3 a phase and none in steady phases: those after a phase of the same workload)",
            "", "| workload | setting | phases | median | max | phases with more than 3 | steady phases | their max |",
            "|---|---|---|---|---|---|---|---|"]
    for w in workloads:
        for s in spec_order:
            d = dec.get((w, s))
            if d:
                st = steady.get((w, s), [])
                mat.append(f"| {w} | `{s}` | {len(d)} | {statistics.median(d):g} | {max(d):g} | "
                           f"{sum(x > 3 for x in d)} | {len(st)} | {max(st) if st else 0:g} |")
text = "\n".join(mat) + "\n\n# Every setting, best first\n\n" + "\n".join(lines)
open(os.path.join(out_dir, "summary.txt"), "w").write(text)
with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(table[0].keys()))
    wr.writeheader()
    wr.writerows(table)
print(text)
EOF
}

# --top K RAW.csv: the K settings of best median of every workload.
top_specs() {
    python3 - "$@" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
k, raw = int(sys.argv[1]), sys.argv[2]
inv, better = defaultdict(list), {}
for r in csv.DictReader(open(raw)):
    if r.get("failed") == "1":
        continue
    inv[(r["workload"], r["spec"], r["run"])].append(float(r["value"]))
    better[r["workload"]] = r["better"] == "higher"
cells = defaultdict(list)
for (w, s, _), v in inv.items():
    cells[(w, s)].append(statistics.median(v))
out = []
for w, hi in better.items():
    ranked = sorted(((statistics.median(v), s) for (ww, s), v in cells.items() if ww == w),
                    reverse=hi)
    for _, s in ranked[:k]:
        if s not in out:
            out.append(s)
print("\n".join(out))
EOF
}

case "${1:-}" in
    --one) shift; run_one "$@"; exit 0 ;;
    --summarize) shift; summarize "$@"; exit 0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
esac

argv="$0 $*"
RUNS=${RUNS:-3}
OUT=""
extra=()
specs=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) RUNS=$2; shift 2 ;;
        -o) OUT=$2; shift 2 ;;
        --grid) mapfile -t g < <(grid_specs); extra+=("${g[@]}"); shift ;;
        --top) mapfile -t g < <(top_specs "$2" "$3"); extra+=("${g[@]}"); shift 3 ;;
        -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
        *) specs+=("$1"); shift ;;
    esac
done
if [ ${#specs[@]} -eq 0 ] && [ ${#extra[@]} -eq 0 ]; then
    read -r -a specs <<<"${SPECS:-$DEFAULT_SPECS}"
fi
OUT=${OUT:-$root/bench/results/adapt-matrix-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# The list, in order, without repeats.
printf '%s\n' "${specs[@]}" "${extra[@]}" | awk 'NF && !seen[$0]++' >"$OUT/specs.txt"
n=$(wc -l <"$OUT/specs.txt")
read -r -a workloads <<<"${WORKLOADS:-$ALL_WORKLOADS}"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "host: $(uname -srm), $(nproc) cores"
    # Latency rows depend on the guest's idle polling (bench/idle-poll.sh).
    echo "idle: $("$here/idle-poll.sh" show | paste -sd' ')"
    echo "invoked as: $argv"
    echo "expanded: $0 -n $RUNS -o $OUT $(tr '\n' ' ' <"$OUT/specs.txt")"
    echo "workloads: ${workloads[*]}"
    echo "phase_ms (toyphases): ${PHASE_MS:-300 (the default)}"
    echo "runs: $RUNS, settings: $n"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"
cat -n "$OUT/specs.txt"
w_list=$(IFS=,; echo "${workloads[*]}")
s_list=$(seq -s, 1 "$n")
"$bin/courier" sweep --runs "$RUNS" --timeout $((TIMEOUT + 60)) --out "$OUT/raw.csv" \
    --param "w=$w_list" --param "s=$s_list" -- "$self" --one '{w}' '{s}' "$OUT/specs.txt"
summarize "$OUT/raw.csv"
