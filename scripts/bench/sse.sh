#!/bin/bash
# SSE-S3 and SSE-KMS against objects stored in clear, the same `tessera
# server` and the same run: `tessera bench put --via s3` (WRITERS writers,
# 16 MiB keys) and `tessera bench get` (8 clients over 8 objects of 16 MiB),
# each once plain, once with --sse and once with --sse aws:kms, alternated
# RUNS times; one line per workload and run with the throughputs and the
# ratios to plain.
#   scripts/bench/sse.sh [RUNS] [SECONDS] [WRITERS]
set -u
# Benchmarks need no web console (and two servers would share its port).
export TESSERA_CONSOLE_LISTEN=off
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
RUNS=${1:-3}; SECONDS_EACH=${2:-8}; WRITERS=${3:-4}
W=$(mktemp -d); SP=""; trap 'kill $SP 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET
export AWS_ACCESS_KEY_ID=AKBENCH AWS_SECRET_ACCESS_KEY=SKBENCHSECRET
E=http://127.0.0.1:19878
rate() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]));w=d['workloads'][0];assert d['errors']==0,d['errors'];print(w['mb_per_s'])" "$1"; }
for r in $(seq "$RUNS"); do
  # A fresh server and data folder each run: the PUTs of a run fill tens of GB.
  rm -rf "$W/data"
  $B server --data $W/data --listen 127.0.0.1:19878 --meta-listen 127.0.0.1:19879 --ops-listen 127.0.0.1:19880 > $W/server.log 2>&1 &
  SP=$!
  for _ in $(seq 60); do grep -q READY $W/server.log && break; sleep 0.5; done
  for mode in plain sse kms; do
    flag=""; [ $mode = sse ] && flag=--sse; [ $mode = kms ] && flag="--sse aws:kms"
    $B bench put --via s3 --endpoint $E --bucket put-$mode --writers "$WRITERS" --key-size 16MiB --duration "${SECONDS_EACH}s" $flag --json > $W/put-$mode.json 2>/dev/null
    $B bench get --endpoint $E --bucket get-$mode --clients 8 --object-size 16MiB --objects 8 --duration "${SECONDS_EACH}s" $flag --json > $W/get-$mode.json 2>/dev/null
  done
  kill $SP; wait $SP 2>/dev/null
  for op in put get; do
    plain=$(rate $W/$op-plain.json); sse=$(rate $W/$op-sse.json); kms=$(rate $W/$op-kms.json)
    python3 -c "p,s,k=$plain,$sse,$kms;print('run $r $op MB/s plain %.0f sse-s3 %.0f kms %.0f ratio sse-s3 %.2f kms %.2f' % (p, s, k, s / p, k / p))"
  done
done
