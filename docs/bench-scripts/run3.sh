#!/bin/bash
# Measurements behind docs/benchmarks.md; results land in /tmp/bm/out.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=${TESSERA_BIN:-$HERE/../../target/release/tessera}
summ() { python3 "$HERE/summ.py" "$@"; }
name=c3; rm -rf /tmp/bm/$name; scripts/bench-cluster.sh --bin $B --dir /tmp/bm/$name --keep > /tmp/bm/$name.out 2>&1 &
CP=$!
for i in $(seq 60); do grep -q "cluster ready" /tmp/bm/$name.out && break; sleep 1; done
eval "$(grep ^export /tmp/bm/$name.out)"
P=$(grep "datanode pids" /tmp/bm/$name.out | awk '{print $3}')
pr() { local tag=$1; shift; $B bench pread --meta $TESSERA_META --datanode-pids $P --json "$@" > $OUT/$tag.json 2>$OUT/$tag.err; summ $tag; }
for r in 1 2; do
pr x-h-seq-r$r --key kd --size 256MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
pr x-h-pos-r$r --key kd --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
done
# the datanode holding internal block 0 (a data cell)
F=$(find /tmp/bm/$name -name '*_0.data' | head -1); echo "cell 0 file: $F"
DN=$(echo $F | sed "s#/tmp/bm/$name/##" | cut -d/ -f1); echo "datanode dir $DN"
VP=$(pgrep -f "datanode.*/tmp/bm/$name/$DN( |$)" | head -1); echo "victim pid $VP"
kill -STOP $CP; kill -9 $VP; sleep 1
P=$(echo $P | tr ',' '\n' | grep -v "^$VP$" | paste -sd,)
for r in 1 2; do
pr x-d-seq-r$r --key kd --size 256MiB --threads 0 --seq-readers 1 --duration 6s --no-short-circuit
pr x-d-pos-r$r --key kd --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 6s --no-short-circuit
done
kill -CONT $CP; kill $CP; sleep 3; echo ALLDONE
