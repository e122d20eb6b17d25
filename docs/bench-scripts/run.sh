#!/bin/bash
# Benchmarks for docs/benchmarks.md; writes JSON per run into /tmp/bm/out
# Measurements behind docs/benchmarks.md; results land in /tmp/bm/out.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=${TESSERA_BIN:-$HERE/../../target/release/tessera}
OUT=/tmp/bm/out; mkdir -p $OUT
cd "$HERE/../.."
summ() { python3 "$HERE/summ.py" "$@"; }
start_cluster() { # name, env...
  local name=$1; shift
  rm -rf /tmp/bm/$name; env "$@" scripts/bench-cluster.sh --bin $B --dir /tmp/bm/$name > /tmp/bm/$name.out 2>&1 &
  echo $! > /tmp/bm/$name.pid
  for i in $(seq 60); do grep -q "cluster ready" /tmp/bm/$name.out && break; sleep 1; done
  eval "$(grep ^export /tmp/bm/$name.out)"
  P=$(grep "datanode pids" /tmp/bm/$name.out | awk '{print $3}')
  GW=$(grep "  gateway" /tmp/bm/$name.out | awk '{print $2}')
}
stop_cluster() { kill $(cat /tmp/bm/$1.pid); sleep 3; }
pr() { # tag args...
  local tag=$1; shift
  $B bench pread --meta $TESSERA_META --datanode-pids $P --json "$@" > $OUT/$tag.json 2>$OUT/$tag.err; summ $tag
}
# loopback TCP baseline
iperf3 -s -D -1 -p 15201 >/dev/null 2>&1; sleep 1
iperf3 -c 127.0.0.1 -p 15201 -t 5 -J > $OUT/iperf.json 2>/dev/null
python3 -c "import json;d=json.load(open('$OUT/iperf.json'));print('iperf3 loopback 1 stream MB/s', round(d['end']['sum_received']['bits_per_second']/8e6))"
# MD5 one core baseline (same run)
python3 - <<'PY'
import hashlib,time,os
b=os.urandom(64<<20); t=time.time(); h=hashlib.md5()
for _ in range(16): h.update(b)
print('md5 one core MB/s', round(16*64*1.048576/(time.time()-t)))
PY
start_cluster sendfile
# 1: 1 GiB single stream, TCP and short-circuit
pr seq1g-tcp --key big1g --size 1GiB --threads 0 --seq-readers 1 --seq-read-size 1MiB --duration 8s --no-short-circuit
pr seq1g-sc --key big1g --size 1GiB --threads 0 --seq-readers 1 --seq-read-size 1MiB --duration 8s
# checksum size: 16K vs 1M, single stream over TCP and positioned
pr seq-bpc16k --key k16k --size 256MiB --bytes-per-checksum 16KiB --threads 0 --seq-readers 1 --duration 8s --no-short-circuit
pr seq-bpc1m --key k1m --size 256MiB --bytes-per-checksum 1MiB --threads 0 --seq-readers 1 --duration 8s --no-short-circuit
pr pos-bpc16k --key k16k --size 256MiB --bytes-per-checksum 16KiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 8s --no-short-circuit
pr pos-bpc1m --key k1m --size 256MiB --bytes-per-checksum 1MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 8s --no-short-circuit
# datanode CPU, sendfile mode
pr cpu-sendfile-seq --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 8s --no-short-circuit
pr cpu-sendfile-pos --key k16k --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 8s --no-short-circuit
# puts: scaling
for w in 1 2 4 16; do
  $B bench put --meta $TESSERA_META --writers $w --key-size 64MiB --replication rs-3-2-1024k --duration 12s --datanode-pids $P --json > $OUT/put-w$w.json 2>$OUT/put-w$w.err; summ put-w$w
done
# one 1 GiB PUT stream through S3
$B bench put --via s3 --endpoint $GW --writers 1 --key-size 1GiB --count 2 --json > $OUT/put-s3-1g.json 2>$OUT/put-s3-1g.err; summ put-s3-1g
# degraded: healthy then one datanode down
pr healthy-seq --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 8s --no-short-circuit
pr healthy-pos --key k16k --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 8s --no-short-circuit
kill -9 ${P%%,*}; sleep 1
P=${P#*,}
pr degraded-seq --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 8s --no-short-circuit
pr degraded-pos --key k16k --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 8s --no-short-circuit
stop_cluster sendfile
start_cluster copy TESSERA_SEND_MODE=copy
pr cpu-copy-seq --key big1g --size 1GiB --threads 0 --seq-readers 1 --duration 8s --no-short-circuit
pr cpu-copy-pos --key k16k --size 256MiB --threads 8 --read-size 64KiB --seq-readers 0 --duration 8s --no-short-circuit
stop_cluster copy
# 1 KiB GETs through S3: short-circuit vs TCP (tessera server)
for mode in sc tcp; do
  rm -rf /tmp/bm/srv; extra=""; [ $mode = tcp ] && extra=--no-short-circuit
  TESSERA_ROOT_ACCESS_KEY=benchkey TESSERA_ROOT_SECRET_KEY=benchsecret12345678 $B server --data /tmp/bm/srv --listen 127.0.0.1:19878 --meta-listen 127.0.0.1:19879 --ops-listen 127.0.0.1:19880 $extra > /tmp/bm/srv-$mode.log 2>&1 &
  SP=$!; sleep 4
  $B bench get --endpoint http://127.0.0.1:19878 --access-key benchkey --secret-key benchsecret12345678 --clients 16 --object-size 1KiB --objects 200 --duration 8s --json > $OUT/get1k-$mode.json 2>$OUT/get1k-$mode.err; summ get1k-$mode
  kill $SP; wait $SP 2>/dev/null
done
echo ALLDONE
