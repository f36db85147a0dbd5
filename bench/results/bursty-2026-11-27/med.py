# medians per config of the batch calls_per_s and bursty latency_us fields
import sys, collections, statistics as st
d = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f = line.split()
    if not f: continue
    wl = None
    for tok in f[1:]:
        k, _, v = tok.partition('=')
        if k == 'workload': wl = v
        elif wl == 'batch' and k == 'calls_per_s': d[f[0]]['batch'].append(float(v))
        elif wl == 'bursty' and k == 'latency_us': d[f[0]]['bursty'].append(float(v))
        elif wl not in ('batch', 'bursty') and k == 'latency_us': d[f[0]][wl].append(float(v))
for c, m in d.items():
    print(c, '  '.join(f"{w}: med {st.median(v):.4g} [{min(v):.4g}, {max(v):.4g}] n={len(v)}" for w, v in m.items()))
