"""SigV4 authentication, anonymous access, request ids and per-user isolation."""

import uuid

import boto3
import pytest
import requests
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tessera_clients import (
    RawS3,
    empty_and_delete,
    error_code,
    http_status,
    new_bucket_name,
    response_headers,
    s3_client,
    s3_error_code,
)
from tessera_procs import find_key, random_access_key, random_secret


def test_wrong_secret_is_signature_does_not_match(server):
    client = s3_client(server.endpoint, server.access_key, random_secret())
    with pytest.raises(ClientError) as refused:
        client.list_buckets()
    assert error_code(refused.value) == "SignatureDoesNotMatch"
    assert http_status(refused.value) == 403


def test_wrong_secret_on_object_put_is_refused(server, s3, bucket):
    client = s3_client(server.endpoint, server.access_key, random_secret())
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=bucket, Key="forged", Body=b"x")
    assert error_code(refused.value) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=bucket, Key="forged")
    assert http_status(head.value) == 404


def test_unknown_access_key_is_invalid_access_key_id(server):
    client = s3_client(server.endpoint, random_access_key(), random_secret())
    with pytest.raises(ClientError) as refused:
        client.list_buckets()
    assert error_code(refused.value) == "InvalidAccessKeyId"
    assert http_status(refused.value) == 403


def test_anonymous_requests_are_access_denied(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="private", Body=b"top secret bytes")
    anonymous = RawS3(server.endpoint, None, None)
    for method, path in [
        ("GET", "/"),
        ("GET", f"/{bucket}"),
        ("GET", f"/{bucket}/private"),
        ("HEAD", f"/{bucket}/private"),
        ("PUT", f"/{bucket}/anonymous-write"),
        ("DELETE", f"/{bucket}/private"),
    ]:
        response = anonymous.request(method, path, sign=False, body=b"x" if method == "PUT" else b"")
        assert response.status_code == 403, f"{method} {path}: {response.status_code} {response.text}"
        assert "x-amz-request-id" in response.headers
        assert b"top secret" not in response.content
        if method != "HEAD":
            assert s3_error_code(response) == "AccessDenied", f"{method} {path}: {response.text}"
    assert s3.get_object(Bucket=bucket, Key="private")["Body"].read() == b"top secret bytes"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="anonymous-write")


def test_unsigned_boto3_client_is_access_denied(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    unsigned = boto3.session.Session().client(
        "s3",
        endpoint_url=server.endpoint,
        config=Config(signature_version=UNSIGNED, region_name="us-east-1", s3={"addressing_style": "path"}),
    )
    with pytest.raises(ClientError) as refused:
        unsigned.get_object(Bucket=bucket, Key="k")
    assert error_code(refused.value) == "AccessDenied"
    assert http_status(refused.value) == 403


def test_every_response_has_a_request_id(s3, raw, bucket):
    ids = []
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    ids.append(response_headers(put).get("x-amz-request-id"))
    ids.append(response_headers(s3.get_object(Bucket=bucket, Key="k")).get("x-amz-request-id"))
    ids.append(response_headers(s3.head_object(Bucket=bucket, Key="k")).get("x-amz-request-id"))
    ids.append(response_headers(s3.list_buckets()).get("x-amz-request-id"))
    ids.append(response_headers(s3.list_objects_v2(Bucket=bucket)).get("x-amz-request-id"))
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=bucket, Key="missing")
    ids.append(response_headers(missing.value).get("x-amz-request-id"))
    ids.append(raw.request("GET", "/no-such-bucket-here-at-all").headers.get("x-amz-request-id"))
    ids.append(raw.request("GET", "/", sign=False).headers.get("x-amz-request-id"))
    ids.append(response_headers(s3.delete_object(Bucket=bucket, Key="k")).get("x-amz-request-id"))
    assert all(ids), f"responses without x-amz-request-id: {ids}"
    assert len(set(ids)) == len(ids), "request ids are unique"


def test_presigned_get_url(s3, bucket):
    s3.put_object(Bucket=bucket, Key="shared", Body=b"presigned body")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "shared"}, ExpiresIn=300)
    response = requests.get(url, timeout=30)
    assert response.status_code == 200, response.text
    assert response.content == b"presigned body"

    tampered = url.replace("shared", "shared-other", 1)
    response = requests.get(tampered, timeout=30)
    assert response.status_code == 403
    assert s3_error_code(response) == "SignatureDoesNotMatch"


def test_presigned_put_with_an_unsigned_amz_header_is_refused(s3, bucket):
    """A presigned PUT URL plus an unsigned x-amz-copy-source would copy any
    object the signer can read: S3 refuses unsigned x-amz-* headers."""
    s3.put_object(Bucket=bucket, Key="secret", Body=b"not for the link holder")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "drop"}, ExpiresIn=300)
    response = requests.put(url, data=b"", headers={"x-amz-copy-source": f"/{bucket}/secret"}, timeout=30)
    assert response.status_code == 403, response.text
    assert s3_error_code(response) == "AccessDenied"
    assert "<HeadersNotSigned>x-amz-copy-source</HeadersNotSigned>" in response.text
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="drop")
    response = requests.put(url, data=b"as the signer meant", timeout=30)
    assert response.status_code == 200, response.text
    assert s3.get_object(Bucket=bucket, Key="drop")["Body"].read() == b"as the signer meant"


@pytest.fixture
def second_user(server):
    name = f"user-{uuid.uuid4().hex[:12]}"
    created = server.admin("user", "create", name)
    access_key, secret_key = find_key(created, "access_key"), find_key(created, "secret_key")
    assert isinstance(access_key, str) and isinstance(secret_key, str), f"admin user create printed {created}"
    return name, s3_client(server.endpoint, access_key, secret_key)


@pytest.mark.tessera
def test_second_user_cannot_read_or_list_first_users_bucket(s3, bucket, second_user):
    _, other = second_user
    s3.put_object(Bucket=bucket, Key="root-only", Body=b"root data")

    for call in (
        lambda: other.get_object(Bucket=bucket, Key="root-only"),
        lambda: other.list_objects_v2(Bucket=bucket),
        lambda: other.put_object(Bucket=bucket, Key="intruder", Body=b"x"),
        lambda: other.delete_object(Bucket=bucket, Key="root-only"),
        lambda: other.delete_bucket(Bucket=bucket),
        lambda: other.create_multipart_upload(Bucket=bucket, Key="intruder"),
    ):
        with pytest.raises(ClientError) as denied:
            call()
        assert error_code(denied.value) == "AccessDenied"
        assert http_status(denied.value) == 403

    with pytest.raises(ClientError) as head:
        other.head_object(Bucket=bucket, Key="root-only")
    assert http_status(head.value) == 403

    assert bucket not in [b["Name"] for b in other.list_buckets()["Buckets"]]
    assert s3.get_object(Bucket=bucket, Key="root-only")["Body"].read() == b"root data"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="intruder")


@pytest.mark.tessera
def test_second_user_creates_and_uses_its_own_bucket(s3, bucket, second_user):
    _, other = second_user
    own = new_bucket_name("own")
    other.create_bucket(Bucket=own)
    try:
        other.put_object(Bucket=own, Key="hello", Body=b"from the second user")
        assert other.get_object(Bucket=own, Key="hello")["Body"].read() == b"from the second user"
        assert [o["Key"] for o in other.list_objects_v2(Bucket=own)["Contents"]] == ["hello"]
        assert [b["Name"] for b in other.list_buckets()["Buckets"]] == [own]

        # The name of someone else's bucket is taken.
        with pytest.raises(ClientError) as taken:
            other.create_bucket(Bucket=bucket)
        assert error_code(taken.value) == "BucketAlreadyExists"
        assert http_status(taken.value) == 409
    finally:
        empty_and_delete(other, own)
