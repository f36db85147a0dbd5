import sys,collections,statistics
# means.py FILE WORKLOAD: each run's mean over its tenths, per setting (median, mean, sorted runs)
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<3 or f[1]!=sys.argv[2]: continue
    v=[float(x.split('=')[1]) for x in f[2:]]
    d[f[0]].append(sum(v)/len(v))
for k,v in d.items(): print(f"{k:8} median {statistics.median(v):6.1f} mean {statistics.mean(v):6.1f}", sorted(round(x) for x in v))
