import statistics as st, collections, sys
b=collections.defaultdict(list); l=collections.defaultdict(list)
for line in open(sys.argv[1]):
    f=line.split()
    if len(f)==3: b[f[0]].append(float(f[2]))
    elif len(f)==2: l[f[0]].append(float(f[1]))
for k in l: print(f"{k:25s} bursty p50 {st.median(l[k]):7.1f} µs (n={len(l[k])})  batch p50 {st.median(b[k])/1e6:.2f} M/s")
