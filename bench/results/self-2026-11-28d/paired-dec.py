import sys,collections,statistics
# paired-dec.py FILE NSETTINGS REF: each run's mean over its tenths per workload; per setting the
# median over runs, and the median over rounds (NSETTINGS runs each, in file order) of the ratio
# to REF in the same round (<1: lower latency than REF).
path,ns,ref=sys.argv[1],int(sys.argv[2]),sys.argv[3]
runs=[]; last=None
for l in open(path):
    f=l.split()
    if len(f)<3 or '=' not in f[2]: continue
    if last is None or f[0]!=last or f[1] in runs[-1][1]:
        runs.append((f[0],{})); last=f[0]
    v=[float(x.split('=')[1]) for x in f[2:]]
    runs[-1][1][f[1]]=sum(v)/len(v)
rounds=[runs[i:i+ns] for i in range(0,len(runs)-ns+1,ns)]
ws=sorted({w for _,d in runs for w in d})
names=sorted({n for n,_ in runs})
for w in ws:
    print(f"== {w} ({len(rounds)} rounds)")
    for n in names:
        vals=[d[w] for m,d in runs if m==n and w in d]
        ratios=[]
        for r in rounds:
            a=[d.get(w) for m,d in r if m==n]; b=[d.get(w) for m,d in r if m==ref]
            if a and b and a[0] and b[0]: ratios.append(a[0]/b[0])
        print(f"  {n:8} median {statistics.median(vals):8.1f}  paired to {ref}: {statistics.median(ratios):.3f}")
