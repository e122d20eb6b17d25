#!/bin/bash
# 1 KiB GETs through S3 (`tessera bench get`, 16 clients) against `tessera
# server`: objects kept in their meta record (inline, the default), and in
# blocks (--inline-max 0) read short-circuit (the default) and with
# --no-short-circuit, alternated RUNS times; one summary line per run.
#   scripts/bench/get-short-circuit.sh [RUNS]
set -u
# Benchmarks need no web console (and two servers would share its port).
export TESSERA_CONSOLE_LISTEN=off
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
RUNS=${1:-2}
W=$(mktemp -d); trap 'kill $SP 2>/dev/null; rm -rf $W' EXIT
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET
export AWS_ACCESS_KEY_ID=AKBENCH AWS_SECRET_ACCESS_KEY=SKBENCHSECRET
for r in $(seq $RUNS); do
  for mode in inline sc tcp; do
    case $mode in
      inline) flags=() ;;
      sc) flags=(--inline-max 0) ;;
      tcp) flags=(--inline-max 0 --no-short-circuit) ;;
    esac
    rm -rf $W/data
    $B server --data $W/data --listen 127.0.0.1:19878 --meta-listen 127.0.0.1:19879 --ops-listen 127.0.0.1:19880 "${flags[@]}" > $W/server.log 2>&1 &
    SP=$!
    for _ in $(seq 60); do grep -q READY $W/server.log && break; sleep 0.5; done
    $B bench get --endpoint http://127.0.0.1:19878 --clients 16 --object-size 1KiB --objects 200 --duration 8s --json > $W/get.json 2>/dev/null
    python3 -c "import json;d=json.load(open('$W/get.json'));w=d['workloads'][0];print('run $r $mode', round(w['ops_per_s']), 'req/s p50', round(w['latency_ms']['p50'],3), 'p99', round(w['latency_ms']['p99'],3), 'errors', d['errors'])"
    kill $SP; wait $SP 2>/dev/null
  done
done
