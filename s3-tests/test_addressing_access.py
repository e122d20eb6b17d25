"""Virtual-hosted-style addressing (`--domain`), access keys limited to some
buckets (`tessera admin key limit`), and anonymous reads of public-read
buckets (`tessera admin bucket public-read`)."""

import time
import uuid

import pytest
from botocore.exceptions import ClientError

from tessera_clients import (
    RawS3,
    empty_and_delete,
    error_code,
    http_status,
    new_bucket_name,
    s3_client,
    s3_error_code,
)
from tessera_procs import start_server

pytestmark = pytest.mark.tessera

DOMAIN = "s3.tessera.test"


@pytest.fixture(scope="module")
def hosted(tessera_bin, tmp_path_factory):
    """A server that also serves `bucket.s3.tessera.test` (virtual-hosted style)."""
    srv = start_server(
        tessera_bin, tmp_path_factory.mktemp("hosted"), name="hosted", extra_args=("--domain", DOMAIN)
    )
    yield srv
    srv.proc.terminate()


def port_of(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[1].rstrip("/")


def test_virtual_hosted_and_path_style_reach_the_same_object(hosted):
    s3 = s3_client(hosted.endpoint, hosted.access_key, hosted.secret_key)
    bucket = new_bucket_name("vh")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="dir/a b.txt", Body=b"hosted bytes")
    raw = RawS3(hosted.endpoint, hosted.access_key, hosted.secret_key)
    host = f"{bucket}.{DOMAIN}:{port_of(hosted.endpoint)}"
    got = raw.request("GET", "/dir/a%20b.txt", headers={"Host": host})
    assert got.status_code == 200, got.text
    assert got.content == b"hosted bytes"
    listed = raw.request("GET", "/", query="list-type=2", headers={"Host": host})
    assert listed.status_code == 200, listed.text
    assert b"<Key>dir/a b.txt</Key>" in listed.content
    assert f"<Name>{bucket}</Name>".encode() in listed.content
    # A PUT through the virtual host is visible path style.
    put = raw.request("PUT", "/via-host", headers={"Host": host}, body=b"v")
    assert put.status_code == 200, put.text
    assert s3.get_object(Bucket=bucket, Key="via-host")["Body"].read() == b"v"
    # The bare domain is the service: ListBuckets.
    service = raw.request("GET", "/", headers={"Host": f"{DOMAIN}:{port_of(hosted.endpoint)}"})
    assert service.status_code == 200 and bucket.encode() in service.content
    empty_and_delete(s3, bucket)


def test_virtual_hosted_missing_bucket_is_no_such_bucket(hosted):
    raw = RawS3(hosted.endpoint, hosted.access_key, hosted.secret_key)
    host = f"no-such-{uuid.uuid4().hex[:8]}.{DOMAIN}:{port_of(hosted.endpoint)}"
    response = raw.request("GET", "/k", headers={"Host": host})
    assert response.status_code == 404
    assert s3_error_code(response) == "NoSuchBucket"


@pytest.fixture(scope="module")
def limited(server, s3):
    """Two buckets, a user owning both, and keys limited to one of them."""
    user = f"u{uuid.uuid4().hex[:10]}"
    created = server.admin("user", "create", user)
    owner = s3_client(server.endpoint, created["access_key"], created["secret_key"])
    readable, other = new_bucket_name("ro"), new_bucket_name("other")
    owner.create_bucket(Bucket=readable)
    owner.create_bucket(Bucket=other)
    owner.put_object(Bucket=readable, Key="k", Body=b"readable")
    owner.put_object(Bucket=other, Key="k", Body=b"other")
    reader = server.admin("key", "create", user, "--limit", f"{readable}:read")
    writer = server.admin("key", "create", user, "--limit", f"{readable}:rw")
    yield {
        "owner": owner,
        "reader": s3_client(server.endpoint, reader["access_key"], reader["secret_key"]),
        "reader_key": reader["access_key"],
        "writer": s3_client(server.endpoint, writer["access_key"], writer["secret_key"]),
        "readable": readable,
        "other": other,
    }
    empty_and_delete(owner, readable)
    empty_and_delete(owner, other)


def denied(call, *args, **kwargs):
    with pytest.raises(ClientError) as refused:
        call(*args, **kwargs)
    assert error_code(refused.value) == "AccessDenied", refused.value
    assert http_status(refused.value) == 403


def test_read_limited_key_reads_only_its_bucket(limited):
    reader, readable, other = limited["reader"], limited["readable"], limited["other"]
    assert reader.get_object(Bucket=readable, Key="k")["Body"].read() == b"readable"
    assert [o["Key"] for o in reader.list_objects_v2(Bucket=readable)["Contents"]] == ["k"]
    denied(reader.put_object, Bucket=readable, Key="new", Body=b"x")
    denied(reader.delete_object, Bucket=readable, Key="k")
    denied(reader.get_object, Bucket=other, Key="k")
    denied(reader.list_objects_v2, Bucket=other)
    denied(reader.create_bucket, Bucket=new_bucket_name("nope"))
    # ListBuckets shows only the buckets the key may reach.
    assert [b["Name"] for b in reader.list_buckets()["Buckets"]] == [readable]
    # Nothing was changed by the refused calls.
    assert limited["owner"].get_object(Bucket=readable, Key="k")["Body"].read() == b"readable"


def test_read_write_limited_key_writes_its_bucket_only(limited):
    writer, readable, other = limited["writer"], limited["readable"], limited["other"]
    writer.put_object(Bucket=readable, Key="written", Body=b"w")
    assert writer.get_object(Bucket=readable, Key="written")["Body"].read() == b"w"
    writer.delete_object(Bucket=readable, Key="written")
    denied(writer.put_object, Bucket=other, Key="written", Body=b"w")


def until_allowed(call, *args, **kwargs):
    """The gateway trusts a looked-up key for a few seconds (auth/cache.rs),
    so a changed limit applies within that time, not at once."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return call(*args, **kwargs)
        except ClientError as exc:
            if error_code(exc) != "AccessDenied" or time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def test_limit_can_be_changed_and_lifted(server, limited):
    reader, other = limited["reader"], limited["other"]
    server.admin("key", "limit", limited["reader_key"], "--bucket", f"{other}:read")
    assert until_allowed(reader.get_object, Bucket=other, Key="k")["Body"].read() == b"other"
    denied(reader.get_object, Bucket=limited["readable"], Key="k")
    server.admin("key", "limit", limited["reader_key"], "--unlimited")
    until_allowed(reader.put_object, Bucket=other, Key="free", Body=b"f")
    reader.delete_object(Bucket=other, Key="free")
    server.admin("key", "limit", limited["reader_key"], "--bucket", f"{limited['readable']}:read")
    until_allowed(reader.get_object, Bucket=limited["readable"], Key="k")


def test_public_read_bucket_serves_anonymous_reads_only(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="pub/a.txt", Body=b"public bytes")
    anonymous = RawS3(server.endpoint, None, None)
    assert anonymous.request("GET", f"/{bucket}/pub/a.txt", sign=False).status_code == 403
    server.admin("bucket", "public-read", bucket, "on")
    try:
        got = anonymous.request("GET", f"/{bucket}/pub/a.txt", sign=False)
        assert got.status_code == 200 and got.content == b"public bytes"
        overridden = anonymous.request(
            "GET", f"/{bucket}/pub/a.txt", query="response-content-type=text%2Fhtml", sign=False
        )
        assert overridden.status_code == 400, overridden.text
        assert s3_error_code(overridden) == "InvalidRequest"
        assert "anonymous GET" in overridden.text
        head = anonymous.request("HEAD", f"/{bucket}/pub/a.txt", sign=False)
        assert head.status_code == 200 and head.headers["Content-Length"] == "12"
        listing = anonymous.request("GET", f"/{bucket}", query="list-type=2", sign=False)
        assert listing.status_code == 200 and b"<Key>pub/a.txt</Key>" in listing.content
        v1 = anonymous.request("GET", f"/{bucket}", sign=False)
        assert v1.status_code == 200 and b"<Key>pub/a.txt</Key>" in v1.content
        for method, path, query in [
            ("PUT", f"/{bucket}/pub/b.txt", ""),
            ("DELETE", f"/{bucket}/pub/a.txt", ""),
            ("GET", f"/{bucket}", "uploads"),
            ("GET", "/", ""),
        ]:
            refused = anonymous.request(method, path, query=query, sign=False, body=b"x" if method == "PUT" else b"")
            assert refused.status_code == 403, f"{method} {path}: {refused.text}"
            assert s3_error_code(refused) == "AccessDenied"
        assert s3.get_object(Bucket=bucket, Key="pub/a.txt")["Body"].read() == b"public bytes"
    finally:
        server.admin("bucket", "public-read", bucket, "off")
    assert anonymous.request("GET", f"/{bucket}/pub/a.txt", sign=False).status_code == 403
