#!/bin/bash
# SSE-S3 against objects stored in clear, the same `tessera server` and the
# same run: `tessera bench put --via s3` (WRITERS writers, 16 MiB keys) and
# `tessera bench get` (8 clients over 8 objects of 16 MiB), each once plain
# and once with --sse, alternated RUNS times; one line per workload and run
# with both throughputs and their ratio.
#   scripts/bench/sse.sh [RUNS] [SECONDS] [WRITERS]
set -u
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/release/tessera}
RUNS=${1:-3}; SECONDS_EACH=${2:-8}; WRITERS=${3:-4}
W=$(mktemp -d); trap 'kill $SP 2>/dev/null; rm -rf $W' EXIT
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET
export AWS_ACCESS_KEY_ID=AKBENCH AWS_SECRET_ACCESS_KEY=SKBENCHSECRET
E=http://127.0.0.1:19878
$B server --data $W/data --listen 127.0.0.1:19878 --meta-listen 127.0.0.1:19879 --ops-listen 127.0.0.1:19880 > $W/server.log 2>&1 &
SP=$!
for _ in $(seq 60); do grep -q READY $W/server.log && break; sleep 0.5; done
rate() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=d['workloads'][0];assert d['errors']==0,d['errors'];print(w['mb_per_s'])" "$1"; }
for r in $(seq "$RUNS"); do
  for mode in plain sse; do
    flag=""; [ $mode = sse ] && flag=--sse
    $B bench put --via s3 --endpoint $E --bucket put-$mode --writers "$WRITERS" --key-size 16MiB --duration "${SECONDS_EACH}s" $flag --json > $W/put-$mode.json 2>/dev/null
    $B bench get --endpoint $E --bucket get-$mode --clients 8 --object-size 16MiB --objects 8 --duration "${SECONDS_EACH}s" $flag --json > $W/get-$mode.json 2>/dev/null
  done
  for op in put get; do
    plain=$(rate $W/$op-plain.json); sse=$(rate $W/$op-sse.json)
    python3 -c "p,s=$plain,$sse;print('run $r $op MB/s plain %.0f sse %.0f ratio %.2f' % (p, s, s / p))"
  done
done
