# Median latency of the bursty phases of bursty-ab.sh output by their
# position in the invocation (1st, 2nd, 3rd bursty phase), per config.
import statistics as st, collections, sys
pos = collections.defaultdict(lambda: collections.defaultdict(list))
last, k = None, 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3:
        if f[0] != last or k >= 3:
            k = 0
        last = f[0]
    elif len(f) == 2:
        pos[f[0]][k].append(float(f[1]))
        k += 1
for n in pos:
    print(f"{n:20s}", [round(st.median(pos[n][i]), 1) for i in sorted(pos[n])])
