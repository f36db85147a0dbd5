# Medians over repetitions of phase-counters.sh output (phase-counters.txt).
import collections, statistics as st, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 5:
        d[(f[0], f[1], f[2], f[3])].append(float(f[4]))
for s in dict.fromkeys(k[0] for k in d):
    for p in sorted(set(k[1] for k in d)):
        for L in ('0', '1'):
            row = {k[3]: st.median(v) for k, v in d.items() if k[:3] == (s, p, L)}
            cols = ['messages'] + ['flush-' + c for c in ('split', 'idle', 'timer', 'bypass', 'answered', 'count', 'bytes')]
            print(f"{s[:10]:10s} phase {p} L{L}: " + " ".join(f"{c.replace('flush-', '')}={row.get(c, 0):.0f}" for c in cols))
