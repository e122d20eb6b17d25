"""CreateBucket, HeadBucket, ListBuckets, DeleteBucket and their errors."""

import pytest
from botocore.exceptions import ClientError

from tessera_clients import error_code, http_status, new_bucket_name, response_headers, s3_error_code


def test_create_head_list_delete(s3):
    name = new_bucket_name()
    created = s3.create_bucket(Bucket=name)
    assert http_status(created) == 200

    head = s3.head_bucket(Bucket=name)
    assert http_status(head) == 200

    listed = s3.list_buckets()
    names = [b["Name"] for b in listed["Buckets"]]
    assert names.count(name) == 1
    assert names == sorted(names), "ListBuckets is sorted by name"
    mine = next(b for b in listed["Buckets"] if b["Name"] == name)
    assert mine["CreationDate"] is not None

    deleted = s3.delete_bucket(Bucket=name)
    assert http_status(deleted) == 204

    with pytest.raises(ClientError) as gone:
        s3.head_bucket(Bucket=name)
    assert http_status(gone.value) == 404
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_delete_non_empty_bucket_is_refused(s3, bucket):
    s3.put_object(Bucket=bucket, Key="keep-me", Body=b"x")
    with pytest.raises(ClientError) as refused:
        s3.delete_bucket(Bucket=bucket)
    assert error_code(refused.value) == "BucketNotEmpty"
    assert http_status(refused.value) == 409
    # Still there, object included.
    assert s3.get_object(Bucket=bucket, Key="keep-me")["Body"].read() == b"x"


def test_an_upload_in_progress_goes_with_its_bucket(s3):
    """S3 deletes a bucket whose only content is an unfinished multipart
    upload, aborting the upload: a client that gave up on an upload can
    still remove its bucket."""
    name = new_bucket_name("upload-left")
    s3.create_bucket(Bucket=name)
    upload = s3.create_multipart_upload(Bucket=name, Key="half")["UploadId"]
    s3.upload_part(Bucket=name, Key="half", UploadId=upload, PartNumber=1, Body=b"x" * 1024)
    assert http_status(s3.delete_bucket(Bucket=name)) == 204
    with pytest.raises(ClientError) as gone:
        s3.head_bucket(Bucket=name)
    assert http_status(gone.value) == 404
    # A bucket of the same name made again has no upload of the old one.
    s3.create_bucket(Bucket=name)
    try:
        assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    finally:
        s3.delete_bucket(Bucket=name)


def test_head_missing_bucket_is_404(s3):
    with pytest.raises(ClientError) as missing:
        s3.head_bucket(Bucket=new_bucket_name("missing"))
    assert http_status(missing.value) == 404
    assert "x-amz-request-id" in response_headers(missing.value)


def test_operations_on_missing_bucket_say_no_such_bucket(s3):
    name = new_bucket_name("missing")
    with pytest.raises(ClientError) as listing:
        s3.list_objects_v2(Bucket=name)
    assert error_code(listing.value) == "NoSuchBucket"
    assert http_status(listing.value) == 404
    with pytest.raises(ClientError) as deleting:
        s3.delete_bucket(Bucket=name)
    assert error_code(deleting.value) == "NoSuchBucket"
    with pytest.raises(ClientError) as putting:
        s3.put_object(Bucket=name, Key="k", Body=b"x")
    assert error_code(putting.value) == "NoSuchBucket"


@pytest.mark.parametrize(
    "name",
    [
        "ab",  # shorter than 3
        "a" * 64,  # longer than 63
        "UpperCase",
        "under_score",
        "-leading-dash",
        "trailing-dash-",
        "double..dot",
        "192.168.5.4",  # formatted as an IP address
    ],
)
def test_invalid_bucket_name_is_refused(s3, name):
    with pytest.raises(ClientError) as refused:
        s3.create_bucket(Bucket=name)
    assert error_code(refused.value) == "InvalidBucketName"
    assert http_status(refused.value) == 400


def test_valid_edge_names_are_accepted(s3):
    for name in ("a" * 63, f"b.{new_bucket_name('x')[:20]}.c", "3-x"):
        s3.create_bucket(Bucket=name)
        assert http_status(s3.head_bucket(Bucket=name)) == 200
        s3.delete_bucket(Bucket=name)


def test_second_create_by_owner_is_already_owned_by_you(s3, bucket):
    with pytest.raises(ClientError) as again:
        s3.create_bucket(Bucket=bucket)
    assert error_code(again.value) == "BucketAlreadyOwnedByYou"
    assert http_status(again.value) == 409


@pytest.mark.tessera
def test_create_bucket_header_sets_default_replication(server, s3):
    name = new_bucket_name("repl")

    def add_header(request, **_):
        request.headers["x-tessera-replication"] = "replicated-3"

    s3.meta.events.register("before-sign.s3.CreateBucket", add_header, unique_id="bucket-replication")
    try:
        s3.create_bucket(Bucket=name)
    finally:
        s3.meta.events.unregister("before-sign.s3.CreateBucket", unique_id="bucket-replication")
    try:
        listed = server.admin("bucket", "list")
        mine = [b for b in listed if b.get("name") == name]
        assert len(mine) == 1, listed
        assert mine[0].get("replication") == "replicated-3", mine
    finally:
        s3.delete_bucket(Bucket=name)


def test_list_buckets_pages(s3, raw):
    """max-buckets, continuation-token and prefix page through the buckets;
    a paginated answer names each bucket's region."""
    prefix = new_bucket_name("pg")
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        s3.create_bucket(Bucket=name)
    try:
        seen, token = [], None
        while True:
            kwargs = {"MaxBuckets": 2, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = s3.list_buckets(**kwargs)
            assert len(page["Buckets"]) <= 2
            assert page["Prefix"] == prefix
            assert all(b["BucketRegion"] == "us-east-1" for b in page["Buckets"])
            seen += [b["Name"] for b in page["Buckets"]]
            token = page.get("ContinuationToken")
            if not token:
                break
        assert seen == names
        everything = s3.list_buckets()
        assert "ContinuationToken" not in everything
        assert "BucketRegion" not in everything["Buckets"][0]
        for bad in ("max-buckets=0", "max-buckets=10001", "max-buckets=ten", "continuation-token=%21%21"):
            refused = raw.request("GET", "/", query=bad)
            assert refused.status_code == 400 and s3_error_code(refused) == "InvalidArgument", (bad, refused.text)
        with pytest.raises(ClientError) as elsewhere:
            s3.list_buckets(BucketRegion="eu-west-1")
        assert error_code(elsewhere.value) == "InvalidArgument"
    finally:
        for name in names:
            s3.delete_bucket(Bucket=name)
