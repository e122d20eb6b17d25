#!/usr/bin/env bash
# Starts a local Tessera cluster of separate processes for `tessera bench`:
# one meta, N datanodes (5 by default) and one S3 gateway, each on 127.0.0.1
# ports picked by the kernel, with data in a temporary folder. Waits until
# every role printed its READY line and every datanode is healthy, prints the
# addresses and credentials, then runs until interrupted (Ctrl-C / SIGTERM),
# when it stops the processes it started and removes the folder.
#
#   scripts/bench-cluster.sh [--bin PATH] [--datanodes N] [--dir DIR] [--keep]
#                            [--block-size SIZE] [--no-fsync]
#
# --bin defaults to $TESSERA_BIN, else target/x86_64-unknown-linux-gnu/release/tessera. Logs are in
# DIR/*.log. Example, in another shell:
#   tessera bench pread --meta <meta> --threads 8 --duration 20s --datanode-pids auto
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
DATANODES=5
DIR=""
KEEP=0
BLOCK_SIZE=256MiB
FSYNC=true
READY_TIMEOUT=60

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --bin) BIN=$2; shift 2 ;;
        --datanodes) DATANODES=$2; shift 2 ;;
        --dir) DIR=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --block-size) BLOCK_SIZE=$2; shift 2 ;;
        --no-fsync) FSYNC=false; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument $1" >&2; usage 2 ;;
    esac
done

[ -x "$BIN" ] || { echo "no tessera binary at $BIN (build it, or pass --bin / TESSERA_BIN)" >&2; exit 1; }
if [ -z "$DIR" ]; then
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench.XXXXXX")
else
    mkdir -p "$DIR"
fi

rand() { head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c "$1"; }
ACCESS_KEY=TK$(rand 18 | tr 'a-f' 'A-F')
SECRET_KEY=$(rand 40)
ADMIN_TOKEN=$(rand 32)
export TESSERA_ROOT_ACCESS_KEY=$ACCESS_KEY TESSERA_ROOT_SECRET_KEY=$SECRET_KEY TESSERA_ADMIN_TOKEN=$ADMIN_TOKEN
unset TESSERA_CONFIG
export RUST_LOG=${RUST_LOG:-info}

PIDS=()
stop_all() {
    trap - EXIT INT TERM
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$KEEP" -eq 0 ]; then rm -rf "$DIR"; else echo "kept $DIR" >&2; fi
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME ARGS...: runs `tessera ARGS...` in the background, stdout to
# DIR/NAME.out and stderr to DIR/NAME.log.
start() {
    local name=$1; shift
    "$BIN" "$@" >"$DIR/$name.out" 2>"$DIR/$name.log" &
    PIDS+=("$!")
    eval "PID_$name=$!"
}

# ready NAME: waits for NAME's READY line and prints it.
ready() {
    local name=$1 pid deadline=$((SECONDS + READY_TIMEOUT))
    eval "pid=\$PID_$name"
    while ! grep -q '^READY ' "$DIR/$name.out" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "$name exited before it was ready; last log lines:" >&2
            tail -n 30 "$DIR/$name.log" >&2
            exit 1
        fi
        [ "$SECONDS" -lt "$deadline" ] || { echo "$name not ready in ${READY_TIMEOUT}s" >&2; exit 1; }
        sleep 0.1
    done
    grep -m1 '^READY ' "$DIR/$name.out"
}

# field LINE KEY: the value of KEY=value in a READY line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

LOCAL=127.0.0.1:0
mkdir -p "$DIR/meta"
# Each datanode and the gateway get a credential of their own, minted with
# the key meta will find in its data folder; bench acts as a gateway too.
mint_args=()
for i in $(seq 0 $((DATANODES - 1))); do mint_args+=(--datanode "$DIR/dn$i.credential"); done
"$BIN" admin credential files --key-file "$DIR/meta/credential-key" "${mint_args[@]}" \
    --gateway "gateway=$DIR/gateway.credential" --gateway "bench=$DIR/bench.credential" 2>/dev/null
start meta meta --data "$DIR/meta" --listen $LOCAL --ops-listen $LOCAL --block-size "$BLOCK_SIZE"
META_LINE=$(ready meta)
META=$(field "$META_LINE" meta)

for i in $(seq 0 $((DATANODES - 1))); do
    mkdir -p "$DIR/dn$i"
    start "dn$i" datanode --meta "$META" --data "$DIR/dn$i" --listen $LOCAL --ops-listen $LOCAL \
        --fsync "$FSYNC" --heartbeat-interval 1s --credential-file "$DIR/dn$i.credential"
done
DN_LINES=()
for i in $(seq 0 $((DATANODES - 1))); do DN_LINES+=("$(ready "dn$i")"); done

start gateway gateway --meta "$META" --listen $LOCAL --ops-listen $LOCAL --block-size "$BLOCK_SIZE" \
    --credential-file "$DIR/gateway.credential"
GW_LINE=$(ready gateway)
S3=$(field "$GW_LINE" s3)

deadline=$((SECONDS + READY_TIMEOUT))
while :; do
    healthy=$("$BIN" admin --meta "$META" --token "$ADMIN_TOKEN" --json status 2>/dev/null \
        | grep -c '"state": "healthy"' || true)
    [ "$healthy" -ge "$DATANODES" ] && break
    [ "$SECONDS" -lt "$deadline" ] || { echo "only $healthy of $DATANODES datanodes healthy" >&2; exit 1; }
    sleep 0.2
done

DN_PIDS=$(for i in $(seq 0 $((DATANODES - 1))); do eval "printf '%s,' \$PID_dn$i"; done)
DN_PIDS=${DN_PIDS%,}
cat <<INFO
cluster ready in $DIR
  meta      $META ($(field "$META_LINE" ops))
$(for i in $(seq 0 $((DATANODES - 1))); do
    printf '  dn%-7s %s (%s)\n' "$i" "$(field "${DN_LINES[$i]}" datanode)" "$(field "${DN_LINES[$i]}" ops)"
done)
  gateway   $S3 ($(field "$GW_LINE" ops))
  datanode pids $DN_PIDS
export TESSERA_META=$META
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export TESSERA_ADMIN_TOKEN=$ADMIN_TOKEN
export TESSERA_CREDENTIAL_FILE=$DIR/bench.credential
examples:
  $BIN bench pread --meta $META --threads 8 --duration 20s --datanode-pids $DN_PIDS
  $BIN bench pread --via s3 --endpoint $S3 --threads 8 --duration 20s
  $BIN bench get --endpoint $S3 --clients 8 --object-size 1MiB --objects 16 --duration 20s
  $BIN bench put --meta $META --writers 4 --key-size 16MiB --duration 20s
press Ctrl-C to stop
INFO

# Run until interrupted, or until one of the roles dies.
while :; do
    for pid in "${PIDS[@]}"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "process $pid exited; stopping the cluster (logs in $DIR)" >&2
            KEEP=1
            exit 1
        fi
    done
    sleep 1
done
