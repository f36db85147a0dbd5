import statistics as st, collections, sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    n,w,*v=l.split()
    if len(v)<3: continue
    d[(w,n)].append([float(x) for x in v])
for (w,n),v in sorted(d.items()):
    m=[x[0] for x in v]; p=[x[1] for x in v]; q=[x[2] for x in v]
    big=sum(1 for x in q if x>500)
    print(f"{w:12} {n:6} n={len(v)} mean-med={st.median(m):.1f} mean-mean={st.mean(m):.1f} p50-med={st.median(p):.1f} p99-med={st.median(q):.0f} p99>500us={big}")
