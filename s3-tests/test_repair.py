"""Self-healing with separate processes: eight datanodes, three SIGKILLed for
good one at a time with repair in between, every version of every object
still reads back by SHA-256 and status says healthy; block files damaged on disk are found by the
scrubber, quarantined and rebuilt while every GET returns the right bytes; an
object with more block files gone than its layout can lose is answered as
lost, not as a retry; a repair interrupted by a meta restart completes."""

import hashlib
import os
import time

import pytest
from botocore.exceptions import ClientError

from block_files import cells
from tessera_clients import MIB, empty_and_delete, new_bucket_name, s3_client
from tessera_procs import HarnessError, find_key, process_env, start_cluster, wait_for
from test_cluster import put_with_replication
from test_crash_safety import restart

pytestmark = pytest.mark.tessera

DATANODES = 8
SIZES = [0, 1, 4096, MIB + 5, 3 * MIB, 7 * MIB + 77]


@pytest.fixture(scope="module")
def healing(tessera_bin, tmp_path_factory):
    try:
        running = start_cluster(
            tessera_bin,
            tmp_path_factory.mktemp("healing"),
            datanodes=DATANODES,
            meta_args=("--stale-after", "1s", "--dead-after", "3s"),
            datanode_args=("--heartbeat-interval", "300ms", "--scrub-period", "2s"),
        )
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield running
    problems = running.stop()
    assert not problems, problems


def wait_healthy_since(cluster, since_ms: int, timeout: float = 90.0) -> dict:
    """Waits until meta has scanned after `since_ms` (Unix ms) and counts no
    damaged group, with nothing queued or running; returns the status."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = cluster.status()
        groups, repair = find_key(status, "block_groups"), find_key(status, "repair")
        scanned = repair["last_scan"] > since_ms
        idle = repair["queued"] == 0 and repair["running"] == 0
        if scanned and idle and groups["degraded"] == groups["at_risk"] == groups["lost"] == 0:
            return status
        time.sleep(0.5)
    raise AssertionError(f"not healthy again within {timeout:.0f} s: {status}")


def test_three_datanodes_killed_one_at_a_time_lose_nothing(healing):
    client = s3_client(healing.endpoint, healing.access_key, healing.secret_key)
    bucket = new_bucket_name("healing")
    client.create_bucket(Bucket=bucket)
    # Older versions are repaired like the latest: each key gets two.
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    digests = {}
    try:
        for size in SIZES:
            for replication in ("rs-3-2-1024k", "replicated-3"):
                key = f"{replication}/{size}"
                for _ in range(2):
                    body = os.urandom(size)
                    version = put_with_replication(client, bucket, key, body, replication)["VersionId"]
                    digests[(key, version)] = hashlib.sha256(body).hexdigest()
        status = healing.status()
        groups = find_key(status, "block_groups")
        repaired = find_key(status, "repair")["repaired_bytes"]
        for victim in (1, 4, 6):
            healing.kill_datanode(victim)
            status = wait_healthy_since(healing, healing.wait_dead(victim))
            repair = find_key(status, "repair")
            assert repair["repaired_bytes"] > repaired, status
            repaired = repair["repaired_bytes"]
        groups = find_key(status, "block_groups")
        assert groups["healthy"] > 0, status
        for (key, version), digest in digests.items():
            body = client.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()
            assert hashlib.sha256(body).hexdigest() == digest, (key, version)
    finally:
        empty_and_delete(client, bucket)


def test_damaged_block_files_are_scrubbed_and_rebuilt(healing):
    client = s3_client(healing.endpoint, healing.access_key, healing.secret_key)
    bucket = new_bucket_name("bitrot")
    client.create_bucket(Bucket=bucket)
    try:
        bodies = {}
        # Only this test's block files are damaged: older ones may be
        # deleted (the first test's bucket) before a scrubber reaches them.
        written_after = time.time() - 1
        for replication in ("rs-3-2-1024k", "replicated-3"):
            body = os.urandom(2 * MIB + 999)
            put_with_replication(client, bucket, replication, body, replication)
            bodies[replication] = body
        before = sum(n["scrub"]["damaged"] for n in find_key(healing.status(), "datanodes"))
        # Flip a byte in every block file of these objects on two live datanodes.
        live = [i for i in range(DATANODES) if i not in healing.killed]
        flipped = 0
        for node in live[:2]:
            for cell in cells(healing.work_dir / f"dn{node}"):
                if cell.length < 2000 or cell.mtime < written_after:
                    continue
                cell.flip(1500)
                flipped += 1
        assert flipped > 0
        # No GET yet: a client's read would report the files first and they
        # could be rebuilt before a scrubber reached them.
        damaged_at = int(time.time() * 1000)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            nodes = find_key(healing.status(), "datanodes")
            if sum(n["scrub"]["damaged"] for n in nodes) - before >= flipped:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the scrubbers did not find {flipped} damaged files: {nodes}")
        for key, body in bodies.items():
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        wait_healthy_since(healing, damaged_at)
        for key, body in bodies.items():
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        quarantined = [p for i in live[:2] for p in (healing.work_dir / f"dn{i}" / "quarantine").glob("*.data")]
        assert len(quarantined) >= flipped, quarantined
    finally:
        empty_and_delete(client, bucket)


def test_an_object_whose_block_files_are_gone_is_told_lost(healing):
    """Block files deleted from live datanodes, more than the layout can
    lose: a GET is answered 403 InvalidObjectState at once (no retry by the
    SDK), not a 503 that clients retry for ever, and meta and the gateway
    each log the loss."""
    client = s3_client(healing.endpoint, healing.access_key, healing.secret_key)
    bucket = new_bucket_name("lost")
    client.create_bucket(Bucket=bucket)
    live = [i for i in range(DATANODES) if i not in healing.killed]
    try:
        for replication, gone in (("rs-3-2-1024k", 3), ("replicated-3", 3)):
            written_after = time.time() - 1
            put_with_replication(client, bucket, replication, os.urandom(12 * MIB), replication)
            held = [
                cell
                for node in live
                for cell in cells(healing.work_dir / f"dn{node}")
                if cell.mtime >= written_after and cell.length > 0
            ]
            width = 5 if replication.startswith("rs") else 3
            # A group whose block files all have files of their own (small
            # ones are packed into volumes, where they cannot be unlinked).
            groups = {
                block: [cell for cell in held if cell.block == block] for block in {cell.block for cell in held}
            }
            group = next(
                g for g in groups.values() if len(g) == width and not any(cell.packed for cell in g)
            )
            for cell in group[:gone]:
                cell.path.unlink()
                cell.path.with_suffix(".crc").unlink(missing_ok=True)
            with pytest.raises(ClientError) as lost:
                client.get_object(Bucket=bucket, Key=replication)["Body"].read()
            answer = lost.value.response
            assert answer["Error"]["Code"] == "InvalidObjectState", answer
            assert answer["ResponseMetadata"]["HTTPStatusCode"] == 403
            assert answer["ResponseMetadata"]["RetryAttempts"] == 0, "a lost object is not retried"
            assert "data is lost" in answer["Error"]["Message"]
        meta_log = healing.meta_proc.log_path
        wait_for("meta's log line of the lost group", lambda: "block group lost" in meta_log.read_text("utf-8", "replace"))
        gateway_log = healing.gateway_proc.log_path.read_text("utf-8", "replace")
        assert "InvalidObjectState" in gateway_log and "data lost" in gateway_log
    finally:
        empty_and_delete(client, bucket)


def test_a_repair_interrupted_by_a_meta_restart_completes(tessera_bin, tmp_path):
    """Repairs are paced slowly enough to catch one running; meta is then
    SIGKILLed and started again at the same address over the same folder:
    the queue it kept is handed out again, the repair that was running
    reports to the new meta, and every group ends whole."""
    cluster = start_cluster(
        tessera_bin,
        tmp_path,
        datanodes=6,
        meta_args=("--stale-after", "1s", "--dead-after", "3s"),
        datanode_args=("--heartbeat-interval", "300ms", "--repair-bandwidth", "4MiB"),
    )
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = new_bucket_name("restart")
        client.create_bucket(Bucket=bucket)
        digests = {}
        for i in range(4):
            body = os.urandom(9 * MIB + i)
            client.put_object(Bucket=bucket, Key=f"k{i}", Body=body)
            digests[f"k{i}"] = hashlib.sha256(body).hexdigest()
        cluster.kill_datanode(0)
        deadline = time.monotonic() + 60
        while find_key(cluster.status(), "repair")["running"] == 0:
            assert time.monotonic() < deadline, "no repair started"
            time.sleep(0.2)
        cluster.meta_proc.kill()
        restarted_at = int(time.time() * 1000)
        argv = list(cluster.meta_proc.argv)
        argv[argv.index("--listen") + 1] = cluster.meta
        cluster.meta_proc = restart(
            cluster.meta_proc, "cluster-meta-restarted", tmp_path, process_env(cluster.creds.env()), argv
        )
        status = wait_healthy_since(cluster, restarted_at)
        assert find_key(status, "repair")["repaired_bytes"] > 0, status
        for key, digest in digests.items():
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert hashlib.sha256(body).hexdigest() == digest, key
        crashed = [p.describe() for i, p in enumerate(cluster.datanodes) if i not in cluster.killed and not p.alive()]
        assert not crashed, crashed
        empty_and_delete(client, bucket)
    finally:
        problems = cluster.stop()
        assert not problems, problems
