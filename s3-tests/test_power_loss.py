"""Power loss: what a server acknowledged survives losing everything that was
not fsynced.

`tessera server` (meta and five datanodes) keeps its data on powercut-fs, a
FUSE filesystem that writes to its backing folder only what a file fsync or a
folder fsync made durable (tools/powercut-fs). Writers PUT and complete
multipart uploads under load; then the filesystem process and the server are
SIGKILLed together, which drops every write that was not synced, as a power
cut drops the page cache and the disk's write cache. The filesystem is mounted
again from its backing folder and the server restarted on it. Every
acknowledged object must read back whole, each overwritten key must hold its
last acknowledged body or the one in flight after it, and nothing partial may
be visible in a listing. Block files up to the pack limit go to the
datanodes' volumes, many to a group commit: the cut lands in the middle of
those, and each datanode cuts its volumes' torn tails and rebuilds their
unsynced indexes at start. Run with the server's meta a group of one (the
default: its Raft log and its store) and with `--lone-meta`.

Needs root and /dev/fuse; under CI a missing one fails the test instead of
skipping it, so the power-loss check cannot silently stop running."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from block_files import cells
from tessera_clients import MIB, s3_client
from tessera_procs import REPO_ROOT, Credentials, HarnessError, Proc, healthy_datanodes, process_env, start_server

pytestmark = pytest.mark.tessera

BUCKET = "power"
CYCLES = 3
WRITERS = 4
# How long writers run before the power goes, drawn per cycle.
LOAD_SECONDS = (1.5, 4.0)
SIZES = [0, 1, 4096, 100_000, 1 * MIB + 17, 3 * MIB]
PART = 5 * MIB


def powercut_binary() -> Path | None:
    explicit = os.environ.get("POWERCUT_FS_BIN")
    if explicit:
        return Path(explicit)
    for profile in ("release", "debug"):
        path = REPO_ROOT / "target" / profile / "powercut-fs"
        if path.is_file():
            return path
    return None


def require_fuse() -> Path:
    problems = []
    binary = powercut_binary()
    if binary is None:
        problems.append("no powercut-fs binary (cargo build --release -p powercut-fs, or set POWERCUT_FS_BIN)")
    if os.geteuid() != 0:
        problems.append("not root (mounting FUSE needs it)")
    if not os.path.exists("/dev/fuse"):
        problems.append("no /dev/fuse")
    if problems:
        reason = "power-loss test cannot run: " + "; ".join(problems)
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return binary


def unmount(mount: Path) -> None:
    subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


class Volume:
    """A powercut-fs mount whose process can be killed and started again."""

    def __init__(self, binary: Path, durable: Path, mount: Path, log_dir: Path):
        self.binary, self.durable, self.mount, self.log_dir = binary, durable, mount, log_dir
        self.boots = 0
        self.proc: Proc | None = None
        durable.mkdir(parents=True, exist_ok=True)
        mount.mkdir(parents=True, exist_ok=True)

    def boot(self, fail_when: Path | None = None, capacity: int | None = None) -> None:
        """Mounts the volume; with `fail_when`, every operation fails with EIO
        once that file exists; `capacity` is the size statfs reports."""
        self.boots += 1
        argv = [str(self.binary), "--durable", str(self.durable), "--mount", str(self.mount)]
        if fail_when is not None:
            argv += ["--fail-when", str(fail_when)]
        if capacity is not None:
            argv += ["--capacity", str(capacity)]
        self.proc = Proc(f"powercut-fs-{self.boots}", argv, process_env({}), self.log_dir)
        self.proc.wait_ready()

    def cut(self) -> None:
        """The power goes: the filesystem dies with everything unsynced."""
        assert self.proc is not None
        self.proc.kill()
        unmount(self.mount)


@dataclass
class Attempt:
    key: str
    digest: str
    size: int
    started: float
    acked: float | None = None
    error: str | None = None


@dataclass
class Load:
    """Every write attempted, in order, per writer."""

    attempts: list[Attempt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, attempt: Attempt) -> None:
        with self.lock:
            self.attempts.append(attempt)


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def writer(client, load: Load, cycle: int, index: int, stop: threading.Event) -> None:
    """PUTs new keys and overwrites this writer's own key, sequentially;
    writer 0 completes multipart uploads instead."""
    rng = random.Random(cycle * 100 + index)
    n = 0
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        n += 1
        overwrite = n % 3 == 0
        key = f"w{index}/shared" if overwrite else f"w{index}/c{cycle}-{n}"
        if index == 0:
            body = os.urandom(PART) + os.urandom(rng.choice([1, 1000, MIB]))
        else:
            body = os.urandom(rng.choice(SIZES))
        attempt = Attempt(key, digest(body), len(body), time.monotonic())
        load.record(attempt)
        try:
            if index == 0:
                upload = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
                parts = []
                for number, start in enumerate(range(0, len(body), PART), start=1):
                    etag = client.upload_part(
                        Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=body[start : start + PART]
                    )["ETag"]
                    parts.append({"PartNumber": number, "ETag": etag})
                client.complete_multipart_upload(
                    Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
                )
            else:
                client.put_object(Bucket=BUCKET, Key=key, Body=body)
            attempt.acked = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - any failure ends this writer; judged below
            attempt.error = f"{type(exc).__name__}: {exc}"
            return


def wait_healthy(server, count: int = 5, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(healthy_datanodes(server.admin("status"))) >= count:
            return
        time.sleep(0.2)
    raise HarnessError(f"datanodes not healthy within {timeout:.0f} s")


def read(client, key: str) -> bytes | None:
    try:
        return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return None
        raise


def check_after_boot(client, load: Load) -> dict[str, int]:
    """Every acknowledged write is readable whole; every visible object is
    one that was attempted; a key holds no body older than its last ack."""
    by_key: dict[str, list[Attempt]] = {}
    for attempt in load.attempts:
        by_key.setdefault(attempt.key, []).append(attempt)
    counts = {"acked": 0, "in_flight": 0, "in_flight_visible": 0}
    for key, attempts in by_key.items():
        acked = [a for a in attempts if a.acked is not None]
        in_flight = [a for a in attempts if a.acked is None]
        counts["acked"] += len(acked)
        counts["in_flight"] += len(in_flight)
        body = read(client, key)
        # Writes of one key come from one writer, one at a time: the last
        # acknowledged body, or one attempted after it, is all that may show.
        allowed = {a.digest for a in attempts[attempts.index(acked[-1]) :]} if acked else {a.digest for a in attempts}
        if body is None:
            assert not acked, f"{key}: acknowledged ({acked[-1].size} bytes) but gone after the power cut"
            continue
        assert digest(body) in allowed, (
            f"{key}: read back {len(body)} bytes that are neither its last acknowledged body nor a later attempt"
        )
        if acked and digest(body) != acked[-1].digest:
            counts["in_flight_visible"] += 1
    listed = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        listed.extend(item["Key"] for item in page.get("Contents", []))
    unknown = set(listed) - set(by_key)
    assert not unknown, f"objects nobody wrote are listed: {sorted(unknown)[:5]}"
    for key in listed:
        body = read(client, key)
        assert body is not None, f"{key} is listed but cannot be read"
    return counts


@pytest.mark.parametrize("meta_args", [(), ("--lone-meta",)], ids=["group of one", "lone meta"])
def test_acknowledged_writes_survive_power_cuts(meta_args, tessera_bin, tmp_path):
    binary = require_fuse()
    volume = Volume(binary, tmp_path / "durable", tmp_path / "mnt", tmp_path)
    creds = Credentials.random()
    load = Load()
    server = None
    try:
        volume.boot()
        server = start_server(
            tessera_bin, tmp_path, name="powered", extra_args=meta_args, creds=creds, data_dir=volume.mount / "data"
        )
        wait_healthy(server)
        client = s3_client(server.endpoint, server.access_key, server.secret_key, read_timeout=60)
        client.create_bucket(Bucket=BUCKET)
        for cycle in range(CYCLES):
            stop = threading.Event()
            start = time.monotonic()
            threads = [
                threading.Thread(target=writer, args=(client, load, cycle, i, stop), daemon=True)
                for i in range(WRITERS)
            ]
            for t in threads:
                t.start()
            time.sleep(random.uniform(*LOAD_SECONDS))
            errors_before_cut = [a for a in load.attempts if a.error and a.started >= start]
            assert not errors_before_cut, f"writes failed before the power cut: {errors_before_cut[:3]}"
            in_flight = [a for a in load.attempts if a.started >= start and a.acked is None]
            volume.cut()
            server.proc.kill()
            stop.set()
            for t in threads:
                t.join(timeout=120)
            assert in_flight, "no write was in flight when the power went: the cut tested nothing"
            acked_this_cycle = [a for a in load.attempts if a.started >= start and a.acked is not None]
            assert acked_this_cycle, "nothing was acknowledged before the power cut"

            volume.boot()
            server = start_server(
                tessera_bin, tmp_path, name="powered", extra_args=meta_args, creds=creds, data_dir=volume.mount / "data"
            )
            wait_healthy(server)
            client = s3_client(server.endpoint, server.access_key, server.secret_key, read_timeout=60)
            counts = check_after_boot(client, load)
            packed = sum(cell.packed for node in (volume.mount / "data").glob("datanode-*") for cell in cells(node))
            assert packed, "no block file was packed into a volume: the cut tested no group commit"
            print(f"cycle {cycle}: {counts}, {packed} packed block files")
            # The next cycle's writers start from what is readable now.
            for attempt in load.attempts:
                if attempt.acked is None:
                    attempt.error = attempt.error or "cut off"
    finally:
        if server is not None and server.proc.alive():
            server.proc.kill()
        if volume.proc is not None and volume.proc.alive():
            volume.proc.kill()
        unmount(volume.mount)
        shutil.rmtree(tmp_path / "durable", ignore_errors=True)
