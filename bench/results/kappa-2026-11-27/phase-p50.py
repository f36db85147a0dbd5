#!/usr/bin/env python3
"""The toy phase rows of an adapt-matrix run by another measure than the
matrix's (the mean latency of a phase's calls): per setting, the median over
invocations of each invocation's median over its phases of the phase's
median (p50) and 99th percentile (p99) latency, and of the mean for
comparison.    phase-p50.py MATRIX_DIR/runs.log"""
import collections, re, statistics as st, sys

cur = None
vals = collections.defaultdict(lambda: collections.defaultdict(list))  # (workload, spec) -> invocation -> [(mean, p50, p99)]
inv = 0
for line in open(sys.argv[1]):
    if line.startswith('### '):
        m = re.search(r'--coalescing (\S+)', line)
        cur = m.group(1) if m else None
        inv += 1
        continue
    m = re.match(r'phase \d+: workload=(\w+) .*latency_us=([\d.]+) p50_us=([\d.]+) p99_us=([\d.]+)', line)
    if m and cur and 'toy' in line or (m and cur):
        vals[(m.group(1), cur)][inv].append(tuple(float(x) for x in m.groups()[1:]))
for w in ['bursty', 'steady', 'sparse', 'awaits']:
    rows = []
    for (wl, spec), by_inv in vals.items():
        if wl != w:
            continue
        per = [tuple(st.median(p[i] for p in phases) for i in range(3)) for phases in by_inv.values()]
        rows.append((st.median(x[1] for x in per), spec, len(per),
                     st.median(x[0] for x in per), st.median(x[2] for x in per)))
    if not rows:
        continue
    best = min(r[0] for r in rows)
    print(f"## toy_{w}: latency in µs, median over invocations (p50 best first)")
    print(f"{'setting':44s} {'n':>3s} {'p50':>8s} {'p50/best':>8s} {'mean':>8s} {'p99':>8s}")
    for p50, spec, n, mean, p99 in sorted(rows):
        print(f"{spec:44s} {n:3d} {p50:8.2f} {p50 / best:8.2f} {mean:8.2f} {p99:8.1f}")
    print()
