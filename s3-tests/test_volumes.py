"""Volumes: small block files packed into the datanodes' volumes, and the
compaction that rewrites a volume once enough of it is deleted.

`tessera server` runs with small volumes (256 KiB) and a slow compaction
(32 KiB/s, from 30% garbage), so that deleting two objects in three leaves
volumes to rewrite and each rewrite lasts seconds. GETs, overwrites and
deletes run while it does, every body checked; the server is then SIGKILLed
in the middle of a compaction and restarted on its folder: every object
reads back as last acknowledged, no deleted one comes back, and compaction
finishes what it began."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from botocore.exceptions import ClientError

from block_files import cells
from tessera_clients import empty_and_delete, metric_total, s3_client
from tessera_procs import Credentials, start_server

pytestmark = pytest.mark.tessera

KIB = 1024
OBJECTS = 240
SIZE = 24 * KIB
SERVER_ARGS = (
    "--volume-max",
    "256KiB",
    "--compact-garbage",
    "0.3",
    "--compact-bandwidth",
    "32KiB",
    "--deletion-delay",
    "0s",
)
COMPACTED_BYTES = "tessera_datanode_compacted_bytes_total"
VOLUMES_COMPACTED = "tessera_datanode_volumes_compacted_total"
GARBAGE = "tessera_datanode_store_garbage_bytes"


def wait_for(what, predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def check_all(client, bucket, expected: dict[str, bytes], deleted: set[str]) -> None:
    for key, body in expected.items():
        got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == body, f"{key}: {len(got)} bytes, not its last acknowledged body"
    for key in deleted:
        with pytest.raises(ClientError) as e:
            client.get_object(Bucket=bucket, Key=key)
        assert e.value.response["Error"]["Code"] == "NoSuchKey", key


def test_small_objects_make_no_block_files_of_their_own(tessera_bin, tmp_path):
    server = start_server(tessera_bin, tmp_path, name="packed")
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        client.create_bucket(Bucket="packed")
        bodies = {f"k{i}": os.urandom(64 * KIB) for i in range(50)}
        for key, body in bodies.items():
            client.put_object(Bucket="packed", Key=key, Body=body)
        nodes = sorted(server.data_dir.glob("datanode-*"))
        stored = [cell for node in nodes for cell in cells(node)]
        assert len(stored) == 5 * len(bodies), len(stored)
        assert all(cell.packed for cell in stored), [c for c in stored if not c.packed][:3]
        files = sum(1 for node in nodes for path in node.rglob("*") if path.is_file())
        # The identity, a volume's three files: a handful per datanode.
        assert files <= 5 * 4, files
        for key, body in bodies.items():
            assert client.get_object(Bucket="packed", Key=key)["Body"].read() == body
        empty_and_delete(client, "packed")
    finally:
        server.proc.kill()


def test_compaction_under_load_and_a_sigkill_in_the_middle_of_it_lose_nothing(tessera_bin, tmp_path):
    creds = Credentials.random()
    server = start_server(tessera_bin, tmp_path, name="compacting", extra_args=SERVER_ARGS, creds=creds)
    bucket = "compacting"
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        client.create_bucket(Bucket=bucket)
        expected = {f"k{i:04}": os.urandom(SIZE) for i in range(OBJECTS)}
        for key, body in expected.items():
            client.put_object(Bucket=bucket, Key=key, Body=body)
        deleted = set()
        for i in range(OBJECTS):
            if i % 3:
                key = f"k{i:04}"
                client.delete_object(Bucket=bucket, Key=key)
                del expected[key]
                deleted.add(key)
        wait_for("a compaction to begin copying", lambda: metric_total(server.ops, COMPACTED_BYTES) > 0)

        # Reads, overwrites and deletes while volumes are rewritten.
        lock = threading.Lock()
        failures: list[str] = []
        stop = threading.Event()

        def reader():
            rng = random.Random(1)
            while not stop.is_set():
                with lock:
                    key, body = rng.choice(list(expected.items()))
                got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                with lock:
                    if got != body and expected.get(key) == body:
                        failures.append(f"{key}: wrong bytes while compacting")

        def writer():
            rng = random.Random(2)
            for _ in range(30):
                with lock:
                    key = rng.choice(sorted(expected))
                if rng.random() < 0.3:
                    client.delete_object(Bucket=bucket, Key=key)
                    with lock:
                        expected.pop(key, None)
                        deleted.add(key)
                else:
                    body = os.urandom(SIZE)
                    client.put_object(Bucket=bucket, Key=key, Body=body)
                    with lock:
                        expected[key] = body
                        deleted.discard(key)

        threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        threads[1].join(timeout=120)
        stop.set()
        threads[0].join(timeout=120)
        assert not failures, failures[:3]
        copied = metric_total(server.ops, COMPACTED_BYTES)

        # The power stays on, the process dies: mid-compaction, as the
        # compactor is still copying (32 KiB/s over many volumes).
        server.proc.kill()
        server = start_server(tessera_bin, tmp_path, name="compacting", extra_args=SERVER_ARGS, creds=creds)
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        check_all(client, bucket, expected, deleted)
        garbage_at_start = metric_total(server.ops, GARBAGE)
        assert garbage_at_start > 0, "compaction had finished before the kill: the kill tested nothing"
        wait_for("compaction to go on after the restart", lambda: metric_total(server.ops, GARBAGE) < garbage_at_start)
        assert metric_total(server.ops, VOLUMES_COMPACTED) > 0
        check_all(client, bucket, expected, deleted)
        print(f"copied {copied:.0f} bytes before the kill, garbage {garbage_at_start:.0f} bytes at restart")
        empty_and_delete(client, bucket)
    finally:
        if server.proc.alive():
            server.proc.kill()
