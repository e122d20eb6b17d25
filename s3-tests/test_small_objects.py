"""Objects smaller than a stripe: an EC object narrower than its layout's
stripe (3 MiB in rs-3-2-1024k) is written with cells fitted to it, so a 1 MiB
object stores 1.69 MiB (three cells of data and two of parity, 352 KiB each)
instead of 3 MiB (one 1 MiB data cell and two 1 MiB parity cells).

The cell each size should get is computed here from the rule (its share of a
stripe, rounded up to 64 KiB, at most the layout's cell), the bytes stored are
summed from the datanodes' block files, and every body is read back whole and
by ranges across the fitted cells.

Smaller still, up to `--inline-max` (16 KiB as stored by default), an object
lives in its meta record and no block file is written at all."""

from __future__ import annotations

import base64
import os
import subprocess

import pytest
from botocore.exceptions import ClientError

from block_files import cells
from tessera_clients import MIB, empty_and_delete, form_post, md5_hex, metric_total, new_bucket_name, s3_client
from tessera_procs import start_server

pytestmark = pytest.mark.tessera

KIB = 1024
REPLICATION_HEADER = "x-tessera-replication"
GRANULE = 16 * KIB
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


@pytest.mark.parametrize("size", [16 * KIB + 1, 64 * KIB, 192 * KIB, 192 * KIB + 1, MIB, MIB + 5, 3 * MIB - 1, 3 * MIB])
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
    return sum(cell.length for node in data_dir.glob("datanode-*") for cell in cells(node))


def test_a_megabyte_object_stores_five_thirds_of_itself(tessera_bin, tmp_path):
    server = start_server(tessera_bin, tmp_path, name="fitted")
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        bucket = new_bucket_name("fitted")
        client.create_bucket(Bucket=bucket)
        for size in (MIB, 100 * KIB, 64 * KIB, 2 * MIB + 1):
            before = block_bytes(server.data_dir)
            client.put_object(Bucket=bucket, Key=f"k{size}", Body=os.urandom(size))
            added = block_bytes(server.data_dir) - before
            assert added == stored_bytes(size), f"{size}: {added} bytes in block files"
        # 1 MiB: 1.69 MiB stored (cells of 352 KiB), where cells of 1 MiB
        # stored 3 MiB.
        assert stored_bytes(MIB) == MIB + 2 * 352 * KIB
        empty_and_delete(client, bucket)
    finally:
        server.proc.terminate()


INLINE_MAX = 16 * KIB  # `--inline-max`'s default


def inline_keys(server) -> float:
    return metric_total(server.ops, "tessera_client_inline_keys_total")


def meta_files_hold(data_dir, needle: bytes) -> bool:
    return any(needle in path.read_bytes() for path in (data_dir / "meta").rglob("*") if path.is_file())


def test_objects_up_to_the_limit_live_in_their_record(tessera_bin, tmp_path):
    """Up to 16 KiB (as stored) an object is kept in its meta record: no block
    file is written, and it reads back whole and by ranges, copied, encrypted,
    versioned, posted from a form, and after a SIGKILL of the server."""
    extra = ("--sse-c-over-http",)
    server = start_server(tessera_bin, tmp_path, name="inline", extra_args=extra)
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        bucket = new_bucket_name("inline")
        client.create_bucket(Bucket=bucket)
        kept: dict[str, bytes] = {}

        def put_inline(key: str, body: bytes, **extra_args) -> dict:
            blocks, inline = block_bytes(server.data_dir), inline_keys(server)
            answer = client.put_object(Bucket=bucket, Key=key, Body=body, **extra_args)
            assert block_bytes(server.data_dir) == blocks, f"{key}: block files written"
            assert inline_keys(server) == inline + 1, key
            return answer

        for size in (1, 1000, INLINE_MAX):
            body = os.urandom(size)
            put = put_inline(f"k{size}", body)
            assert put["ETag"] == f'"{md5_hex(body)}"'
            head = client.head_object(Bucket=bucket, Key=f"k{size}")
            assert head["ContentLength"] == size
            assert head["ResponseMetadata"]["HTTPHeaders"][REPLICATION_HEADER] == "inline"
            assert client.get_object(Bucket=bucket, Key=f"k{size}")["Body"].read() == body
            tail = client.get_object(Bucket=bucket, Key=f"k{size}", Range=f"bytes={size // 2}-")
            assert tail["Body"].read() == body[size // 2 :]
            kept[f"k{size}"] = body

        # One byte over: blocks, laid out as the bucket says.
        blocks, inline = block_bytes(server.data_dir), inline_keys(server)
        over = os.urandom(INLINE_MAX + 1)
        client.put_object(Bucket=bucket, Key="over", Body=over)
        assert block_bytes(server.data_dir) > blocks
        assert inline_keys(server) == inline
        head = client.head_object(Bucket=bucket, Key="over")
        assert head["ResponseMetadata"]["HTTPHeaders"][REPLICATION_HEADER].startswith("rs-3-2-")
        kept["over"] = over

        # A copy of a small object is small too; a copy of a larger one is not.
        blocks, inline = block_bytes(server.data_dir), inline_keys(server)
        client.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "k1000"})
        assert (block_bytes(server.data_dir), inline_keys(server)) == (blocks, inline + 1)
        assert client.get_object(Bucket=bucket, Key="copy")["Body"].read() == kept["k1000"]
        kept["copy"] = kept["k1000"]

        # The record holds the body (base64 in its JSON); encrypted, only sealed.
        assert meta_files_hold(server.data_dir, base64.b64encode(kept["k1000"]))
        secret = os.urandom(1000)
        put_inline("sse-s3", secret, ServerSideEncryption="AES256")
        assert client.get_object(Bucket=bucket, Key="sse-s3")["Body"].read() == secret
        assert not meta_files_hold(server.data_dir, base64.b64encode(secret))
        assert not meta_files_hold(server.data_dir, secret[:64])
        customer = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)}
        put_inline("sse-c", secret, **customer)
        assert client.get_object(Bucket=bucket, Key="sse-c", **customer)["Body"].read() == secret
        with pytest.raises(ClientError) as refused:
            client.get_object(Bucket=bucket, Key="sse-c")
        assert refused.value.response["Error"]["Code"] == "InvalidRequest"
        kept["sse-s3"] = secret

        # Versions: each keeps its own body.
        versioned = new_bucket_name("inline-v")
        client.create_bucket(Bucket=versioned)
        client.put_bucket_versioning(Bucket=versioned, VersioningConfiguration={"Status": "Enabled"})
        first, second = os.urandom(100), os.urandom(200)
        v1 = client.put_object(Bucket=versioned, Key="v", Body=first)["VersionId"]
        client.put_object(Bucket=versioned, Key="v", Body=second)
        client.delete_object(Bucket=versioned, Key="v")
        assert client.get_object(Bucket=versioned, Key="v", VersionId=v1)["Body"].read() == first
        versions = client.list_object_versions(Bucket=versioned)["Versions"]
        assert sorted(v["Size"] for v in versions) == [100, 200]

        # A form's file has no declared length: kept while it fits, else blocks.
        post = client.generate_presigned_post(Bucket=bucket, Key="form/${filename}", ExpiresIn=600)
        small_file, large_file = os.urandom(3000), os.urandom(100 * KIB)
        blocks, inline = block_bytes(server.data_dir), inline_keys(server)
        assert form_post(server, post, small_file, filename="small").status_code == 204
        assert (block_bytes(server.data_dir), inline_keys(server)) == (blocks, inline + 1)
        assert form_post(server, post, large_file, filename="large").status_code == 204
        assert block_bytes(server.data_dir) > blocks and inline_keys(server) == inline + 1
        kept["form/small"], kept["form/large"] = small_file, large_file

        listed = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
        assert {key: listed[key] for key in kept} == {key: len(body) for key, body in kept.items()}

        # Acknowledged means durable: back after a SIGKILL.
        server.proc.kill()
        server = start_server(tessera_bin, tmp_path, name="inline", extra_args=extra, creds=server.creds)
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        for key, body in kept.items():
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        empty_and_delete(client, bucket)
        empty_and_delete(client, versioned)
    finally:
        server.proc.terminate()


def test_an_inline_limit_of_zero_keeps_every_body_in_blocks(tessera_bin, tmp_path):
    server = start_server(tessera_bin, tmp_path, name="no-inline", extra_args=("--inline-max", "0"))
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        bucket = new_bucket_name("no-inline")
        client.create_bucket(Bucket=bucket)
        blocks = block_bytes(server.data_dir)
        client.put_object(Bucket=bucket, Key="k", Body=b"x" * 100)
        assert block_bytes(server.data_dir) > blocks
        assert inline_keys(server) == 0
        assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x" * 100
        empty_and_delete(client, bucket)
    finally:
        server.proc.terminate()


def test_an_inline_limit_over_what_meta_keeps_is_refused(tessera_bin):
    refused = subprocess.run(
        [str(tessera_bin), "server", "--inline-max", "300KiB"], check=False, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0
    assert "over the 262144 bytes meta keeps in a record" in refused.stderr, refused.stderr
