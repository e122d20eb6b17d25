"""One summary line per `tessera bench --json` result in $OUTDIR (default
/tmp/bm/out): python3 scripts/bench/summarize.py TAG reads OUTDIR/TAG.json."""
import json, os, sys
tag = sys.argv[1]
out = os.environ.get('OUTDIR', '/tmp/bm/out')
try:
    d = json.load(open(f'{out}/{tag}.json'))
except Exception:
    print(tag, 'FAILED', open(f'{out}/{tag}.err').read()[-400:]); sys.exit()
cpu = d.get('datanode_cpu') or {}
line = [tag, 'total MB/s', round(d.get('mb_per_s', 0)), 'errors', d.get('errors'),
        'dn cpu s/GB', round(cpu.get('cpu_seconds_per_gb') or 0, 3), 'pool', d.get('buffer_pool')]
md5 = d.get('md5_single_core_mb_per_s')
if md5:
    line += ['md5 1-core MB/s', round(md5), 'ratio', round(d['mb_per_s'] / md5, 3)]
print(*line)
for w in d.get('workloads', []):
    l = w['latency_ms']
    print('   ', w['name'], round(w['ops_per_s']), 'ops/s', round(w['mb_per_s']), 'MB/s p50', round(l['p50'], 3),
          'p99', round(l['p99'], 3), 'max', round(l['max'], 1))
