"""python3 tp-summary.py tp-*.txt: timerpin.sh's phases, per variant: medians of the phases'
mean, p50 and p99, and the phases with p99 above 500 us."""
import collections, statistics as st, sys
for path in sys.argv[1:]:
    rows = collections.defaultdict(list)
    for line in open(path):
        variant, _, _, mean, p50, p99 = line.split()
        rows[variant].append((float(mean), float(p50), float(p99)))
    for variant, x in rows.items():
        med = [st.median(y[i] for y in x) for i in range(3)]
        print(f"{path} {variant}: {len(x)} phases, mean {med[0]:.2f} p50 {med[1]:.2f} p99 {med[2]:.2f} us, p99>500: {sum(y[2] > 500 for y in x)}")
