import json,sys
def tree(v,p,out):
    if isinstance(v,dict):
        for k,x in v.items(): tree(x,p+"/"+k,out)
    elif isinstance(v,list):
        if not v: out.add(p+"[] (empty)")
        for x in v: tree(x,p+"[]",out)
    else:
        t={bool:"bool",str:"string",type(None):"null"}.get(type(v),"number"); out.add(p+" "+t)
a=set();b=set()
da=json.load(open(sys.argv[1])); db=json.load(open(sys.argv[2]))
tree(da,"",a); tree(db,"",b)
print("iperf3 only:",sorted(a-b)); print("landspeed only:",sorted(x for x in b-a if not x.startswith("/landspeed")))
print("rc-ish error:", da.get("error"), db.get("error"))
