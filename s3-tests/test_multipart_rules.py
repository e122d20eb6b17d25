"""Multipart rules as S3 enforces them: EntityTooSmall for any part but the
last under 5 MiB, part numbers 1..10000, InvalidPart, InvalidPartOrder,
re-uploaded parts replacing older ones, abort."""

import os

import pytest
from botocore.exceptions import ClientError

from tessera_clients import MIB, error_code, http_status, md5_hex


def start(s3, bucket, key="mp"):
    return s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]


def part(s3, bucket, upload, number, data, key="mp"):
    return s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data)["ETag"]


def finish(s3, bucket, upload, parts, key="mp"):
    return s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
    )


def test_small_part_before_the_last_is_too_small(s3, bucket):
    upload = start(s3, bucket)
    first = part(s3, bucket, upload, 1, os.urandom(MIB))
    second = part(s3, bucket, upload, 2, os.urandom(MIB))
    with pytest.raises(ClientError) as err:
        finish(s3, bucket, upload, [(1, first), (2, second)])
    assert error_code(err.value) == "EntityTooSmall"
    assert http_status(err.value) == 400
    # One small part alone is the last part: fine.
    finish(s3, bucket, upload, [(1, first)])


@pytest.mark.parametrize("number", [0, 10001])
def test_part_numbers_out_of_range(s3, bucket, number):
    upload = start(s3, bucket)
    with pytest.raises(ClientError) as err:
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=number, Body=b"x")
    assert error_code(err.value) == "InvalidArgument"
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)


def test_part_10000_is_accepted(s3, bucket):
    upload = start(s3, bucket)
    etag = part(s3, bucket, upload, 10000, b"last")
    finish(s3, bucket, upload, [(10000, etag)])
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"last"


def test_invalid_part_and_order(s3, bucket):
    upload = start(s3, bucket)
    first = part(s3, bucket, upload, 1, os.urandom(5 * MIB))
    second = part(s3, bucket, upload, 2, b"tail")
    with pytest.raises(ClientError) as err:
        finish(s3, bucket, upload, [(1, first), (3, second)])
    assert error_code(err.value) == "InvalidPart"
    with pytest.raises(ClientError) as err:
        finish(s3, bucket, upload, [(1, '"00000000000000000000000000000000"')])
    assert error_code(err.value) == "InvalidPart"
    with pytest.raises(ClientError) as err:
        finish(s3, bucket, upload, [(2, second), (1, first)])
    assert error_code(err.value) == "InvalidPartOrder"
    finish(s3, bucket, upload, [(1, first), (2, second)])


def test_reuploaded_part_replaces_the_older(s3, bucket):
    upload = start(s3, bucket)
    part(s3, bucket, upload, 1, b"old bytes")
    new = part(s3, bucket, upload, 1, b"new bytes")
    listed = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == [(1, f'"{md5_hex(b"new bytes")}"', 9)]
    finish(s3, bucket, upload, [(1, new)])
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"new bytes"


def test_abort_removes_the_upload(s3, bucket):
    upload = start(s3, bucket)
    part(s3, bucket, upload, 1, b"x")
    assert http_status(s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)) == 204
    with pytest.raises(ClientError) as err:
        s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload)
    assert error_code(err.value) == "NoSuchUpload"
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert upload not in [u["UploadId"] for u in uploads]


def test_aws_cli_multipart_rules(aws, s3, bucket, tmp_path):
    upload = start(s3, bucket, "cli")
    body = tmp_path / "part"
    body.write_bytes(b"x")
    result = aws(
        "s3api", "upload-part", "--bucket", bucket, "--key", "cli", "--upload-id", upload,
        "--part-number", "10001", "--body", str(body), check=False,
    )
    assert result.returncode != 0
    assert "InvalidArgument" in result.stderr
    aws("s3api", "abort-multipart-upload", "--bucket", bucket, "--key", "cli", "--upload-id", upload)
