#!/bin/bash
# What mutual TLS on the internal links costs: two `tessera server`s from the
# same binary (release build), both reading every block over TCP
# (--no-short-circuit, so each GET crosses a datanode link), one with clear
# text links and one with mutual TLS on its meta RPC and datanode ports
# (--cluster-ca/--cluster-cert/--cluster-key, made by `tessera admin certs`),
# as targets of the same ../shared/bench/s3-load.py runs (wrk replaying
# signed requests), RUNS times; one table per run on stdout. Needs wrk and
# boto3 (the repo's .venv has it).
#   scripts/bench/s3-mtls.sh [RUNS] [SCENARIOS] [SECONDS]
set -u
# Benchmarks need no web console (and two servers would share its port).
export TESSERA_CONSOLE_LISTEN=off
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
RUNS=${1:-3}; ONLY=${2:-range64k-c64,get256m-c1,put16m-c16}; DUR=${3:-5}
LOAD=${S3_LOAD:-$ROOT/../shared/bench/s3-load.py}
PY=${PYTHON:-$ROOT/.venv/bin/python}
W=$(mktemp -d); PLAIN=""; MTLS=""
trap 'kill $PLAIN $MTLS 2>/dev/null; rm -rf $W' EXIT
$B admin certs --dir $W/certs --node server=127.0.0.1 > /dev/null
C=$W/certs
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET
start() { # NAME PORT [ARGS...]: starts a server, waits for READY
  local name=$1 port=$2; shift 2
  $B server --data $W/$name --listen 127.0.0.1:$port --meta-listen 127.0.0.1:$((port + 1)) \
    --ops-listen 127.0.0.1:$((port + 2)) --no-short-circuit "$@" > $W/$name.log 2>&1 &
  echo $!
  for _ in $(seq 60); do grep -q READY $W/$name.log && return; sleep 0.5; done
}
for r in $(seq $RUNS); do
  rm -rf $W/plain $W/mtls
  PLAIN=$(start plain 19878)
  MTLS=$(start mtls 29878 --cluster-ca $C/ca.pem --cluster-cert $C/server.pem --cluster-key $C/server.key)
  echo "# run $r"
  $PY "$LOAD" --duration $DUR --only $ONLY \
    --target plain=http://127.0.0.1:19878,AKBENCH,SKBENCHSECRET \
    --target mtls=http://127.0.0.1:29878,AKBENCH,SKBENCHSECRET
  kill $PLAIN $MTLS 2>/dev/null; wait $PLAIN $MTLS 2>/dev/null
done
