#!/usr/bin/env python3
"""GETs of small objects against several S3 servers, side by side in one run.

Scenarios: 1 KiB objects at 64 connections, 64 KiB at 16 and 1 MiB at 8 (wrk replaying
GETs signed in advance, over 256 objects of each size written first, so the
reads are of warm pages and measure each server's work per GET, not the
disk). For each scenario and target: requests per second, MB/s, p50 and p99,
errors, and the CPU time the server process spent per GET (with its PID).
Beside `tessera server`, the same binary with `--pack-max 0` compares block
files packed in volumes with block files of their own.

  small_gets.py --target NAME=URL,ACCESS,SECRET[,PID] [--target ...] [--duration S]
"""

import argparse
import os

from small_puts import core_times, cpu_seconds, open_targets, s3_load

SCENARIOS = [("get1k-c64", 1 << 10, 64), ("get64k-c16", 64 << 10, 16), ("get1m-c8", 1 << 20, 8)]
OBJECTS = 256


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="append", required=True, help="NAME=URL,ACCESS,SECRET[,PID]")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--bucket", default="smallgets")
    ap.add_argument("--data-dir", help="unused; accepted for the runner's sake")
    ap.add_argument("--only", action="append", choices=[s[0] for s in SCENARIOS])
    a = ap.parse_args()
    region = os.environ.get("REGION", "us-east-1")
    targets = open_targets(a.target, a.bucket)
    print("| scenario | target | req/s | MB/s | p50 ms | p99 ms | errors | CPU ms per GET | cores busy |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for scenario, size, conns in SCENARIOS:
        if a.only and scenario not in a.only:
            continue
        for name, url, ak, sk, pid in targets:
            client = s3_load.client(url, ak, sk)
            requests = []
            for k in range(OBJECTS):
                key = f"{scenario}/{k}"
                client.put_object(Bucket=a.bucket, Key=key, Body=os.urandom(size))
                path = f"/{a.bucket}/{key}"
                requests.append(("GET", path, s3_load.sign(url, ak, sk, region, "GET", path)))
            script = s3_load.lua_script(requests, 0)
            # One short pass first: every object's pages and the servers' caches warm.
            s3_load.run_wrk(url, script, conns, 2, 1)
            cpu_before, cores_before = cpu_seconds(pid), core_times()
            rps, p50, p99, errs = s3_load.run_wrk(url, script, conns, 2, a.duration)
            busy, _, total = (now - then for now, then in zip(core_times(), cores_before))
            gets = rps * a.duration
            cpu = f"{(cpu_seconds(pid) - cpu_before) * 1000 / gets:.3f}" if pid and gets else "-"
            print(
                f"| {scenario} | {name} | {rps:,.0f} | {rps * size / 1e6:,.1f} | {p50:.2f} | "
                f"{p99:.2f} | {errs} | {cpu} | {busy / total:.0%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
