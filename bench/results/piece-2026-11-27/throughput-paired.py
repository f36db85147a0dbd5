#!/usr/bin/env python3
"""Paired summary of throughput-ab.sh output: per workload and configuration,
the median and the median of the per-round ratio to REF (performance ratio:
>1 is better; parquet's seconds are inverted).
   throughput-paired.py FILE REF"""
import collections, statistics as st, sys
path, ref = sys.argv[1], sys.argv[2]
rows = [l.split() for l in open(path) if len(l.split()) == 3]
order = []
rounds = collections.defaultdict(list)  # (config, workload) -> values in order
for name, w, v in rows:
    if name not in order:
        order.append(name)
    rounds[(name, w)].append(float(v))
for w in ['histo', 'ig', 'randomaccess', 'parquet', 'toy']:
    print(f"{w}: (performance over {ref}, >1 better)")
    base = rounds[(ref, w)]
    for name in order:
        vals = rounds[(name, w)]
        n = min(len(vals), len(base))
        if n == 0:
            continue
        ratios = [(base[i] / vals[i]) if w == 'parquet' else (vals[i] / base[i]) for i in range(n)]
        print(f"  {name:10s} median {st.median(vals):10.4g}  paired {st.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}] n={n}")
