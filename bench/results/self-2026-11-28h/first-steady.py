"""python3 first-steady.py FILE... : the steady phases of phases-p50.sh files of the five workloads
(10 phases: steady is phases 3 and 8, in that order per run), per setting and phase: how many have a
mean above 20 us (hit by a stall), out of how many."""
import collections, sys

for path in sys.argv[1:]:
    seen = collections.Counter()
    cells = collections.defaultdict(list)
    for line in open(path):
        name, row, *values = line.split()
        if row != "toy_steady":
            continue
        seen[name] += 1
        phase = 3 if seen[name] % 2 == 1 else 8
        cells[(name, phase)].append(float(values[0]))
    text = "  ".join(f"{n}@{p}: {sum(x > 20 for x in v)}/{len(v)}" for (n, p), v in sorted(cells.items()))
    print(f"{path}: {text}")
