"""GetObject with a Range header: every form RFC 9110 allows, clamping,
416 for unsatisfiable ranges and 200 for ranges that do not parse."""

import os

import pytest
from botocore.exceptions import ClientError

from tessera_clients import MIB, empty_and_delete, error_code, http_status, new_bucket_name, s3_error_code

# One full rs-3-2-1024k stripe (3 MiB) plus a partial one, so ranges cross
# cell and stripe boundaries.
SIZE = 3 * MIB + 12345
KEY = "ranged"


@pytest.fixture(scope="module")
def ranged(s3):
    name = new_bucket_name("ranges")
    s3.create_bucket(Bucket=name)
    data = os.urandom(SIZE)
    s3.put_object(Bucket=name, Key=KEY, Body=data)
    yield name, data
    empty_and_delete(s3, name)


SATISFIABLE = [
    ("bytes=0-9", 0, 9),
    ("bytes=100-", 100, SIZE - 1),
    ("bytes=-100", SIZE - 100, SIZE - 1),
    (f"bytes={SIZE - 10}-{SIZE + 1000}", SIZE - 10, SIZE - 1),
    (f"bytes=-{SIZE + 100}", 0, SIZE - 1),
    ("bytes=5-5", 5, 5),
    (f"bytes={SIZE - 1}-", SIZE - 1, SIZE - 1),
    ("bytes=0-", 0, SIZE - 1),
    (f"bytes=0-{SIZE - 1}", 0, SIZE - 1),
    (f"bytes={MIB - 3}-{MIB + 2}", MIB - 3, MIB + 2),
    (f"bytes={3 * MIB - 5}-{3 * MIB + 5}", 3 * MIB - 5, 3 * MIB + 5),
    (f"bytes={2 * MIB}-{3 * MIB + 100}", 2 * MIB, 3 * MIB + 100),
]


@pytest.mark.parametrize("header,first,last", SATISFIABLE, ids=[c[0] for c in SATISFIABLE])
def test_satisfiable_range_is_206(s3, ranged, header, first, last):
    bucket, data = ranged
    got = s3.get_object(Bucket=bucket, Key=KEY, Range=header)
    assert http_status(got) == 206
    assert got["ContentRange"] == f"bytes {first}-{last}/{SIZE}"
    assert got["ContentLength"] == last - first + 1
    body = got["Body"].read()
    assert len(body) == last - first + 1
    assert body == data[first : last + 1]


UNSATISFIABLE = [f"bytes={SIZE}-", f"bytes={SIZE + 10}-{SIZE + 20}"]


@pytest.mark.parametrize("header", UNSATISFIABLE)
def test_unsatisfiable_range_is_416(s3, ranged, header):
    bucket, _ = ranged
    with pytest.raises(ClientError) as refused:
        s3.get_object(Bucket=bucket, Key=KEY, Range=header)
    assert http_status(refused.value) == 416
    assert error_code(refused.value) == "InvalidRange"
    headers = refused.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert headers.get("content-range") == f"bytes */{SIZE}"


def test_unsatisfiable_range_raw_response(raw, ranged):
    bucket, _ = ranged
    response = raw.request("GET", f"/{bucket}/{KEY}", headers={"Range": f"bytes={SIZE}-"})
    assert response.status_code == 416
    assert response.headers.get("Content-Range") == f"bytes */{SIZE}"
    assert s3_error_code(response) == "InvalidRange"
    assert "x-amz-request-id" in response.headers


INVALID = ["bytes=abc", "bytes=5-2", "items=0-5", "bytes 0-5", "bytes=-"]


@pytest.mark.parametrize("header", INVALID)
def test_invalid_range_syntax_returns_whole_object(s3, ranged, header):
    bucket, data = ranged
    got = s3.get_object(Bucket=bucket, Key=KEY, Range=header)
    assert http_status(got) == 200
    assert "ContentRange" not in got
    assert got["ContentLength"] == SIZE
    assert got["Body"].read() == data


def test_invalid_range_raw_response(raw, ranged):
    bucket, data = ranged
    response = raw.request("GET", f"/{bucket}/{KEY}", headers={"Range": "bytes=9-3"})
    assert response.status_code == 200
    assert "Content-Range" not in response.headers
    assert response.content == data


def test_range_is_advertised(s3, ranged):
    bucket, _ = ranged
    head = s3.head_object(Bucket=bucket, Key=KEY)
    assert head["AcceptRanges"] == "bytes"
    assert head["ContentLength"] == SIZE
