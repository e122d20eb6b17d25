"""What a server acknowledged survives a restart, and what it deleted really
leaves the datanodes' disks."""

import os
import time

import pytest

from block_files import cells
from tessera_clients import MIB, s3_client
from tessera_procs import Credentials, start_server

pytestmark = pytest.mark.tessera


def block_files(data_dir):
    """Committed block data files of every datanode of a `tessera server`."""
    return {f"{node.name}/{cell.name}" for node in sorted(data_dir.glob("datanode-*")) for cell in cells(node)}


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_overwritten_and_deleted_blocks_are_removed_from_datanodes(tessera_bin, tmp_path):
    own = start_server(
        tessera_bin,
        tmp_path,
        name="deleter",
        extra_args=("--deletion-delay", "0s", "--heartbeat-interval", "200ms"),
    )
    try:
        client = s3_client(own.endpoint, own.access_key, own.secret_key)
        client.create_bucket(Bucket="gc-bucket")
        assert block_files(own.data_dir) == set()

        client.put_object(Bucket="gc-bucket", Key="k", Body=os.urandom(4 * MIB))
        first = block_files(own.data_dir)
        assert len(first) == 5, "rs-3-2 writes one block file on each of five datanodes"

        new_body = os.urandom(4 * MIB)
        client.put_object(Bucket="gc-bucket", Key="k", Body=new_body)
        assert wait_for(lambda: not (block_files(own.data_dir) & first)), (
            "blocks of the overwritten object are still on disk"
        )
        second = block_files(own.data_dir)
        assert len(second) == 5
        assert client.get_object(Bucket="gc-bucket", Key="k")["Body"].read() == new_body

        client.delete_object(Bucket="gc-bucket", Key="k")
        assert wait_for(lambda: block_files(own.data_dir) == set()), (
            f"blocks of the deleted object are still on disk: {block_files(own.data_dir)}"
        )
    finally:
        own.proc.terminate()


def test_restart_keeps_every_acknowledged_object(tessera_bin, tmp_path):
    own = start_server(tessera_bin, tmp_path, name="restart")
    bodies = {f"k{i}": os.urandom(size) for i, size in enumerate([0, 1, MIB, 7 * MIB + 3])}
    try:
        client = s3_client(own.endpoint, own.access_key, own.secret_key)
        client.create_bucket(Bucket="keep")
        for key, body in bodies.items():
            client.put_object(Bucket="keep", Key=key, Body=body)
    finally:
        assert own.proc.terminate() == 0

    again = start_server(tessera_bin, tmp_path, name="restart", creds=own.creds)
    try:
        client = s3_client(again.endpoint, again.access_key, again.secret_key)
        for key, body in bodies.items():
            assert client.get_object(Bucket="keep", Key=key)["Body"].read() == body, key
        listed = client.list_objects_v2(Bucket="keep")["Contents"]
        assert sorted(o["Key"] for o in listed) == sorted(bodies)
    finally:
        again.proc.terminate()


def test_generated_root_credentials_are_saved_and_reused(tessera_bin, tmp_path):
    """Without TESSERA_ROOT_* the server generates credentials once, saves them
    in the data folder, and a restart keeps them."""

    class AdminTokenOnly(Credentials):
        def env(self):
            return {"TESSERA_ADMIN_TOKEN": self.admin_token}

    creds = AdminTokenOnly("", "", Credentials.random().admin_token)

    def saved():
        text = (tmp_path / "gen-data" / "meta" / "root-credentials").read_text()
        values = dict(
            line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
        )
        return values["TESSERA_ROOT_ACCESS_KEY"].strip(), values["TESSERA_ROOT_SECRET_KEY"].strip()

    first = start_server(tessera_bin, tmp_path, name="gen", creds=creds)
    try:
        key, secret = saved()
        client = s3_client(first.endpoint, key, secret)
        client.create_bucket(Bucket="generated")
    finally:
        first.proc.terminate()
    second = start_server(tessera_bin, tmp_path, name="gen", creds=creds)
    try:
        assert saved() == (key, secret)
        client = s3_client(second.endpoint, key, secret)
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["generated"]
    finally:
        second.proc.terminate()
