# paired gain over a reference: per round (one invocation of each config,
# in the order of the file), the median of an invocation's latency_us fields
# over the reference's; prints the median [min, max] of the ratios (<1: faster)
import sys, collections, statistics as st
ref = sys.argv[2] if len(sys.argv) > 2 else 'on'
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    v = [float(t.split('=')[1]) for t in f[1:] if t.startswith('latency_us=')]
    if v: rows.append((f[0], st.median(v)))
configs = list(dict.fromkeys(c for c, _ in rows))
n = len(configs)
ratios = collections.defaultdict(list); meds = collections.defaultdict(list)
for i in range(0, len(rows) - n + 1, n):
    rnd = dict(rows[i:i + n])
    for c in configs:
        meds[c].append(rnd[c])
        if ref in rnd: ratios[c].append(rnd[c] / rnd[ref])
for c in configs:
    r = ratios[c]
    print(f"{c:42s} med of invocation medians {st.median(meds[c]):7.1f}   over {ref}: {st.median(r):.3f} [{min(r):.3f}, {max(r):.3f}] n={len(r)}")
