"""Adaptive against the static setting chosen beforehand for each row.

python3 prechosen.py RAW.csv

The best static setting of each row is taken from another run
(../self-2026-11-28d/matrix20, 20 runs of the same 8 settings), so that
picking the best of 7 noisy medians in this run does not bias the
comparison towards the static side. Prints, per row: the static setting's
and adaptive's medians and their ratio (adaptive's cost: > 1 is worse),
the paired ratio (median over rounds of the ratio in the same round)
and a bootstrap 90 % interval of the ratio of medians; a run's value is
the mean of its phases of the row.
"""
import csv
import random
import statistics as st
import sys
from collections import defaultdict

CHOSEN = {
    "toy_batch": "count:num_parcels=16384,interval_us=10000",
    "toy_bursty": "count:num_parcels=250,interval_us=10000",
    "toy_steady": "count:num_parcels=4096,interval_us=1000",
    "toy_sparse": "on",
    "toy_awaits": "off",
    "pingpong_b2b": "count:num_parcels=64,interval_us=100",
    "pingpong_sparse": "off",
}

values = defaultdict(lambda: defaultdict(list))  # workload -> spec -> [(run, value)]
better = {}
for row in csv.DictReader(open(sys.argv[1])):
    if row["failed"] != "0":
        continue
    values[row["workload"]][row["spec"]].append((row["run"], float(row["value"])))
    better[row["workload"]] = row["better"]


def cost(a, s, higher):
    """How many times longer adaptive's a takes than static s."""
    return s / a if higher else a / s


random.seed(1)
print("| row | chosen static | its median | adaptive | ratio of medians | paired | 90 % interval |")
print("|---|---|---|---|---|---|---|")
for w, spec in CHOSEN.items():
    if w not in values:
        continue
    higher = better[w] == "higher"
    # One value a run (the mean of its phases of the row), as the
    # matrix's summary counts them.
    by_run_s = defaultdict(list)
    by_run_a = defaultdict(list)
    for r, v in values[w][spec]:
        by_run_s[r].append(v)
    for r, v in values[w]["adaptive"]:
        by_run_a[r].append(v)
    s = [st.mean(v) for v in by_run_s.values()]
    a = [st.mean(v) for v in by_run_a.values()]
    ratio = cost(st.median(a), st.median(s), higher)
    paired = st.median(
        cost(st.mean(by_run_a[r]), st.mean(by_run_s[r]), higher)
        for r in by_run_s
        if r in by_run_a
    )
    boots = sorted(
        cost(
            st.median(random.choices(a, k=len(a))),
            st.median(random.choices(s, k=len(s))),
            higher,
        )
        for _ in range(2000)
    )
    lo, hi = boots[100], boots[1899]
    print(
        f"| {w} | `{spec}` | {st.median(s):.4g} (n={len(s)}) | {st.median(a):.4g} (n={len(a)}) "
        f"| ×{ratio:.2f} | ×{paired:.2f} | ×{lo:.2f}–{hi:.2f} |"
    )
