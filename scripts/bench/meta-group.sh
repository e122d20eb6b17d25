#!/bin/bash
# PUTs of 1 KiB, 64 KiB and 1 MiB objects (scripts/bench/small_puts.py)
# through a cluster of separate processes whose meta is one `tessera meta`
# without a log (target `lone`), a group of one member (`group1`) or a group
# of three (`group3`), each with five datanodes and a gateway, one cluster at
# a time, RUNS times: the cost of replicating meta's writes through Raft.
# MEMBERS lists the metas to run (default "lone 1 3"). Needs wrk and fio.
# SCENARIOS picks some of the sizes (e.g. "put1k-c64").
#   scripts/bench/meta-group.sh [RUNS] [SECONDS]
set -u
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
B=${TESSERA_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/tessera}
RUNS=${1:-1}; DUR=${2:-5}
PY=${PYTHON:-$ROOT/.venv/bin/python}
ONLY=()
for s in ${SCENARIOS:-}; do ONLY+=(--only "$s"); done
PIDS=()
# On the disk the repository is on (a tmpfs /tmp would measure no disk).
TOP=$(mktemp -d -p "$ROOT/target"); trap 'kill "${PIDS[@]}" 2>/dev/null; wait; rm -rf "$TOP"' EXIT
export TESSERA_ROOT_ACCESS_KEY=AKBENCH TESSERA_ROOT_SECRET_KEY=SKBENCHSECRET TESSERA_ADMIN_TOKEN=benchadmintoken
export TESSERA_CONSOLE_LISTEN=off RUST_LOG=warn

# run NAME ARGS...: a process in the background whose READY line is awaited;
# its fields are left in READY_FIELDS.
run() {
  local name=$1
  shift
  "$B" "$@" > "$W/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 120); do
    READY_FIELDS=$(grep -m1 READY "$W/$name.log") && return
    sleep 0.5
  done
  echo "$name did not start: $(tail -5 "$W/$name.log")" >&2; exit 1
}

field() { tr ' ' '\n' <<<"$READY_FIELDS" | sed -n "s/^$1=//p"; }

# cluster MEMBERS: meta (without a log when MEMBERS is `lone`, else a group
# of that many), five datanodes, a gateway; sets ENDPOINT.
cluster() {
  local members=$1 meta peers="" i
  mkdir -p "$W/meta1"
  "$B" admin credential files --key-file "$W/meta1/credential-key" \
    --datanode "$W/dn1.cred" --datanode "$W/dn2.cred" --datanode "$W/dn3.cred" \
    --datanode "$W/dn4.cred" --datanode "$W/dn5.cred" --gateway "gw=$W/gw.cred" 2>/dev/null
  if [ "$members" = lone ]; then
    run meta1 meta --data "$W/meta1" --listen 127.0.0.1:0 --ops-listen 127.0.0.1:0
    meta=$(field meta)
  else
    meta=""
    local ports=()
    for i in $(seq "$members"); do
      # Members must know each other's ports before they start.
      ports[i]=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      peers+="${peers:+,}$i=127.0.0.1:${ports[i]}"
      meta+="${meta:+,}127.0.0.1:${ports[i]}"
    done
    for i in $(seq "$members"); do
      "$B" meta --data "$W/meta$i" --listen "127.0.0.1:${ports[i]}" --ops-listen 127.0.0.1:0 \
        --node-id "$i" --peers "$peers" > "$W/meta$i.log" 2>&1 &
      PIDS+=($!)
    done
    for i in $(seq "$members"); do
      for _ in $(seq 120); do grep -q READY "$W/meta$i.log" && break; sleep 0.5; done
    done
  fi
  for i in 1 2 3 4 5; do
    run "dn$i" datanode --meta "$meta" --data "$W/dn$i" --listen 127.0.0.1:0 --ops-listen 127.0.0.1:0 \
      --credential-file "$W/dn$i.cred"
  done
  run gateway gateway --meta "$meta" --listen 127.0.0.1:0 --ops-listen 127.0.0.1:0 --credential-file "$W/gw.cred"
  ENDPOINT=$(field s3)
  # The group's first leader writes the root key just after its election.
  for _ in $(seq 60); do
    AWS_ACCESS_KEY_ID=AKBENCH AWS_SECRET_ACCESS_KEY=SKBENCHSECRET AWS_DEFAULT_REGION=us-east-1 \
      "$ROOT/.venv/bin/aws" --endpoint-url "$ENDPOINT" s3 ls > /dev/null 2>&1 && break
    sleep 0.5
  done
}

for r in $(seq "$RUNS"); do
  for members in ${MEMBERS:-lone 1 3}; do
    # A folder of its own per cluster, all removed at the end (as in
    # small-puts.sh: ext4 makes file creation dear after mass deletions).
    W=$TOP/$r-$members; mkdir -p "$W"
    cluster "$members"
    name=$([ "$members" = lone ] && echo lone || echo "group$members")
    echo "# run $r: $name"
    "$PY" "$HERE/small_puts.py" --data-dir "$W" --duration "$DUR" "${ONLY[@]}" \
      --target "$name=$ENDPOINT,AKBENCH,SKBENCHSECRET" | tee "$W/table"
    # CPU the meta processes spent over the phase, per PUT served: with
    # every member on this one machine, a group spends it three times.
    ticks=0
    for pid in "${PIDS[@]}"; do
      tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q '^[^ ]* meta ' || continue
      ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    puts=$(awk -F'|' -v d="$DUR" '$3 ~ /'"$name"'/ {gsub(/[ ,]/, "", $4); n += $4 * d} END {print n}' "$W/table")
    echo "meta CPU: $((ticks * 10)) ms for about $puts PUTs ($(awk -v t="$ticks" -v p="$puts" 'BEGIN {printf "%.2f", t * 10 / p}') ms per PUT)"
    if [ "$members" != lone ]; then
      # Entries per sync of the log, summed over the members.
      entries=0 syncs=0
      for i in $(seq "$members"); do
        ops=$(grep -m1 READY "$W/meta$i.log" | tr ' ' '\n' | sed -n 's/^ops=//p')
        m=$(curl -s "$ops/metrics")
        entries=$((entries + $(awk '/^tessera_meta_log_entries_total/ {n += $2} END {print n + 0}' <<<"$m")))
        syncs=$((syncs + $(awk '/^tessera_meta_log_syncs_total/ {n += $2} END {print n + 0}' <<<"$m")))
      done
      echo "log: $entries entries in $syncs syncs ($(awk -v e="$entries" -v s="$syncs" 'BEGIN {printf "%.1f", e / (s ? s : 1)}') per sync)"
    fi
    kill "${PIDS[@]}" 2>/dev/null; wait; PIDS=()
  done
done
