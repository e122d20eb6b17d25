#!/usr/bin/env python3
"""Repair after a datanode loss, measured on a cluster of separate processes
(meta, DATANODES datanodes, gateway; the s3-tests harness starts them):

1. PUT objects of 64 MiB in rs-3-2 until the datanode to be lost holds about
   --lost-gib of block files;
2. ranged GETs (64 KiB at random offsets, 4 threads) for --idle-seconds: the
   idle latency;
3. SIGKILL one datanode; poll `tessera admin status` for when meta declares
   it dead and when every group is whole again (a scan after the death finds
   nothing damaged, nothing queued or running), with the same ranged GETs
   running all along: their latency while the repair runs.

Prints one JSON line: bytes of block files lost, seconds from dead to whole,
repair rate (GB of lost block files rebuilt per minute), ranged GET p50/p99
idle and during the repair, and their ratio.

    .venv/bin/python scripts/bench/repair.py [--repair-bandwidth 32MiB|0] [--lost-gib 1]
"""

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "s3-tests"))

from tessera_clients import s3_client  # noqa: E402
from tessera_procs import find_key, start_cluster  # noqa: E402

DATANODES = 6
OBJECT = 64 * 1024 * 1024
RANGE = 64 * 1024


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def block_bytes(work: Path, node: int) -> int:
    return sum(p.stat().st_size for p in (work / f"dn{node}" / "blocks").glob("*/*.data"))


class RangedGets:
    """Threads issuing ranged GETs, recording (start time, latency)."""

    def __init__(self, client, bucket, keys, threads=4):
        self.client, self.bucket, self.keys = client, bucket, keys
        self.samples, self.errors = [], 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        rng = random.Random()
        while not self.stop.is_set():
            key = rng.choice(self.keys)
            start = rng.randrange(0, OBJECT - RANGE)
            began = time.monotonic()
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{start + RANGE - 1}")
                body["Body"].read()
                self.samples.append((began, time.monotonic() - began))
            except Exception:  # noqa: BLE001 - counted, reported
                self.errors += 1

    def between(self, t0, t1):
        return [lat for began, lat in self.samples if t0 <= began < t1]

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repair-bandwidth", default="32MiB")
    parser.add_argument("--lost-gib", type=float, default=1.0)
    parser.add_argument("--idle-seconds", type=float, default=15.0)
    args = parser.parse_args()
    binary = Path(os.environ.get("TESSERA_BIN", ROOT / "target/x86_64-unknown-linux-gnu/release/tessera"))
    work = Path(tempfile.mkdtemp(prefix="repair-bench-"))
    cluster = start_cluster(
        binary,
        work,
        datanodes=DATANODES,
        meta_args=("--stale-after", "2s", "--dead-after", "5s"),
        datanode_args=("--heartbeat-interval", "1s", "--repair-bandwidth", args.repair_bandwidth),
    )
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = "repair-bench"
        client.create_bucket(Bucket=bucket)
        body = os.urandom(OBJECT)
        keys = []
        lost = 0
        while block_bytes(work, 0) < args.lost_gib * 2**30:
            key = f"o{len(keys)}"
            client.put_object(Bucket=bucket, Key=key, Body=body)
            keys.append(key)
        lost = block_bytes(work, 0)
        gets = RangedGets(client, bucket, keys)
        t_idle = time.monotonic()
        time.sleep(args.idle_seconds)
        killed_ms = int(time.time() * 1000)
        t_kill = time.monotonic()
        cluster.kill_datanode(0)
        t_dead = t_whole = None
        status = None
        while t_whole is None and time.monotonic() - t_kill < 900:
            status = cluster.status()
            nodes = find_key(status, "datanodes")
            if t_dead is None and any(n["state"] == "dead" for n in nodes):
                t_dead = time.monotonic()
            groups, repair = find_key(status, "block_groups"), find_key(status, "repair")
            whole = groups["degraded"] == groups["at_risk"] == groups["lost"] == 0
            if t_dead and repair["last_scan"] > killed_ms and whole and repair["queued"] == repair["running"] == 0:
                t_whole = time.monotonic()
            time.sleep(0.25)
        gets.close()
        idle = gets.between(t_idle, t_kill)
        during = gets.between(t_dead or t_kill, t_whole or time.monotonic())
        seconds = (t_whole - t_dead) if t_whole and t_dead else None
        result = {
            "repair_bandwidth": args.repair_bandwidth,
            "objects": len(keys),
            "lost_block_bytes": lost,
            "dead_to_whole_s": round(seconds, 1) if seconds else None,
            "rebuilt_gb_per_min": round(lost / 1e9 / (seconds / 60), 2) if seconds else None,
            "repair_read_bytes": find_key(status, "repair")["repaired_bytes"],
            "get_idle_p50_ms": round(1000 * percentile(idle, 0.5), 1),
            "get_idle_p99_ms": round(1000 * percentile(idle, 0.99), 1),
            "get_repair_p50_ms": round(1000 * percentile(during, 0.5), 1) if during else None,
            "get_repair_p99_ms": round(1000 * percentile(during, 0.99), 1) if during else None,
            "gets_idle": len(idle),
            "gets_during_repair": len(during),
            "get_errors": gets.errors,
        }
        if during:
            result["p99_ratio"] = round(percentile(during, 0.99) / percentile(idle, 0.99), 2)
        print(json.dumps(result))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
