#!/bin/bash
# The client-library rows of docs/benchmarks.md: `tessera bench` against a
# cluster of separate processes (scripts/bench-cluster.sh). Results: one JSON
# per run in $OUT (default /tmp/bm/out4), one summary line each on stdout.
# TESSERA_BIN picks the binary (default target/x86_64-unknown-linux-gnu/release/tessera).
#   scripts/bench/client-paths.sh [section...]   sections: stream degraded pread writers put1g
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=${TESSERA_BIN:-$HERE/../../target/x86_64-unknown-linux-gnu/release/tessera}
OUT=${OUT:-/tmp/bm/out4}; mkdir -p "$OUT"; cd "$HERE/../.."
SECTIONS=${*:-stream degraded pread writers put1g}
summ() { OUTDIR=$OUT python3 "$HERE/summarize.py" "$@"; }
start_cluster() { # name [bench-cluster args...]
  local name=$1; shift
  rm -rf /tmp/bm/$name
  scripts/bench-cluster.sh --bin "$B" --dir /tmp/bm/$name "$@" > /tmp/bm/$name.out 2>&1 &
  CP=$!
  for _ in $(seq 90); do grep -q "cluster ready" /tmp/bm/$name.out && break; sleep 1; done
  eval "$(grep ^export /tmp/bm/$name.out)"
  P=$(grep "datanode pids" /tmp/bm/$name.out | awk '{print $3}')
  GW=$(grep "  gateway" /tmp/bm/$name.out | awk '{print $2}')
}
stop_cluster() { kill -CONT $CP 2>/dev/null; kill $CP; wait $CP 2>/dev/null; sleep 2; }
pr() { local tag=$1; shift; $B bench pread --meta $TESSERA_META --datanode-pids $P --json "$@" > $OUT/$tag.json 2>$OUT/$tag.err; summ $tag; }
pu() { local tag=$1; shift; $B bench put --datanode-pids $P --json "$@" > $OUT/$tag.json 2>$OUT/$tag.err; summ $tag; }
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

start_cluster c4
if has stream; then
  # loopback ceiling: iperf3's fastest single stream (sendfile, 1 MiB writes), best of 3
  for r in 1 2 3; do
    iperf3 -s -D -1 -p 15201 >/dev/null 2>&1; sleep 1
    iperf3 -c 127.0.0.1 -p 15201 -t 4 -Z -l 1M -J > $OUT/iperf-r$r.json 2>/dev/null
    python3 -c "import json;d=json.load(open('$OUT/iperf-r$r.json'));print('iperf3 -Z -l 1M loopback 1 stream MB/s', round(d['end']['sum_received']['bits_per_second']/8e6))"
  done
  # warm: one pass of each key first (block data is written past the page cache)
  for k in k16k:16KiB k1m:1MiB; do
    pr warm-${k%%:*} --key ${k%%:*} --size 256MiB --bytes-per-checksum ${k##*:} --threads 0 --seq-readers 1 --duration 3s --no-short-circuit >/dev/null
  done
  pr warm-big1g --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 4s --no-short-circuit >/dev/null
  for r in 1 2 3; do
    pr seq1g-tcp-r$r --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
    pr seq1g-sc-r$r --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 6s
    pr bpc16k-r$r --key k16k --size 256MiB --bytes-per-checksum 16KiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
    pr bpc1m-r$r --key k1m --size 256MiB --bytes-per-checksum 1MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
  done
fi
if has pread; then
  pr warm-k256 --key k256 --size 256MiB --threads 0 --seq-readers 1 --duration 3s --no-short-circuit >/dev/null
  for r in 1 2 3; do
    pr pos-alone-r$r --key k256 --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
    pr pos-seq-r$r --key k256 --size 256MiB --threads 8 --read-size 64KiB --seq-readers 1 --seq-read-size 1MiB --duration 6s --no-short-circuit
    pr pos-seq-sc-r$r --key k256 --size 256MiB --threads 8 --read-size 64KiB --seq-readers 1 --seq-read-size 1MiB --duration 6s
  done
fi
if has put1g; then
  for r in 1 2 3; do
    pu put1g-s3-r$r --via s3 --endpoint $GW --writers 1 --key-size 1GiB --count 3
  done
  python3 - "$OUT" <<'PY'
import hashlib, os, sys, time
b = os.urandom(64 << 20); h = hashlib.md5(); t = time.time()
for _ in range(8): h.update(b)
print('openssl md5 (python hashlib) one core MB/s', round(8 * 64 * 1.048576 / (time.time() - t)))
PY
fi
if has writers; then
  # Each row on a fresh cluster: a row writes ~10 GB, and the disk is shared.
  stop_cluster
  for w in 1 2 4 16; do
    start_cluster c4w$w
    pu writers-$w --meta $TESSERA_META --writers $w --key-size 64MiB --replication rs-3-2-1024k --duration 8s
    stop_cluster
  done
  start_cluster c4
fi
if has degraded; then
  pr warm-kd --key kd --size 256MiB --threads 0 --seq-readers 1 --duration 3s --no-short-circuit >/dev/null
  for r in 1 2; do
    pr h-seq-r$r --key kd --size 256MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
    pr h-pos-r$r --key kd --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
  done
  # the datanode holding internal block 0 (a data cell) of the key's first group
  F=$(find /tmp/bm/c4 -name '*_0.data' | head -1); DN=$(echo "$F" | sed "s#/tmp/bm/c4/##" | cut -d/ -f1)
  VP=$(pgrep -f "datanode.*/tmp/bm/c4/$DN( |$)" | head -1); echo "killing datanode $DN (pid $VP), holder of $F"
  kill -STOP $CP; kill -9 $VP; sleep 1
  P=$(echo $P | tr ',' '\n' | grep -v "^$VP$" | paste -sd,)
  for r in 1 2; do
    pr d-seq-r$r --key kd --size 256MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
    pr d-pos-r$r --key kd --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
  done
fi
stop_cluster
echo ALLDONE
