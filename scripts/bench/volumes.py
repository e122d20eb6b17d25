#!/usr/bin/env python3
"""How fast the datanodes' volumes are scrubbed and compacted.

`tessera server` (five datanodes, rs-3-2, 16 MiB volumes) takes OBJECTS
objects of 64 KiB (five packed block files each), then one in two is deleted,
compaction off. Restarted with it on, unpaced (`--compact-bandwidth 0`),
compaction rewrites every volume past half garbage, one after the other: the rate is the bytes of live records it copied, and of volume
it freed, over the time from the first copy to the last (the volume each
datanode appends to is not compacted). Then the server is
restarted with a scrub period of one second, so the scrubber reads every
block file unpaced: the rate is the bytes it checked over the time of its
first pass. The five datanodes share the machine, as in `tessera server`.

    TESSERA_BIN=target/x86_64-unknown-linux-gnu/release/tessera .venv/bin/python scripts/bench/volumes.py [--objects N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "s3-tests"))

from tessera_clients import metric_total, s3_client  # noqa: E402
from tessera_procs import Credentials, start_server  # noqa: E402

SIZE = 64 * 1024
COPIED = "tessera_datanode_compacted_bytes_total"
FREED = "tessera_datanode_compaction_freed_bytes_total"
SCRUBBED = "tessera_datanode_scrubbed_bytes_total"
USED = "tessera_datanode_store_used_bytes"


def rate_over(ops: str, metric: str, done=None, quiet: float = 3.0, timeout: float = 600.0) -> tuple[float, float]:
    """Waits for `metric` to start rising, then for `done()` (or, without
    one, for `quiet` seconds without a rise); answers the bytes it rose by
    and the seconds from its first rise to its last."""
    start_value = last_value = metric_total(ops, metric)
    deadline = time.monotonic() + timeout
    began = last_rise = None
    while time.monotonic() < deadline:
        value = metric_total(ops, metric)
        now = time.monotonic()
        if value > last_value:
            began = began or now
            last_rise, last_value = now, value
        if began is not None and (done() if done else now - last_rise >= quiet):
            return last_value - start_value, max(last_rise - began, 1e-3)
        time.sleep(0.05)
    raise SystemExit(f"{metric} did not finish in {timeout} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=3000)
    a = ap.parse_args()
    binary = Path(os.environ.get("TESSERA_BIN", ROOT / "target/x86_64-unknown-linux-gnu/release/tessera"))
    work = Path(tempfile.mkdtemp(dir=ROOT / "target"))
    creds = Credentials.random()
    base = ("--volume-max", "16MiB", "--compact-bandwidth", "0", "--deletion-delay", "0s")
    # No compaction and no scrubbing while the objects are written and deleted.
    quiet_args = (*base, "--compact-garbage", "2", "--scrub-period", "0s")
    server = start_server(binary, work, name="volumes", extra_args=quiet_args, creds=creds)
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        client.create_bucket(Bucket="volumes")
        body = os.urandom(SIZE)
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: client.put_object(Bucket="volumes", Key=f"k{i}", Body=body), range(a.objects)))
        deleted = [f"k{i}" for i in range(0, a.objects, 2)]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: client.delete_object(Bucket="volumes", Key=k), deleted))
        garbage = "tessera_datanode_store_garbage_bytes"
        # Every deletion handed to the datanodes: the garbage stops growing.
        settled, last = 0, -1.0
        while settled < 3:
            time.sleep(2)
            now = metric_total(server.ops, garbage)
            settled, last = (settled + 1 if now == last else 0), now
        server.proc.kill()
        server = start_server(binary, work, name="volumes", extra_args=(*base, "--scrub-period", "0s"), creds=creds)
        copied, seconds = rate_over(server.ops, COPIED)
        freed = metric_total(server.ops, FREED)
        print(
            f"compaction: {copied / 1e6:.1f} MB of live records copied, {freed / 1e6:.1f} MB of volumes freed, "
            f"in {seconds:.2f} s: {copied / 1e6 / seconds:.1f} MB/s copied, {freed / 1e6 / seconds:.1f} MB/s freed"
        )
        server.proc.kill()
        server = start_server(binary, work, name="volumes", extra_args=(*base, "--scrub-period", "1s"), creds=creds)
        held = metric_total(server.ops, USED)
        checked, seconds = rate_over(server.ops, SCRUBBED, lambda: metric_total(server.ops, SCRUBBED) >= held)
        print(f"scrubber: {checked / 1e6:.1f} MB checked in {seconds:.2f} s: {checked / 1e6 / seconds:.1f} MB/s")
    finally:
        server.proc.kill()


if __name__ == "__main__":
    main()
