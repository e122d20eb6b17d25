"""ListObjects (v1) with marker, delimiter and NextMarker; ListObjectsV2's
start-after, fetch-owner and encoding-type=url; ListMultipartUploads and
ListParts pagination. Keys in UTF-8 byte order throughout."""

import xml.etree.ElementTree as ET

import pytest

from tessera_clients import empty_and_delete, new_bucket_name

KEYS = sorted(
    [f"a/{i:02d}" for i in range(12)]
    + [f"b/c/{i}" for i in range(3)]
    + ["top-1", "top-2", "Zed", "sp ace", "\u00fcber", "\uff01bang", "\U0001f600/x"],
    key=lambda k: k.encode(),
)


@pytest.fixture(scope="module")
def listed(s3):
    name = new_bucket_name("v1")
    s3.create_bucket(Bucket=name)
    for key in KEYS:
        s3.put_object(Bucket=name, Key=key, Body=b"")
    yield name
    empty_and_delete(s3, name)


def children(xml: bytes, tag: str):
    root = ET.fromstring(xml)
    return [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == tag]


def text(xml: bytes, tag: str):
    found = children(xml, tag)
    return found[0].text if found else None


def test_v1_marker_pages_in_utf8_order_without_next_marker(s3, listed):
    keys, marker, pages = [], "", 0
    while True:
        page = s3.list_objects(Bucket=listed, Marker=marker, MaxKeys=5)
        pages += 1
        batch = [o["Key"] for o in page.get("Contents", [])]
        keys += batch
        # Without a delimiter S3 sends no NextMarker: the next marker is the last key.
        assert "NextMarker" not in page
        if not page["IsTruncated"]:
            break
        marker = batch[-1]
    assert keys == KEYS
    assert pages == -(-len(KEYS) // 5)


def test_v1_delimiter_rolls_up_and_sends_next_marker(s3, listed):
    page = s3.list_objects(Bucket=listed, Delimiter="/", MaxKeys=3)
    assert page["IsTruncated"] is True
    first = [p["Prefix"] for p in page.get("CommonPrefixes", [])] + [o["Key"] for o in page.get("Contents", [])]
    assert len(first) == 3
    assert page["NextMarker"]
    seen_prefixes, seen_keys, marker = [], [], ""
    while True:
        page = s3.list_objects(Bucket=listed, Delimiter="/", MaxKeys=3, Marker=marker)
        seen_prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        seen_keys += [o["Key"] for o in page.get("Contents", [])]
        if not page["IsTruncated"]:
            assert "NextMarker" not in page
            break
        marker = page["NextMarker"]
    assert seen_prefixes == ["a/", "b/", "\U0001f600/"]
    assert seen_keys == [k for k in KEYS if "/" not in k]


def test_v1_encoding_type_url(raw, listed):
    response = raw.request("GET", f"/{listed}", query="encoding-type=url&prefix=sp")
    assert response.status_code == 200
    assert text(response.content, "EncodingType") == "url"
    assert text(response.content, "Key") == "sp%20ace"


def test_v2_start_after_fetch_owner_and_encoding(raw, s3, listed):
    page = s3.list_objects_v2(Bucket=listed, StartAfter="a/05", MaxKeys=4, FetchOwner=True)
    assert [o["Key"] for o in page["Contents"]] == KEYS[KEYS.index("a/05") + 1 :][:4]
    assert page["StartAfter"] == "a/05"
    assert page["KeyCount"] == 4
    assert all(o["Owner"]["ID"] for o in page["Contents"])
    without_owner = s3.list_objects_v2(Bucket=listed, MaxKeys=1)
    assert "Owner" not in without_owner["Contents"][0]
    encoded = raw.request("GET", f"/{listed}", query="list-type=2&encoding-type=url&delimiter=%2F")
    prefixes = [e.text for e in children(encoded.content, "Prefix") if e.text]
    assert "%F0%9F%98%80/" in prefixes
    assert text(encoded.content, "KeyCount") == str(len(children(encoded.content, "Contents")) + 3)


def test_v2_continuation_with_delimiter_and_prefix(s3, listed):
    tokens, keys, prefixes = None, [], []
    while True:
        call = {"Bucket": listed, "Prefix": "b/", "Delimiter": "/", "MaxKeys": 1}
        if tokens:
            call["ContinuationToken"] = tokens
        page = s3.list_objects_v2(**call)
        keys += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        if not page["IsTruncated"]:
            break
        tokens = page["NextContinuationToken"]
    assert prefixes == ["b/c/"] and keys == []


def test_list_multipart_uploads_pages_by_key_and_upload_id(s3, bucket):
    started = []
    for key in ["k1", "k1", "k2", "k3", "k3", "k3"]:
        started.append((key, s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]))
    seen, key_marker, id_marker = [], "", ""
    while True:
        page = s3.list_multipart_uploads(
            Bucket=bucket, MaxUploads=2, KeyMarker=key_marker, UploadIdMarker=id_marker
        )
        batch = [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        assert len(batch) <= 2
        seen += batch
        if not page["IsTruncated"]:
            break
        key_marker, id_marker = page["NextKeyMarker"], page["NextUploadIdMarker"]
        assert (key_marker, id_marker) == batch[-1]
    assert sorted(seen) == sorted(started)
    assert [k for k, _ in seen] == sorted(k for k, _ in started)
    # key-marker alone skips every upload of that key.
    after_k1 = s3.list_multipart_uploads(Bucket=bucket, KeyMarker="k1")
    assert {u["Key"] for u in after_k1["Uploads"]} == {"k2", "k3"}
    for key, upload_id in started:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)


def test_list_parts_pages_with_part_number_marker(s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
    for number in range(1, 8):
        s3.upload_part(Bucket=bucket, Key="parts", UploadId=upload, PartNumber=number, Body=b"p%d" % number)
    numbers, marker = [], 0
    while True:
        page = s3.list_parts(Bucket=bucket, Key="parts", UploadId=upload, MaxParts=3, PartNumberMarker=marker)
        batch = [p["PartNumber"] for p in page.get("Parts", [])]
        assert len(batch) <= 3
        numbers += batch
        if not page["IsTruncated"]:
            break
        marker = page["NextPartNumberMarker"]
        assert marker == batch[-1]
    assert numbers == list(range(1, 8))
    s3.abort_multipart_upload(Bucket=bucket, Key="parts", UploadId=upload)
