"""MinIO's Python SDK against Tessera through its documented calls: buckets,
objects with metadata and tags, a multipart upload, copies, listings,
multi-object deletes, presigned links and a bucket policy."""

import io
import json
import os
from urllib.parse import urlsplit

import pytest
import requests

import minio
from minio.commonconfig import CopySource, Tags
from minio.deleteobjects import DeleteObject

from tessera_clients import REGION, empty_and_delete, new_bucket_name

MIB = 1024 * 1024


@pytest.fixture
def client(server):
    return minio.Minio(
        urlsplit(server.endpoint).netloc,
        access_key=server.access_key,
        secret_key=server.secret_key,
        secure=False,
        region=REGION,
    )


@pytest.fixture
def mbucket(client, s3):
    name = new_bucket_name("minio")
    client.make_bucket(name)
    yield name
    empty_and_delete(s3, name)


def test_objects_metadata_tags_and_copies(client, mbucket):
    assert client.bucket_exists(mbucket)
    data = os.urandom(100_000)
    client.put_object(
        mbucket, "dir/a.bin", io.BytesIO(data), len(data),
        content_type="application/x-test", metadata={"origin": "minio-sdk"},
    )
    stat = client.stat_object(mbucket, "dir/a.bin")
    assert stat.size == len(data) and stat.content_type == "application/x-test"
    assert stat.metadata["x-amz-meta-origin"] == "minio-sdk"
    response = client.get_object(mbucket, "dir/a.bin")
    try:
        assert response.read() == data
    finally:
        response.close()
        response.release_conn()
    ranged = client.get_object(mbucket, "dir/a.bin", offset=10, length=20)
    assert ranged.read() == data[10:30]
    ranged.close()
    ranged.release_conn()
    tags = Tags.new_object_tags()
    tags["team"] = "storage"
    client.set_object_tags(mbucket, "dir/a.bin", tags)
    assert dict(client.get_object_tags(mbucket, "dir/a.bin")) == {"team": "storage"}
    client.copy_object(mbucket, "dir/b.bin", CopySource(mbucket, "dir/a.bin"))
    names = sorted(o.object_name for o in client.list_objects(mbucket, prefix="dir/", recursive=True))
    assert names == ["dir/a.bin", "dir/b.bin"]
    errors = list(client.remove_objects(mbucket, [DeleteObject("dir/a.bin"), DeleteObject("dir/b.bin")]))
    assert errors == []
    assert list(client.list_objects(mbucket, recursive=True)) == []


def test_multipart_upload_of_unknown_length(client, mbucket):
    data = os.urandom(12 * MIB + 123)
    client.put_object(mbucket, "big.bin", io.BytesIO(data), length=-1, part_size=5 * MIB)
    stat = client.stat_object(mbucket, "big.bin")
    assert stat.size == len(data) and stat.etag.endswith("-3")
    response = client.get_object(mbucket, "big.bin")
    try:
        assert response.read() == data
    finally:
        response.close()
        response.release_conn()


def test_presigned_links_and_a_bucket_policy(client, mbucket, s3):
    put_url = client.presigned_put_object(mbucket, "up.txt")
    assert requests.put(put_url, data=b"by link", timeout=30).status_code == 200
    get_url = client.presigned_get_object(mbucket, "up.txt")
    assert requests.get(get_url, timeout=30).content == b"by link"
    # A public prefix: the bucket's public access block must allow it first.
    s3.delete_public_access_block(Bucket=mbucket)
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": ["*"]},
            "Action": ["s3:GetObject"],
            "Resource": [f"arn:aws:s3:::{mbucket}/public/*"],
        }],
    }
    client.set_bucket_policy(mbucket, json.dumps(policy))
    assert json.loads(client.get_bucket_policy(mbucket)) == policy
    client.put_object(mbucket, "public/hello.txt", io.BytesIO(b"hello"), 5)
    endpoint = f"http://{client._base_url.host}"
    assert requests.get(f"{endpoint}/{mbucket}/public/hello.txt", timeout=30).content == b"hello"
    assert requests.get(f"{endpoint}/{mbucket}/up.txt", timeout=30).status_code == 403
    client.delete_bucket_policy(mbucket)
    assert requests.get(f"{endpoint}/{mbucket}/public/hello.txt", timeout=30).status_code == 403
