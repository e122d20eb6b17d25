"""CopyObject and UploadPartCopy: metadata directives, copy-source
conditions, URL-encoded source keys, copies across buckets, a copy onto
itself, a large copy streamed through the gateway, and aws-cli's `s3 cp`
between S3 locations."""

import hashlib
import os
import uuid

import pytest
from botocore.exceptions import ClientError

from tessera_clients import MIB, empty_and_delete, error_code, http_status, md5_hex, new_bucket_name, s3_client


def put(s3, bucket, key, data, **kwargs):
    return s3.put_object(Bucket=bucket, Key=key, Body=data, **kwargs)


def test_copy_keeps_metadata_and_returns_copy_result(s3, bucket):
    data = os.urandom(100_000)
    put(s3, bucket, "src", data, ContentType="text/x-src", Metadata={"color": "blue"}, CacheControl="no-cache")
    reply = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert reply["CopyObjectResult"]["ETag"] == f'"{md5_hex(data)}"'
    assert reply["CopyObjectResult"]["LastModified"] is not None
    got = s3.get_object(Bucket=bucket, Key="dst")
    assert got["Body"].read() == data
    assert got["ContentType"] == "text/x-src"
    assert got["Metadata"] == {"color": "blue"}
    assert got["CacheControl"] == "no-cache"


def test_copy_replace_directive_sets_new_metadata(s3, bucket):
    put(s3, bucket, "src", b"hello", ContentType="text/plain", Metadata={"a": "1"})
    s3.copy_object(
        Bucket=bucket,
        Key="dst",
        CopySource=f"{bucket}/src",
        MetadataDirective="REPLACE",
        ContentType="application/json",
        Metadata={"b": "2"},
    )
    head = s3.head_object(Bucket=bucket, Key="dst")
    assert head["ContentType"] == "application/json"
    assert head["Metadata"] == {"b": "2"}


def test_copy_across_buckets_with_encoded_key_and_null_version(s3, bucket):
    other = new_bucket_name()
    s3.create_bucket(Bucket=other)
    try:
        key = "dir/with space/ü+?&.bin"
        data = os.urandom(4096)
        put(s3, bucket, key, data)
        s3.copy_object(Bucket=other, Key="copied", CopySource={"Bucket": bucket, "Key": key, "VersionId": "null"})
        assert s3.get_object(Bucket=other, Key="copied")["Body"].read() == data
    finally:
        empty_and_delete(s3, other)


def test_copy_onto_itself_needs_replace(s3, bucket):
    put(s3, bucket, "self", b"same bytes", Metadata={"v": "1"})
    with pytest.raises(ClientError) as err:
        s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"})
    assert error_code(err.value) == "InvalidRequest"
    assert http_status(err.value) == 400
    s3.copy_object(
        Bucket=bucket,
        Key="self",
        CopySource={"Bucket": bucket, "Key": "self"},
        MetadataDirective="REPLACE",
        Metadata={"v": "2"},
    )
    got = s3.get_object(Bucket=bucket, Key="self")
    assert got["Metadata"] == {"v": "2"}
    assert got["Body"].read() == b"same bytes"


def test_copy_source_conditions(s3, bucket):
    reply = put(s3, bucket, "src", b"conditional")
    etag = reply["ETag"]
    src = {"Bucket": bucket, "Key": "src"}
    s3.copy_object(Bucket=bucket, Key="ok", CopySource=src, CopySourceIfMatch=etag)
    for kwargs in (
        {"CopySourceIfMatch": '"00000000000000000000000000000000"'},
        {"CopySourceIfNoneMatch": etag},
        {"CopySourceIfModifiedSince": "2100-01-01T00:00:00Z"},
        {"CopySourceIfUnmodifiedSince": "2000-01-01T00:00:00Z"},
    ):
        with pytest.raises(ClientError) as err:
            s3.copy_object(Bucket=bucket, Key="no", CopySource=src, **kwargs)
        assert error_code(err.value) == "PreconditionFailed", kwargs
        assert http_status(err.value) == 412
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key="no")
    assert http_status(err.value) == 404


def test_copy_missing_source_and_bad_version(s3, bucket):
    with pytest.raises(ClientError) as err:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "absent"})
    assert error_code(err.value) == "NoSuchKey"
    put(s3, bucket, "src", b"x")
    with pytest.raises(ClientError) as err:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src", "VersionId": "v2"})
    assert error_code(err.value) == "InvalidArgument"


def test_large_copy_streams_through(s3, bucket):
    data = os.urandom(40 * MIB + 123)
    put(s3, bucket, "big", data)
    s3.copy_object(Bucket=bucket, Key="big-copy", CopySource={"Bucket": bucket, "Key": "big"})
    body = s3.get_object(Bucket=bucket, Key="big-copy")["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()


def test_upload_part_copy_with_ranges(s3, bucket):
    data = os.urandom(12 * MIB)
    put(s3, bucket, "src", data)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    first = s3.upload_part_copy(
        Bucket=bucket, Key="assembled", UploadId=upload, PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=f"bytes=0-{6 * MIB - 1}",
    )
    assert first["CopyPartResult"]["ETag"] == f'"{md5_hex(data[: 6 * MIB])}"'
    second = s3.upload_part_copy(
        Bucket=bucket, Key="assembled", UploadId=upload, PartNumber=2,
        CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=f"bytes={6 * MIB}-{12 * MIB - 1}",
    )
    with pytest.raises(ClientError) as err:
        s3.upload_part_copy(
            Bucket=bucket, Key="assembled", UploadId=upload, PartNumber=3,
            CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=f"bytes=0-{12 * MIB}",
        )
    # S3's answer to a range past the source (seen from aws-cli).
    assert http_status(err.value) == 400
    assert error_code(err.value) == "InvalidArgument"
    assert f"source object of size: {12 * MIB}" in err.value.response["Error"]["Message"]
    # A range not of the form bytes=first-last is another InvalidArgument.
    for improper in ("0-2", "bytes=0", "bytes=hello-world", "bytes=0-bar", "bytes=hello-", "bytes=0-2,3-5"):
        with pytest.raises(ClientError) as err:
            s3.upload_part_copy(
                Bucket=bucket, Key="assembled", UploadId=upload, PartNumber=3,
                CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=improper,
            )
        assert (http_status(err.value), error_code(err.value)) == (400, "InvalidArgument"), improper
        assert "bytes=first-last" in err.value.response["Error"]["Message"]
    parts = [
        {"PartNumber": 1, "ETag": first["CopyPartResult"]["ETag"]},
        {"PartNumber": 2, "ETag": second["CopyPartResult"]["ETag"]},
    ]
    s3.complete_multipart_upload(Bucket=bucket, Key="assembled", UploadId=upload, MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key="assembled")["Body"].read() == data


def test_aws_cli_copies_between_keys(aws, s3, bucket):
    data = os.urandom(2 * MIB)
    put(s3, bucket, "cli/src", data, Metadata={"k": "v"})
    aws("s3", "cp", f"s3://{bucket}/cli/src", f"s3://{bucket}/cli/dst")
    aws("s3api", "copy-object", "--bucket", bucket, "--key", "cli/api", "--copy-source", f"{bucket}/cli/src")
    for key in ("cli/dst", "cli/api"):
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got["Body"].read() == data
    assert s3.head_object(Bucket=bucket, Key="cli/api")["Metadata"] == {"k": "v"}


def test_standard_headers_survive_copy_and_get_overrides(s3, bucket):
    put(
        s3, bucket, "h", b"x", ContentType="text/plain", ContentDisposition="inline", ContentEncoding="identity",
        ContentLanguage="en", CacheControl="max-age=5", Expires="Wed, 21 Oct 2037 07:28:00 GMT",
    )
    s3.copy_object(Bucket=bucket, Key="h2", CopySource={"Bucket": bucket, "Key": "h"})
    head = s3.head_object(Bucket=bucket, Key="h2")
    assert (head["ContentType"], head["ContentDisposition"], head["ContentEncoding"]) == (
        "text/plain", "inline", "identity")
    assert (head["ContentLanguage"], head["CacheControl"]) == ("en", "max-age=5")
    assert head["ResponseMetadata"]["HTTPHeaders"]["expires"] == "Wed, 21 Oct 2037 07:28:00 GMT"
    got = s3.get_object(
        Bucket=bucket, Key="h2", ResponseContentType="application/x-over", ResponseContentDisposition="attachment",
        ResponseContentEncoding="gzip", ResponseContentLanguage="fr", ResponseCacheControl="no-store",
        ResponseExpires="Thu, 01 Jan 2099 00:00:00 GMT",
    )
    assert got["ContentType"] == "application/x-over"
    assert got["ContentDisposition"] == "attachment"
    assert got["ContentEncoding"] == "gzip"
    assert got["ContentLanguage"] == "fr"
    assert got["CacheControl"] == "no-store"
    assert got["ResponseMetadata"]["HTTPHeaders"]["expires"] == "Thu, 01 Jan 2099 00:00:00 GMT"


def test_copy_replace_metadata_is_limited_to_2kb(s3, bucket):
    put(s3, bucket, "src", b"x")
    with pytest.raises(ClientError) as err:
        s3.copy_object(
            Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"},
            MetadataDirective="REPLACE", Metadata={"big": "v" * 2100},
        )
    assert error_code(err.value) == "MetadataTooLarge"


def test_aws_cli_multipart_copy_uses_part_copies(aws, s3, bucket):
    """aws-cli copies objects over its 8 MiB threshold with UploadPartCopy and ranges."""
    data = os.urandom(20 * MIB + 5)
    put(s3, bucket, "cli/big", data)
    aws("s3", "cp", f"s3://{bucket}/cli/big", f"s3://{bucket}/cli/big-copy")
    got = s3.get_object(Bucket=bucket, Key="cli/big-copy")
    assert got["ETag"].endswith('-3"'), got["ETag"]
    assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(data).digest()


@pytest.fixture(scope="module")
def copy_limits(server):
    """A user owning a secret and a shared bucket, and a key limited to
    read-write in the shared bucket only."""
    user = f"u{uuid.uuid4().hex[:10]}"
    created = server.admin("user", "create", user)
    owner = s3_client(server.endpoint, created["access_key"], created["secret_key"])
    secret, shared = new_bucket_name("secret"), new_bucket_name("shared")
    owner.create_bucket(Bucket=secret)
    owner.create_bucket(Bucket=shared)
    owner.put_object(Bucket=secret, Key="k", Body=b"not for the limited key")
    owner.put_object(Bucket=shared, Key="k", Body=b"shared bytes")
    limited = server.admin("key", "create", user, "--limit", f"{shared}:rw")
    yield {
        "owner": owner,
        "limited": s3_client(server.endpoint, limited["access_key"], limited["secret_key"]),
        "secret": secret,
        "shared": shared,
    }
    empty_and_delete(owner, secret)
    empty_and_delete(owner, shared)


def access_denied(call, **kwargs):
    with pytest.raises(ClientError) as refused:
        call(**kwargs)
    assert error_code(refused.value) == "AccessDenied", refused.value
    assert http_status(refused.value) == 403


@pytest.mark.tessera
def test_copy_needs_read_access_to_the_source_bucket(copy_limits):
    limited, secret, shared = copy_limits["limited"], copy_limits["secret"], copy_limits["shared"]
    # Within the bucket it may reach, the key copies.
    limited.copy_object(Bucket=shared, Key="copy", CopySource={"Bucket": shared, "Key": "k"})
    assert limited.get_object(Bucket=shared, Key="copy")["Body"].read() == b"shared bytes"
    # It may write the destination but not read the source: refused, nothing written.
    access_denied(limited.copy_object, Bucket=shared, Key="stolen", CopySource={"Bucket": secret, "Key": "k"})
    upload = limited.create_multipart_upload(Bucket=shared, Key="stolen-part")["UploadId"]
    try:
        access_denied(
            limited.upload_part_copy,
            Bucket=shared,
            Key="stolen-part",
            UploadId=upload,
            PartNumber=1,
            CopySource={"Bucket": secret, "Key": "k"},
        )
        assert limited.list_parts(Bucket=shared, Key="stolen-part", UploadId=upload).get("Parts", []) == []
    finally:
        limited.abort_multipart_upload(Bucket=shared, Key="stolen-part", UploadId=upload)
    keys = [o["Key"] for o in copy_limits["owner"].list_objects_v2(Bucket=shared)["Contents"]]
    assert keys == ["copy", "k"]


@pytest.mark.tessera
def test_copy_from_another_users_bucket_is_refused(server, s3, bucket):
    put(s3, bucket, "private", b"root's bytes")
    name = f"user-{uuid.uuid4().hex[:12]}"
    created = server.admin("user", "create", name)
    other = s3_client(server.endpoint, created["access_key"], created["secret_key"])
    own = new_bucket_name("own")
    other.create_bucket(Bucket=own)
    try:
        access_denied(other.copy_object, Bucket=own, Key="taken", CopySource={"Bucket": bucket, "Key": "private"})
        assert other.list_objects_v2(Bucket=own).get("KeyCount") == 0
    finally:
        empty_and_delete(other, own)
