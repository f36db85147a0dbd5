"""python3 five.py FILE REF_ROW=SETTING... : per row and setting of a phases-p50.sh file, the
median over runs of each figure (a run's figure: the mean of its phases of the row), and
adaptive (`ad`) against the setting named for the row: ratio of medians, paired ratio (median
over rounds of the ratio in the same round) and a bootstrap 90 % interval of the ratio of
medians. Figures: batch calls/s (higher is better); the others mean, p50 and p99 latency in
µs (lower is better)."""
import random
import statistics as st
import sys
from collections import defaultdict

random.seed(1)
rows = defaultdict(lambda: defaultdict(list))  # row -> name -> [per-phase tuples]
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 3 or not p[1].startswith("toy_"):
        continue
    rows[p[1]][p[0]].append(tuple(float(x) for x in p[2:]))
ref = dict(a.split("=", 1) for a in sys.argv[2:])
for row, by_name in rows.items():
    print(f"## {row}")
    per_run = {}
    for name, vals in by_name.items():
        # Two phases of each row a run (toyphases, 10 phases).
        runs = [tuple(st.mean(c) for c in zip(*vals[i : i + 2])) for i in range(0, len(vals), 2)]
        per_run[name] = runs
        meds = [st.median(c) for c in zip(*runs)]
        print(f"  {name:6} n={len(runs)} " + " ".join(f"{m:.4g}" for m in meds))
    r = ref.get(row)
    if r and r in per_run and "ad" in per_run:
        higher = row == "toy_batch"
        labels = ["calls/s"] if higher else ["mean", "p50", "p99"]
        for k, label in enumerate(labels):
            a = [x[k] for x in per_run["ad"]]
            s = [x[k] for x in per_run[r]]
            cost = (lambda x, y: y / x) if higher else (lambda x, y: x / y)
            ratio = cost(st.median(a), st.median(s))
            paired = st.median(cost(x, y) for x, y in zip(a, s))
            boots = sorted(
                cost(st.median(random.choices(a, k=len(a))), st.median(random.choices(s, k=len(s))))
                for _ in range(2000)
            )
            print(f"  ad vs {r} ({label}): ×{ratio:.3f}, paired ×{paired:.3f}, 90 % ×{boots[100]:.2f}–{boots[1899]:.2f}")
