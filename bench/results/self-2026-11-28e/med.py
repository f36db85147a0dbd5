import sys,statistics as st,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)==3: d[p[1]][p[0]].append(float(p[2]))
for w in d:
    for k,v in d[w].items():
        print(w,k,len(v),"median %.1f mean %.1f"%(st.median(v),st.mean(v)))
