"""Versions of a bucket that never had versioning as S3 answers them (each
object its one `null` version), ACLs where they are off, and owner IDs."""

import json

import pytest
from botocore.exceptions import ClientError

from tessera_clients import error_code, http_status, s3_client
from tessera_procs import find_key


def test_list_object_versions_pages(s3, bucket):
    for key in ("a", "b/1", "b/2", "c"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    everything = s3.list_object_versions(Bucket=bucket)
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in everything["Versions"]] == [
        ("a", "null", True), ("b/1", "null", True), ("b/2", "null", True), ("c", "null", True),
    ]
    assert everything["Versions"][0]["Size"] == 1
    assert "DeleteMarkers" not in everything
    rolled = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [v["Key"] for v in rolled["Versions"]] == ["a", "c"]
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["b/"]
    first = s3.list_object_versions(Bucket=bucket, MaxKeys=2)
    assert first["IsTruncated"] is True
    assert [v["Key"] for v in first["Versions"]] == ["a", "b/1"]
    assert (first["NextKeyMarker"], first["NextVersionIdMarker"]) == ("b/1", "null")
    rest = s3.list_object_versions(
        Bucket=bucket, MaxKeys=2, KeyMarker=first["NextKeyMarker"], VersionIdMarker=first["NextVersionIdMarker"]
    )
    assert [v["Key"] for v in rest["Versions"]] == ["b/2", "c"]
    assert rest["IsTruncated"] is False
    prefixed = s3.list_object_versions(Bucket=bucket, Prefix="b/")
    assert [v["Key"] for v in prefixed["Versions"]] == ["b/1", "b/2"]


def test_version_id_null_reaches_the_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"payload")
    assert s3.get_object(Bucket=bucket, Key="k", VersionId="null")["Body"].read() == b"payload"
    assert s3.head_object(Bucket=bucket, Key="k", VersionId="null")["ContentLength"] == 7
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="k", VersionId="3HL4kqtJlcpXroDTDmJ")
    assert error_code(err.value) == "InvalidArgument"
    assert http_status(err.value) == 400
    # An id of S3's form names no version here: 404 NoSuchVersion.
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="k", VersionId="v5n1PPUjOCMHLyyfq0ayjoZ5RZLfVQKA")
    assert error_code(err.value) == "NoSuchVersion"
    assert http_status(err.value) == 404
    s3.delete_object(Bucket=bucket, Key="k", VersionId="null")
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key="k")
    assert http_status(err.value) == 404


def test_acls_are_the_owners(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for reply in (s3.get_bucket_acl(Bucket=bucket), s3.get_object_acl(Bucket=bucket, Key="k")):
        assert [g["Permission"] for g in reply["Grants"]] == ["FULL_CONTROL"]
        assert reply["Grants"][0]["Grantee"]["Type"] == "CanonicalUser"
        assert reply["Grants"][0]["Grantee"]["ID"] == reply["Owner"]["ID"]
    with pytest.raises(ClientError) as err:
        s3.get_object_acl(Bucket=bucket, Key="absent")
    assert error_code(err.value) == "NoSuchKey"


def test_acls_are_off_in_a_new_bucket(s3, bucket):
    """BucketOwnerEnforced (a new bucket's setting, as in S3): only the
    owner's FULL_CONTROL may be asked for; any other ACL is
    AccessControlListNotSupported, a malformed grant InvalidArgument."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="private")
    s3.put_object_acl(Bucket=bucket, Key="k", ACL="private")
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    for call in (
        lambda: s3.put_object(Bucket=bucket, Key="p", Body=b"x", ACL="public-read"),
        lambda: s3.put_object_acl(Bucket=bucket, Key="k", ACL="public-read"),
        lambda: s3.put_bucket_acl(Bucket=bucket, ACL="authenticated-read"),
    ):
        with pytest.raises(ClientError) as err:
            call()
        assert error_code(err.value) == "AccessControlListNotSupported"
        assert http_status(err.value) == 400
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="g", Body=b"x", GrantRead='id="someone"')
    assert error_code(err.value) == "InvalidArgument"


def test_put_acl_policy_granting_the_owner_only(s3, bucket):
    current = s3.get_bucket_acl(Bucket=bucket)
    s3.put_bucket_acl(
        Bucket=bucket, AccessControlPolicy={"Grants": current["Grants"], "Owner": current["Owner"]}
    )
    other = [{"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
              "Permission": "READ"}]
    with pytest.raises(ClientError) as err:
        s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy={"Grants": other, "Owner": current["Owner"]})
    assert error_code(err.value) == "AccessControlListNotSupported"


def test_aws_cli_versions_and_acl(aws, s3, bucket):
    s3.put_object(Bucket=bucket, Key="v", Body=b"x")
    versions = json.loads(aws("s3api", "list-object-versions", "--bucket", bucket).stdout)
    assert [(v["Key"], v["VersionId"]) for v in versions["Versions"]] == [("v", "null")]
    acl = json.loads(aws("s3api", "get-bucket-acl", "--bucket", bucket).stdout)
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"


def test_create_bucket_canned_acl(s3):
    from tessera_clients import empty_and_delete, new_bucket_name

    name = new_bucket_name()
    s3.create_bucket(Bucket=name, ACL="private")
    empty_and_delete(s3, name)
    with pytest.raises(ClientError) as err:
        s3.create_bucket(Bucket=new_bucket_name(), ACL="public-read")
    assert error_code(err.value) == "InvalidBucketAclWithObjectOwnership"


def test_owner_id_is_one_canonical_id_everywhere(server, s3, bucket):
    """One owner ID per user (64 hex digits, as S3's canonical IDs) in every
    answer that shows an owner; another user has another."""
    import re
    import uuid

    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    seen = {
        "ListBuckets": s3.list_buckets()["Owner"]["ID"],
        "ListObjectsV2": s3.list_objects_v2(Bucket=bucket, FetchOwner=True)["Contents"][0]["Owner"]["ID"],
        "ListObjects": s3.list_objects(Bucket=bucket)["Contents"][0]["Owner"]["ID"],
        "ListObjectVersions": s3.list_object_versions(Bucket=bucket)["Versions"][0]["Owner"]["ID"],
        "ListMultipartUploads owner": s3.list_multipart_uploads(Bucket=bucket)["Uploads"][0]["Owner"]["ID"],
        "ListMultipartUploads initiator": s3.list_multipart_uploads(Bucket=bucket)["Uploads"][0]["Initiator"]["ID"],
        "ListParts": s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload)["Owner"]["ID"],
        "GetBucketAcl": s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"],
        "GetObjectAcl": s3.get_object_acl(Bucket=bucket, Key="k")["Owner"]["ID"],
    }
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)
    ids = set(seen.values())
    assert len(ids) == 1, seen
    (root_id,) = ids
    assert re.fullmatch("[0-9a-f]{64}", root_id), root_id
    created = server.admin("user", "create", f"owner-{uuid.uuid4().hex[:8]}")
    other = s3_client(server.endpoint, find_key(created, "access_key"), find_key(created, "secret_key"))
    other_id = other.list_buckets()["Owner"]["ID"]
    assert re.fullmatch("[0-9a-f]{64}", other_id) and other_id != root_id
