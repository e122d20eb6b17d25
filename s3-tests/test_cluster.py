"""A real multi-process cluster (meta, five datanodes, gateway), with clear-text
internal links and with mutual TLS on all of them: EC and replicated objects
stay readable after a datanode is SIGKILLed; processes of another CA are refused."""

import os
import time

import pytest

from block_files import cells
from tessera_clients import MIB, RawS3, empty_and_delete, metric_total, new_bucket_name, quote_key, s3_client
from tessera_procs import (
    HarnessError,
    find_key,
    healthy_datanodes,
    make_certs,
    process_env,
    run_admin,
    start_datanode,
    tls_args,
)

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
    return [len(cells(cluster.work_dir / f"dn{i}")) for i in range(len(cluster.datanodes))]


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


DEGRADED_READS = "tessera_client_degraded_reads_total"
# rs-3-2-1024k: internal blocks 0..2 hold data cells, 3 and 4 parity.
DATA_BLOCKS = 3


def block_sizes(cluster):
    """{(datanode index, block file name): size} of every committed block file."""
    sizes = {}
    for i in range(len(cluster.datanodes)):
        for cell in cells(cluster.work_dir / f"dn{i}"):
            sizes[(i, cell.name)] = cell.length
    return sizes


def put_placed(cluster, put, wanted, what):
    """Runs `put()` until `wanted(placed)` holds for the block files it added
    (placement ties are broken at random; an overwrite places anew), where
    `placed` maps datanode index -> [(internal index, size)] of those files."""
    for _ in range(40):
        before = block_sizes(cluster)
        put()
        placed = {}
        for (node, name), size in block_sizes(cluster).items():
            if (node, name) not in before:
                internal = int(name.removesuffix(".data").rsplit("_", 1)[1])
                placed.setdefault(node, []).append((internal, size))
        if wanted(placed):
            return placed
        time.sleep(0.25)
    raise AssertionError(f"no placement of {what} in 40 PUTs was the one the test needs")


def holds_data(placed, node):
    """Whether `node` holds a data cell with bytes of the object."""
    return any(internal < DATA_BLOCKS and size > 0 for internal, size in placed.get(node, []))


def test_objects_survive_a_killed_datanode(cluster, cluster_client):
    """SIGKILL the datanode holding a data cell of every EC object (found from
    its block files: `<block>_<internal index>.data`): each EC read is then a
    degraded read (the gateway's degraded-read counter rises on every one),
    a replicated read goes to another replica, and every byte is right."""
    client = cluster_client
    bucket = new_bucket_name("cluster")
    client.create_bucket(Bucket=bucket)
    raw = RawS3(cluster.endpoint, cluster.access_key, cluster.secret_key)
    # Sizes cross cell (1 MiB) and stripe (3 MiB) boundaries and end in a partial stripe.
    objects = {
        # Over the inline limit (16 KiB): data cells fitted to it (16 KiB each).
        "small-ec": os.urandom(20 * 1024),
        # Under a stripe: three data cells fitted to it (352 KiB each).
        "fitted-ec": os.urandom(MIB + 5),
        "default-ec": os.urandom(10 * MIB + 12345),
        "explicit-ec": os.urandom(7 * MIB + 1),
        "replicated": os.urandom(2 * MIB + 3),
        # Kept in its meta record: no datanode's loss touches it.
        "inline": os.urandom(100),
    }

    def put(key, replication=None):
        if replication is None:
            return lambda: client.put_object(Bucket=bucket, Key=key, Body=objects[key])
        if key == "replicated":
            # The header through a hand-signed request, so it is surely on the wire.
            def put_raw():
                path = f"/{bucket}/{quote_key(key)}"
                response = raw.request("PUT", path, headers={REPLICATION_HEADER: replication}, body=objects[key])
                assert response.status_code == 200, response.text

            return put_raw
        return lambda: put_with_replication(client, bucket, key, objects[key], replication)

    # A 20 KiB object has two data cells with bytes: the first one's datanode is the victim.
    small = put_placed(cluster, put("small-ec"), lambda placed: len(placed) == 5, "small-ec")
    (victim,) = [node for node, cells in small.items() if any(internal == 0 for internal, _ in cells)]
    put_placed(cluster, put("fitted-ec"), lambda placed: holds_data(placed, victim), "fitted-ec")
    put_placed(cluster, put("default-ec"), lambda placed: holds_data(placed, victim), "default-ec")
    put_placed(cluster, put("explicit-ec", "rs-3-2-1024k"), lambda placed: holds_data(placed, victim), "explicit-ec")
    put_placed(cluster, put("replicated", "replicated-3"), lambda placed: victim in placed, "replicated")
    client.put_object(Bucket=bucket, Key="inline", Body=objects["inline"])
    ec_keys = ["small-ec", "fitted-ec", "default-ec", "explicit-ec"]

    def degraded():
        return metric_total(cluster.gateway_ops, DEGRADED_READS)

    def check_all(when, expect_degraded):
        for key, data in objects.items():
            was = degraded()
            got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert got == data, f"{key} differs {when}"
            rebuilt = degraded() - was
            if expect_degraded and key in ec_keys:
                assert rebuilt >= 1, f"{key} read {when} without a degraded read, though a data cell is lost"
            elif not expect_degraded:
                assert rebuilt == 0, f"{key} read {when}: {rebuilt} degraded reads with every datanode up"
        big = objects["default-ec"]
        start, end = 3 * MIB - 10, 4 * MIB + 10
        ranged = client.get_object(Bucket=bucket, Key="default-ec", Range=f"bytes={start}-{end}")
        assert ranged["Body"].read() == big[start : end + 1], f"range differs {when}"

    check_all("before the kill", expect_degraded=False)
    cluster.kill_datanode(victim)
    check_all(f"after SIGKILL of datanode {victim}", expect_degraded=True)
    # A second read of everything: the dead node is not cached as good.
    check_all("on the second read after the kill", expect_degraded=True)

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


@pytest.mark.parametrize("cluster", ["mutual-tls"], indirect=True)
def test_processes_of_another_ca_are_refused(cluster, tessera_bin, tmp_path):
    """With mutual TLS on, a datanode holding a valid credential but a
    certificate of another CA never registers, and the admin tool with such a
    certificate, or with none, gets nothing from meta."""
    foreign = tmp_path / "foreign"
    make_certs(tessera_bin, foreign, ["intruder", "admin"])
    # Meta of this cluster is not trusted by a client of the other CA.
    with pytest.raises(HarnessError) as distrusted:
        run_admin(cluster.meta, cluster.creds.admin_token, "status", tls=tls_args(foreign, "admin"))
    assert "invalid peer certificate" in str(distrusted.value)
    with pytest.raises(HarnessError) as clear:
        run_admin(cluster.meta, cluster.creds.admin_token, "status")
    assert "--cluster-ca" in str(clear.value)

    refused_before = metric_total(cluster.meta_ops, "tessera_meta_connections_refused_total")
    minted = cluster.admin("credential", "datanode")
    credential = tmp_path / "intruder.credential"
    credential.write_text(minted["credential"])
    credential.chmod(0o600)
    # It trusts this cluster's CA (whose certificate is no secret) but holds
    # a certificate of its own CA.
    flags = tls_args(foreign, "intruder")
    flags[1] = str(cluster.certs / "ca.pem")
    intruder = start_datanode(
        tessera_bin,
        "intruder-dn",
        cluster.meta,
        tmp_path / "intruder",
        credential,
        ["--heartbeat-interval", "200ms", *flags],
        process_env({}),
        tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        while metric_total(cluster.meta_ops, "tessera_meta_connections_refused_total") < refused_before + 3:
            assert time.monotonic() < deadline, "meta refused no connection of the intruder"
            assert intruder.alive(), intruder.describe()
            time.sleep(0.2)
        nodes = find_key(cluster.status(), "datanodes")
        assert len(nodes) == 5, nodes
    finally:
        intruder.kill()
