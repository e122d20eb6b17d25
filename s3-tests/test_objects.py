"""PutObject, GetObject, HeadObject, DeleteObject: bytes, ETags, metadata, keys."""

import base64
import hashlib
import os
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from tessera_clients import (
    MIB,
    error_code,
    http_status,
    md5_hex,
    s3_client,
    sha256_hex,
    sha256_of_body,
)


@pytest.mark.parametrize("size", [0, 1, MIB], ids=["0B", "1B", "1MiB"])
def test_put_get_roundtrip(s3, bucket, size):
    body = os.urandom(size)
    put = s3.put_object(Bucket=bucket, Key=f"obj-{size}", Body=body)
    assert put["ETag"] == f'"{md5_hex(body)}"', "single-PUT ETag is the quoted hex MD5"

    got = s3.get_object(Bucket=bucket, Key=f"obj-{size}")
    data = got["Body"].read()
    assert len(data) == size
    assert sha256_hex(data) == sha256_hex(body)
    assert got["ContentLength"] == size
    assert got["ETag"] == put["ETag"]

    head = s3.head_object(Bucket=bucket, Key=f"obj-{size}")
    assert head["ContentLength"] == size
    assert head["ETag"] == put["ETag"]
    assert head["LastModified"] is not None


def test_put_get_100_mib_streamed(s3, bucket, big_file):
    path, expected_sha = big_file
    md5 = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            md5.update(block)
    size = path.stat().st_size

    with open(path, "rb") as f:
        put = s3.put_object(Bucket=bucket, Key="big/100MiB", Body=f)
    assert put["ETag"] == f'"{md5.hexdigest()}"'

    got = s3.get_object(Bucket=bucket, Key="big/100MiB")
    assert got["ContentLength"] == size
    digest, read = sha256_of_body(got["Body"])
    assert read == size
    assert digest == expected_sha


def test_user_metadata_and_content_type_are_kept(s3, bucket):
    metadata = {"color": "blue", "with-dash": "two words"}
    s3.put_object(
        Bucket=bucket,
        Key="meta",
        Body=b"hello",
        ContentType="text/plain; charset=utf-8",
        Metadata=metadata,
    )
    head = s3.head_object(Bucket=bucket, Key="meta")
    assert head["ContentType"] == "text/plain; charset=utf-8"
    assert head["Metadata"] == metadata
    got = s3.get_object(Bucket=bucket, Key="meta")
    assert got["ContentType"] == "text/plain; charset=utf-8"
    assert got["Metadata"] == metadata
    assert got["Body"].read() == b"hello"


def test_standard_headers_are_kept(s3, bucket):
    s3.put_object(
        Bucket=bucket,
        Key="headers",
        Body=b"x",
        CacheControl="max-age=60",
        ContentDisposition='attachment; filename="x.txt"',
        ContentLanguage="en",
    )
    head = s3.head_object(Bucket=bucket, Key="headers")
    assert head["CacheControl"] == "max-age=60"
    assert head["ContentDisposition"] == 'attachment; filename="x.txt"'
    assert head["ContentLanguage"] == "en"


def test_overwrite_returns_new_bytes(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"first version, longer than the second")
    second = s3.put_object(Bucket=bucket, Key="k", Body=b"second")
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"second"
    assert got["ETag"] == second["ETag"] == f'"{md5_hex(b"second")}"'
    listed = s3.list_objects_v2(Bucket=bucket)
    assert [(o["Key"], o["Size"]) for o in listed["Contents"]] == [("k", 6)]


def test_delete_then_get_is_no_such_key(s3, bucket):
    s3.put_object(Bucket=bucket, Key="doomed", Body=b"bye")
    deleted = s3.delete_object(Bucket=bucket, Key="doomed")
    assert http_status(deleted) == 204

    with pytest.raises(ClientError) as get:
        s3.get_object(Bucket=bucket, Key="doomed")
    assert error_code(get.value) == "NoSuchKey"
    assert http_status(get.value) == 404

    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=bucket, Key="doomed")
    assert http_status(head.value) == 404

    # Deleting a key that does not exist succeeds, as in S3.
    assert http_status(s3.delete_object(Bucket=bucket, Key="doomed")) == 204


def test_get_never_written_key_is_no_such_key(s3, bucket):
    with pytest.raises(ClientError) as get:
        s3.get_object(Bucket=bucket, Key="never/written")
    assert error_code(get.value) == "NoSuchKey"


def test_wrong_content_md5_is_bad_digest(s3, bucket):
    wrong = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key="bad-md5", Body=b"the real body", ContentMD5=wrong)
    assert error_code(refused.value) == "BadDigest"
    assert http_status(refused.value) == 400
    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=bucket, Key="bad-md5")
    assert http_status(head.value) == 404, "a refused PUT leaves no object behind"


def test_right_content_md5_is_accepted(s3, bucket):
    body = b"checked body"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    put = s3.put_object(Bucket=bucket, Key="good-md5", Body=body, ContentMD5=good)
    assert put["ETag"] == f'"{md5_hex(body)}"'


ODD_KEYS = [
    "../x",
    "a//b",
    ".",
    "..",
    "a/./b",
    "a/../b",
    "a b+c",
    "q?x=1#h",
    "%2F",
    "a&b<c>'\"",
    "ünïcødé/文件 😀.txt",
    "trailing/",
    "\uff01 full-width",  # U+FF01: sorts before U+1F600 in UTF-8 but after it in UTF-16
    "\U0001f600 emoji",
]


def utf8_sorted(keys):
    return sorted(keys, key=lambda k: k.encode("utf-8"))


def test_odd_keys_are_plain_names(s3, bucket):
    for key in ODD_KEYS:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode("utf-8"))
    for key in ODD_KEYS:
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got["Body"].read() == key.encode("utf-8"), f"key {key!r} returned another object's bytes"

    # boto3 asks for encoding-type=url and decodes the keys itself.
    listed = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in listed["Contents"]] == utf8_sorted(ODD_KEYS)
    assert listed["KeyCount"] == len(ODD_KEYS)


def test_odd_keys_listed_exactly_without_url_encoding(s3, raw, bucket):
    for key in ODD_KEYS:
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    response = raw.request("GET", f"/{bucket}", query="list-type=2")
    assert response.status_code == 200, response.text
    root = ET.fromstring(response.content)
    keys = [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]
    assert keys == utf8_sorted(ODD_KEYS)


def test_non_ascii_metadata_round_trip(server, s3, bucket):
    """S3 keeps non-ASCII metadata decoded and returns it as one RFC 2047
    UTF-8 encoded word: sent encoded (what an ASCII-only client must do) or
    as raw UTF-8 (botocore's ASCII check taken out), it reads back the same."""
    from email.header import decode_header, make_header

    from botocore.handlers import validate_ascii_metadata

    text = "d\u00e9j\u00e0 vu \u2122 \U0001f600"
    encoded = "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="
    s3.put_object(Bucket=bucket, Key="encoded", Body=b"x", Metadata={"title": encoded, "plain": "ascii"})
    raw = s3_client(server.endpoint, server.access_key, server.secret_key)
    raw.meta.events.unregister("before-parameter-build.s3.PutObject", validate_ascii_metadata)
    raw.put_object(Bucket=bucket, Key="raw", Body=b"x", Metadata={"title": text})
    for key in ("encoded", "raw"):
        head = s3.head_object(Bucket=bucket, Key=key)
        assert head["Metadata"]["title"] == encoded, key
        assert str(make_header(decode_header(head["Metadata"]["title"]))) == text
    assert s3.head_object(Bucket=bucket, Key="encoded")["Metadata"]["plain"] == "ascii"
