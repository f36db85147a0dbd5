import sys,collections
# stalls.py FILE WORKLOAD: per setting, runs, runs with a tenth (after the first two) above 150 µs
n=collections.Counter(); c=collections.Counter()
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<3 or f[1]!=sys.argv[2]: continue
    n[f[0]]+=1
    if any(float(x.split('=')[1])>150 for x in f[4:]): c[f[0]]+=1
for k in n: print(f"{k:10} runs {n[k]:3} with a stall {c[k]:3}")
