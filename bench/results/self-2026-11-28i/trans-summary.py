"""python3 trans-summary.py trans1.txt: medians of the 20-ms bursty phases after the batch,
the first five (100 ms) and the 7th-9th, per setting."""
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    spec, values = line.rsplit(": ", 1) if ": " in line else line.split(":", 1)
    rows.setdefault(spec.strip(), []).append([float(x) for x in values.split()])
for spec, runs in rows.items():
    first = [x for r in runs for x in r[0:5]]
    late = [x for r in runs for x in r[6:9]]
    print(f"{spec}: first 100 ms median {st.median(first):.1f} us, phases 7-9 median {st.median(late):.1f} us ({len(runs)} runs)")
