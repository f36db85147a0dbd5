"""python3 phasestats.py RUNS.log WORKLOAD [SPEC...]: per setting, over every phase of WORKLOAD
in an adapt-matrix.sh runs.log: phases, median of the phases' mean, p50 and p99, and how many
phases had p99 above 500 us."""
import re, statistics as st, sys
from collections import defaultdict
path, workload = sys.argv[1], sys.argv[2]
want = sys.argv[3:]
spec = None
cells = defaultdict(list)
for line in open(path):
    m = re.match(r"### \S+ workload=\S+ spec=(\S+)", line)
    if m:
        spec = m.group(1)
        continue
    m = re.match(rf"phase \d+: workload={workload} .*latency_us=([\d.]+) p50_us=([\d.]+) p99_us=([\d.]+)", line)
    if m and spec:
        cells[spec].append(tuple(map(float, m.groups())))
for s in (want or sorted(cells)):
    v = cells[s]
    print(f"{s:45} n={len(v):3} mean {st.median(x[0] for x in v):7.2f}  p50 {st.median(x[1] for x in v):7.2f}  "
          f"p99 {st.median(x[2] for x in v):8.2f}  p99>500: {sum(x[2] > 500 for x in v)}")
