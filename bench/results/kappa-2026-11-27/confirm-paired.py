#!/usr/bin/env python3
"""The confirmation of a matrix's phase rows: in a fresh run of phases-ab.sh
(configurations alternated round after round), adaptive against the static
setting the matrix chose for each row, paired per round.
   confirm-paired.py FILE ROW=CONFIG... [--default CONFIG] [--adaptive CONFIG]
e.g. confirm-paired.py confirm.txt batch=bytes bursty=bytes steady=c64 sparse=on awaits=off --default on
Per row: the paired median (and range) of adaptive's latency over the chosen
setting's (batch: the chosen setting's calls/s over adaptive's), so <1 means
adaptive is faster; the same against the old default."""
import collections, statistics as st, sys

path = sys.argv[1]
chosen, default, adaptive = {}, None, 'adaptive'
args = sys.argv[2:]
while args:
    a = args.pop(0)
    if a == '--default':
        default = args.pop(0)
    elif a == '--adaptive':
        adaptive = args.pop(0)
    else:
        row, _, config = a.partition('=')
        chosen[row] = config
rows = []
for line in open(path):
    f = line.split()
    if len(f) < 2:
        continue
    vals = collections.defaultdict(list)
    for t in f[1:]:
        k, _, v = t.partition('=')
        if v:
            vals[k].append(float(v))
    rows.append((f[0], {k: st.median(v) for k, v in vals.items()}))
configs = list(dict.fromkeys(c for c, _ in rows))
n = len(configs)
rounds = [dict(rows[i:i + n]) for i in range(0, len(rows) - n + 1, n)]

def paired(w, a, b):
    rat = [(r[b][w] / r[a][w]) if w == 'batch' else (r[a][w] / r[b][w])
           for r in rounds if w in r.get(a, {}) and w in r.get(b, {})]
    return st.median(rat), min(rat), max(rat), len(rat)

print("| row | chosen static | adaptive over it | adaptive over the default |")
print("|---|---|---|---|")
for w, c in chosen.items():
    m, lo, hi, k = paired(w, adaptive, c)
    d = paired(w, adaptive, default) if default else None
    ds = f"{d[0]:.3f} [{d[1]:.2f}, {d[2]:.2f}]" if d else ""
    print(f"| {w} | `{c}` | {m:.3f} [{lo:.2f}, {hi:.2f}] n={k} | {ds} |")
