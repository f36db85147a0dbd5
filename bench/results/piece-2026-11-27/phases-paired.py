# phases-paired.py FILE [REF]: per workload, each config's median of its
# invocations' medians and its paired ratio to REF (default on) per round
# (batch: REF/config so that <1 is better everywhere; others config/REF).
import sys, collections, statistics as st
ref = sys.argv[2] if len(sys.argv) > 2 else 'on'
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 2: continue
    vals = collections.defaultdict(list)
    for t in f[1:]:
        k, _, v = t.partition('=')
        if v: vals[k].append(float(v))
    rows.append((f[0], {k: st.median(v) for k, v in vals.items()}))
configs = list(dict.fromkeys(c for c, _ in rows)); n = len(configs)
rounds = [dict(rows[i:i + n]) for i in range(0, len(rows) - n + 1, n)]
for w in ['batch', 'bursty', 'steady', 'sparse', 'awaits']:
    print(f"{w}: (ratio to {ref}, <1 better)")
    for c in configs:
        vals = [r[c][w] for r in rounds if w in r.get(c, {})]
        rat = [(r[ref][w] / r[c][w]) if w == 'batch' else (r[c][w] / r[ref][w]) for r in rounds if w in r.get(c, {}) and w in r.get(ref, {})]
        if vals:
            print(f"  {c:10s} median {st.median(vals):10.4g}  paired {st.median(rat):.3f} [{min(rat):.3f}, {max(rat):.3f}] n={len(rat)}")
