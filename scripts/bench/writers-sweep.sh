#!/bin/bash
# `tessera bench put` rows of rs-3-2-1024k 64 MiB keys for $DURATION (8s), each on a
# fresh cluster of processes (scripts/bench-cluster.sh), with the datanodes'
# --max-disk-writes set per row. While a row runs, the busy fraction of all
# cores over 4 s is printed (or, with PERF=1, a whole-system perf profile is
# written to /tmp/bm/perf-DW-W.data).
#   scripts/bench/writers-sweep.sh DW:W [DW:W...]   e.g. 4:1 4:16 2:16
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../.."
export TESSERA_BIN=${TESSERA_BIN:-$PWD/target/x86_64-unknown-linux-gnu/release/tessera}
for row in "$@"; do
  dw=${row%%:*}; w=${row##*:}
  export TESSERA_MAX_DISK_WRITES=$dw
  rm -rf /tmp/bm/wr; mkdir -p /tmp/bm
  scripts/bench-cluster.sh --bin $TESSERA_BIN --dir /tmp/bm/wr > /tmp/bm/wr.out 2>&1 &
  CP=$!
  for _ in $(seq 90); do grep -q "cluster ready" /tmp/bm/wr.out && break; sleep 1; done
  eval "$(grep ^export /tmp/bm/wr.out)"
  P=$(grep "datanode pids" /tmp/bm/wr.out | awk '{print $3}')
  (sleep 3; if [ -n "${PERF:-}" ]; then perf record -a -F 499 -g -o /tmp/bm/perf-$dw-$w.data -- sleep 4 >/dev/null 2>&1; else $HERE/cpu-busy.sh 4; fi) &
  $TESSERA_BIN bench put --datanode-pids $P --json --meta $TESSERA_META --writers $w --key-size 64MiB --replication rs-3-2-1024k --duration ${DURATION:-8s} > /tmp/bm/wr-$dw-$w.json 2>/dev/null
  python3 -c "import json;d=json.load(open('/tmp/bm/wr-$dw-$w.json'));print('dw=$dw w=$w MB/s', round(d['mb_per_s']), 'p50', round(d['workloads'][0]['latency_ms']['p50']), 'dncpu/GB', round(d['datanode_cpu']['cpu_seconds_per_gb'],2), 'pool', d.get('buffer_pool'))" 2>&1 | cut -c1-300
  kill $CP; wait $CP 2>/dev/null; sleep 2
done
rm -rf /tmp/bm/wr
