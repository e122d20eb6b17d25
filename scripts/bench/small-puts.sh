#!/bin/bash
# PUTs of 1 KiB, 64 KiB and 1 MiB objects (scripts/bench/small_puts.py):
# `tessera server` (release build, defaults) beside folder-s3, a thin S3
# server over a plain folder that fsyncs each object (tools/folder-s3),
# s3s-fs when installed (below), and the disk's own direct synchronous
# writes (fio), RUNS times. With TESSERA_BASELINE_BIN set, a
# server from that binary runs beside them as the target `baseline`: two
# builds compared in the same runs; TESSERA_BASELINE_ARGS are given to it
# (and alone, with this build: e.g. "--inline-max 0" measures this build
# without inline objects). Needs wrk and fio (apt-get install -y
# wrk fio) and boto3 (the repo's .venv has it).
# SCENARIOS picks some of the sizes (e.g. "put64k-c16"). BENCH=small_gets.py
# runs GETs of 64 KiB and 1 MiB objects instead (scripts/bench/small_gets.py).
#   scripts/bench/small-puts.sh [RUNS] [SECONDS]
set -u
export TESSERA_CONSOLE_LISTEN=off
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
F=${FOLDER_S3_BIN:-$ROOT/target/release/folder-s3}
# s3s-fs (the s3s project's S3 server over a folder; it never fsyncs), when
# installed: cargo install s3s-fs@0.14.1 --features binary --locked
S3S=${S3S_FS_BIN:-$HOME/.cargo/bin/s3s-fs}
RUNS=${1:-1}; DUR=${2:-5}
PY=${PYTHON:-$ROOT/.venv/bin/python}
ONLY=()
for s in ${SCENARIOS:-}; do ONLY+=(--only "$s"); done
BASE=${TESSERA_BASELINE_BIN:-}
BASE_ARGS=${TESSERA_BASELINE_ARGS:-}
if [ -n "$BASE_ARGS" ] && [ -z "$BASE" ]; then BASE=$B; fi
PIDS=()
# On the disk the repository is on (a tmpfs /tmp would measure no disk).
TOP=$(mktemp -d -p "$ROOT/target"); trap 'kill "${PIDS[@]}" 2>/dev/null; wait; rm -rf "$TOP"' EXIT
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET

# start NAME BIN PORT_BASE [ARGS...]: a `tessera server` on 127.0.0.1:PORT_BASE..+2.
start() {
  local name=$1 bin=$2 port=$3
  shift 3
  "$bin" server --data "$W/$name" --listen "127.0.0.1:$port" --meta-listen "127.0.0.1:$((port + 1))" \
    --ops-listen "127.0.0.1:$((port + 2))" "$@" > "$W/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 60); do grep -q READY "$W/$name.log" && return; sleep 0.5; done
  echo "$name did not start: $(tail -5 "$W/$name.log")" >&2; exit 1
}

for r in $(seq "$RUNS"); do
  # A folder of its own per run, all removed at the end: ext4 skips inodes
  # deleted in the last minute (longer while their table is unwritten) when
  # it allocates new ones, so files removed between runs would make the
  # next run's file creations cost several times their usual CPU.
  W=$TOP/run$r; mkdir -p "$W"
  TARGETS=()
  start tessera "$B" 19878
  TARGETS+=(--target "tessera=http://127.0.0.1:19878,AKBENCH,SKBENCHSECRET,${PIDS[-1]}")
  if [ -n "$BASE" ]; then
    # shellcheck disable=SC2086 # the arguments, word by word
    start baseline "$BASE" 29878 $BASE_ARGS
    TARGETS+=(--target "baseline=http://127.0.0.1:29878,AKBENCH,SKBENCHSECRET,${PIDS[-1]}")
  fi
  "$F" --root "$W/folder" > "$W/folder.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 60); do grep -q LISTENING "$W/folder.log" && break; sleep 0.2; done
  FOLDER=$(awk '/LISTENING/ {print $2}' "$W/folder.log")
  TARGETS+=(--target "folder-s3=http://$FOLDER,AKBENCH,SKBENCHSECRET,${PIDS[-1]}")
  if [ -x "$S3S" ]; then
    mkdir -p "$W/s3s-fs"
    "$S3S" --host 127.0.0.1 --port 39878 --access-key AKBENCH --secret-key SKBENCHSECRET "$W/s3s-fs" \
      > "$W/s3s-fs.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 60); do (echo > /dev/tcp/127.0.0.1/39878) 2>/dev/null && break; sleep 0.2; done
    TARGETS+=(--target "s3s-fs=http://127.0.0.1:39878,AKBENCH,SKBENCHSECRET,${PIDS[-1]}")
  fi
  echo "# run $r"
  "$PY" "$HERE/${BENCH:-small_puts.py}" --data-dir "$W" --duration "$DUR" "${ONLY[@]}" "${TARGETS[@]}"
  kill "${PIDS[@]}" 2>/dev/null; wait; PIDS=()
done
