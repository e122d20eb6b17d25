"""Bucket versioning as S3 answers it, through boto3 and aws-cli: versions
and delete markers, reads and deletes by version id, the null version of a
suspended bucket, listings of versions with their markers, copies, tags and
DeleteObjects by version, and concurrent writers of one key."""

import json
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from tessera_clients import error_code, http_status, response_headers


def enable(s3, bucket, status="Enabled"):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def versions_page(s3, bucket, **kwargs):
    """One ListObjectVersions page: its entries as (key, version id, is
    latest, is marker) in the document's order (boto3 splits versions and
    markers into two lists), and the parsed reply."""
    captured = []

    def keep_body(http_response, **_):
        captured.append(http_response.content)

    s3.meta.events.register("after-call.s3.ListObjectVersions", keep_body)
    try:
        reply = s3.list_object_versions(Bucket=bucket, **kwargs)
    finally:
        s3.meta.events.unregister("after-call.s3.ListObjectVersions", keep_body)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    entries = []
    for element in ET.fromstring(captured[-1]):
        if element.tag in (ns + "Version", ns + "DeleteMarker"):
            entries.append((
                element.findtext(ns + "Key"),
                element.findtext(ns + "VersionId"),
                element.findtext(ns + "IsLatest") == "true",
                element.tag == ns + "DeleteMarker",
            ))
    return entries, reply


def versions_of(s3, bucket, **kwargs):
    """Every entry of every page, in listing order."""
    entries = []
    while True:
        page, reply = versions_page(s3, bucket, **kwargs)
        entries += page
        if not reply["IsTruncated"]:
            return entries
        kwargs = {**kwargs, "KeyMarker": reply["NextKeyMarker"], "VersionIdMarker": reply["NextVersionIdMarker"]}


def test_status_goes_from_none_to_enabled_to_suspended(s3, bucket):
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    enable(s3, bucket)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    enable(s3, bucket, "Suspended")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    for bad in ("enabled", "Disabled", ""):
        with pytest.raises(ClientError) as err:
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": bad})
        assert (http_status(err.value), error_code(err.value)) == (400, "MalformedXML")
    s3.put_bucket_versioning(
        Bucket=bucket, VersioningConfiguration={"Status": "Enabled", "MFADelete": "Disabled"}
    )
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"


def test_every_put_makes_a_version_readable_by_id(s3, bucket):
    enable(s3, bucket)
    ids = [s3.put_object(Bucket=bucket, Key="k", Body=f"body {i}".encode())["VersionId"] for i in range(3)]
    assert len(set(ids)) == 3 and all(len(i) == 32 for i in ids)
    latest = s3.get_object(Bucket=bucket, Key="k")
    assert latest["Body"].read() == b"body 2"
    assert latest["VersionId"] == ids[2]
    for i, version in enumerate(ids):
        got = s3.get_object(Bucket=bucket, Key="k", VersionId=version)
        assert got["Body"].read() == f"body {i}".encode()
        assert got["VersionId"] == version
        assert s3.head_object(Bucket=bucket, Key="k", VersionId=version)["ContentLength"] == 6
    assert versions_of(s3, bucket) == [
        ("k", ids[2], True, False),
        ("k", ids[1], False, False),
        ("k", ids[0], False, False),
    ]
    # Only the latest shows in ordinary listings.
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]


def test_delete_makes_a_marker_and_deleting_it_restores(s3, bucket):
    enable(s3, bucket)
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    deleted = s3.delete_object(Bucket=bucket, Key="k")
    assert deleted["DeleteMarker"] is True
    marker = deleted["VersionId"]
    assert marker != first
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="k")
    assert (http_status(err.value), error_code(err.value)) == (404, "NoSuchKey")
    headers = response_headers(err.value)
    assert headers["x-amz-delete-marker"] == "true"
    assert headers["x-amz-version-id"] == marker
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key="k")
    assert http_status(err.value) == 404
    assert response_headers(err.value)["x-amz-delete-marker"] == "true"
    # A delete marker named by id is a resource only DELETE may address.
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="k", VersionId=marker)
    assert (http_status(err.value), error_code(err.value)) == (405, "MethodNotAllowed")
    assert response_headers(err.value)["allow"] == "DELETE"
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    assert versions_of(s3, bucket) == [("k", marker, True, True), ("k", first, False, False)]
    # The old version is still readable, and removing the marker brings it back.
    assert s3.get_object(Bucket=bucket, Key="k", VersionId=first)["Body"].read() == b"one"
    removed = s3.delete_object(Bucket=bucket, Key="k", VersionId=marker)
    assert removed["DeleteMarker"] is True and removed["VersionId"] == marker
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"one"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]


def test_deleting_versions_for_good(s3, bucket):
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    # Removing the latest makes the one before it the latest.
    gone = s3.delete_object(Bucket=bucket, Key="k", VersionId=v2)
    assert gone["VersionId"] == v2 and "DeleteMarker" not in gone
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"one"
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="k", VersionId=v2)
    assert (http_status(err.value), error_code(err.value)) == (404, "NoSuchVersion")
    # A version that is not there: 204, naming it.
    again = s3.delete_object(Bucket=bucket, Key="k", VersionId=v2)
    assert again["VersionId"] == v2
    s3.delete_object(Bucket=bucket, Key="k", VersionId=v1)
    assert versions_of(s3, bucket) == []
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key="k")
    assert http_status(err.value) == 404
    assert "x-amz-delete-marker" not in response_headers(err.value)


def test_malformed_version_ids(s3, bucket):
    enable(s3, bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for bad in ("abc", "x" * 33, "0000000000000001+123456789abcdef"):
        with pytest.raises(ClientError) as err:
            s3.get_object(Bucket=bucket, Key="k", VersionId=bad)
        assert (http_status(err.value), error_code(err.value)) == (400, "InvalidArgument"), bad
    # S3's form, but not a version of this key.
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="k", VersionId="v5n1PPUjOCMHLyyfq0ayjoZ5RZLfVQKA")
    assert (http_status(err.value), error_code(err.value)) == (404, "NoSuchVersion")


def test_suspended_bucket_keeps_one_null_version(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"before")  # the null version
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")["VersionId"]
    enable(s3, bucket, "Suspended")
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"null 1")
    assert "VersionId" not in put
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"null 1" and got["VersionId"] == "null"
    # The null version from before versioning was replaced, not kept.
    assert versions_of(s3, bucket) == [("k", "null", True, False), ("k", v1, False, False)]
    s3.put_object(Bucket=bucket, Key="k", Body=b"null 2")
    assert versions_of(s3, bucket) == [("k", "null", True, False), ("k", v1, False, False)]
    assert s3.get_object(Bucket=bucket, Key="k", VersionId="null")["Body"].read() == b"null 2"
    # A delete in a suspended bucket replaces the null version with a null marker.
    deleted = s3.delete_object(Bucket=bucket, Key="k")
    assert deleted["DeleteMarker"] is True and deleted["VersionId"] == "null"
    assert versions_of(s3, bucket) == [("k", "null", True, True), ("k", v1, False, False)]
    s3.delete_object(Bucket=bucket, Key="k", VersionId="null")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v1"
    # Enabled again: the null version made while suspended stays below new ones.
    s3.put_object(Bucket=bucket, Key="n", Body=b"null")
    enable(s3, bucket)
    v2 = s3.put_object(Bucket=bucket, Key="n", Body=b"v2")["VersionId"]
    assert versions_of(s3, bucket, Prefix="n") == [("n", v2, True, False), ("n", "null", False, False)]


def test_listing_pages_through_versions_and_prefixes(s3, bucket):
    enable(s3, bucket)
    expected = []
    for key in ("a", "d/1", "d/2", "z"):
        ids = [s3.put_object(Bucket=bucket, Key=key, Body=b"x")["VersionId"] for _ in range(3)]
        expected += [(key, v) for v in reversed(ids)]
    marker = s3.delete_object(Bucket=bucket, Key="z")["VersionId"]
    expected.insert(len(expected) - 3, ("z", marker))
    seen = []
    kwargs = {}
    while True:
        page, reply = versions_page(s3, bucket, MaxKeys=2, **kwargs)
        assert len(page) <= 2
        seen += [(key, version) for key, version, _, _ in page]
        if not reply["IsTruncated"]:
            break
        kwargs = {"KeyMarker": reply["NextKeyMarker"], "VersionIdMarker": reply["NextVersionIdMarker"]}
    assert seen == expected
    assert versions_of(s3, bucket, MaxKeys=3) == versions_of(s3, bucket)
    rolled = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["d/"]
    assert {v["Key"] for v in rolled["Versions"]} == {"a", "z"}
    # A key marker alone skips every version of that key.
    after_a = s3.list_object_versions(Bucket=bucket, KeyMarker="a")
    assert {v["Key"] for v in after_a["Versions"]} == {"d/1", "d/2", "z"}
    with pytest.raises(ClientError) as err:
        s3.list_object_versions(Bucket=bucket, VersionIdMarker=marker)
    assert (http_status(err.value), error_code(err.value)) == (400, "InvalidArgument")


def test_copy_of_an_old_version_and_tags_per_version(s3, bucket):
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one", Tagging="n=1")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    # Restoring an old version by copying it onto its key makes a new version.
    copy = s3.copy_object(Bucket=bucket, Key="k", CopySource={"Bucket": bucket, "Key": "k", "VersionId": v1})
    assert copy["CopySourceVersionId"] == v1
    v3 = copy["VersionId"]
    assert v3 not in (v1, v2)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"one"
    latest_copy = s3.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "k"})
    assert latest_copy["CopySourceVersionId"] == v3
    # Tags of an old version change in place: no new version.
    assert s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v1)["TagSet"] == [{"Key": "n", "Value": "1"}]
    put = s3.put_object_tagging(
        Bucket=bucket, Key="k", VersionId=v2, Tagging={"TagSet": [{"Key": "old", "Value": "2"}]}
    )
    assert put["VersionId"] == v2
    assert s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v2)["TagSet"] == [{"Key": "old", "Value": "2"}]
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == [{"Key": "n", "Value": "1"}]
    s3.delete_object_tagging(Bucket=bucket, Key="k", VersionId=v2)
    assert s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=v2)["TagSet"] == []
    assert [v for k, v, _, _ in versions_of(s3, bucket) if k == "k"] == [v3, v2, v1]
    # Copying onto itself without a version or a change stays illegal.
    with pytest.raises(ClientError) as err:
        s3.copy_object(Bucket=bucket, Key="k", CopySource={"Bucket": bucket, "Key": "k"})
    assert error_code(err.value) == "InvalidRequest"


def test_delete_objects_with_versions(s3, bucket):
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="a", Body=b"1")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="a", Body=b"2")["VersionId"]
    s3.put_object(Bucket=bucket, Key="b", Body=b"b")
    reply = s3.delete_objects(
        Bucket=bucket,
        Delete={"Objects": [{"Key": "a", "VersionId": v1}, {"Key": "b"}, {"Key": "c", "VersionId": "bad"}]},
    )
    deleted = {d["Key"]: d for d in reply["Deleted"]}
    assert deleted["a"]["VersionId"] == v1 and "DeleteMarker" not in deleted["a"]
    assert deleted["b"]["DeleteMarker"] is True
    marker = deleted["b"]["DeleteMarkerVersionId"]
    assert [(e["Key"], e["Code"]) for e in reply["Errors"]] == [("c", "NoSuchVersion")]
    # Removing a marker by id reports it as one.
    reply = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "b", "VersionId": marker}]})
    assert reply["Deleted"][0]["DeleteMarker"] is True
    assert reply["Deleted"][0]["DeleteMarkerVersionId"] == marker
    assert s3.get_object(Bucket=bucket, Key="b")["Body"].read() == b"b"
    assert [v for k, v, _, _ in versions_of(s3, bucket) if k == "a"] == [v2]


def test_versioned_multipart_upload(s3, bucket):
    enable(s3, bucket)
    old = s3.put_object(Bucket=bucket, Key="mp", Body=b"small")["VersionId"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, Body=b"p" * 1000)
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert done["VersionId"] not in (None, old)
    assert s3.get_object(Bucket=bucket, Key="mp")["ContentLength"] == 1000
    assert s3.get_object(Bucket=bucket, Key="mp", VersionId=old)["Body"].read() == b"small"


def test_bucket_with_versions_is_not_empty(s3, bucket):
    enable(s3, bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="k")
    with pytest.raises(ClientError) as err:
        s3.delete_bucket(Bucket=bucket)
    assert error_code(err.value) == "BucketNotEmpty"


def test_conditional_put_over_a_marker(s3, bucket):
    enable(s3, bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="k")
    # The key has no current object: If-None-Match: * holds.
    s3.put_object(Bucket=bucket, Key="k", Body=b"y", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=b"z", IfNoneMatch="*")
    assert http_status(err.value) == 412


def test_concurrent_writers_of_one_key(s3, bucket):
    """Every PUT and DELETE acknowledged is one version or marker, and
    exactly one entry is the latest."""
    enable(s3, bucket)

    def work(i):
        if i % 4 == 3:
            return ("marker", s3.delete_object(Bucket=bucket, Key="hot")["VersionId"])
        return ("version", s3.put_object(Bucket=bucket, Key="hot", Body=f"{i}".encode())["VersionId"])

    with ThreadPoolExecutor(16) as pool:
        made = list(pool.map(work, range(64)))
    listed = versions_of(s3, bucket)
    assert sorted(v for _, v, _, _ in listed) == sorted(v for _, v in made)
    assert sum(1 for _, _, latest, _ in listed if latest) == 1
    kinds = {v: kind for kind, v in made}
    assert all((kinds[v] == "marker") == marker for _, v, _, marker in listed)
    # The listing's order is the order the server made them: newest first.
    assert [v for _, v, _, _ in listed] == sorted((v for _, v in made), reverse=True)


def test_aws_cli_sees_versions(aws, s3, bucket):
    aws("s3api", "put-bucket-versioning", "--bucket", bucket, "--versioning-configuration", "Status=Enabled")
    s3.put_object(Bucket=bucket, Key="v", Body=b"1")
    s3.put_object(Bucket=bucket, Key="v", Body=b"2")
    aws("s3", "rm", f"s3://{bucket}/v")
    listed = json.loads(aws("s3api", "list-object-versions", "--bucket", bucket).stdout)
    assert len(listed["Versions"]) == 2
    assert [m["IsLatest"] for m in listed["DeleteMarkers"]] == [True]


def test_attributes_and_acl_of_an_old_version(s3, bucket):
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"three")
    attributes = s3.get_object_attributes(Bucket=bucket, Key="k", VersionId=v1, ObjectAttributes=["ObjectSize"])
    assert attributes["ObjectSize"] == 3
    assert attributes["VersionId"] == v1
    assert s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])["ObjectSize"] == 5
    assert s3.get_object_acl(Bucket=bucket, Key="k", VersionId=v1)["Grants"][0]["Permission"] == "FULL_CONTROL"
    with pytest.raises(ClientError) as err:
        s3.get_object_acl(Bucket=bucket, Key="k", VersionId="v5n1PPUjOCMHLyyfq0ayjoZ5RZLfVQKA")
    assert error_code(err.value) == "NoSuchVersion"
