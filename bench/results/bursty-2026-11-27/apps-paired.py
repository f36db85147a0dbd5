# apps-paired.py FILE [REF]: ig (M reads/s, higher) and parquet (s, lower):
# each config's median and its paired ratio to REF (default adaptive) per round.
import sys, statistics as st
ref = sys.argv[2] if len(sys.argv) > 2 else 'adaptive'
rows = []
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) < 2: continue
    rows.append((f[0], dict(t.split('=') for t in f[1:])))
cfgs = list(dict.fromkeys(c for c, _ in rows)); n = len(cfgs)
for w in ['ig', 'parquet']:
    for c in cfgs:
        v = [float(kv[w]) for cc, kv in rows if cc == c and kv.get(w)]
        rat = []
        for i in range(0, len(rows) - n + 1, n):
            r = dict(rows[i:i + n])
            if r[c].get(w) and r[ref].get(w): rat.append(float(r[c][w]) / float(r[ref][w]))
        print(w, f"{c:8s} median {st.median(v):.4g} [{min(v):.4g},{max(v):.4g}] paired/{ref} {st.median(rat):.3f} [{min(rat):.3f},{max(rat):.3f}] n={len(rat)}")
