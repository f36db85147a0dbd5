import sys, statistics as st
rows={}
for l in open(sys.argv[1]):
    f=l.split(); rows.setdefault(f[0],[]).append([float(x) for x in f[1:]])
for k,v in rows.items():
    n=min(len(r) for r in v)
    print(f"{k[:40]:40s} n={len(v):3d} " + " ".join(f"{st.median(r[i] for r in v):5.0f}" for i in range(n)), f" all={st.median(sum(r)/len(r) for r in v):.1f}")
