import sys, glob, os, collections, statistics
# usage: analyze.py DIR... ; each DIR has calls-PID.txt, ev-PID.txt (two), out.txt
TH = float(os.environ.get('TH', '35000'))
names = {1:'epoch',2:'timer-wake',3:'timer-fire',4:'timer-wakes-task',5:'lost-core',6:'park-wait-end',7:'driver-block-end'}
agg = collections.defaultdict(lambda: collections.Counter())
tot = collections.Counter()
lat_all = collections.defaultdict(list)
for d in sys.argv[1:]:
    setting = os.path.basename(d).rsplit('-',1)[0]
    cf = glob.glob(d+'/calls-*.txt')
    if not cf: continue
    cpid = cf[0].split('-')[-1][:-4]
    calls = [tuple(l.split()) for l in open(cf[0])]
    calls = [(int(p), int(w), int(l)) for p,_,w,l in calls if int(p) > 1]  # skip phase 1
    evs = {}
    for ef in glob.glob(d+'/ev-*.txt'):
        pid = ef.split('-')[-1][:-4]
        who = 'L0' if pid == cpid else 'L1'
        for line in open(ef):
            k,t,dd = map(int, line.split())
            evs.setdefault((who,k), []).append((t,dd))
    for key in evs: evs[key].sort()
    import bisect
    for p,w,l in calls:
        slow = l > TH
        lat_all[setting].append(l)
        tot[(setting, slow)] += 1
        for key, lst in evs.items():
            ts = [t for t,_ in lst]
            i = bisect.bisect_left(ts, w)
            j = bisect.bisect_right(ts, w + l)
            if j > i:
                agg[(setting, slow)][key] += 1
for setting in sorted(set(s for s,_ in tot)):
    ls = sorted(lat_all[setting]); n=len(ls)
    print(f"== {setting}: calls {n} mean {statistics.mean(ls)/1e3:.2f} p50 {ls[n//2]/1e3:.2f} p99 {ls[int(n*0.99)]/1e3:.2f} slow(>{TH/1e3:.0f}us) {tot[(setting,True)]}")
    keys = sorted(set(agg[(setting,True)]) | set(agg[(setting,False)]))
    for key in keys:
        a = agg[(setting,True)][key]; b = agg[(setting,False)][key]
        ns = max(tot[(setting,True)],1); nf = max(tot[(setting,False)],1)
        print(f"   {key[0]} {names[key[1]]:18s} in slow calls {a:5d} ({100*a/ns:5.1f}%)  in others {b:6d} ({100*b/nf:5.1f}%)")
