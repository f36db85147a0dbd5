# python3 percentiles.py DIR: per phase workload and setting, the medians over the
# invocations of toy's mean, p50 and p99 latency, from DIR/runs.log of adapt-matrix.sh.
import re, statistics as st, collections, sys
spec = None
d = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1] + "/runs.log"):
    m = re.match(r'### \S+ workload=\S+ spec=(\S+)', line)
    if m:
        spec = m.group(1)
        continue
    m = re.match(r'phase \d+: workload=(\w+) .*latency_us=([\d.]+) p50_us=([\d.]+) p99_us=([\d.]+)', line)
    if m and spec:
        d[m.group(1)][spec].append(tuple(map(float, m.group(2, 3, 4))))
for w in sorted(d):
    print(w)
    for s, v in sorted(d[w].items()):
        print(f"  {s:42} n={len(v)} mean {st.median(x[0] for x in v):8.2f} p50 {st.median(x[1] for x in v):8.2f} p99 {st.median(x[2] for x in v):8.2f}")
