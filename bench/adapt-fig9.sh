#!/usr/bin/env bash
# A Fig. 9-style figure of adaptive coalescing over time (seed 000: Wagle
# et al. 2018 §V, Fig. 9, n_oh following the coalescing parameters phase
# by phase; here the tuner sets them and the *workload* changes between
# phases). Runs the toy once on 2 localities over TCP under
# `--coalescing adaptive --print-adapt` with the workload changing every
# phase, samples the parameters in force on locality 0 (the sender), the
# tuner's decisions and n_oh of both localities every MS ms through
# Courier's periodic counter output, and writes into DIR:
#
#   toy.log       the toy's standard output (its `phase N:` lines)
#   adapt.log     standard error: every decision with its reason
#   samples.csv   the raw samples (--print-counter-format csv; n_oh is
#                 reset at each print, so each value covers one interval)
#   phases.csv    one row per phase: workload, span, figure, parameters in
#                 force (at the end, and every value sampled during it),
#                 n_oh, decisions
#   phases.md     the same as a table
#   fig9.svg      num_parcels and interval_us in force (log scale) and n_oh
#                 of each locality over time, phase boundaries marked, a
#                 dot at each decision
#   command.txt   the exact command
#
#   bench/adapt-fig9.sh [-o DIR] [-i MS] [--coalescing SPEC] [--workload W,..]
#                       [--phases N] [--parcels N] [--phase-ms MS] [TOY_ARG ...]
#
# --coalescing: default adaptive (`adaptive:max_parcels=4096`, or a static
# SPEC such as `on` for the same run without a tuner, to compare).
# -i: the sampling interval (default 10 ms, the tuner's epoch). The toy's
# flags default to --workload batch,bursty,steady,sparse,awaits --phases 10
# --parcels 400000 --phase-ms 300 (each workload twice); e.g. `--phases 5
# --phase-ms 150` for a quick look. Other TOY_ARGs go to the toy as they
# are (`--rate`, `--burst`, `--window`, ...).
# BIN is the directory of the binaries (default target/release of this
# tree: cargo build --release -p courier-apps).
#
# Times are seconds since locality 0 started; each print round's values
# are placed at locality 0's time of that round (locality 1's own clock
# started a few ms apart). The phase spans come from the toy's `from_s`
# and `until_s` (the same clock). The printer is a task on locality 0's
# worker: while a batch phase keeps that worker issuing calls, it samples
# late (the first sample of a run comes at the end of its first batch).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${BIN:-$root/target/release}

case "${1:-}" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
esac

OUT=""
interval_ms=10
workload=batch,bursty,steady,sparse,awaits
phases=10
parcels=400000
phase_ms=300
coalescing=adaptive
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
        -o) OUT=$2; shift 2 ;;
        -i) interval_ms=$2; shift 2 ;;
        --workload) workload=$2; shift 2 ;;
        --phases) phases=$2; shift 2 ;;
        --parcels) parcels=$2; shift 2 ;;
        --phase-ms) phase_ms=$2; shift 2 ;;
        --coalescing) coalescing=$2; shift 2 ;;
        *) rest+=("$1"); shift ;;
    esac
done
OUT=${OUT:-$root/bench/results/adapt-fig9-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

action=get_cplx
cmd=("$bin/toy" --localities 2 --transport tcp --coalescing "$coalescing" --print-adapt
    --workload "$workload" --phases "$phases" --parcels "$parcels" --phase-ms "$phase_ms"
    --print-counter "/coalescing{locality#0/total}/parameter/num-parcels@$action"
    --print-counter "/coalescing{locality#0/total}/parameter/interval@$action"
    --print-counter "/adapt{locality#*/total}/count/decisions@$action"
    --print-counter-reset "/threads{locality#*/total}/background-overhead"
    --print-counter-interval "$interval_ms" --print-counter-format csv
    --print-counter-destination "$OUT/samples.csv" ${rest[@]+"${rest[@]}"})
{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "load1 before: $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo nan)"
    echo "${cmd[*]}"
} >"$OUT/command.txt"
"${cmd[@]}" >"$OUT/toy.log" 2>"$OUT/adapt.log"

python3 - "$OUT" "$coalescing" <<'EOF'
import csv, os, re, sys
from collections import defaultdict

out, coalescing = sys.argv[1], sys.argv[2]

# The samples: per print round (sequence), locality 0's time and each value.
rounds = defaultdict(dict)
for r in csv.DictReader(open(os.path.join(out, "samples.csv"))):
    m = re.match(r"/(\w+)\{locality#(\d+)/total\}/(.*?)(@.*)?$", r["name"])
    if not m:
        continue
    loc, what = int(m.group(2)), m.group(3)
    key = {"parameter/num-parcels": "num_parcels", "parameter/interval": "interval_us",
           "count/decisions": f"decisions@{loc}", "background-overhead": f"n_oh@{loc}"}.get(what)
    if key:
        rd = rounds[int(r["sequence"])]
        rd[key] = float(r["value"])
        if loc == 0:
            rd["t"] = min(rd.get("t", float("inf")), float(r["time_s"]))
samples = [rounds[k] for k in sorted(rounds) if "t" in rounds[k]]

# The phases, from the toy's lines.
phases = []
for line in open(os.path.join(out, "toy.log")):
    m = re.match(r"phase (\d+): (.*)", line)
    if m:
        kv = dict(w.split("=", 1) for w in m.group(2).split() if "=" in w)
        kv["phase"] = m.group(1)
        phases.append(kv)

def fmt(x):
    return f"{x:g}"

rows = []
for p in phases:
    lo, hi = float(p["from_s"]), float(p["until_s"])
    inside = [s for s in samples if lo <= s["t"] <= hi]
    seen = []
    for s in inside:
        v = (fmt(s.get("num_parcels", 0)), fmt(s.get("interval_us", 0)))
        if not seen or seen[-1] != v:
            seen.append(v)
    metric = "calls_per_s" if "latency_us" not in p else "latency_us"
    rows.append({
        "phase": p["phase"], "workload": p.get("workload", ""),
        "from_s": p["from_s"], "until_s": p["until_s"],
        "metric": metric, "value": p[metric],
        "num_parcels_at_end": p.get("num_parcels", ""), "interval_us_at_end": p.get("interval_us", ""),
        "in_force_sampled": " → ".join(f"{n}/{i}" for n, i in seen),
        "n_oh": p.get("n_oh", ""), "n_oh@0": p.get("n_oh@0", ""), "n_oh@1": p.get("n_oh@1", ""),
        "decisions": p.get("decisions", ""), "decisions@0": p.get("decisions@0", ""),
        "decisions@1": p.get("decisions@1", ""),
    })
if rows:
    with open(os.path.join(out, "phases.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cols = list(rows[0])
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    md += ["", "in_force_sampled: num_parcels/interval_us in force on locality 0 at each sample of the phase, repeats left out"]
    open(os.path.join(out, "phases.md"), "w").write("\n".join(md) + "\n")

# The figure: two panels over one time axis.
W, H, L, R = 960, 560, 70, 130
top = (40, 300)      # num_parcels, interval_us: log scale
bottom = (340, 500)  # n_oh: 0..1
t_end = max([s["t"] for s in samples] + [float(p["until_s"]) for p in phases] + [1e-3])
x = lambda t: L + (W - L - R) * t / t_end
import math
lo_exp, hi_exp = 0, 5  # 1 .. 100,000
def y_log(v):
    v = min(max(v, 10 ** lo_exp), 10 ** hi_exp)
    return top[1] - (top[1] - top[0]) * (math.log10(v) - lo_exp) / (hi_exp - lo_exp)
y_lin = lambda v: bottom[1] - (bottom[1] - bottom[0]) * min(max(v, 0.0), 1.0)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="20" font-size="13">toy::get_cplx under --coalescing {coalescing} over time (locality 0 sends), the workload changing by phase</text>']
# phase spans: shaded alternately, labelled with the workload and decisions.
for i, p in enumerate(phases):
    a, b = x(float(p["from_s"])), x(float(p["until_s"]))
    if i % 2 == 0:
        svg.append(f'<rect x="{a:.1f}" y="{top[0]}" width="{max(b - a, 0.5):.1f}" height="{bottom[1] - top[0]}" fill="#eef2f7"/>')
    svg.append(f'<line x1="{a:.1f}" y1="{top[0]}" x2="{a:.1f}" y2="{bottom[1]}" stroke="#888" stroke-dasharray="3,3"/>')
    svg.append(f'<text x="{a + 2:.1f}" y="{top[0] + 10}" font-size="10">{p.get("workload", "")}</text>')
    svg.append(f'<text x="{a + 2:.1f}" y="{top[0] + 22}" font-size="9" fill="#555">d={p.get("decisions", "")}</text>')
# axes
for (y0, y1) in (top, bottom):
    svg.append(f'<line x1="{L}" y1="{y1}" x2="{W - R}" y2="{y1}" stroke="black"/>')
    svg.append(f'<line x1="{L}" y1="{y0}" x2="{L}" y2="{y1}" stroke="black"/>')
for e in range(lo_exp, hi_exp + 1):
    yy = y_log(10 ** e)
    svg.append(f'<line x1="{L - 4}" y1="{yy:.1f}" x2="{W - R}" y2="{yy:.1f}" stroke="#ddd"/>')
    svg.append(f'<text x="{L - 6}" y="{yy + 4:.1f}" text-anchor="end">{10 ** e:,}</text>')
for v in (0, 0.25, 0.5, 0.75, 1):
    yy = y_lin(v)
    svg.append(f'<line x1="{L - 4}" y1="{yy:.1f}" x2="{W - R}" y2="{yy:.1f}" stroke="#ddd"/>')
    svg.append(f'<text x="{L - 6}" y="{yy + 4:.1f}" text-anchor="end">{v:g}</text>')
step = 10 ** math.floor(math.log10(t_end)) if t_end > 0 else 1
if t_end / step < 4:
    step /= 5 if t_end / step < 2 else 2
t = 0.0
while t <= t_end + 1e-9:
    svg.append(f'<text x="{x(t):.1f}" y="{bottom[1] + 16}" text-anchor="middle">{t:g}</text>')
    t += step
svg.append(f'<text x="{(L + W - R) / 2}" y="{bottom[1] + 34}" text-anchor="middle">seconds since locality 0 started</text>')
svg.append(f'<text x="16" y="{(top[0] + top[1]) / 2}" transform="rotate(-90 16 {(top[0] + top[1]) / 2})" text-anchor="middle">in force (log scale)</text>')
svg.append(f'<text x="16" y="{(bottom[0] + bottom[1]) / 2}" transform="rotate(-90 16 {(bottom[0] + bottom[1]) / 2})" text-anchor="middle">n_oh</text>')

def series(key, ymap, colour, dash="", level=True):
    """Steps: a level holds from its sample to the next; a value reset at
    each print (n_oh, level=False) covers the interval up to its sample."""
    pts = [(x(s["t"]), ymap(s[key])) for s in samples if key in s]
    d, prev = [], None
    for px, py in pts:
        if prev:
            d.append(f"{px:.1f},{prev[1]:.1f}" if level else f"{prev[0]:.1f},{py:.1f}")
        d.append(f"{px:.1f},{py:.1f}")
        prev = (px, py)
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    if d:
        svg.append(f'<polyline points="{" ".join(d)}" fill="none" stroke="{colour}" stroke-width="1.6"{extra}/>')

series("num_parcels", y_log, "#1f5fbf")
series("interval_us", y_log, "#d0741a", "5,3")
series("n_oh@0", y_lin, "#1f5fbf", level=False)
series("n_oh@1", y_lin, "#2a9d3f", "4,2", level=False)
# a dot where locality 0's decisions counter grew (cumulative from 0)
prev = 0.0
for s in samples:
    d = s.get("decisions@0", prev)
    if d > prev and "num_parcels" in s:
        svg.append(f'<circle cx="{x(s["t"]):.1f}" cy="{y_log(s["num_parcels"]):.1f}" r="3.5" fill="#c0392b"/>')
    prev = d
legend = [("#1f5fbf", "", "num_parcels (locality 0)"), ("#d0741a", "5,3", "interval_us (locality 0)"),
          ("#1f5fbf", "", "n_oh locality 0"), ("#2a9d3f", "4,2", "n_oh locality 1")]
for i, (c, dash, label) in enumerate(legend):
    yy = top[0] + 10 + 16 * i + (bottom[0] - top[0] if i >= 2 else 0)
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    svg.append(f'<line x1="{W - R + 8}" y1="{yy}" x2="{W - R + 28}" y2="{yy}" stroke="{c}" stroke-width="1.6"{extra}/>')
    svg.append(f'<text x="{W - R + 32}" y="{yy + 4}">{label}</text>')
svg.append(f'<circle cx="{W - R + 18}" cy="{top[0] + 74}" r="3.5" fill="#c0392b"/><text x="{W - R + 32}" y="{top[0] + 78}">a decision</text>')
svg.append("</svg>")
open(os.path.join(out, "fig9.svg"), "w").write("\n".join(svg) + "\n")
if rows:
    print(open(os.path.join(out, "phases.md")).read())
print(f"{len(samples)} sample rounds, {len(phases)} phases; wrote {out}/fig9.svg, phases.csv, phases.md")
EOF
