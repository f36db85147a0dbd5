import sys,collections,statistics
# deciles.py FILE [WORKLOAD]: median of each tenth's mean latency per setting.
w=sys.argv[2] if len(sys.argv)>2 else 'steady'
d=collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<3 or f[1]!=w: continue
    for kv in f[2:]:
        k,v=kv.split('='); d[f[0]][k].append(float(v))
for s in d:
    print(f"{s:12} n={len(d[s]['d0']):3}", " ".join(f"{statistics.median(d[s][k]):6.1f}" for k in sorted(d[s])))
