"""Many disks per datanode, and one of them failing under load.

Six datanodes as separate processes; datanode 0 serves three disks
(`--data A,B,C`), the middle one a powercut-fs mount that starts failing
every operation with EIO on demand, as a dying disk does. Writers PUT
objects of a packed size, of a size that gets files of its own and of a
multi-block size, and readers GET what was acknowledged, all through the
failure: no request may fail. The datanode takes the disk out of service and
keeps serving the other two, meta hears of the lost block files at once and
rebuilds them elsewhere, `tessera admin status` names the failed disk, and
every object reads back by SHA-256. Past `--failed-disks-tolerated` the
datanode stops. And folders of the layout before volumes take the new one
in place: both read back and repair.

Needs root and /dev/fuse (see test_power_loss)."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from block_files import cells
from tessera_clients import MIB, s3_client
from tessera_procs import HarnessError, find_key, process_env, start_cluster, wait_for
from test_crash_safety import restart
from test_power_loss import Volume, require_fuse
from test_repair import wait_healthy_since

pytestmark = pytest.mark.tessera

DATANODES = 6
SIZES = [1000, 64 * 1024, 300 * 1024, 2 * MIB + 5, 5 * MIB]
# A lost datanode is dead within seconds, so repairs start during a test.
FAST_META = ("--stale-after", "1s", "--dead-after", "3s")
FAST_DATANODE = ("--heartbeat-interval", "300ms")


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class Traffic:
    """Writers and readers running until stopped, every error kept."""

    def __init__(self, client, bucket: str):
        self.client, self.bucket = client, bucket
        self.acked: dict[str, str] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.write, args=(i,), daemon=True) for i in range(3)]
        self.threads += [threading.Thread(target=self.read, args=(i,), daemon=True) for i in range(2)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)

    def write(self, index: int) -> None:
        rng = random.Random(index)
        n = 0
        while not self.stop.is_set():
            n += 1
            key = f"w{index}/{n}"
            body = os.urandom(rng.choice(SIZES))
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                with self.lock:
                    self.errors.append(f"PUT {key}: {exc}")
                continue
            with self.lock:
                self.acked[key] = sha(body)

    def read(self, index: int) -> None:
        rng = random.Random(100 + index)
        while not self.stop.is_set():
            with self.lock:
                keys = list(self.acked.items())
            if not keys:
                time.sleep(0.05)
                continue
            key, digest = rng.choice(keys)
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                with self.lock:
                    self.errors.append(f"GET {key}: {exc}")
                continue
            if sha(body) != digest:
                with self.lock:
                    self.errors.append(f"GET {key}: wrong bytes")


def disk_of(status, path: Path) -> dict:
    for node in find_key(status, "datanodes"):
        for disk in node.get("disks", []):
            if disk["path"] == str(path):
                return disk
    raise AssertionError(f"no disk {path} in {status}")


def test_a_disk_failing_under_load_is_taken_out_and_rebuilt_without_a_client_error(tessera_bin, tmp_path):
    powercut = require_fuse()
    failing = tmp_path / "disk-fails"
    disk = Volume(powercut, tmp_path / "durable", tmp_path / "dn0-d1", tmp_path)
    # The same room as its neighbours on the real disk: new block files
    # spread over all three.
    room = shutil.disk_usage(tmp_path).free
    disk.boot(fail_when=failing, capacity=room)
    disks = [tmp_path / "dn0-d0", disk.mount, tmp_path / "dn0-d2"]
    try:
        cluster = start_cluster(
            tessera_bin,
            tmp_path,
            datanodes=DATANODES,
            meta_args=FAST_META,
            datanode_args=(*FAST_DATANODE, "--failed-disks-tolerated", "1"),
            disks={0: disks},
        )
    except HarnessError as exc:
        disk.cut()
        pytest.fail(str(exc), pytrace=False)
    try:
        status = cluster.status()
        for path in disks:
            assert disk_of(status, path)["failed"] is None
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = "disks"
        client.create_bucket(Bucket=bucket)
        traffic = Traffic(client, bucket)
        traffic.start()
        # Every disk of datanode 0 takes block files, the failing one among them.
        wait_for("block files on each of datanode 0's disks", lambda: all(cells(d) for d in disks))
        time.sleep(3)
        assert len(cells(disk.mount)) > 10
        failed_at = int(time.time() * 1000)
        failing.touch()
        failed = wait_for(
            "status naming the failed disk",
            lambda: disk_of(cluster.status(), disk.mount)["failed"],
        )
        # Load goes on through the repair.
        wait_healthy_since(cluster, failed_at, timeout=120)
        time.sleep(2)
        traffic.finish()
        assert not traffic.errors, traffic.errors[:10]
        assert len(traffic.acked) > 20, len(traffic.acked)

        status = cluster.status()
        assert disk_of(status, disks[0])["failed"] is None
        assert disk_of(status, disks[2])["failed"] is None
        assert "EIO" in failed or "Input/output error" in failed or "identity" in failed, failed
        node0 = next(n for n in find_key(status, "datanodes") if any(d["path"] == str(disks[0]) for d in n["disks"]))
        assert node0["state"] == "healthy", node0
        assert cluster.datanodes[0].alive(), "a tolerated disk failure does not stop the datanode"
        repair = find_key(status, "repair")
        assert repair["repaired_bytes"] > 0, status
        for key, digest in traffic.acked.items():
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert sha(body) == digest, key
        # New block files land on the disks still serving.
        before = {d: len(cells(d)) for d in (disks[0], disks[2])}
        for n in range(20):
            client.put_object(Bucket=bucket, Key=f"after/{n}", Body=os.urandom(64 * 1024))
        assert sum(len(cells(d)) - before[d] for d in before) > 0

        # A second failed disk is one more than tolerated: the datanode stops.
        os.rename(disks[2] / "datanode.id", disks[2] / "datanode.id.gone")
        wait_for("datanode 0 stopping", lambda: not cluster.datanodes[0].alive(), timeout=30)
        assert "more disks failed than" in cluster.datanodes[0].stderr_tail(200)
    finally:
        problems = cluster.stop()
        disk.cut()
    assert not [p for p in problems if "dn0" not in p], problems


def test_a_folder_of_files_per_block_file_upgraded_in_place_reads_back_and_repairs(tessera_bin, tmp_path):
    """Six datanodes write the layout before volumes (`--pack-max 0`: a data
    file and a sidecar per block file), then every one is restarted on its
    folder with the defaults: objects of both layouts read back, new block
    files go to volumes beside the old files, and a datanode holding both
    kinds is lost for good and rebuilt from the others."""
    cluster = start_cluster(
        tessera_bin,
        tmp_path,
        datanodes=DATANODES,
        meta_args=FAST_META,
        datanode_args=(*FAST_DATANODE, "--pack-max", "0"),
    )
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = "upgrade"
        client.create_bucket(Bucket=bucket)
        digests = {}
        for n in range(12):
            body = os.urandom(SIZES[n % len(SIZES)])
            client.put_object(Bucket=bucket, Key=f"old/{n}", Body=body)
            digests[f"old/{n}"] = sha(body)
        folders = [tmp_path / f"dn{i}" for i in range(DATANODES)]
        assert all(not c.packed for d in folders for c in cells(d)), "the old layout has no volumes"

        env = process_env(cluster.creds.env())
        for i, proc in enumerate(cluster.datanodes):
            proc.terminate()
            at = proc.argv.index("--pack-max")
            argv = proc.argv[:at] + proc.argv[at + 2 :]
            cluster.datanodes[i] = restart(proc, f"cluster-dn{i}-upgraded", tmp_path, env, argv)
        cluster.wait_datanodes(DATANODES)
        for n in range(12):
            body = os.urandom(SIZES[n % len(SIZES)])
            client.put_object(Bucket=bucket, Key=f"new/{n}", Body=body)
            digests[f"new/{n}"] = sha(body)
        kinds = [{c.packed for c in cells(d)} for d in folders]
        both = [i for i, k in enumerate(kinds) if k == {True, False}]
        assert both, kinds
        for key, digest in digests.items():
            assert sha(client.get_object(Bucket=bucket, Key=key)["Body"].read()) == digest, key

        cluster.kill_datanode(both[0])
        status = wait_healthy_since(cluster, cluster.wait_dead(both[0]), timeout=120)
        assert find_key(status, "repair")["repaired_bytes"] > 0, status
        for key, digest in digests.items():
            assert sha(client.get_object(Bucket=bucket, Key=key)["Body"].read()) == digest, key
    finally:
        problems = cluster.stop()
    assert not problems, problems
