#!/usr/bin/env python3
"""The balancer filling two new datanodes, measured on a cluster of separate
processes (meta, five datanodes, gateway; the s3-tests harness starts them),
each datanode reporting a fixed --capacity:

1. PUT objects of 64 MiB (rs-3-2) until the five datanodes hold about
   --stored-gib of block files; set the balancer's threshold and bandwidth;
2. ranged GETs (64 KiB at random offsets, 4 threads) for --idle-seconds:
   the idle latency;
3. start two empty datanodes; poll `tessera admin balance status` until
   every datanode's use is within the threshold of the mean, with the same
   ranged GETs running all along: their latency while block files move.

Prints one JSON line: bytes moved, seconds from the new datanodes' start to
balanced, the rate (GB of block files moved per minute), ranged GET p50/p99
idle and during the moves, and their ratio.

    .venv/bin/python scripts/bench/balance.py [--bandwidth 64MiB] [--repair-bandwidth 32MiB]
        [--threshold 2] [--stored-gib 3]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "s3-tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from repair import OBJECT, RangedGets, block_bytes, percentile

from tessera_clients import s3_client
from tessera_procs import mint_credentials, process_env, run_admin, start_cluster, start_datanode

OLD, NEW = 5, 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bandwidth", default="64MiB", help="the balancer's bandwidth (admin balance start)")
    parser.add_argument("--threshold", type=int, default=2, help="percentage points from the mean")
    parser.add_argument("--stored-gib", type=float, default=3.0, help="block files on the five datanodes")
    parser.add_argument("--capacity", default="4GiB", help="each datanode's --capacity")
    parser.add_argument("--repair-bandwidth", default="32MiB", help="each datanode's --repair-bandwidth")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    os.environ.setdefault("TESSERA_BIN", str(ROOT / "target/x86_64-unknown-linux-gnu/release/tessera"))
    datanode_args = (
        "--capacity",
        args.capacity,
        "--repair-bandwidth",
        args.repair_bandwidth,
        "--heartbeat-interval",
        "1s",
    )
    with tempfile.TemporaryDirectory(prefix="tessera-balance-", dir=os.environ.get("BENCH_DIR")) as tmp:
        work = Path(tmp)
        cluster = start_cluster(
            Path(os.environ["TESSERA_BIN"]),
            work,
            datanodes=OLD,
            meta_args=("--redundancy-scan-interval", "5s"),
            datanode_args=datanode_args,
        )
        try:
            admin = lambda *a: run_admin(cluster.meta, cluster.creds.admin_token, *a)
            admin("balance", "start", "--threshold", str(args.threshold), "--bandwidth", args.bandwidth)
            client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
            client.create_bucket(Bucket="bench")
            body = os.urandom(OBJECT)
            keys = []
            target = args.stored_gib * (1 << 30)
            while sum(block_bytes(work, n) for n in range(OLD)) < target:
                key = f"k{len(keys)}"
                client.put_object(Bucket="bench", Key=key, Body=body)
                keys.append(key)
            stored = sum(block_bytes(work, n) for n in range(OLD))
            gets = RangedGets(client, "bench", keys)
            idle_from = time.monotonic()
            time.sleep(args.idle_seconds)
            idle_to = time.monotonic()

            env = process_env(cluster.creds.env())
            credentials = [work / f"dn{i}.credential" for i in range(OLD, OLD + NEW)]
            mint_credentials(cluster_binary(), work / "meta", credentials, work / "spare-gateway.credential")
            started = time.monotonic()
            for i, credential in zip(range(OLD, OLD + NEW), credentials, strict=True):
                proc = start_datanode(
                    cluster_binary(),
                    f"cluster-dn{i}",
                    cluster.meta,
                    work / f"dn{i}",
                    credential,
                    list(datanode_args),
                    env,
                    work,
                )
                proc.wait_ready()
                cluster.datanodes.append(proc)
            while True:
                status = admin("balance", "status")
                nodes = status["datanodes"]
                even = all(abs(n["from_mean_points"]) <= args.threshold for n in nodes)
                if len(nodes) == OLD + NEW and status["state"] == "balanced" and even:
                    break
                if time.monotonic() - started > 1800:
                    raise SystemExit(f"not balanced within 30 min: {status}")
                time.sleep(0.5)
            balanced = time.monotonic()
            gets.close()
            idle = gets.between(idle_from, idle_to)
            moving = gets.between(started, balanced)
            moved = status["moved_bytes"]
            seconds = balanced - started
            print(
                json.dumps(
                    {
                        "bandwidth": args.bandwidth,
                        "repair_bandwidth": args.repair_bandwidth,
                        "threshold": args.threshold,
                        "stored_gb": round(stored / 1e9, 2),
                        "moved_gb": round(moved / 1e9, 3),
                        "moves": status["moved"],
                        "seconds": round(seconds, 1),
                        "gb_per_min": round(moved / 1e9 / seconds * 60, 2),
                        "new_use_percent": [
                            round(n["use_percent"], 2) for n in nodes if n["id"] not in old_ids(cluster, admin)
                        ],
                        "mean_use_percent": round(status["mean_use_percent"], 2),
                        "get_p50_ms": [ms(percentile(idle, 0.5)), ms(percentile(moving, 0.5))],
                        "get_p99_ms": [ms(percentile(idle, 0.99)), ms(percentile(moving, 0.99))],
                        "p99_ratio": round(percentile(moving, 0.99) / percentile(idle, 0.99), 2),
                        "gets": [len(idle), len(moving)],
                        "get_errors": gets.errors,
                    }
                )
            )
        finally:
            cluster.stop()


def cluster_binary() -> Path:
    return Path(os.environ["TESSERA_BIN"])


def old_ids(cluster, admin) -> set[str]:
    """The ids of the first five datanodes, by their addresses."""
    addresses = {p.ready["datanode"] for p in cluster.datanodes[:OLD]}
    return {n["id"] for n in admin("status")["datanodes"] if n["address"] in addresses}


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


if __name__ == "__main__":
    main()
