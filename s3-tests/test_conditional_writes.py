"""Conditional writes: PutObject and CompleteMultipartUpload with
If-None-Match: * (412 when the key exists) and If-Match (412 when the ETag
differs, 404 when the key is absent), checked atomically by meta."""

import pytest
from botocore.exceptions import ClientError

from tessera_clients import error_code, http_status


def test_put_if_none_match_star(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert error_code(err.value) == "PreconditionFailed"
    assert http_status(err.value) == 412
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"


def test_put_if_match(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")["ETag"]
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert error_code(err.value) == "PreconditionFailed"
    assert http_status(err.value) == 412
    s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="absent", Body=b"x", IfMatch=etag)
    assert error_code(err.value) == "NoSuchKey"
    assert http_status(err.value) == 404


def complete(s3, bucket, key, **kwargs):
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"part")
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    return upload, lambda: s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload=parts, **kwargs
    )


def test_complete_if_none_match(s3, bucket):
    _, done = complete(s3, bucket, "mp", IfNoneMatch="*")
    done()
    upload, again = complete(s3, bucket, "mp", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        again()
    assert error_code(err.value) == "PreconditionFailed"
    # The refused upload is still there to complete or abort.
    listed = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload)
    assert [p["PartNumber"] for p in listed["Parts"]] == [1]
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)


def test_complete_if_match(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="mp", Body=b"old")["ETag"]
    _, wrong = complete(s3, bucket, "mp", IfMatch='"ffffffffffffffffffffffffffffffff"')
    with pytest.raises(ClientError) as err:
        wrong()
    assert error_code(err.value) == "PreconditionFailed"
    _, right = complete(s3, bucket, "mp", IfMatch=etag)
    right()
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"part"


def test_aws_cli_conditional_put(aws, s3, bucket, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"cli")
    aws("s3api", "put-object", "--bucket", bucket, "--key", "c", "--body", str(path), "--if-none-match", "*")
    second = aws(
        "s3api", "put-object", "--bucket", bucket, "--key", "c", "--body", str(path), "--if-none-match", "*",
        check=False,
    )
    assert second.returncode != 0
    assert "PreconditionFailed" in second.stderr
