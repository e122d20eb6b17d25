"""Crash safety of PUT: SIGKILL one process (the gateway, meta, a datanode, or
a whole `tessera server`) while PUTs are in flight, start it again, and check:

- no PUT failed before the kill, and the kill cut off a PUT that had begun
  sending its body (else the test proved nothing);
- every acknowledged PUT reads back whole; the key all writers overwrite holds
  the last acknowledged body or one written concurrently with it, never an
  older one;
- nothing visible is partial: every object is a body a PUT delivered whole;
- the blocks of cut-off PUTs are cleaned up: the datanodes end with exactly
  the block files the committed objects reference, no uploads left in tmp/
  and no deletions pending (meta runs with a short --orphan-grace, the
  datanodes with short block-report and upload-grace intervals)."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from block_files import cells
from tessera_clients import MIB, metric_total, s3_client
from tessera_procs import Cluster, HarnessError, Proc, process_env, require, start_cluster, start_server

pytestmark = pytest.mark.tessera

BUCKET = "crash"
# Sizes around one stripe (3 MiB for rs-3-2-1024k) and a few stripes, so the
# kill lands in every phase: filling, encoding, sending, committing; and one
# byte, which is kept in its meta record.
SIZES = [1, 300 * 1024, 3 * MIB - 1, 3 * MIB + 5, 7 * MIB + 3, 12 * MIB + 11]
WRITERS = 4
# Acknowledged PUTs (and of them, overwrites of the shared key) before the kill.
ACKS_BEFORE_KILL = 6
SHARED_ACKS_BEFORE_KILL = 2
SHARED_KEY = "shared"
# Every object here is one rs-3-2 block group: five block files.
BLOCKS_PER_OBJECT = 5
# Objects up to this size live in their meta record, with no block file.
INLINE_MAX = 16 * 1024
# Short enough that orphans, stale uploads and released blocks go within the test.
META_CLEANUP_ARGS = ("--orphan-grace", "3s", "--deletion-delay", "1s")
DATANODE_CLEANUP_ARGS = ("--block-report-interval", "1s", "--upload-grace", "3s", "--heartbeat-interval", "1s")
CLEANUP_TIMEOUT_S = 90.0


@dataclass
class Attempt:
    """One PUT, with the monotonic times that place it against the kill."""

    writer: int
    key: str
    size: int
    sha256: str
    started: float
    # When the first body byte went to the socket (after botocore's
    # before-send, so after the server's 100 Continue); None if none did.
    sending: float | None = None
    # The farthest body byte handed to the socket.
    sent: int = 0
    ended: float | None = None
    acked: bool = False
    error: str | None = None

    @property
    def delivered(self) -> bool:
        """Whether every body byte was handed to the socket: the only way the
        server could have stored this body."""
        return self.sent == self.size

    def in_flight_at(self, when: float) -> bool:
        return self.sending is not None and self.sending < when and (self.ended is None or self.ended > when)


class TrackedBody(io.BytesIO):
    """A PUT body that counts the bytes read from it once the request is on
    the wire (botocore reads it before that, for the payload hash)."""

    def __init__(self, data: bytes, attempt: Attempt, log: PutLog):
        super().__init__(data)
        self.attempt = attempt
        self.log = log
        self.on_wire = False

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self.on_wire and chunk:
            with self.log.lock:
                if self.attempt.sending is None:
                    self.attempt.sending = time.monotonic()
                self.attempt.sent = max(self.attempt.sent, self.tell())
        return chunk


def mark_on_wire(request, **_):
    if isinstance(request.body, TrackedBody):
        request.body.on_wire = True


@dataclass
class PutLog:
    """Every PUT attempt of every writer, and when the kill was sent."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: list[Attempt] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    killed_at: float | None = None

    def begin(self, writer: int, key: str, body: bytes) -> Attempt:
        attempt = Attempt(writer, key, len(body), hashlib.sha256(body).hexdigest(), time.monotonic())
        with self.lock:
            self.attempts.append(attempt)
        return attempt

    def end(self, attempt: Attempt, error: str | None = None) -> None:
        with self.lock:
            attempt.ended = time.monotonic()
            attempt.acked = error is None
            attempt.error = error

    def snapshot(self) -> list[Attempt]:
        with self.lock:
            return list(self.attempts)

    def acks(self, key: str | None = None) -> int:
        return sum(1 for a in self.snapshot() if a.acked and (key is None or a.key == key))

    def kill_with(self, kill) -> None:
        """Runs `kill`. A kill that first waits for its moment (meta
        stopped until the uploads in flight wait for it) returns the moment
        it struck, and that is the kill's time: a PUT begun while it waited
        is cut off all the same. Otherwise the call's start is."""
        started = time.monotonic()
        struck = kill()
        self.killed_at = struck if struck is not None else started


def describe_error(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        meta = exc.response.get("ResponseMetadata", {})
        return f"HTTP {meta.get('HTTPStatusCode')} {exc.response.get('Error', {}).get('Code')}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def writer(endpoint: str, access_key: str, secret_key: str, index: int, log: PutLog) -> None:
    """PUTs fresh keys (every third one the shared key) until told to stop or
    a PUT fails."""
    client = s3_client(endpoint, access_key, secret_key, read_timeout=60)
    client.meta.events.register("before-send.s3.PutObject", mark_on_wire)
    n = 0
    while not log.stop.is_set():
        size = SIZES[(index + n) % len(SIZES)]
        key = SHARED_KEY if n % 3 == 2 else f"w{index}/k{n}"
        data = os.urandom(size)
        attempt = log.begin(index, key, data)
        try:
            client.put_object(Bucket=BUCKET, Key=key, Body=TrackedBody(data, attempt, log))
        except (BotoCoreError, ClientError, OSError) as exc:
            log.end(attempt, describe_error(exc))
            return
        log.end(attempt)
        n += 1


def wait_for(condition, timeout: float, what: str, poll: float = 0.002) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


def put_until_killed(
    endpoint: str, access_key: str, secret_key: str, kill, *, also=lambda: True, after_kill=None
) -> PutLog:
    """Runs the writers; once enough PUTs (and shared-key overwrites) were
    acknowledged, a PUT is midway through its body and `also()` holds, calls
    `kill`. Then `after_kill(log)` (writers still running), then stops the
    writers and returns the log once every one has finished."""
    log = PutLog()
    threads = [
        threading.Thread(target=writer, args=(endpoint, access_key, secret_key, i, log), daemon=True)
        for i in range(WRITERS)
    ]
    for t in threads:
        t.start()
    try:

        def ready() -> bool:
            attempts = log.snapshot()
            assert all(a.error is None for a in attempts), f"a PUT failed before the kill: {failed(attempts)}"
            if not any(t.is_alive() for t in threads):
                raise AssertionError("every writer stopped before the kill")
            acked = sum(1 for a in attempts if a.acked)
            shared = sum(1 for a in attempts if a.acked and a.key == SHARED_KEY)
            mid_body = any(a.sending is not None and a.ended is None and 0 < a.sent < a.size for a in attempts)
            return acked >= ACKS_BEFORE_KILL and shared >= SHARED_ACKS_BEFORE_KILL and mid_body and also()

        wait_for(ready, 120, "acknowledged PUTs and one midway through its body")
        log.kill_with(kill)
        if after_kill is not None:
            after_kill(log)
    finally:
        log.stop.set()
        for t in threads:
            t.join(90)
    assert not any(t.is_alive() for t in threads), "a writer still runs 90 s after the kill"
    return log


def failed(attempts: list[Attempt]) -> list[str]:
    return [f"{a.key} ({a.size} B): {a.error}" for a in attempts if a.error is not None]


def check_the_kill_cut_in(log: PutLog) -> list[Attempt]:
    """No PUT failed before the kill; return the PUTs it cut off (begun
    sending before it, never acknowledged), failing if there are none."""
    assert log.killed_at is not None
    attempts = log.snapshot()
    early = [a for a in attempts if a.error is not None and a.ended <= log.killed_at]
    assert not early, f"PUTs failed before the kill: {failed(early)}"
    unsent = [a for a in attempts if a.acked and not a.delivered]
    assert not unsent, f"acknowledged PUTs whose body was not seen going out: {[a.key for a in unsent]}"
    cut_off = [a for a in attempts if not a.acked and a.sending is not None and a.sending < log.killed_at]
    assert cut_off, "the kill cut off no PUT that had begun sending its body; the test proved nothing"
    return cut_off


def possible_final(attempts: list[Attempt], key: str) -> dict[str, Attempt]:
    """The bodies `key` may hold (by SHA-256), from its attempts: acknowledged
    or delivered whole before being cut off, and not followed by an
    acknowledged PUT that began after it ended (a cut-off PUT may have landed
    at any time up to the kill, so it never ended). With linearizable PUTs the
    last to commit wins, and no such successor can have committed before it."""
    mine = [a for a in attempts if a.key == key]
    candidates = {}
    for a in mine:
        if not (a.acked or a.delivered):
            continue
        end = a.ended if a.acked else float("inf")
        if not any(b.acked and b.started > end for b in mine):
            candidates[a.sha256] = a
    return candidates


def read_all(client) -> dict[str, tuple[int, bytes]]:
    """Every listed key: (listed size, body read back)."""
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = (obj["Size"], client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read())
    return found


def check_objects(client, log: PutLog) -> int:
    """Acknowledged PUTs read back whole, the shared key holds a body it may
    hold, nothing visible is partial; returns how many of the objects listed
    are in blocks (over the inline limit: smaller ones live in meta)."""
    attempts = log.snapshot()
    acked_keys = {a.key for a in attempts if a.acked}
    found = read_all(client)
    missing = acked_keys - set(found)
    assert not missing, f"acknowledged keys lost: {sorted(missing)}"
    for key, (size, body) in found.items():
        candidates = possible_final(attempts, key)
        digest = hashlib.sha256(body).hexdigest()
        assert len(body) == size, f"{key}: listed {size} bytes, read {len(body)}"
        assert digest in candidates, (
            f"{key}: holds {len(body)} bytes that are no body it may hold "
            f"(it may hold {[(c.size, c.acked) for c in candidates.values()]}; "
            f"attempted {[(a.size, a.acked) for a in attempts if a.key == key]})"
        )
    return sum(1 for size, _ in found.values() if size > INLINE_MAX)


def block_files(data_dirs: list[Path]) -> list[int]:
    return [len(cells(d)) for d in data_dirs]


def upload_files(data_dirs: list[Path]) -> list[int]:
    return [len(list((d / "tmp").glob("*"))) if (d / "tmp").is_dir() else 0 for d in data_dirs]


def check_cleaned_up(admin_status, data_dirs: list[Path], objects: int) -> None:
    """Wait until the datanodes hold exactly the block files of the `objects`
    committed objects, no uploads, and meta has no deletion pending."""
    expected = BLOCKS_PER_OBJECT * objects
    deadline = time.monotonic() + CLEANUP_TIMEOUT_S
    while True:
        files, uploads = block_files(data_dirs), upload_files(data_dirs)
        status = admin_status()
        pending = status.get("pending_deletions")
        if sum(files) == expected and not any(uploads) and pending == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{CLEANUP_TIMEOUT_S:.0f} s after recovery the datanodes hold {sum(files)} block files {files} "
                f"and uploads {uploads}, meta has {pending} deletions pending; the {objects} committed "
                f"objects reference {expected}"
            )
        time.sleep(0.5)


def cluster_dirs(cluster: Cluster) -> list[Path]:
    return [cluster.work_dir / f"dn{i}" for i in range(len(cluster.datanodes))]


def restart(proc: Proc, name: str, work_dir: Path, env: dict[str, str], argv: list[str] | None = None) -> Proc:
    """Start `proc`'s command line (or `argv`) again and wait for READY."""
    again = Proc(name, argv or list(proc.argv), env, work_dir)
    again.wait_ready()
    return again


def cleanup_cluster(tessera_bin, tmp_path, datanodes: int = 5) -> Cluster:
    return start_cluster(
        tessera_bin, tmp_path, datanodes, meta_args=META_CLEANUP_ARGS, datanode_args=DATANODE_CLEANUP_ARGS
    )


def stop_cluster(cluster: Cluster) -> None:
    problems = cluster.stop()
    assert not problems, problems


def test_sigkill_of_a_gateway_mid_put_loses_no_acknowledged_object(tessera_bin, tmp_path):
    cluster = cleanup_cluster(tessera_bin, tmp_path)
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        client.create_bucket(Bucket=BUCKET)
        log = put_until_killed(cluster.endpoint, cluster.access_key, cluster.secret_key, cluster.gateway_proc.kill)
        check_the_kill_cut_in(log)
        # The same command line as the killed gateway (it listens on port 0).
        gateway = restart(cluster.gateway_proc, "cluster-gateway-restarted", tmp_path, process_env(cluster.creds.env()))
        cluster.gateway_proc = gateway
        require(gateway.ready, gateway, "s3", "ops")
        again = s3_client(gateway.ready["s3"], cluster.access_key, cluster.secret_key)
        objects = check_objects(again, log)
        check_cleaned_up(cluster.status, cluster_dirs(cluster), objects)
    finally:
        stop_cluster(cluster)


def test_sigkill_of_meta_mid_commit_loses_no_object_and_leaves_no_orphan(tessera_bin, tmp_path):
    """Meta stalls (SIGSTOP) while PUTs stream to the datanodes; once their
    blocks are committed there and the gateway waits to commit the records,
    meta is SIGKILLed, so those blocks are orphans. The gateway and datanodes
    live on and meet the restarted meta at the same address; its block-report
    check must delete exactly the orphans."""
    cluster = cleanup_cluster(tessera_bin, tmp_path)
    dirs = cluster_dirs(cluster)
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        client.create_bucket(Bucket=BUCKET)

        def kill_meta_once_blocks_wait_for_it():
            # Stop meta at a moment when an upload is still being written,
            # seen after the stop: a check before it can be overtaken by the
            # PUT finishing and committing its record in between, and then
            # the kill leaves no orphan to prove anything with.
            for _ in range(500):
                cluster.meta_proc.popen.send_signal(signal.SIGSTOP)
                if any(upload_files(dirs)):
                    break
                cluster.meta_proc.popen.send_signal(signal.SIGCONT)
                time.sleep(0.01)
            else:
                raise AssertionError("no upload was in flight whenever meta was stopped")
            wait_for(lambda: not any(upload_files(dirs)), 30, "the uploads in flight to commit their blocks", 0.05)
            struck = time.monotonic()
            cluster.meta_proc.kill()
            return struck

        log = put_until_killed(
            cluster.endpoint,
            cluster.access_key,
            cluster.secret_key,
            kill_meta_once_blocks_wait_for_it,
            also=lambda: any(upload_files(dirs)),
        )
        check_the_kill_cut_in(log)
        # The datanodes and the gateway were told meta's address: the
        # restarted meta takes the port the kernel gave the first one.
        argv = list(cluster.meta_proc.argv)
        argv[argv.index("--listen") + 1] = cluster.meta
        env = process_env(cluster.creds.env())
        cluster.meta_proc = restart(cluster.meta_proc, "cluster-meta-restarted", tmp_path, env, argv)
        cluster.wait_datanodes(len(cluster.datanodes))
        objects = check_objects(client, log)
        check_cleaned_up(cluster.status, dirs, objects)
        orphans = metric_total(cluster.meta_proc.ready["ops"], "tessera_meta_orphan_blocks_total")
        assert orphans >= BLOCKS_PER_OBJECT, f"meta deleted {orphans} orphan blocks; the stalled PUTs left some"
    finally:
        stop_cluster(cluster)


def test_sigkill_of_a_datanode_mid_put_fails_no_put_and_loses_no_object(tessera_bin, tmp_path):
    """Six datanodes, so a write can fail over past the killed one: every PUT
    in flight at the kill, and every one after it, succeeds; the objects read
    back while the datanode is down (degraded reads) and after it restarts."""
    cluster = cleanup_cluster(tessera_bin, tmp_path, datanodes=6)
    dirs = cluster_dirs(cluster)
    victim: list[int] = []
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        client.create_bucket(Bucket=BUCKET)
        failovers_before = metric_total(cluster.gateway_ops, "tessera_client_write_failovers_total")

        def kill_a_datanode_with_an_upload():
            # One that is receiving a block right now.
            uploads = upload_files(dirs)
            index = max(range(len(dirs)), key=lambda i: uploads[i])
            victim.append(index)
            cluster.kill_datanode(index)

        def keep_writing(log: PutLog):
            acks = log.acks()
            wait_for(lambda: log.acks() >= acks + ACKS_BEFORE_KILL, 120, "PUTs acknowledged after the kill", 0.05)

        log = put_until_killed(
            cluster.endpoint,
            cluster.access_key,
            cluster.secret_key,
            kill_a_datanode_with_an_upload,
            also=lambda: any(upload_files(dirs)),
            after_kill=keep_writing,
        )
        attempts = log.snapshot()
        assert not failed(attempts), f"PUTs failed although a datanode was left to fail over to: {failed(attempts)}"
        assert any(a.in_flight_at(log.killed_at) for a in attempts), "no PUT was in flight at the kill"
        failovers = metric_total(cluster.gateway_ops, "tessera_client_write_failovers_total") - failovers_before
        assert failovers >= 1, "no write failed over from the killed datanode; the kill missed every write"
        check_objects(client, log)
        (index,) = victim
        env = process_env(cluster.creds.env())
        cluster.datanodes[index] = restart(cluster.datanodes[index], f"cluster-dn{index}-restarted", tmp_path, env)
        cluster.killed.remove(index)
        cluster.wait_datanodes(len(cluster.datanodes))
        check_objects(client, log)
        # Failover splits objects into several block groups, so their block
        # count is not known here; what must go is every upload left behind.
        wait_for(
            lambda: not any(upload_files(dirs)) and cluster.status().get("pending_deletions") == 0,
            CLEANUP_TIMEOUT_S,
            f"uploads {upload_files(dirs)} and pending deletions to be cleaned",
            0.5,
        )
    finally:
        stop_cluster(cluster)


def test_sigkill_of_a_server_mid_put_loses_no_acknowledged_object(tessera_bin, tmp_path):
    """The whole `tessera server` (meta, datanodes, gateway) dies at once."""
    args = META_CLEANUP_ARGS + DATANODE_CLEANUP_ARGS
    own = start_server(tessera_bin, tmp_path, name="crash", extra_args=args)
    try:
        client = s3_client(own.endpoint, own.access_key, own.secret_key)
        client.create_bucket(Bucket=BUCKET)
        log = put_until_killed(own.endpoint, own.access_key, own.secret_key, own.proc.kill)
    finally:
        own.proc.kill()
    check_the_kill_cut_in(log)
    try:
        again = start_server(tessera_bin, tmp_path, name="crash", extra_args=args, creds=own.creds)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        client = s3_client(again.endpoint, again.access_key, again.secret_key)
        objects = check_objects(client, log)
        dirs = sorted(again.data_dir.glob("datanode-*"))
        assert len(dirs) == 5, dirs
        check_cleaned_up(lambda: again.admin("status"), dirs, objects)
    finally:
        assert again.proc.terminate() == 0
