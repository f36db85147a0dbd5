import statistics as st, sys, collections
d = collections.defaultdict(list); runs = collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    s, r, p, m, p50, p99 = l.split()
    d[s].append((float(m), float(p50), float(p99))); runs[s][r].append(float(m))
for s, v in d.items():
    per_run = [st.mean(x) for x in runs[s].values()]
    print(f"{s:45} phases {len(v):3}  mean {st.median(x[0] for x in v):7.2f}  p50 {st.median(x[1] for x in v):7.2f}  p99 {st.median(x[2] for x in v):7.2f}  per-run mean median {st.median(per_run):7.2f}")
