#!/bin/bash
# `tessera server` (release build, defaults) and nginx serving the same bytes,
# measured by ../shared/bench/s3-load.py (wrk replaying signed requests), RUNS
# times; one table per run on stdout. The server is measured twice per
# scenario: `tessera` right after the upload (its blocks were written with
# O_DIRECT, so the first reads come from the disk) and `tessera-warm` just
# after it (the same object, read once: as warm as nginx's freshly written
# file). With TESSERA_BASELINE_BIN set, a second server from that binary runs
# beside the first (ports 29878-29880) as the targets `baseline` and
# `baseline-warm` of the same runs: two builds compared scenario by scenario.
# Needs wrk and nginx (apt-get install -y wrk nginx-light) and boto3 (the
# repo's .venv has it).
#   scripts/bench/s3-vs-nginx.sh [RUNS] [SCENARIOS] [SECONDS]
set -u
# Benchmarks need no web console (and two servers would share its port).
export TESSERA_CONSOLE_LISTEN=off
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
RUNS=${1:-3}; ONLY=${2:-range64k-c8,range64k-c64,get1k-c64,get256m-c1,put1m-c8,put16m-c2,put16m-c16}; DUR=${3:-5}
LOAD=${S3_LOAD:-$ROOT/../shared/bench/s3-load.py}
PY=${PYTHON:-$ROOT/.venv/bin/python}
BASE=${TESSERA_BASELINE_BIN:-}
SP=""; BP=""
W=$(mktemp -d); trap 'kill $SP $BP 2>/dev/null; nginx -c $W/nginx.conf -p $W -s stop 2>/dev/null; rm -rf $W' EXIT
mkdir -p $W/www; chmod 755 $W  # nginx workers run as nobody
printf 'worker_processes 2; pid %s/nginx.pid; error_log %s/error.log;\nevents { worker_connections 1024; }\nhttp { access_log off; sendfile on; keepalive_requests 1000000;\n  server { listen 127.0.0.1:18080; root %s/www; } }\n' "$W" "$W" "$W" > $W/nginx.conf
nginx -c $W/nginx.conf -p $W
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET
for r in $(seq $RUNS); do
  rm -rf $W/data $W/base
  $B server --data $W/data --listen 127.0.0.1:19878 --meta-listen 127.0.0.1:19879 --ops-listen 127.0.0.1:19880 > $W/server.log 2>&1 &
  SP=$!
  for _ in $(seq 60); do grep -q READY $W/server.log && break; sleep 0.5; done
  BASELINE=()
  if [ -n "$BASE" ]; then
    $BASE server --data $W/base --listen 127.0.0.1:29878 --meta-listen 127.0.0.1:29879 --ops-listen 127.0.0.1:29880 > $W/base.log 2>&1 &
    BP=$!
    for _ in $(seq 60); do grep -q READY $W/base.log && break; sleep 0.5; done
    BASELINE=(--target baseline=http://127.0.0.1:29878,AKBENCH,SKBENCHSECRET
              --target baseline-warm=http://127.0.0.1:29878,AKBENCH,SKBENCHSECRET)
  fi
  echo "# run $r"
  $PY "$LOAD" --duration $DUR --only $ONLY \
    --target tessera=http://127.0.0.1:19878,AKBENCH,SKBENCHSECRET \
    --target tessera-warm=http://127.0.0.1:19878,AKBENCH,SKBENCHSECRET \
    "${BASELINE[@]}" \
    --target "nginx=http://127.0.0.1:18080,static,$W/www"
  kill $SP $BP 2>/dev/null; wait $SP $BP 2>/dev/null; BP=""
done
