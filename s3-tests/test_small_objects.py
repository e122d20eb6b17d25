"""Objects smaller than a stripe: an EC object narrower than its layout's
stripe (3 MiB in rs-3-2-1024k) is written with cells fitted to it, so a 1 MiB
object stores 1.75 MiB (three cells of data and two of parity, 384 KiB each)
instead of 3 MiB (one 1 MiB data cell and two 1 MiB parity cells).

The cell each size should get is computed here from the rule (its share of a
stripe, rounded up to 64 KiB, at most the layout's cell), the bytes stored are
summed from the datanodes' block files, and every body is read back whole and
by ranges across the fitted cells."""

from __future__ import annotations

import os

import pytest

from tessera_clients import MIB, empty_and_delete, new_bucket_name, s3_client
from tessera_procs import start_server

pytestmark = pytest.mark.tessera

KIB = 1024
REPLICATION_HEADER = "x-tessera-replication"
GRANULE = 64 * KIB
DATA, PARITY, CELL = 3, 2, MIB


def fitted_cell(size: int) -> int:
    if size >= DATA * CELL:
        return CELL
    share = max(1, -(-size // DATA))
    return min(CELL, -(-share // GRANULE) * GRANULE)


def stored_bytes(size: int) -> int:
    """Block file bytes of an rs-3-2 object of `size` bytes with fitted cells:
    the data as it is, and each parity block as long as the longest data block."""
    cell = fitted_cell(size)
    stripe = DATA * cell
    full, rest = divmod(size, stripe)
    parity_per_stripe = cell if full else 0
    last_parity = min(rest, cell)
    return size + PARITY * (full * parity_per_stripe + last_parity)


@pytest.mark.parametrize("size", [1, 1000, 64 * KIB, 192 * KIB, 192 * KIB + 1, MIB, MIB + 5, 3 * MIB - 1, 3 * MIB])
def test_a_small_object_gets_cells_fitted_to_it(s3, bucket, size):
    body = os.urandom(size)
    s3.put_object(Bucket=bucket, Key="k", Body=body)
    head = s3.head_object(Bucket=bucket, Key="k")
    replication = head["ResponseMetadata"]["HTTPHeaders"][REPLICATION_HEADER]
    assert replication == f"rs-3-2-{fitted_cell(size) // KIB}k"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body
    cell = fitted_cell(size)
    for start, end in ((cell - 7, cell + 7), (2 * cell - 1, 2 * cell), (size - 3, size - 1)):
        if 0 <= start <= end < size:
            got = s3.get_object(Bucket=bucket, Key="k", Range=f"bytes={start}-{end}")["Body"].read()
            assert got == body[start : end + 1], (start, end)


def block_bytes(data_dir) -> int:
    total = 0
    for node in data_dir.glob("datanode-*"):
        for path in (node / "blocks").rglob("*.data"):
            total += path.stat().st_size
    return total


def test_a_megabyte_object_stores_five_thirds_of_itself(tessera_bin, tmp_path):
    server = start_server(tessera_bin, tmp_path, name="fitted")
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        bucket = new_bucket_name("fitted")
        client.create_bucket(Bucket=bucket)
        for size in (MIB, 100 * KIB, 2 * MIB + 1):
            before = block_bytes(server.data_dir)
            client.put_object(Bucket=bucket, Key=f"k{size}", Body=os.urandom(size))
            added = block_bytes(server.data_dir) - before
            assert added == stored_bytes(size), f"{size}: {added} bytes in block files"
        # 1 MiB: 1.75 MiB stored, where cells of 1 MiB stored 3 MiB.
        assert stored_bytes(MIB) == 7 * MIB // 4
        empty_and_delete(client, bucket)
    finally:
        server.proc.terminate()
