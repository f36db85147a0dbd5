import sys, statistics as st
rows={}
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)==2: rows.setdefault(f[0],[]).append(float(f[1]))
for k,v in rows.items(): print(f"{k:12s} n={len(v):3d} median={st.median(v):.5g} min={min(v):.5g} max={max(v):.5g}")
