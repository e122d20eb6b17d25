"""The balancer with separate processes and meta as a group of three: a
cluster grown from five datanodes to seven is evened out (every datanode's
use within the threshold of the mean) while PUTs and GETs go on; meta's
leader SIGKILLed in the middle of the moves loses nothing, and once the
old copies and the strays of interrupted moves are deleted, the datanodes
hold exactly the bytes the records list (no block file counted twice)."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest
from block_files import cells
from test_crash_safety import restart
from test_meta_group import MEMBERS, Load, free_port, start_group

from tessera_clients import MIB, empty_and_delete, new_bucket_name, s3_client
from tessera_procs import find_key, mint_credentials, process_env, start_datanode

pytestmark = pytest.mark.tessera

THRESHOLD = 2
DATANODE_ARGS = (
    "--capacity",
    "512MiB",
    "--heartbeat-interval",
    "300ms",
    "--block-report-interval",
    "2s",
)
META_ARGS = (
    "--deletion-delay",
    "1s",
    "--orphan-grace",
    "10s",
    "--redundancy-scan-interval",
    "3s",
)


def balance(running, meta: str | None = None) -> dict:
    return running.admin("balance", "status", meta=meta)


def data_bytes_on_disk(tmp_path, datanodes: int) -> int:
    return sum(cell.length for i in range(datanodes) for cell in cells(tmp_path / f"dn{i}"))


def wait_for(what: str, check, timeout: float, every: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # noqa: BLE001 - meta may be electing a leader
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"{what} not within {timeout:.0f} s (last: {last})")


def within_threshold(status: dict) -> bool:
    nodes = status["datanodes"]
    return len(nodes) == 7 and all(abs(n["from_mean_points"]) <= THRESHOLD for n in nodes)


def test_two_new_datanodes_are_filled_while_the_leader_is_killed_mid_move(tessera_bin, tmp_path):
    running = start_group(
        tessera_bin,
        tmp_path,
        {member: f"127.0.0.1:{free_port()}" for member in MEMBERS},
        datanodes=5,
        meta_args=META_ARGS,
        datanode_args=DATANODE_ARGS,
    )
    try:
        client = s3_client(running.endpoint, running.creds.access_key, running.creds.secret_key)
        bucket = new_bucket_name("balance")
        client.create_bucket(Bucket=bucket)
        digests = {}
        for i in range(40):
            body = os.urandom(3 * MIB + i)
            client.put_object(Bucket=bucket, Key=f"k{i}", Body=body)
            digests[f"k{i}"] = hashlib.sha256(body).hexdigest()
        # Five datanodes evenly used: balanced, once a scan counted every
        # object (five block files of a little over 1 MiB each).
        stored = 40 * 5 * MIB

        def counted():
            b = balance(running)
            return b["state"] == "balanced" and sum(n["listed_bytes"] for n in b["datanodes"]) >= stored and b

        before = wait_for("a scan counting every object", counted, timeout=60)
        listed = sum(n["listed_bytes"] for n in before["datanodes"])
        # Slow enough to be caught in the middle of its moves.
        running.admin("balance", "start", "--threshold", str(THRESHOLD), "--bandwidth", "3MiB")

        env = process_env(running.creds.env())
        new = [tmp_path / f"dn{i}.credential" for i in (5, 6)]
        mint_credentials(tessera_bin, running.member_dir(1), new, tmp_path / "unused-gateway.credential")
        for i in (5, 6):
            proc = start_datanode(
                tessera_bin,
                f"group-dn{i}",
                running.meta,
                tmp_path / f"dn{i}",
                new[i - 5],
                list(DATANODE_ARGS),
                env,
                tmp_path,
            )
            proc.wait_ready()
            running.others.append(proc)

        load = Load(
            s3_client(running.endpoint, running.creds.access_key, running.creds.secret_key), new_bucket_name("load")
        )
        load.client.create_bucket(Bucket=load.bucket)
        threads = [threading.Thread(target=load.writer, args=("w", 256 * 1024)), threading.Thread(target=load.reader)]
        for thread in threads:
            thread.start()
        try:
            # In the middle of the moves: some done, one running, more queued.
            def mid_move():
                b, repair = balance(running), find_key(running.admin("status"), "repair")
                return b["moved"] >= 1 and b["queued"] > 0 and repair["running"] > 0

            wait_for("a move running", mid_move, timeout=120, every=0.2)
            leader = running.leader()
            killed_at = time.monotonic()
            running.members[leader].kill()
            new_leader = running.leader(timeout=30)
            assert new_leader != leader
            running.members[leader] = restart(running.members[leader], f"meta{leader}-restarted", tmp_path, env)
            done = wait_for(
                "every datanode within the threshold",
                lambda: (b := balance(running))["state"] == "balanced" and within_threshold(b) and b,
                timeout=240,
            )
        finally:
            load.stop.set()
            for thread in threads:
                thread.join()
        assert not load.wrong, load.wrong
        assert load.acked, "no PUT was acknowledged during the moves"
        assert any(ok for started, ok in load.outcomes if started > killed_at), "no request succeeded after the kill"
        new_ids = {n["id"] for n in done["datanodes"]} - {n["id"] for n in before["datanodes"]}
        assert len(new_ids) == 2
        mean = done["mean_use_percent"]
        for node in done["datanodes"]:
            if node["id"] in new_ids:
                assert node["use_percent"] >= mean - THRESHOLD, done

        for key, body in load.acked.items():
            assert load.client.get_object(Bucket=load.bucket, Key=key)["Body"].read() == body, key
        empty_and_delete(load.client, load.bucket)
        for key, digest in digests.items():
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert hashlib.sha256(body).hexdigest() == digest, key

        # Nothing counted twice: the records list what they listed before
        # the moves, and once deletions and orphans are done, the disks
        # hold exactly that.
        def settled():
            b = balance(running)
            now = sum(n["listed_bytes"] for n in b["datanodes"])
            on_disk = data_bytes_on_disk(tmp_path, 7)
            return now == listed and on_disk == listed and (now, on_disk)

        def whole() -> None:
            status = running.admin("status")
            groups = find_key(status, "block_groups")
            assert groups["degraded"] == groups["at_risk"] == groups["lost"] == groups["misplaced"] == 0, status
            for key, digest in digests.items():
                body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                assert hashlib.sha256(body).hexdigest() == digest, key

        wait_for("the disks holding exactly what the records list", settled, timeout=120, every=1)
        whole()
        # Every member applied the same moves: each leader in turn (the
        # member killed mid-move among them, most likely) lists the same
        # bytes, all on disk, and serves every object.
        for turn in range(3):
            current = running.leader()
            if current == leader:
                break
            running.members[current].kill()
            running.leader(timeout=30)
            wait_for("the next leader listing the same", settled, timeout=120, every=1)
            whole()
            running.members[current] = restart(
                running.members[current], f"meta{current}-restarted-{turn}", tmp_path, env
            )
    finally:
        running.stop()
