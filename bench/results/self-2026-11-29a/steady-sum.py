import re, glob, statistics, collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob('bench/results/self-2026-11-29a/steady-after-bursty/run-*.txt'):
    _, s, r = f[:-4].split('/')[-1].split('-')
    for line in open(f):
        m = re.search(r'phase (\d+): workload=(\w+).*latency_us=([\d.]+) p50_us=([\d.]+) p99_us=([\d.]+)', line)
        if m and int(m.group(1)) > 2:  # skip the first cycle
            d[m.group(2)][s].append((int(r), float(m.group(3)), float(m.group(4)), float(m.group(5))))
for w in d:
    print(w)
    for s in sorted(d[w]):
        v=d[w][s]
        runs=collections.defaultdict(list)
        for r,mean,p50,p99 in v: runs[r].append(mean)
        print(f"  {s:10s} phases {len(v):3d} median of phase means {statistics.median(x[1] for x in v):7.2f} p50 {statistics.median(x[2] for x in v):6.2f} p99 {statistics.median(x[3] for x in v):7.2f}  median of run means {statistics.median(statistics.mean(x) for x in runs.values()):7.2f}")
