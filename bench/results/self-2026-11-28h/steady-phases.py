"""python3 steady-phases.py RAW.csv... : the steady phases of an adapt-matrix.sh raw.csv (toyphases:
phases 3 and 8), per setting and phase: how many are above 20 us (hit by a stall) and their median,
and the median of all of a setting's steady phases."""
import collections, csv, statistics as st, sys

for path in sys.argv[1:]:
    print(f"## {path}")
    by_phase = collections.defaultdict(list)
    for r in csv.DictReader(open(path)):
        if r["workload"] == "toy_steady":
            by_phase[(r["spec"], r["phase"])].append(float(r["value"]))
    specs = sorted({s for s, _ in by_phase})
    for s in specs:
        cells = [(p, by_phase[(s, p)]) for p in ("3", "8") if (s, p) in by_phase]
        every = [x for _, v in cells for x in v]
        text = "  ".join(f"phase {p}: {sum(x > 20 for x in v)}/{len(v)} stalled, median {st.median(v):.1f}" for p, v in cells)
        print(f"  {s:45} {text}  all: median {st.median(every):.1f} us")
