import os,sys,time,collections
pid=int(sys.argv[1]); secs=float(sys.argv[2]) if len(sys.argv)>2 else 5
def snap():
    d=collections.Counter()
    for t in os.listdir(f'/proc/{pid}/task'):
        try:
            s=open(f'/proc/{pid}/task/{t}/stat').read()
            comm=s[s.index('(')+1:s.rindex(')')]
            f=s[s.rindex(')')+2:].split()
            d[comm]+=int(f[11])+int(f[12])
        except Exception: pass
    return d
a=snap(); time.sleep(secs); b=snap()
tot=0
for k in sorted(b,key=lambda k:-(b[k]-a.get(k,0))):
    v=(b[k]-a.get(k,0))/secs
    tot+=v
    if v>0.5: print(f'{k:24s} {v:6.1f}%')
print(f'{"total":24s} {tot:6.1f}%')
