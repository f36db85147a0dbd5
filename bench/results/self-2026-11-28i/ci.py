"""python3 ci.py RAW.csv [ROW...]: for each row of an adapt-matrix.sh raw.csv, adaptive against
the best static setting of the run (the matrix's choice: the static with the best median of
per-run figures, a run's figure being the median of its phases of the row, as the matrix takes it), the ratio of medians
(adaptive's cost: > 1 is worse) with a bootstrap 90 % interval (runs resampled, the best static
chosen again in each resample, so that the interval carries the choice's own luck), and the same
with every phase a sample of its own."""
import csv, random, statistics as st, sys
from collections import defaultdict

rows = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # row -> spec -> run -> [values]
better = {}
for r in csv.DictReader(open(sys.argv[1])):
    if r["failed"] != "0":
        continue
    rows[r["workload"]][r["spec"]][r["run"]].append(float(r["value"]))
    better[r["workload"]] = r["better"]
static = lambda s: s in ("on", "off") or s.startswith(("count", "bytes"))
random.seed(1)


def ratio(cells, hi):
    """adaptive's cost against the best static of `cells` (spec -> samples)."""
    med = {s: st.median(v) for s, v in cells.items() if v}
    best = (max if hi else min)((s for s in med if static(s)), key=lambda s: med[s])
    a = med["adaptive"]
    return (med[best] / a if hi else a / med[best]), best


print("| row | best static | ratio of medians, per run | 90 % interval | per phase | 90 % interval |")
print("|---|---|---|---|---|---|")
for w in sys.argv[2:] or sorted(rows):
    hi = better[w] == "higher"
    specs = rows[w]
    runs = sorted({r for s in specs.values() for r in s})
    out = []
    for per_phase in (False, True):
        def cells(sample):
            c = defaultdict(list)
            for s, by_run in specs.items():
                for r in sample:
                    if r in by_run:
                        c[s].extend(by_run[r] if per_phase else [st.median(by_run[r])])
            return c
        point, best = ratio(cells(runs), hi)
        boot = sorted(ratio(cells([random.choice(runs) for _ in runs]), hi)[0] for _ in range(2000))
        out.append((point, boot[100], boot[1899], best))
    (p, lo, up, best), (pp, plo, pup, _) = out
    print(f"| {w} | `{best}` | ×{p:.2f} | ×{lo:.2f}–{up:.2f} | ×{pp:.2f} | ×{plo:.2f}–{pup:.2f} |")
