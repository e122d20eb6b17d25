#!/usr/bin/env python3
"""PUTs of small objects against several S3 servers, side by side in one run.

Scenarios: 1 KiB objects at 64 connections, 64 KiB at 16 and 1 MiB at 8 (wrk
replaying requests signed in advance, each to a key of its own, bodies that
differ per request). For each scenario and target: requests per second, MB/s,
p50 and p99, errors, and the bytes the disk wrote per byte stored (the
device's written sectors over the run, so only meaningful on a machine
otherwise idle). Then fio's direct synchronous writes of the same sizes at the
same concurrency: the disk's own speed for that pattern. A target given with
its server's PID also shows the CPU time that process spent per PUT (user and
system, all threads); every target shows how busy the machine's cores were
(all processes, the load generator's too) and how much of their time was I/O
wait: together they tell whether the cores or the disk bound a rate.

  small_puts.py --data-dir DIR --target NAME=URL,ACCESS,SECRET[,PID] [--target ...] [--duration S]
"""

import argparse
import importlib.util
import json
import os
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOAD = Path(os.environ.get("S3_LOAD", HERE / "../../../shared/bench/s3-load.py"))
spec = importlib.util.spec_from_file_location("s3_load", LOAD)
s3_load = importlib.util.module_from_spec(spec)
spec.loader.exec_module(s3_load)

SCENARIOS = [("put1k-c64", 1 << 10, 64), ("put64k-c16", 64 << 10, 16), ("put1m-c8", 1 << 20, 8)]
KEYS = 4096


def device_of(path):
    """The block device (name in /proc/diskstats) holding `path`."""
    dev = os.stat(path).st_dev
    name = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve().name
    return name


def sectors_written(device):
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if fields[2] == device:
            return int(fields[9])
    raise SystemExit(f"no {device} in /proc/diskstats")


def cpu_seconds(pid):
    """User plus system CPU time of process `pid` so far (every thread), or None without a PID."""
    if pid is None:
        return None
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def core_times():
    """(busy, iowait, total) jiffies of all cores so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle, iowait = fields[3], fields[4]
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle - iowait, iowait, total


def lua(requests, size):
    """wrk script: PUT each signed request in turn with a body of `size` bytes
    whose first 16 bytes count the requests sent (no two bodies alike)."""
    out = ["local reqs = {}", "local n = 0", "local i = 0", "local sent = 0", "local base = nil"]
    out.append("init = function(args)")
    out.append("  local chunk = {}")
    out.append(f"  for j = 1, {size - 16} do chunk[j] = string.char(math.random(0, 255)) end")
    out.append("  base = table.concat(chunk)")
    out.append("  sent = math.random(1000000000) * 1000")
    for k, (path, headers) in enumerate(requests):
        hs = ", ".join(f'["{h}"] = "{v}"' for h, v in headers.items() if h.lower() != "host")
        out.append(f'  reqs[{k + 1}] = {{"{path}", {{{hs}}}}}')
    out.append("  n = #reqs")
    out.append("end")
    out.append("request = function()")
    out.append("  i = i % n + 1; sent = sent + 1")
    out.append("  local r = reqs[i]")
    out.append("  return wrk.format('PUT', r[1], r[2], string.format('%16d', sent) .. base)")
    out.append("end")
    out.append("done = function(summary, latency, requests)")
    out.append(
        '  io.write(string.format("P50 %d\\nP99 %d\\nERRS %d\\n", latency:percentile(50), '
        "latency:percentile(99), summary.errors.status + summary.errors.connect + "
        "summary.errors.read + summary.errors.write + summary.errors.timeout))"
    )
    out.append("end")
    return "\n".join(out)


def fio(directory, size, jobs, duration):
    """Direct synchronous writes of `size` at `jobs` jobs: (IOPS, MB/s)."""
    out = subprocess.run(
        [
            "fio",
            "--name=direct",
            f"--directory={directory}",
            "--rw=write",
            f"--bs={size}",
            "--direct=1",
            "--fsync=1",
            f"--numjobs={jobs}",
            "--size=64m",
            "--time_based",
            f"--runtime={duration}",
            "--group_reporting",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    write = json.loads(out)["jobs"][0]["write"]
    return write["iops"], write["bw_bytes"] / 1e6


def open_targets(specs, bucket):
    """(name, url, access key, secret, PID or None) of each `NAME=URL,ACCESS,SECRET[,PID]`,
    with `bucket` created on each."""
    targets = []
    for spec in specs:
        name, rest = spec.split("=", 1)
        url, ak, sk, *pid = rest.split(",")
        targets.append((name, url.rstrip("/"), ak, sk, int(pid[0]) if pid else None))
        s3_load.client(url, ak, sk).create_bucket(Bucket=bucket)
    return targets


def files_under(folder):
    """Files in `folder` and below (0 when it is not there)."""
    return sum(len(files) for _, _, files in os.walk(folder))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="append", required=True, help="NAME=URL,ACCESS,SECRET[,PID]")
    ap.add_argument("--data-dir", required=True, help="a folder on the disk the servers store on")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--bucket", default="smallputs")
    ap.add_argument(
        "--only", action="append", choices=[s[0] for s in SCENARIOS], help="run only this scenario (repeatable)"
    )
    a = ap.parse_args()
    region = os.environ.get("REGION", "us-east-1")
    device = device_of(a.data_dir)
    targets = open_targets(a.target, a.bucket)

    print(
        "| scenario | target | req/s | MB/s | p50 ms | p99 ms | errors | disk bytes per byte "
        "| CPU ms per PUT | cores busy | I/O wait | files per object |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario, size, conns in SCENARIOS:
        if a.only and scenario not in a.only:
            continue
        for name, url, ak, sk, pid in targets:
            requests = []
            for k in range(KEYS):
                path = f"/{a.bucket}/{scenario}/{name}/{k}"
                headers = {"Content-Length": str(size)}
                requests.append((path, s3_load.sign(url, ak, sk, region, "PUT", path, headers)))
            # The last target's writeback neither slows this one nor counts as its writes.
            os.sync()
            # Each server stores in a folder named after it (folder-s3 in `folder`).
            folder = os.path.join(a.data_dir, "folder" if name == "folder-s3" else name)
            files_before = files_under(folder)
            before = sectors_written(device)
            cpu_before, cores_before = cpu_seconds(pid), core_times()
            rps, p50, p99, errs = s3_load.run_wrk(url, lua(requests, size), conns, 2, a.duration)
            busy, iowait, total = (now - then for now, then in zip(core_times(), cores_before))
            written = (sectors_written(device) - before) * 512
            stored = rps * a.duration * size
            per_byte = f"{written / stored:.2f}" if stored else "-"
            puts = rps * a.duration
            cpu = f"{(cpu_seconds(pid) - cpu_before) * 1000 / puts:.2f}" if pid and puts else "-"
            files = f"{(files_under(folder) - files_before) / puts:.3f}" if puts else "-"
            print(
                f"| {scenario} | {name} | {rps:,.0f} | {rps * size / 1e6:,.1f} | {p50:.2f} | "
                f"{p99:.2f} | {errs} | {per_byte} | {cpu} | {busy / total:.0%} | {iowait / total:.0%} | {files} |",
                flush=True,
            )
        with tempfile.TemporaryDirectory(dir=a.data_dir) as scratch:
            iops, mbs = fio(scratch, size, conns, a.duration)
        print(f"| {scenario} | disk (fio, direct + fsync) | {iops:,.0f} | {mbs:,.1f} | | | | 1.00 | | | | |", flush=True)


if __name__ == "__main__":
    main()
