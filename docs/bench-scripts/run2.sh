#!/bin/bash
# Measurements behind docs/benchmarks.md; results land in /tmp/bm/out.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=${TESSERA_BIN:-$HERE/../../target/release/tessera}
OUT=/tmp/bm/out; mkdir -p $OUT; cd "$HERE/../.."
summ() { python3 "$HERE/summ.py" "$@"; }
name=c2; rm -rf /tmp/bm/$name; scripts/bench-cluster.sh --bin $B --dir /tmp/bm/$name > /tmp/bm/$name.out 2>&1 &
CP=$!
for i in $(seq 60); do grep -q "cluster ready" /tmp/bm/$name.out && break; sleep 1; done
eval "$(grep ^export /tmp/bm/$name.out)"
P=$(grep "datanode pids" /tmp/bm/$name.out | awk '{print $3}')
pr() { local tag=$1; shift; $B bench pread --meta $TESSERA_META --datanode-pids $P --json "$@" > $OUT/$tag.json 2>$OUT/$tag.err; summ $tag; }
for r in 1 2 3; do
  pr bpc16k-r$r --key k16k --size 256MiB --bytes-per-checksum 16KiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
  pr bpc1m-r$r --key k1m --size 256MiB --bytes-per-checksum 1MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
done
for r in 1 2; do
  pr h-seq-r$r --key k16k --size 256MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
  pr h-pos-r$r --key k16k --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
done
kill -STOP $CP
kill -9 ${P%%,*}; P=${P#*,}; sleep 1
for r in 1 2; do
  pr d-seq-r$r --key k16k --size 256MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
  pr d-pos-r$r --key k16k --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
done
kill -CONT $CP; kill $CP; sleep 3
echo ALLDONE
