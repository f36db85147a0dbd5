import sys,collections,statistics
# bins.py FILE: median of each bin per name, and the mean over bins
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); d[f[0]].append([float(x.split('=')[1]) for x in f[1:]])
for k,v in d.items():
    print(f"{k:10} n={len(v):3}", " ".join(f"{statistics.median(r[i] for r in v):6.1f}" for i in range(10)), f" mean {statistics.median(statistics.mean(r) for r in v):6.1f}")
