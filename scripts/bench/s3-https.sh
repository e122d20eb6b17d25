#!/bin/bash
# What HTTPS costs on the S3 port: two `tessera server`s from the same binary
# (release build, defaults), one plain, one with a self-signed P-256
# certificate (--tls-cert/--tls-key), as targets of the same
# ../shared/bench/s3-load.py runs (wrk replaying signed requests), RUNS
# times; one table per run on stdout. Needs wrk, openssl and boto3 (the
# repo's .venv has it).
#   scripts/bench/s3-https.sh [RUNS] [SCENARIOS] [SECONDS]
set -u
# Benchmarks need no web console (and two servers would share its port).
export TESSERA_CONSOLE_LISTEN=off
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
RUNS=${1:-3}; ONLY=${2:-range64k-c64,get1k-c64,put16m-c16}; DUR=${3:-5}
LOAD=${S3_LOAD:-$ROOT/../shared/bench/s3-load.py}
PY=${PYTHON:-$ROOT/.venv/bin/python}
W=$(mktemp -d); PLAIN=""; TLS=""
trap 'kill $PLAIN $TLS 2>/dev/null; rm -rf $W' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -keyout $W/s3.key -out $W/s3.crt -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET
# boto3 (which uploads the objects) trusts the certificate; wrk checks none.
export AWS_CA_BUNDLE=$W/s3.crt
start() { # NAME PORT [ARGS...]: starts a server, waits for READY
  local name=$1 port=$2; shift 2
  $B server --data $W/$name --listen 127.0.0.1:$port --meta-listen 127.0.0.1:$((port + 1)) \
    --ops-listen 127.0.0.1:$((port + 2)) "$@" > $W/$name.log 2>&1 &
  echo $!
  for _ in $(seq 60); do grep -q READY $W/$name.log && return; sleep 0.5; done
}
for r in $(seq $RUNS); do
  rm -rf $W/plain $W/tls
  PLAIN=$(start plain 19878)
  TLS=$(start tls 29878 --tls-cert $W/s3.crt --tls-key $W/s3.key)
  echo "# run $r"
  $PY "$LOAD" --duration $DUR --only $ONLY \
    --target http=http://127.0.0.1:19878,AKBENCH,SKBENCHSECRET \
    --target https=https://127.0.0.1:29878,AKBENCH,SKBENCHSECRET
  kill $PLAIN $TLS 2>/dev/null; wait $PLAIN $TLS 2>/dev/null
done
