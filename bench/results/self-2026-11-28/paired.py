import sys,collections,statistics
f,ref=sys.argv[1],sys.argv[2]
rows=[l.split() for l in open(f) if len(l.split())==3]
# pair by round: sequence index per (name,workload)
cnt=collections.Counter(); d=collections.defaultdict(dict)
for n,w,v in rows:
    i=cnt[(n,w)]; cnt[(n,w)]+=1; d[(w,i)][n]=float(v)
names=sorted({n for n,_,_ in rows}); works=sorted({w for _,w,_ in rows})
for w in works:
    print(w, end=': ')
    for n in names:
        vals=[d[(w,i)][n] for i in range(cnt[(n,w)]) if n in d[(w,i)]]
        rat=[d[(w,i)][n]/d[(w,i)][ref] for i in range(cnt[(n,w)]) if n in d[(w,i)] and ref in d[(w,i)]]
        print(f"{n} {statistics.median(vals):.4g} ({statistics.median(rat):.3f})", end='  ')
    print()
