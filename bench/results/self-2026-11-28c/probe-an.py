import re,sys
lines=open(sys.argv[1],errors='replace').read().splitlines()
starts={}
for l in lines:
    m=re.match(r"phase-start (\w+) Instant \{ tv_sec: (\d+), tv_nsec: (\d+)",l)
    if m: starts[m.group(1)]=int(m.group(2))+int(m.group(3))/1e9
S=starts['steady']
for l in lines:
    if l.startswith('slices'): print(l)
rows={}
for l in lines:
    m=re.match(r'probe Some\("([^"]+)"\) Instant \{ tv_sec: (\d+), tv_nsec: (\d+) \} \[(.*)\]',l)
    if m:
        t=int(m.group(2))+int(m.group(3))/1e9-S
        if -0.01<t<0.3: rows.setdefault(round(t*200),{})[m.group(1)[8]]=m.group(4)
for k in sorted(rows): print(f"{k*5:4d}ms", " | ".join(f"w{w}: {rows[k][w]}" for w in sorted(rows[k])))
