"""A real multi-process cluster (meta, five datanodes, gateway): EC and
replicated objects stay readable after a datanode is SIGKILLed."""

import os

import pytest

from tessera_clients import MIB, RawS3, empty_and_delete, new_bucket_name, quote_key, s3_client
from tessera_procs import find_key, healthy_datanodes

REPLICATION_HEADER = "x-tessera-replication"

pytestmark = pytest.mark.tessera


def put_with_replication(client, bucket, key, body, replication):
    """PutObject through boto3 with x-tessera-replication added before signing."""

    def add_header(request, **_):
        request.headers[REPLICATION_HEADER] = replication

    event = "before-sign.s3.PutObject"
    client.meta.events.register(event, add_header, unique_id="tessera-replication")
    try:
        return client.put_object(Bucket=bucket, Key=key, Body=body)
    finally:
        client.meta.events.unregister(event, unique_id="tessera-replication")


def test_status_lists_five_healthy_datanodes(cluster):
    status = cluster.status()
    nodes = find_key(status, "datanodes")
    assert isinstance(nodes, list) and len(nodes) == 5, status
    assert len(healthy_datanodes(status)) == 5, status
    addrs = [n.get("address", n.get("addr")) for n in nodes]
    assert len(set(addrs)) == 5, f"datanodes share addresses: {addrs}"
    ready_addrs = {p.ready["datanode"] for p in cluster.datanodes}
    assert set(addrs) == ready_addrs


@pytest.fixture(scope="module")
def cluster_client(cluster):
    return s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)


def block_files(cluster):
    """Committed block data files per datanode (see docs/architecture.md)."""
    return [len(list((cluster.work_dir / f"dn{i}" / "blocks").glob("*/*.data"))) for i in range(len(cluster.datanodes))]


def test_replication_header_decides_block_placement(cluster, cluster_client):
    bucket = new_bucket_name("placement")
    cluster_client.create_bucket(Bucket=bucket)
    try:
        cases = [
            (None, [1] * 5),  # default rs-3-2-1024k: one internal block on each of 5 datanodes
            ("rs-3-2-1024k", [1] * 5),
            ("replicated-3", [1, 1, 1, 0, 0]),
            ("replicated-1", [1, 0, 0, 0, 0]),
        ]
        for replication, expected in cases:
            before = block_files(cluster)
            body = os.urandom(2 * MIB + 17)
            key = f"obj-{replication or 'default'}"
            if replication is None:
                cluster_client.put_object(Bucket=bucket, Key=key, Body=body)
            else:
                put_with_replication(cluster_client, bucket, key, body, replication)
            gained = [after - was for after, was in zip(block_files(cluster), before)]
            assert sorted(gained, reverse=True) == expected, f"{replication}: new block files per datanode {gained}"
            assert cluster_client.get_object(Bucket=bucket, Key=key)["Body"].read() == body
    finally:
        empty_and_delete(cluster_client, bucket)


def test_objects_survive_a_killed_datanode(cluster, cluster_client):
    client = cluster_client
    bucket = new_bucket_name("cluster")
    client.create_bucket(Bucket=bucket)

    # Sizes cross cell (1 MiB) and stripe (3 MiB) boundaries and end in a partial stripe.
    objects = {
        "default-ec": os.urandom(10 * MIB + 12345),
        "explicit-ec": os.urandom(7 * MIB + 1),
        "replicated": os.urandom(2 * MIB + 3),
        "small-ec": os.urandom(100),
    }
    client.put_object(Bucket=bucket, Key="default-ec", Body=objects["default-ec"])
    client.put_object(Bucket=bucket, Key="small-ec", Body=objects["small-ec"])
    put_with_replication(client, bucket, "explicit-ec", objects["explicit-ec"], "rs-3-2-1024k")
    # The same header through a hand-signed request, so it is surely on the wire.
    raw = RawS3(cluster.endpoint, cluster.access_key, cluster.secret_key)
    response = raw.request(
        "PUT",
        f"/{bucket}/{quote_key('replicated')}",
        headers={REPLICATION_HEADER: "replicated-3"},
        body=objects["replicated"],
    )
    assert response.status_code == 200, response.text

    def check_all(when):
        for key, data in objects.items():
            got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert got == data, f"{key} differs {when}"
        big = objects["default-ec"]
        start, end = 3 * MIB - 10, 4 * MIB + 10
        ranged = client.get_object(Bucket=bucket, Key="default-ec", Range=f"bytes={start}-{end}")
        assert ranged["Body"].read() == big[start : end + 1], f"range differs {when}"

    check_all("before the kill")
    cluster.kill_datanode(2)
    check_all("after SIGKILL of one datanode")
    # A second read of everything: the dead node is not cached as good.
    check_all("on the second read after the kill")

    empty_and_delete(client, bucket)


def test_unknown_replication_is_refused(cluster, cluster_client):
    bucket = new_bucket_name("badrepl")
    cluster_client.create_bucket(Bucket=bucket)
    try:
        raw = RawS3(cluster.endpoint, cluster.access_key, cluster.secret_key)
        response = raw.request("PUT", f"/{bucket}/k", headers={REPLICATION_HEADER: "rs-9-9-1k"}, body=b"x")
        assert response.status_code == 400, response.text
    finally:
        empty_and_delete(cluster_client, bucket)
