"""Meta on a full disk: its data folder is a small tmpfs that a filler file
fills up. Writes then fail with 503 and meta's /health says why, reads go
on, and once the filler is deleted writes succeed again without a restart;
nothing acknowledged before is lost. Checked for a lone meta process (its
store finds the disk full) and for `tessera server`, whose meta is a group
of one (it refuses new log entries once free space falls under
its reserve, before a log write could fail). In a group of three, a follower
whose disk runs short refuses the leader's entries while the two others go on
committing, and catches up once space is freed, without a restart.

Needs root (to mount the tmpfs); under CI a missing one fails the test."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import requests
from botocore.exceptions import ClientError

from tessera_clients import s3_client
from tessera_procs import start_cluster, start_server
from test_meta_group import MEMBERS, free_port, start_group

pytestmark = pytest.mark.tessera

# A lone meta's store fails on the full disk itself; a group member keeps
# 64 MiB and a copy of its store free, so its tmpfs is larger.
META_FS_BYTES = {"lone meta": 24 * 1024 * 1024, "server (group of one)": 192 * 1024 * 1024}
GROUP_MEMBER_FS_BYTES = META_FS_BYTES["server (group of one)"]


def require_root() -> None:
    if os.geteuid() != 0:
        reason = "the disk-full test mounts a tmpfs, which needs root"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def fill(folder, name="filler", leave=0):
    """Writes a file until the file system has `leave` bytes free (none by
    default: full to the last byte); returns its path."""
    path = folder / name
    chunk = b"\0" * (1 << 20)

    def room():
        stats = os.statvfs(folder)
        return stats.f_bavail * stats.f_frsize - leave

    with open(path, "wb", buffering=0) as f:
        try:
            while room() >= len(chunk):
                f.write(chunk)
            while room() >= 4096:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return path


def start(kind, tessera_bin, tmp_path):
    """The cluster of `kind` over `tmp_path`, its meta folder in
    `tmp_path/meta` or `tmp_path/server-data/meta`; answers it with its meta's
    /health address."""
    if kind == "lone meta":
        cluster = start_cluster(tessera_bin, tmp_path)
        return cluster, cluster.meta_ops
    server = start_server(tessera_bin, tmp_path)
    return server, server.ops


@pytest.mark.parametrize("kind", list(META_FS_BYTES))
def test_meta_survives_a_full_disk(kind, tessera_bin, tmp_path):
    require_root()
    meta_dir = tmp_path / "meta" if kind == "lone meta" else tmp_path / "server-data" / "meta"
    meta_dir.mkdir(parents=True)
    size = META_FS_BYTES[kind]
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(meta_dir)], check=True)
    cluster = None
    try:
        cluster, ops = start(kind, tessera_bin, tmp_path)

        def health():
            return requests.get(f"{ops}/health", timeout=10)

        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key, read_timeout=60)
        client.create_bucket(Bucket="full")
        before = {f"before-{i}": os.urandom(1000 + i) for i in range(20)}
        for key, body in before.items():
            client.put_object(Bucket="full", Key=key, Body=body)
        assert health().status_code == 200

        filler = fill(meta_dir)
        # redb may still commit a few writes into pages its file already
        # holds; once those are used every write is refused with a 503.
        failed_in_a_row, acknowledged = 0, set()
        for i in range(200):
            try:
                client.put_object(Bucket="full", Key=f"during-{i}", Body=b"x" * 100)
                acknowledged.add(f"during-{i}")
                failed_in_a_row = 0
            except ClientError as exc:
                assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503, exc.response
                failed_in_a_row += 1
                if failed_in_a_row == 10:
                    break
        assert failed_in_a_row == 10, f"{len(acknowledged)} PUTs succeeded on a full disk"
        answer = health()
        assert answer.status_code == 503 and "refuses writes" in answer.text, answer.text
        # Reads go on while writes are refused.
        for key, body in before.items():
            assert client.get_object(Bucket="full", Key=key)["Body"].read() == body

        filler.unlink()
        deadline = time.monotonic() + 30
        while True:
            try:
                client.put_object(Bucket="full", Key="after", Body=b"space is back")
                break
            except ClientError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert health().status_code == 200
        assert client.get_object(Bucket="full", Key="after")["Body"].read() == b"space is back"
        for key, body in before.items():
            assert client.get_object(Bucket="full", Key=key)["Body"].read() == body
        listed = [o["Key"] for o in client.list_objects_v2(Bucket="full")["Contents"]]
        assert set(before) | {"after"} <= set(listed)
        # Refused PUTs left nothing visible; any acknowledged one stayed.
        assert {k for k in listed if k.startswith("during-")} == acknowledged
    finally:
        if cluster is not None:
            cluster.stop()
        subprocess.run(["umount", "-l", str(meta_dir)], check=False)


def test_a_follower_short_of_space_catches_up_once_it_is_freed(tessera_bin, tmp_path):
    require_root()
    folders = [tmp_path / f"meta{member}" for member in MEMBERS]
    group = None
    try:
        for folder in folders:
            folder.mkdir()
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={GROUP_MEMBER_FS_BYTES}", "tmpfs", str(folder)],
                check=True,
            )
        group = start_group(tessera_bin, tmp_path, {member: f"127.0.0.1:{free_port()}" for member in MEMBERS})
        client = s3_client(group.endpoint, group.creds.access_key, group.creds.secret_key, read_timeout=60)
        client.create_bucket(Bucket="full")
        bodies = {f"before-{i}": os.urandom(1000 + i) for i in range(20)}
        for key, body in bodies.items():
            client.put_object(Bucket="full", Key=key, Body=body)
        leader = group.leader()
        follower = next(m for m in MEMBERS if m != leader)
        follower_proc = group.members[follower]
        term = group.statuses()[leader]["term"]

        # Under its reserve but not full: entries it took just before still
        # have room to be applied, and the build without the refusal would
        # go on taking new ones.
        filler = fill(group.member_dir(follower), leave=8 * 1024 * 1024)
        # The leader and the other follower are a majority with room: every
        # write is acknowledged.
        during = {f"during-{i}": os.urandom(2000 + i) for i in range(30)}
        for key, body in during.items():
            client.put_object(Bucket="full", Key=key, Body=body)
        bodies.update(during)
        time.sleep(2)
        views = group.statuses()
        assert views[follower]["last_log_index"] < views[leader]["last_log_index"], views
        # Nobody stood for election meanwhile, the full follower included.
        assert views[leader]["role"] == "leader" and views[leader]["term"] == term, views
        assert views[follower]["role"] == "follower" and views[follower]["term"] == term, views
        answer = requests.get(f"{follower_proc.wait_ready()['ops']}/health", timeout=10)
        assert answer.status_code == 503 and "refuses writes" in answer.text, answer.text

        filler.unlink()
        group.wait_caught_up(follower, views[leader]["last_log_index"])
        # Caught up by the process that was full, not by a restart.
        assert group.members[follower] is follower_proc and follower_proc.alive()

        # It votes and serves again: with the leader gone, the two others
        # elect one of them, which holds every acknowledged write.
        group.members[leader].kill()
        assert group.leader() != leader
        for key, body in bodies.items():
            assert client.get_object(Bucket="full", Key=key)["Body"].read() == body, key
    finally:
        if group is not None:
            group.stop()
        for folder in folders:
            subprocess.run(["umount", "-l", str(folder)], check=False)
