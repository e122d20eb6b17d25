"""Failure domains with separate processes, the datanodes labelled onto
named hosts and racks (`tessera datanode --location /zone/rack/host`):
every datanode of one host SIGKILLed at once loses no object of rs-3-2 or
replication 3; a whole rack SIGKILLed loses no object of rs-6-3; groups
left misplaced by relabelling datanodes onto one host are found and moved.
Each placement is also checked on disk, where `<block>_<index>.data` says
which datanode holds which block file."""

import hashlib
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from block_files import cells as stored_cells
from tessera_clients import MIB, metric_total, new_bucket_name, s3_client
from tessera_procs import HarnessError, find_key, process_env, start_cluster, wait_for
from test_cluster import put_with_replication
from test_crash_safety import restart

pytestmark = pytest.mark.tessera

# Sizes of every shape: kept in the meta record, one fitted cell, fitted
# cells over a stripe, whole stripes and a part-filled one.
SIZES = [100, 20 * 1024, MIB + 5, 3 * MIB, 7 * MIB + 77]


def host_of(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[1]


def rack_of(location: str) -> str:
    return location.strip("/").split("/")[1]


def cells_by_block(work_dir: Path, datanodes: int) -> dict[int, list[tuple[int, int]]]:
    """{block id: [(datanode index, internal index)]} of every committed block file."""
    cells: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for node in range(datanodes):
        for cell in stored_cells(work_dir / f"dn{node}"):
            cells[cell.block].append((node, cell.index))
    return cells


def most_in_one(cells: list[tuple[int, int]], domain_of) -> int:
    """The most block files of one group in one domain."""
    return max(Counter(domain_of(node) for node, _ in cells).values())


def put_all(client, bucket: str, replication: str, copies: int) -> dict[str, str]:
    """`copies` objects of each size in `replication`; {key: sha256}."""
    digests = {}
    for copy in range(copies):
        for size in SIZES:
            key = f"{replication}/{size}/{copy}"
            body = os.urandom(size)
            put_with_replication(client, bucket, key, body, replication)
            digests[key] = hashlib.sha256(body).hexdigest()
    return digests


def read_all(client, bucket: str, digests: dict[str, str], when: str) -> None:
    for key, digest in digests.items():
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert hashlib.sha256(body).hexdigest() == digest, f"{key} differs {when}"


def labelled_cluster(tessera_bin, tmp_path, locations: list[str], meta_args=(), datanode_args=()):
    try:
        return start_cluster(
            tessera_bin,
            tmp_path,
            datanodes=len(locations),
            locations=locations,
            meta_args=meta_args,
            datanode_args=("--heartbeat-interval", "300ms", *datanode_args),
        )
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)


def statuses_show_locations(cluster, locations: list[str]) -> None:
    """Waits until meta lists each datanode at its location (a restarted
    one is listed once its heartbeat is in)."""

    def listed() -> bool:
        nodes = find_key(cluster.status(), "datanodes")
        by_address = {n["address"]: n["location"] for n in nodes}
        return all(
            by_address.get(proc.ready["datanode"]) == location
            for proc, location in zip(cluster.datanodes, locations, strict=True)
        )

    wait_for("every datanode listed at its location", listed, timeout=30)


def test_a_host_lost_whole_loses_no_object(tessera_bin, tmp_path):
    """Eight datanodes on three hosts (3, 3 and 2): no host holds more than
    two block files of an rs-3-2 group, nor two copies of a replicated
    block; all datanodes of the host with the most block files are then
    SIGKILLed at once, before meta could call them dead, and every object
    reads back byte for byte."""
    hosts = ["h1"] * 3 + ["h2"] * 3 + ["h3"] * 2
    locations = [f"/zone-1/rack-{h[-1]}/{h}" for h in hosts]
    cluster = labelled_cluster(tessera_bin, tmp_path, locations)
    try:
        statuses_show_locations(cluster, locations)
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = new_bucket_name("hosts")
        client.create_bucket(Bucket=bucket)
        digests = put_all(client, bucket, "rs-3-2-1024k", copies=4)
        digests |= put_all(client, bucket, "replicated-3", copies=2)

        cells = cells_by_block(tmp_path, len(hosts))
        assert len(cells) == 24, f"{len(cells)} groups on disk"
        for block, held in cells.items():
            limit = 2 if len(held) == 5 else 1
            assert most_in_one(held, lambda n: hosts[n]) <= limit, f"group {block}: {held}"
        per_host = Counter(hosts[n] for held in cells.values() for n, _ in held)
        victim = per_host.most_common(1)[0][0]
        for node, host in enumerate(hosts):
            if host == victim:
                cluster.kill_datanode(node)
        read_all(client, bucket, digests, f"with host {victim} gone")
    finally:
        problems = cluster.stop()
        assert not problems, problems


def test_a_rack_lost_whole_loses_no_rs_6_3_object(tessera_bin, tmp_path):
    """Ten datanodes in three racks of unequal hosts: each rack holds three
    block files of every rs-6-3 group, so every datanode of the largest
    rack SIGKILLed at once loses none of its objects."""
    layout = [("r1", "a"), ("r1", "a"), ("r1", "b"), ("r1", "b")]
    layout += [("r2", "c")] * 3
    layout += [("r3", "d"), ("r3", "e"), ("r3", "f")]
    locations = [f"/zone-1/{rack}/{host}" for rack, host in layout]
    cluster = labelled_cluster(tessera_bin, tmp_path, locations)
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = new_bucket_name("racks")
        client.create_bucket(Bucket=bucket)
        digests = put_all(client, bucket, "rs-6-3-1024k", copies=3)
        cells = cells_by_block(tmp_path, len(layout))
        assert len(cells) >= 12, f"only {len(cells)} groups on disk"
        for block, held in cells.items():
            assert len(held) == 9, f"group {block}: {held}"
            racks = Counter(layout[n][0] for n, _ in held)
            assert sorted(racks.values()) == [3, 3, 3], f"group {block}: {racks}"
        for node, (rack, _) in enumerate(layout):
            if rack == "r1":
                cluster.kill_datanode(node)
        read_all(client, bucket, digests, "with rack r1 gone")
    finally:
        problems = cluster.stop()
        assert not problems, problems


def test_groups_misplaced_by_relabelling_are_found_and_moved(tessera_bin, tmp_path):
    """Six datanodes on six hosts take rs-3-2 groups (one block file a
    host); three of them are then restarted labelled onto one host, which
    leaves about half the groups with three block files there. The scan
    counts them misplaced, one block file of each moves off the crowded
    host (copied, adopted, then deleted where it was), and every object
    still reads back."""
    locations = [f"/zone-1/rack-1/h{i}" for i in range(6)]
    cluster = labelled_cluster(
        tessera_bin,
        tmp_path,
        locations,
        meta_args=("--deletion-delay", "1s", "--stale-after", "2s", "--dead-after", "30s"),
    )
    try:
        client = s3_client(cluster.endpoint, cluster.access_key, cluster.secret_key)
        bucket = new_bucket_name("relabel")
        client.create_bucket(Bucket=bucket)
        digests = put_all(client, bucket, "rs-3-2-1024k", copies=5)
        before = cells_by_block(tmp_path, 6)
        assert all(most_in_one(held, lambda n: n) == 1 for held in before.values())
        crowded = {0, 1, 2}
        expect_misplaced = sum(1 for held in before.values() if crowded <= {n for n, _ in held})
        assert expect_misplaced >= 3, f"only {expect_misplaced} groups would be misplaced"

        relabelled = list(locations)
        env = process_env(cluster.creds.env())
        for node in sorted(crowded):
            relabelled[node] = "/zone-1/rack-1/crowded"
            proc = cluster.datanodes[node]
            proc.terminate()
            argv = list(proc.argv)
            argv[argv.index("--location") + 1] = relabelled[node]
            cluster.datanodes[node] = restart(proc, f"cluster-dn{node}-relabelled", tmp_path, env, argv)
        statuses_show_locations(cluster, relabelled)

        def host(node: int) -> str:
            return host_of(relabelled[node])

        # Moved: on disk no host keeps three block files of a group.
        def mended():
            cells = cells_by_block(tmp_path, 6)
            crowded_groups = [b for b, held in cells.items() if most_in_one(held, host) > 2]
            return not crowded_groups and all(len(held) == 5 for held in cells.values())

        wait_for("every group mended on disk", mended, timeout=180)
        status = wait_for(
            "a scan finding nothing misplaced",
            lambda: (s := cluster.status()) and find_key(s, "block_groups")["misplaced"] == 0 and s,
            timeout=60,
        )
        assert find_key(status, "block_groups")["healthy"] == len(before), status
        # Found and moved by meta: one block file of each crowded group.
        moved = metric_total(cluster.meta_ops, 'tessera_meta_block_files_moved_total{reason="misplaced"}')
        assert moved == expect_misplaced, (moved, expect_misplaced)
        read_all(client, bucket, digests, "after the moves")
    finally:
        problems = cluster.stop()
        assert not problems, problems
