"""ListObjectsV2 over 2,500 keys: pagination, prefix, delimiter, start-after,
KeyCount, and UTF-8 byte order."""

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from tessera_clients import empty_and_delete, new_bucket_name


def make_keys():
    keys = [f"top-{i:04d}" for i in range(100)]
    keys += [f"p{i % 5}/sub{(i // 5) % 7}/k{i:05d}" for i in range(2300)]
    # Upper case sorts before lower case; U+FF01 sorts before U+1F600 in UTF-8
    # (EF BC 81 < F0 9F 98 80) but after it in UTF-16.
    for i in range(25):
        keys += [f"Zed-{i:03d}", f"\u00fc-{i:03d}", f"\U0001f600/{i:03d}", f"\uff01-{i:03d}"]
    assert len(keys) == len(set(keys)) == 2500
    return keys


ALL_KEYS = sorted(make_keys(), key=lambda k: k.encode("utf-8"))
# A few objects carry bytes so Size is checked too; the rest are empty.
SIZED = {key: (i % 7) + 1 for i, key in enumerate(ALL_KEYS[::97])}


@pytest.fixture(scope="module")
def listing(s3):
    name = new_bucket_name("listing")
    s3.create_bucket(Bucket=name)

    def put(key):
        s3.put_object(Bucket=name, Key=key, Body=b"x" * SIZED.get(key, 0))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, ALL_KEYS))
    yield name
    empty_and_delete(s3, name)


def list_all(s3, bucket, **params):
    """Follow continuation tokens by hand; return (pages, keys, prefixes)."""
    pages, keys, prefixes = [], [], []
    token = None
    while True:
        call = dict(params, Bucket=bucket)
        if token:
            call["ContinuationToken"] = token
        page = s3.list_objects_v2(**call)
        pages.append(page)
        contents = page.get("Contents", [])
        common = page.get("CommonPrefixes", [])
        assert page["KeyCount"] == len(contents) + len(common)
        keys += [o["Key"] for o in contents]
        prefixes += [p["Prefix"] for p in common]
        if not page["IsTruncated"]:
            assert "NextContinuationToken" not in page
            return pages, keys, prefixes
        token = page["NextContinuationToken"]
        assert token, "a truncated page carries NextContinuationToken"
        assert len(pages) < 100, "pagination does not end"


def test_default_page_is_1000_keys(s3, listing):
    page = s3.list_objects_v2(Bucket=listing)
    assert page["IsTruncated"] is True
    assert page["KeyCount"] == 1000
    assert page["MaxKeys"] == 1000
    assert [o["Key"] for o in page["Contents"]] == ALL_KEYS[:1000]


@pytest.mark.parametrize("max_keys", [1000, 333])
def test_pagination_lists_every_key_once_in_utf8_order(s3, listing, max_keys):
    pages, keys, prefixes = list_all(s3, listing, MaxKeys=max_keys)
    assert prefixes == []
    assert len(keys) == len(set(keys)) == len(ALL_KEYS)
    assert keys == ALL_KEYS
    assert len(pages) == math.ceil(len(ALL_KEYS) / max_keys)
    for page in pages[:-1]:
        assert page["KeyCount"] == max_keys


def test_sizes_and_etags_are_listed(s3, listing):
    sizes = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=listing):
        for obj in page.get("Contents", []):
            sizes[obj["Key"]] = obj["Size"]
            assert obj["ETag"].startswith('"') and obj["ETag"].endswith('"')
    assert sizes == {key: SIZED.get(key, 0) for key in ALL_KEYS}


@pytest.mark.parametrize("prefix", ["p3/", "p3/sub4/", "\U0001f600/", "top-00", "nothing-here"])
def test_prefix(s3, listing, prefix):
    _, keys, prefixes = list_all(s3, listing, Prefix=prefix)
    assert prefixes == []
    assert keys == [k for k in ALL_KEYS if k.startswith(prefix)]


def rolled_up(prefix):
    """Expected (keys, common prefixes) for Prefix=prefix, Delimiter='/'."""
    keys, prefixes = [], []
    for key in ALL_KEYS:
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if "/" in rest:
            common = prefix + rest[: rest.index("/") + 1]
            if common not in prefixes:
                prefixes.append(common)
        else:
            keys.append(key)
    return keys, prefixes


def test_delimiter_at_root(s3, listing):
    expected_keys, expected_prefixes = rolled_up("")
    page = s3.list_objects_v2(Bucket=listing, Delimiter="/")
    assert page["IsTruncated"] is False
    assert [o["Key"] for o in page.get("Contents", [])] == expected_keys
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == expected_prefixes
    assert expected_prefixes == ["p0/", "p1/", "p2/", "p3/", "p4/", "\U0001f600/"]
    assert page["KeyCount"] == len(expected_keys) + len(expected_prefixes)
    assert page["Delimiter"] == "/"


def test_prefix_and_delimiter(s3, listing):
    page = s3.list_objects_v2(Bucket=listing, Prefix="p1/", Delimiter="/")
    assert page.get("Contents", []) == []
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == [f"p1/sub{j}/" for j in range(7)]
    assert page["KeyCount"] == 7


def test_delimiter_pagination_rolls_each_prefix_up_once(s3, listing):
    pages, keys, prefixes = list_all(s3, listing, Prefix="p1/", Delimiter="/", MaxKeys=2)
    assert keys == []
    assert prefixes == [f"p1/sub{j}/" for j in range(7)]
    assert len(pages) == 4

    expected_keys, expected_prefixes = rolled_up("")
    pages, keys, prefixes = list_all(s3, listing, Delimiter="/", MaxKeys=10)
    assert keys == expected_keys
    assert prefixes == expected_prefixes


def test_start_after(s3, listing):
    pivot = ALL_KEYS[1234]
    pages, keys, _ = list_all(s3, listing, StartAfter=pivot)
    assert keys == ALL_KEYS[1235:]
    assert pages[0]["StartAfter"] == pivot

    # A StartAfter that is not a key: everything strictly greater.
    _, keys, _ = list_all(s3, listing, StartAfter="p2/")
    assert keys == [k for k in ALL_KEYS if k.encode() > b"p2/"]

    _, keys, _ = list_all(s3, listing, StartAfter=ALL_KEYS[-1])
    assert keys == []


def test_max_keys_one(s3, listing):
    page = s3.list_objects_v2(Bucket=listing, MaxKeys=1, Prefix="top-")
    assert page["KeyCount"] == 1
    assert page["IsTruncated"] is True
    assert [o["Key"] for o in page["Contents"]] == ["top-0000"]
    nxt = s3.list_objects_v2(Bucket=listing, MaxKeys=1, Prefix="top-", ContinuationToken=page["NextContinuationToken"])
    assert [o["Key"] for o in nxt["Contents"]] == ["top-0001"]


def test_aws_cli_recursive_ls_sees_every_key(aws, listing):
    out = aws("s3", "ls", f"s3://{listing}", "--recursive").stdout
    assert len(out.splitlines()) == len(ALL_KEYS)
