#!/usr/bin/env python3
"""frozen250.txt / frozen250b.txt: per configuration, the median of each
invocation's median bursty latency, and the median over rounds of its ratio
to on's in the same round (<1: faster).   frozen-paired.py FILE"""
import collections, statistics as st, sys
d = collections.defaultdict(list); rounds = []; cur = {}
for l in open(sys.argv[1]):
    p = l.split(); c = p[0]; m = st.median(float(x) for x in p[1:])
    d[c].append(m); cur[c] = m
    if c == 'fon':
        rounds.append(dict(cur))
for c in d:
    print(c, 'median %.1f' % st.median(d[c]), 'paired/on %.3f' % st.median(r[c] / r['on'] for r in rounds))
