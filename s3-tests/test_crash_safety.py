"""Crash safety of PUT: SIGKILL the process serving S3 while PUTs are in
flight, start it again, and check that every acknowledged PUT reads back
whole and that no partial object is visible (an object whose PUT was cut
off is either absent or whole; it is never a prefix or a mix)."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tessera_clients import MIB, s3_client
from tessera_procs import Proc, process_env, require, start_cluster, start_server

pytestmark = pytest.mark.tessera

BUCKET = "crash"
# Sizes around one stripe (3 MiB for rs-3-2-1024k) and a few stripes, so the
# kill lands in every phase: filling, encoding, sending, committing.
SIZES = [1, 300 * 1024, 3 * MIB - 1, 3 * MIB + 5, 7 * MIB + 3, 12 * MIB + 11]
WRITERS = 4
# Acknowledged PUTs to wait for before the kill (some are always in flight then).
ACKS_BEFORE_KILL = 6
SHARED_KEY = "shared"


class PutLog:
    """Every body each writer tried to store, and which PUTs were acknowledged."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempted: dict[str, list[bytes]] = {}
        self.acked: dict[str, list[bytes]] = {}
        self.ack_count = 0
        self.stop = threading.Event()

    def attempt(self, key: str, body: bytes) -> None:
        with self.lock:
            self.attempted.setdefault(key, []).append(body)

    def ack(self, key: str, body: bytes) -> None:
        with self.lock:
            self.acked.setdefault(key, []).append(body)
            self.ack_count += 1


def writer(endpoint: str, access_key: str, secret_key: str, index: int, log: PutLog) -> None:
    """PUTs fresh keys (and now and then the shared key) until the server dies."""
    client = s3_client(endpoint, access_key, secret_key, read_timeout=60)
    n = 0
    while not log.stop.is_set():
        size = SIZES[(index + n) % len(SIZES)]
        key = SHARED_KEY if n % 5 == 4 else f"w{index}/k{n}"
        body = os.urandom(size)
        log.attempt(key, body)
        try:
            client.put_object(Bucket=BUCKET, Key=key, Body=body)
        except (BotoCoreError, ClientError, OSError):
            # The server went away mid-request: this PUT is unacknowledged.
            return
        log.ack(key, body)
        n += 1


def put_until_killed(endpoint: str, access_key: str, secret_key: str, kill) -> PutLog:
    """Runs the writers, calls `kill` once enough PUTs were acknowledged, and
    returns the log once every writer has seen the server go."""
    log = PutLog()
    threads = [
        threading.Thread(target=writer, args=(endpoint, access_key, secret_key, i, log), daemon=True)
        for i in range(WRITERS)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while log.ack_count < ACKS_BEFORE_KILL and time.monotonic() < deadline:
        if not any(t.is_alive() for t in threads):
            break
        time.sleep(0.02)
    assert log.ack_count >= ACKS_BEFORE_KILL, f"only {log.ack_count} PUTs acknowledged before the kill"
    kill()
    log.stop.set()
    for t in threads:
        t.join(90)
        assert not t.is_alive(), "a writer still runs after the kill"
    return log


def check_after_restart(client, log: PutLog) -> None:
    """Acknowledged PUTs read back whole; everything visible is a whole body."""
    digests = {
        key: {hashlib.md5(b).hexdigest() for b in bodies} for key, bodies in log.attempted.items()
    }
    for key, bodies in log.acked.items():
        got = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        if key == SHARED_KEY:
            # Writers race on it: any whole body tried for it, never a mix.
            assert hashlib.md5(got).hexdigest() in digests[key], f"{key}: {len(got)} bytes, not a body sent"
        else:
            assert got == bodies[-1], f"{key}: acknowledged body lost or damaged ({len(got)} bytes)"
    listed = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            listed[obj["Key"]] = obj["Size"]
    assert set(log.acked) <= set(listed), f"acknowledged keys missing: {set(log.acked) - set(listed)}"
    for key, size in listed.items():
        assert key in log.attempted, f"{key} was never written"
        got = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert len(got) == size, f"{key}: listed {size} bytes, read {len(got)}"
        assert hashlib.md5(got).hexdigest() in digests[key], f"{key}: a partial or mixed body is visible"
    unacked = [k for k in log.attempted if k not in log.acked]
    assert unacked, "the kill cut off no PUT; the test proved nothing"


def test_sigkill_of_a_gateway_mid_put_loses_no_acknowledged_object(tessera_bin, tmp_path):
    cluster = start_cluster(tessera_bin, tmp_path, datanodes=5)
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        client.create_bucket(Bucket=BUCKET)
        log = put_until_killed(
            cluster.endpoint, cluster.access_key, cluster.secret_key, cluster.gateway_proc.kill
        )
        # The same command line as the killed gateway (it listens on port 0).
        gateway = Proc(
            "cluster-gateway-restarted",
            list(cluster.gateway_proc.argv),
            process_env(cluster.creds.env()),
            tmp_path,
        )
        cluster.gateway_proc = gateway
        fields = gateway.wait_ready()
        require(fields, gateway, "s3", "ops")
        again = s3_client(fields["s3"], cluster.access_key, cluster.secret_key)
        check_after_restart(again, log)
    finally:
        problems = cluster.stop()
        assert not problems, problems


def test_sigkill_of_a_server_mid_put_loses_no_acknowledged_object(tessera_bin, tmp_path):
    """The whole `tessera server` (meta, datanodes, gateway) dies at once."""
    own = start_server(tessera_bin, tmp_path, name="crash")
    try:
        client = s3_client(own.endpoint, own.access_key, own.secret_key)
        client.create_bucket(Bucket=BUCKET)
        log = put_until_killed(own.endpoint, own.access_key, own.secret_key, own.proc.kill)
    finally:
        own.proc.kill()
    again = start_server(tessera_bin, tmp_path, name="crash", creds=own.creds)
    try:
        client = s3_client(again.endpoint, again.access_key, again.secret_key)
        check_after_restart(client, log)
    finally:
        assert again.proc.terminate() == 0
