# clean.py FILE (a phases-p50.sh file): per row and setting, the phases split at a p99 of 500 us
# (above: hit by a stall); the median mean, p50 and p99 of the clean phases, and the median and mean
# of all phases means. Lines of batch phases are skipped.
import statistics as st, collections, sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    n,w,*v=l.split()
    if len(v)<3: continue
    d[(w,n)].append([float(x) for x in v])
for (w,n),v in sorted(d.items()):
    clean=[x for x in v if x[2]<=500] or [[float("nan")]*3]
    print(f"{w:11} {n:6} n={len(v):3} stalled={len(v)-len(clean):3} clean: mean-med={st.median(x[0] for x in clean):6.2f} p50-med={st.median(x[1] for x in clean):6.2f} p99-med={st.median(x[2] for x in clean):6.1f} | all: mean-med={st.median(x[0] for x in v):6.2f} mean-mean={st.mean(x[0] for x in v):6.1f}")
