import sys, statistics as st, collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f=line.split()
    if len(f)<5: continue
    d[f[0]]['b2b'].append(float(f[2])); d[f[0]]['sparse'].append(float(f[4]))
for k,v in d.items():
    print(f"{k:12s} n={len(v['sparse'])} b2b med {st.median(v['b2b']):.2f}  sparse med {st.median(v['sparse']):.2f}  sorted {sorted(v['sparse'])}")
