import json,sys
tag=sys.argv[1]
try: d=json.load(open(f'/tmp/bm/out/{tag}.json'))
except Exception as e:
    print(tag,'FAILED',open(f'/tmp/bm/out/{tag}.err').read()[-400:]); sys.exit()
cpu=d.get('datanode_cpu') or {}
print(tag,'total MB/s',round(d.get('mb_per_s',0)),'errors',d.get('errors'),'dn cpu s/GB',round(cpu.get('cpu_seconds_per_gb',0),3), 'pool', d.get('buffer_pool'))
for w in d.get('workloads',[]):
    l=w['latency_ms']; print('   ',w['name'],round(w['ops_per_s']),'ops/s',round(w['mb_per_s']),'MB/s p50',round(l['p50'],3),'p99',round(l['p99'],3),'max',round(l['max'],1))
