"""Server-side encryption through boto3 and aws-cli: SSE-S3 bodies of every
size, single or multipart, round-trip whole and by range, are stored sealed
(the plaintext is in no file of the datanodes, as it is for an object stored
in clear), keep their MD5 ETag, copy into and out of encryption, survive a
restart of the server; a bucket's default encryption applies to every kind
of write that asks for none; SSE-C bodies open only with the client's key,
which is never stored and travels only over HTTPS unless the operator
allows it; and what Tessera does not offer yet is refused, never stored in
clear."""

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tessera_clients import AwsCli, error_code, form_post, http_status, md5_b64, md5_hex, rclone, rclone_env, s3_client
from tessera_procs import HarnessError, start_server

PACKAGE = 64 * 1024
MiB = 1024 * 1024
SIZES = [0, 1, PACKAGE - 1, PACKAGE, PACKAGE + 1, 3 * 1024 * 1024 + 7, 9 * 1024 * 1024 + 3]


def code_of(call) -> tuple[int, str]:
    with pytest.raises(ClientError) as err:
        call()
    return http_status(err.value), error_code(err.value)


def body_of(size: int, seed: int = 0) -> bytes:
    return (hashlib.sha256(f"{seed}".encode()).digest() * (size // 32 + 1))[:size]


def put_encrypted(s3, bucket, key, body):
    return s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="AES256")


def test_bodies_of_every_size_round_trip_whole_and_by_range(s3, bucket):
    for size in SIZES:
        body = body_of(size, size)
        key = f"sse-{size}"
        put = put_encrypted(s3, bucket, key, body)
        assert put["ServerSideEncryption"] == "AES256"
        assert put["ETag"] == f'"{md5_hex(body)}"', "the ETag is the plaintext's MD5"
        head = s3.head_object(Bucket=bucket, Key=key)
        assert head["ServerSideEncryption"] == "AES256"
        assert head["ContentLength"] == size
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got["ServerSideEncryption"] == "AES256"
        assert got["Body"].read() == body, size
        if size == 0:
            continue
        edges = {0, 1, PACKAGE - 1, PACKAGE, PACKAGE + 1, size // 2, size - 1}
        for start in sorted(e for e in edges if e < size):
            for end in {start, min(size - 1, start + 1), min(size - 1, start + PACKAGE), size - 1}:
                part = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end}")
                assert part["Body"].read() == body[start : end + 1], (size, start, end)
        tail = s3.get_object(Bucket=bucket, Key=key, Range="bytes=-5")["Body"].read()
        assert tail == body[-5:]
    listed = {o["Key"]: o for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed["sse-65537"]["Size"] == PACKAGE + 1, "listings show the plaintext size"


def files_containing(root: Path, needle: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(path)
    return found


def test_encrypted_bodies_are_not_on_disk_in_clear(tessera_bin, tmp_path):
    own = start_server(tessera_bin, tmp_path, name="sealed")
    try:
        s3 = s3_client(own.endpoint, own.access_key, own.secret_key)
        s3.create_bucket(Bucket="sealed")
        marker = os.urandom(64)
        body = os.urandom(100_000) + marker + os.urandom(100_000)
        s3.put_object(Bucket="sealed", Key="clear", Body=body.replace(marker, marker[::-1]) + marker[::-1])
        put_encrypted(s3, "sealed", "secret", body)
        upload_parts(s3, "sealed", "parted", [os.urandom(5 * MiB), body], ServerSideEncryption="AES256")
        kms_key = own.admin("kms", "key", "create", "sealed")["id"]
        s3.put_object(Bucket="sealed", Key="kms", Body=body, ServerSideEncryption="aws:kms", SSEKMSKeyId=kms_key)
        datanodes = own.data_dir
        # The check can fail: the object stored in clear is found.
        assert files_containing(datanodes, marker[::-1]), "a clear body is visible on disk"
        assert files_containing(datanodes, marker) == []
        master = own.data_dir / "meta" / "sse-master-key"
        assert master.stat().st_mode & 0o077 == 0, "the master key file is private"
        assert s3.get_object(Bucket="sealed", Key="secret")["Body"].read() == body
        assert s3.get_object(Bucket="sealed", Key="parted", PartNumber=2)["Body"].read() == body
    finally:
        assert own.proc.terminate() == 0
    again = start_server(tessera_bin, tmp_path, name="sealed", creds=own.creds)
    try:
        s3 = s3_client(again.endpoint, again.access_key, again.secret_key)
        got = s3.get_object(Bucket="sealed", Key="secret")
        assert got["Body"].read() == body, "the master key opens the body after a restart"
        assert got["ServerSideEncryption"] == "AES256"
        assert s3.get_object(Bucket="sealed", Key="parted", PartNumber=2)["Body"].read() == body
        kms = s3.get_object(Bucket="sealed", Key="kms")
        assert kms["Body"].read() == body, "KMS keys survive a restart"
        assert kms["SSEKMSKeyId"].endswith(f":key/{kms_key}")
    finally:
        assert again.proc.terminate() == 0
    # Without its master key meta refuses to start, rather than make a new
    # key that opens nothing; with the key back, every body reads again.
    master = own.data_dir / "meta" / "sse-master-key"
    saved = master.read_bytes()
    master.unlink()
    with pytest.raises(HarnessError, match="exited with status"):
        start_server(tessera_bin, tmp_path, name="sealed", creds=own.creds)
    assert "the encryption master key" in (tmp_path / "sealed.stderr.log").read_text(), "it says why"
    assert not master.exists(), "no new key was made in its place"
    master.write_bytes(saved)
    master.chmod(0o600)
    restored = start_server(tessera_bin, tmp_path, name="sealed", creds=own.creds)
    try:
        s3 = s3_client(restored.endpoint, restored.access_key, restored.secret_key)
        assert s3.get_object(Bucket="sealed", Key="secret")["Body"].read() == body
    finally:
        assert restored.proc.terminate() == 0


def upload_parts(s3, bucket, key, parts, **create):
    """A multipart upload of `parts` (bodies, in order); answers the
    completion and the plaintext. Part 2, when there is one, is uploaded
    twice, the first body replaced (a new part key each time)."""
    started = s3.create_multipart_upload(Bucket=bucket, Key=key, **create)
    upload = started["UploadId"]
    done = []
    for number, part in enumerate(parts, start=1):
        if number == 2:
            s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=2, Body=part[::-1])
        answer = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=part)
        assert answer.get("ServerSideEncryption") == started.get("ServerSideEncryption")
        done.append({"PartNumber": number, "ETag": answer["ETag"]})
    completed = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done})
    return started, completed, b"".join(parts)


def test_multipart_uploads_are_sealed_part_by_part(s3, raw, bucket):
    parts = [body_of(5 * MiB + 3, 1), body_of(5 * MiB, 2), body_of(PACKAGE + 9, 3)]
    started, completed, body = upload_parts(s3, bucket, "mp", parts, ServerSideEncryption="AES256")
    assert started["ServerSideEncryption"] == "AES256"
    assert completed["ServerSideEncryption"] == "AES256"
    head = s3.head_object(Bucket=bucket, Key="mp")
    assert head["ServerSideEncryption"] == "AES256" and head["ContentLength"] == len(body)
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == body
    first, second = len(parts[0]), len(parts[0]) + len(parts[1])
    for start, end in [
        (first - 1, first),
        (first - PACKAGE - 5, second + 7),
        (second, len(body) - 1),
        (0, len(body) - 1),
        (second - 1, second - 1),
        (first + PACKAGE, first + 2 * PACKAGE - 1),
    ]:
        got = s3.get_object(Bucket=bucket, Key="mp", Range=f"bytes={start}-{end}")["Body"].read()
        assert got == body[start : end + 1], (start, end)
    for number, part in enumerate(parts, start=1):
        got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=number)
        assert got["Body"].read() == part, number
    # Copied whole into clear, and a range of it into another encrypted upload.
    s3.copy_object(Bucket=bucket, Key="mp-clear", CopySource={"Bucket": bucket, "Key": "mp"})
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="mp-clear")
    assert s3.get_object(Bucket=bucket, Key="mp-clear")["Body"].read() == body
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp-copy", ServerSideEncryption="AES256")["UploadId"]
    start, end = first - 100, second + 100
    part = s3.upload_part_copy(
        Bucket=bucket,
        Key="mp-copy",
        UploadId=upload,
        PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "mp"},
        CopySourceRange=f"bytes={start}-{end}",
    )
    assert part["ServerSideEncryption"] == "AES256"
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp-copy",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    got = s3.get_object(Bucket=bucket, Key="mp-copy")
    assert got["ServerSideEncryption"] == "AES256" and got["Body"].read() == body[start : end + 1]
    # An upload part does not take an encryption of its own, as in S3.
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp-x")["UploadId"]
    refused = raw.request(
        "PUT",
        f"/{bucket}/mp-x?partNumber=1&uploadId={upload}",
        body=b"x",
        headers={"x-amz-server-side-encryption": "AES256"},
    )
    assert refused.status_code == 400 and b"<Code>InvalidArgument</Code>" in refused.content, refused.text
    s3.abort_multipart_upload(Bucket=bucket, Key="mp-x", UploadId=upload)


def put_default(s3, bucket, algorithm="AES256", **extra):
    rule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": algorithm, **extra}}
    return s3.put_bucket_encryption(
        Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [{**rule, "BucketKeyEnabled": True}]}
    )


def test_bucket_default_encryption_seals_every_write_that_asks_for_none(server, s3, bucket):
    assert code_of(lambda: s3.get_bucket_encryption(Bucket=bucket)) == (
        404,
        "ServerSideEncryptionConfigurationNotFoundError",
    )
    s3.put_object(Bucket=bucket, Key="before", Body=b"clear")
    put_default(s3, bucket)
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules == [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]
    body = body_of(200_000, 9)
    put = s3.put_object(Bucket=bucket, Key="single", Body=body)
    assert put["ServerSideEncryption"] == "AES256"
    _, completed, parted = upload_parts(s3, bucket, "multi", [body_of(5 * MiB, 4), body])
    assert completed["ServerSideEncryption"] == "AES256"
    copied = s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "before"})
    assert copied["ServerSideEncryption"] == "AES256"
    post = s3.generate_presigned_post(Bucket=bucket, Key="form")
    assert form_post(server, post, body).status_code == 204
    for key, expected in [("single", body), ("multi", parted), ("copied", b"clear"), ("form", body)]:
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got.get("ServerSideEncryption") == "AES256", key
        assert got["Body"].read() == expected, key
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="before"), "earlier objects stay"
    s3.delete_bucket_encryption(Bucket=bucket)
    assert code_of(lambda: s3.get_bucket_encryption(Bucket=bucket))[0] == 404
    assert "ServerSideEncryption" not in s3.put_object(Bucket=bucket, Key="after", Body=b"x")


def test_bucket_encryption_refusals(s3, raw, bucket):
    assert code_of(lambda: put_default(s3, bucket, KMSMasterKeyID="k")) == (400, "InvalidArgument")
    assert code_of(lambda: put_default(s3, bucket, "aws:kms:dsse")) == (501, "NotImplemented")
    assert code_of(lambda: put_default(s3, bucket, "aws:kms", KMSMasterKeyID="alias/no-such-key")) == (
        400,
        "KMS.NotFoundException",
    )
    good = (
        b"<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256"
        b"</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>"
    )
    for document in [
        good.replace(b"AES256", b"DES"),
        b"<ServerSideEncryptionConfiguration></ServerSideEncryptionConfiguration>",
        b"<ServerSideEncryptionConfiguration><Rule>",
    ]:
        answer = raw.request("PUT", f"/{bucket}?encryption", body=document, headers={"Content-MD5": md5_b64(document)})
        assert answer.status_code == 400 and b"<Code>MalformedXML</Code>" in answer.content, answer.text
    unchecked = raw.request("PUT", f"/{bucket}?encryption", body=good)
    assert unchecked.status_code == 400 and b"<Code>InvalidRequest</Code>" in unchecked.content, unchecked.text
    assert code_of(lambda: s3.get_bucket_encryption(Bucket=bucket))[0] == 404, "nothing was stored"


def test_copies_move_between_clear_and_encrypted(s3, bucket):
    body = body_of(5 * 1024 * 1024 + 11, 7)
    put_encrypted(s3, bucket, "enc", body)
    s3.put_object(Bucket=bucket, Key="clear", Body=body)
    source = {"Bucket": bucket, "Key": "enc"}
    to_clear = s3.copy_object(Bucket=bucket, Key="enc-to-clear", CopySource=source)
    assert "ServerSideEncryption" not in to_clear, "a copy does not take its source's encryption"
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="enc-to-clear")
    assert s3.get_object(Bucket=bucket, Key="enc-to-clear")["Body"].read() == body
    to_enc = s3.copy_object(
        Bucket=bucket, Key="clear-to-enc", CopySource={"Bucket": bucket, "Key": "clear"}, ServerSideEncryption="AES256"
    )
    assert to_enc["ServerSideEncryption"] == "AES256"
    got = s3.get_object(Bucket=bucket, Key="clear-to-enc")
    assert got["ServerSideEncryption"] == "AES256" and got["Body"].read() == body
    # Onto itself, changing only the encryption, as S3 allows.
    s3.copy_object(
        Bucket=bucket, Key="clear", CopySource={"Bucket": bucket, "Key": "clear"}, ServerSideEncryption="AES256"
    )
    assert s3.head_object(Bucket=bucket, Key="clear")["ServerSideEncryption"] == "AES256"
    assert s3.get_object(Bucket=bucket, Key="clear")["Body"].read() == body
    # A part copied from an encrypted object holds its plaintext.
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    part = s3.upload_part_copy(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload,
        PartNumber=1,
        CopySource=source,
        CopySourceRange="bytes=10-5242889",
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    assert s3.get_object(Bucket=bucket, Key="assembled")["Body"].read() == body[10:5242890]


def test_aws_cli_writes_and_reads_encrypted(aws, s3, bucket, tmp_path):
    source = tmp_path / "in.bin"
    source.write_bytes(body_of(9 * MiB, 3))  # past aws-cli's multipart threshold
    aws("s3", "cp", str(source), f"s3://{bucket}/cli", "--sse", "AES256")
    assert s3.head_object(Bucket=bucket, Key="cli")["ServerSideEncryption"] == "AES256"
    target = tmp_path / "out.bin"
    aws("s3", "cp", f"s3://{bucket}/cli", str(target))
    assert target.read_bytes() == source.read_bytes()


def test_what_is_not_offered_is_refused_never_stored_in_clear(s3, bucket):
    assert code_of(lambda: s3.put_object(Bucket=bucket, Key="k", Body=b"x", ServerSideEncryption="aws:kms:dsse")) == (
        501,
        "NotImplemented",
    )
    # Customer keys over plain HTTP: refused, as S3 refuses them.
    sse_c = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)}
    assert code_of(lambda: s3.put_object(Bucket=bucket, Key="k", Body=b"x", **sse_c)) == (400, "InvalidRequest")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="k")


def test_unknown_methods_and_read_headers_get_s3_errors(raw, bucket):
    bad = raw.request("PUT", f"/{bucket}/k", body=b"x", headers={"x-amz-server-side-encryption": "aes256"})
    assert bad.status_code == 400 and b"InvalidArgument" in bad.content, bad.text
    raw.request("PUT", f"/{bucket}/k", body=b"x")
    read = raw.request("GET", f"/{bucket}/k", headers={"x-amz-server-side-encryption": "AES256"})
    assert read.status_code == 400 and b"InvalidArgument" in read.content, read.text
    assert "x-amz-server-side-encryption" not in raw.request("HEAD", f"/{bucket}/k").headers


@pytest.fixture(scope="module")
def keys_over_http(tessera_bin, tmp_path_factory):
    """A server that takes SSE-C keys over plain HTTP (as behind a proxy
    that ends TLS), with a bucket."""
    work = tmp_path_factory.mktemp("sse-c")
    own = start_server(tessera_bin, work, name="ssec", extra_args=("--sse-c-over-http",))
    s3 = s3_client(own.endpoint, own.access_key, own.secret_key)
    s3.create_bucket(Bucket="ssec")
    yield own, s3, work
    assert own.proc.terminate() == 0


def customer(key: bytes, prefix: str = "SSECustomer") -> dict:
    return {f"{prefix}Algorithm": "AES256", f"{prefix}Key": key}


def encoded(key: bytes) -> dict:
    """SSE-C parameters as boto3 sends them unchanged (it encodes the key and
    adds its MD5 itself only when no MD5 is given)."""
    return {
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": base64.b64encode(key).decode(),
        "SSECustomerKeyMD5": base64.b64encode(hashlib.md5(key).digest()).decode(),
    }


def test_customer_keys_open_their_bodies_and_nothing_else(keys_over_http):
    _, s3, _ = keys_over_http
    key, other = os.urandom(32), os.urandom(32)
    md5 = base64.b64encode(hashlib.md5(key).digest()).decode()
    for size in [0, 1, PACKAGE + 1, 3 * MiB + 7]:
        body = body_of(size, size + 100)
        name = f"c-{size}"
        put = s3.put_object(Bucket="ssec", Key=name, Body=body, **customer(key))
        assert put["SSECustomerAlgorithm"] == "AES256" and put["SSECustomerKeyMD5"] == md5
        assert "ServerSideEncryption" not in put
        assert put["ETag"] != f'"{md5_hex(body)}"', "an SSE-C ETag confirms no guess of the body"
        got = s3.get_object(Bucket="ssec", Key=name, **customer(key))
        assert got["Body"].read() == body and got["SSECustomerKeyMD5"] == md5
        assert got["ETag"] == put["ETag"]
        head = s3.head_object(Bucket="ssec", Key=name, **customer(key))
        assert head["ContentLength"] == size and head["SSECustomerKeyMD5"] == md5
        if size > 10:
            ranged = s3.get_object(Bucket="ssec", Key=name, Range="bytes=3-9", **customer(key))
            assert ranged["Body"].read() == body[3:10]
    name = f"c-{PACKAGE + 1}"
    assert code_of(lambda: s3.get_object(Bucket="ssec", Key=name)) == (400, "InvalidRequest")
    assert code_of(lambda: s3.head_object(Bucket="ssec", Key=name))[0] == 400
    assert code_of(lambda: s3.get_object(Bucket="ssec", Key=name, **customer(other))) == (403, "AccessDenied")
    assert code_of(lambda: s3.head_object(Bucket="ssec", Key=name, **customer(other)))[0] == 403
    # boto3 leaves GetObjectAttributes' key as given: base64, with its MD5.
    attributes = {"Bucket": "ssec", "Key": name, "ObjectAttributes": ["ObjectSize"]}
    assert code_of(lambda: s3.get_object_attributes(**attributes, **encoded(other))) == (403, "AccessDenied")
    assert code_of(lambda: s3.get_object_attributes(**attributes))[0] == 400
    assert s3.get_object_attributes(**attributes, **encoded(key))["ObjectSize"] == PACKAGE + 1
    # Headers S3 refuses: an MD5 of another key, a key of 128 bits.
    wrong_md5 = {**encoded(key), "SSECustomerKeyMD5": encoded(other)["SSECustomerKeyMD5"]}
    assert code_of(lambda: s3.put_object(Bucket="ssec", Key="bad", Body=b"x", **wrong_md5)) == (
        400,
        "InvalidArgument",
    )
    short = os.urandom(16)
    assert code_of(lambda: s3.put_object(Bucket="ssec", Key="bad", Body=b"x", **customer(short))) == (
        400,
        "InvalidArgument",
    )
    both = {**customer(key), "ServerSideEncryption": "AES256"}
    assert code_of(lambda: s3.put_object(Bucket="ssec", Key="bad", Body=b"x", **both)) == (400, "InvalidArgument")
    s3.put_object(Bucket="ssec", Key="clear", Body=b"clear")
    assert code_of(lambda: s3.get_object(Bucket="ssec", Key="clear", **customer(key))) == (400, "InvalidRequest")
    in_place = {"Bucket": "ssec", "Key": "clear", "CopySource": {"Bucket": "ssec", "Key": "clear"}}
    in_place |= {"MetadataDirective": "REPLACE", **customer(key, "CopySourceSSECustomer")}
    assert code_of(lambda: s3.copy_object(**in_place)) == (400, "InvalidRequest"), "a key for a source without one"
    assert "Contents" not in s3.list_objects_v2(Bucket="ssec", Prefix="bad")


def test_customer_keys_seal_multipart_uploads_and_copies(keys_over_http):
    _, s3, _ = keys_over_http
    key, other = os.urandom(32), os.urandom(32)
    started = s3.create_multipart_upload(Bucket="ssec", Key="mp", **customer(key))
    upload = started["UploadId"]
    assert started["SSECustomerAlgorithm"] == "AES256"
    parts = [body_of(5 * MiB + 1, 11), body_of(PACKAGE * 2 + 3, 12)]
    assert code_of(lambda: s3.upload_part(Bucket="ssec", Key="mp", UploadId=upload, PartNumber=1, Body=b"x")) == (
        400,
        "InvalidRequest",
    ), "a part needs the upload's key"
    assert code_of(
        lambda: s3.upload_part(Bucket="ssec", Key="mp", UploadId=upload, PartNumber=1, Body=b"x", **customer(other))
    ) == (400, "InvalidRequest"), "a part under another key: 400, as S3 answers it"
    done = []
    for number, part in enumerate(parts, start=1):
        answer = s3.upload_part(Bucket="ssec", Key="mp", UploadId=upload, PartNumber=number, Body=part, **customer(key))
        assert answer["SSECustomerAlgorithm"] == "AES256"
        done.append({"PartNumber": number, "ETag": answer["ETag"]})
    s3.complete_multipart_upload(Bucket="ssec", Key="mp", UploadId=upload, MultipartUpload={"Parts": done})
    body = b"".join(parts)
    assert s3.get_object(Bucket="ssec", Key="mp", **customer(key))["Body"].read() == body
    cut = len(parts[0])
    ranged = s3.get_object(Bucket="ssec", Key="mp", Range=f"bytes={cut - 5}-{cut + 5}", **customer(key))
    assert ranged["Body"].read() == body[cut - 5 : cut + 6]
    assert code_of(lambda: s3.get_object(Bucket="ssec", Key="mp", PartNumber=2))[0] == 400
    # Copies: to another customer key, to clear, to SSE-S3, from clear.
    source = {"Bucket": "ssec", "Key": "mp"}
    assert code_of(lambda: s3.copy_object(Bucket="ssec", Key="x", CopySource=source)) == (400, "InvalidRequest")
    rekeyed = s3.copy_object(
        Bucket="ssec", Key="rekeyed", CopySource=source, **customer(key, "CopySourceSSECustomer"), **customer(other)
    )
    assert rekeyed["SSECustomerKeyMD5"] == base64.b64encode(hashlib.md5(other).digest()).decode()
    assert s3.get_object(Bucket="ssec", Key="rekeyed", **customer(other))["Body"].read() == body
    assert code_of(lambda: s3.get_object(Bucket="ssec", Key="rekeyed", **customer(key)))[0] == 403
    s3.copy_object(
        Bucket="ssec",
        Key="to-s3",
        CopySource=source,
        ServerSideEncryption="AES256",
        **customer(key, "CopySourceSSECustomer"),
    )
    got = s3.get_object(Bucket="ssec", Key="to-s3")
    assert got["ServerSideEncryption"] == "AES256" and got["Body"].read() == body
    s3.copy_object(Bucket="ssec", Key="from-clear", CopySource={"Bucket": "ssec", "Key": "to-s3"}, **customer(key))
    assert s3.get_object(Bucket="ssec", Key="from-clear", **customer(key))["Body"].read() == body
    # A part copied out of an SSE-C object into an SSE-C upload of another key.
    upload = s3.create_multipart_upload(Bucket="ssec", Key="assembled", **customer(other))["UploadId"]
    part = s3.upload_part_copy(
        Bucket="ssec",
        Key="assembled",
        UploadId=upload,
        PartNumber=1,
        CopySource=source,
        CopySourceRange=f"bytes=100-{cut + 99}",
        **customer(key, "CopySourceSSECustomer"),
        **customer(other),
    )
    s3.complete_multipart_upload(
        Bucket="ssec",
        Key="assembled",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    assert s3.get_object(Bucket="ssec", Key="assembled", **customer(other))["Body"].read() == body[100 : cut + 100]


def test_customer_keys_are_never_stored(keys_over_http):
    own, s3, work = keys_over_http
    key = os.urandom(32)
    marker = os.urandom(64)
    s3.put_object(Bucket="ssec", Key="never", Body=os.urandom(1000) + marker, **customer(key))
    cli = AwsCli(own.endpoint, own.access_key, own.secret_key, work / "aws")
    (work / "key.bin").write_bytes(key)
    source = work / "cli.bin"
    source.write_bytes(os.urandom(9 * MiB) + marker)
    fileb = f"fileb://{work / 'key.bin'}"
    cli("s3", "cp", str(source), "s3://ssec/cli", "--sse-c", "AES256", "--sse-c-key", fileb)
    cli("s3", "cp", "s3://ssec/cli", str(work / "back.bin"), "--sse-c", "AES256", "--sse-c-key", fileb)
    assert (work / "back.bin").read_bytes() == source.read_bytes()
    for needle in [key, base64.b64encode(key), key.hex().encode(), marker]:
        assert files_containing(own.data_dir, needle) == [], needle
    # The check can fail: the MD5 the server keeps is there.
    assert files_containing(own.data_dir, base64.b64encode(hashlib.md5(key).digest()))


def new_kms_key(server, name: str) -> tuple[str, str]:
    """A key of the built-in KMS, made with `tessera admin kms key create`:
    its id and its alias (`alias/NAME`)."""
    created = server.admin("kms", "key", "create", f"{name}-{os.urandom(4).hex()}")
    return created["id"], created["alias"]


def test_kms_keys_seal_bodies_under_the_key_named(server, s3, bucket):
    key_id, alias = new_kms_key(server, "app")
    assert key_id in [k["id"] for k in server.admin("kms", "key", "list")]
    arn = f"arn:aws:kms:us-east-1:000000000000:key/{key_id}"
    body = body_of(PACKAGE * 3 + 5, 21)
    for name, named in [("by-alias", alias), ("by-id", key_id), ("by-arn", arn)]:
        put = s3.put_object(Bucket=bucket, Key=name, Body=body, ServerSideEncryption="aws:kms", SSEKMSKeyId=named)
        assert put["ServerSideEncryption"] == "aws:kms"
        assert put["SSEKMSKeyId"].endswith(f":key/{key_id}"), put["SSEKMSKeyId"]
        assert put["ETag"] != f'"{md5_hex(body)}"', "an SSE-KMS ETag confirms no guess of the body"
        got = s3.get_object(Bucket=bucket, Key=name, Range="bytes=10-70000")
        assert got["Body"].read() == body[10:70001]
        assert got["ServerSideEncryption"] == "aws:kms" and got["SSEKMSKeyId"] == put["SSEKMSKeyId"]
    # No key named: the default key, aws/s3, made at its first use.
    default = s3.put_object(Bucket=bucket, Key="default", Body=body, ServerSideEncryption="aws:kms")
    default_id = next(k["id"] for k in server.admin("kms", "key", "list") if k["alias"] == "alias/aws/s3")
    assert default["SSEKMSKeyId"].endswith(f":key/{default_id}")
    assert s3.get_object(Bucket=bucket, Key="default")["Body"].read() == body
    # An encryption context is bound to the key and answered back.
    context = base64.b64encode(json.dumps({"app": "billing"}).encode()).decode()
    s3.put_object(
        Bucket=bucket,
        Key="with-context",
        Body=body,
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=key_id,
        SSEKMSEncryptionContext=context,
    )
    head = s3.head_object(Bucket=bucket, Key="with-context")
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-server-side-encryption-context"] == context
    # Refused, and nothing stored: an unknown key, a context that is not a
    # JSON map of strings.
    unknown = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/no-such-key"}
    assert code_of(lambda: s3.put_object(Bucket=bucket, Key="bad", Body=b"x", **unknown)) == (
        400,
        "KMS.NotFoundException",
    )
    assert code_of(lambda: s3.create_multipart_upload(Bucket=bucket, Key="bad", **unknown))[1] == (
        "KMS.NotFoundException"
    )
    bad_context = base64.b64encode(b'{"n": 1}').decode()
    assert code_of(
        lambda: s3.put_object(
            Bucket=bucket, Key="bad", Body=b"x", ServerSideEncryption="aws:kms", SSEKMSEncryptionContext=bad_context
        )
    ) == (400, "InvalidArgument")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="bad")
    # A taken alias is refused by the admin command.
    with pytest.raises(HarnessError):
        server.admin("kms", "key", "create", alias.removeprefix("alias/"))


def test_kms_multipart_copies_and_bucket_default(server, s3, bucket):
    key_id, alias = new_kms_key(server, "mp")
    kms = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": key_id}
    parts = [body_of(5 * MiB + 9, 31), body_of(PACKAGE + 1, 32)]
    started, completed, body = upload_parts(s3, bucket, "kms-mp", parts, **kms)
    assert started["ServerSideEncryption"] == "aws:kms" and completed["SSEKMSKeyId"].endswith(key_id)
    # The encryption is the upload's: S3 refuses the header on a part, naming it.
    upload = s3.create_multipart_upload(Bucket=bucket, Key="kms-part", **kms)["UploadId"]

    def add_sse(request, **_):
        request.headers["x-amz-server-side-encryption"] = "aws:kms"

    s3.meta.events.register("before-sign.s3.UploadPart", add_sse, unique_id="sse-on-part")
    try:
        with pytest.raises(ClientError) as refused:
            s3.upload_part(Bucket=bucket, Key="kms-part", UploadId=upload, PartNumber=1, Body=b"x")
    finally:
        s3.meta.events.unregister("before-sign.s3.UploadPart", unique_id="sse-on-part")
    error = refused.value.response["Error"]
    assert (error["Code"], error["ArgumentName"], error["ArgumentValue"]) == (
        "InvalidArgument",
        "x-amz-server-side-encryption",
        "aws:kms",
    )
    s3.abort_multipart_upload(Bucket=bucket, Key="kms-part", UploadId=upload)
    cut = len(parts[0])
    got = s3.get_object(Bucket=bucket, Key="kms-mp", Range=f"bytes={cut - 3}-{cut + 3}")
    assert got["Body"].read() == body[cut - 3 : cut + 4] and got["ServerSideEncryption"] == "aws:kms"
    to_s3 = s3.copy_object(
        Bucket=bucket, Key="to-s3", CopySource={"Bucket": bucket, "Key": "kms-mp"}, ServerSideEncryption="AES256"
    )
    assert to_s3["ServerSideEncryption"] == "AES256"
    assert s3.get_object(Bucket=bucket, Key="to-s3")["Body"].read() == body
    back = s3.copy_object(Bucket=bucket, Key="back", CopySource={"Bucket": bucket, "Key": "to-s3"}, **kms)
    assert back["SSEKMSKeyId"].endswith(key_id)
    assert s3.get_object(Bucket=bucket, Key="back")["Body"].read() == body
    # A bucket default of aws:kms with a key: every write that asks for none.
    put_default(s3, bucket, "aws:kms", KMSMasterKeyID=alias)
    rule = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert rule["ApplyServerSideEncryptionByDefault"]["KMSMasterKeyID"] == alias
    plain = s3.put_object(Bucket=bucket, Key="defaulted", Body=b"by default")
    assert plain["ServerSideEncryption"] == "aws:kms" and plain["SSEKMSKeyId"].endswith(key_id)
    assert s3.get_object(Bucket=bucket, Key="defaulted")["Body"].read() == b"by default"


@pytest.mark.skipif(shutil.which("rclone") is None, reason="rclone is not installed (apt-get install rclone)")
def test_rclone_writes_and_reads_sse_s3_and_sse_kms(keys_over_http, tmp_path):
    """(rclone sends SSE-C keys over HTTPS only: test_tls.py has that case.)"""
    own, s3, _ = keys_over_http
    source = tmp_path / "source"
    source.mkdir()
    files = {"small.bin": os.urandom(1000), "big.bin": os.urandom(6 * MiB + 5)}
    for name, data in files.items():
        (source / name).write_bytes(data)
    key_id, _ = new_kms_key(own, "rclone")
    modes = {
        "sse-s3": (["--s3-server-side-encryption", "AES256"], {}),
        "sse-kms": (["--s3-server-side-encryption", "aws:kms", "--s3-sse-kms-key-id", key_id], {}),
    }
    env = rclone_env(own.endpoint, own.access_key, own.secret_key, tmp_path)
    for mode, (flags, read_with) in modes.items():
        # Small chunks so the big file goes up as a multipart upload.
        target = f"tessera:ssec/rclone-{mode}"
        rclone(env, "copy", "--s3-upload-cutoff", "1M", "--s3-chunk-size", "5M", *flags, str(source), target)
        head = s3.head_object(Bucket="ssec", Key=f"rclone-{mode}/big.bin", **read_with)
        expected = {"sse-s3": "AES256", "sse-kms": "aws:kms"}.get(mode)
        assert head.get("ServerSideEncryption") == expected, (mode, head)
        assert (head.get("SSECustomerAlgorithm") == "AES256") == (mode == "sse-c")
        back = tmp_path / f"back-{mode}"
        rclone(env, "copy", *flags, target, str(back))
        for name, data in files.items():
            assert (back / name).read_bytes() == data, (mode, name)
