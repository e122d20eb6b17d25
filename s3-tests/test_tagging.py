"""Object and bucket tags: Put/Get/DeleteObjectTagging, x-amz-tagging on
PutObject, CreateMultipartUpload and CopyObject (with the tagging
directive), the tag limits, bucket tagging, and the aws CLI."""

import json

import pytest
from botocore.exceptions import ClientError

from tessera_clients import error_code, http_status


def tagset(reply):
    return {t["Key"]: t["Value"] for t in reply["TagSet"]}


def test_object_tagging_round_trip(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="k")) == {}
    s3.put_object_tagging(
        Bucket=bucket, Key="k", Tagging={"TagSet": [{"Key": "team", "Value": "blue"}, {"Key": "e", "Value": ""}]}
    )
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="k")) == {"team": "blue", "e": ""}
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["TagCount"] == 2
    assert got["Body"].read() == b"data"
    deleted = s3.delete_object_tagging(Bucket=bucket, Key="k")
    assert http_status(deleted) == 204
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="k")) == {}
    assert "TagCount" not in s3.head_object(Bucket=bucket, Key="k")


def test_tagging_missing_object(s3, bucket):
    with pytest.raises(ClientError) as err:
        s3.get_object_tagging(Bucket=bucket, Key="absent")
    assert error_code(err.value) == "NoSuchKey"


def test_tagging_header_on_put_and_multipart(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"x", Tagging="a=1&b=two%20words")
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="p")) == {"a": "1", "b": "two words"}
    upload = s3.create_multipart_upload(Bucket=bucket, Key="m", Tagging="mp=yes")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="m", UploadId=upload, PartNumber=1, Body=b"abc")
    s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    )
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="m")) == {"mp": "yes"}


def test_copy_tagging_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"x", Tagging="orig=1")
    s3.copy_object(Bucket=bucket, Key="kept", CopySource={"Bucket": bucket, "Key": "src"})
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="kept")) == {"orig": "1"}
    s3.copy_object(
        Bucket=bucket, Key="replaced", CopySource={"Bucket": bucket, "Key": "src"},
        TaggingDirective="REPLACE", Tagging="new=2",
    )
    assert tagset(s3.get_object_tagging(Bucket=bucket, Key="replaced")) == {"new": "2"}


@pytest.mark.parametrize(
    "tags",
    [
        [{"Key": f"k{i}", "Value": "v"} for i in range(11)],
        [{"Key": "k" * 129, "Value": "v"}],
        [{"Key": "k", "Value": "v" * 257}],
        [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}],
    ],
    ids=["eleven-tags", "long-key", "long-value", "duplicate-key"],
)
def test_tag_limits(s3, bucket, tags):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    with pytest.raises(ClientError) as err:
        s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tags})
    assert error_code(err.value) == "InvalidTag"
    assert http_status(err.value) == 400


def test_tag_limits_at_the_edge_are_accepted(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    tags = [{"Key": f"{i}" + "k" * 127, "Value": "v" * 256} for i in range(10)]
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tags})
    assert len(tagset(s3.get_object_tagging(Bucket=bucket, Key="k"))) == 10
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="h", Body=b"x", Tagging="&".join(f"k{i}=v" for i in range(11)))
    assert error_code(err.value) == "InvalidTag"


def test_bucket_tagging(s3, bucket):
    with pytest.raises(ClientError) as err:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error_code(err.value) == "NoSuchTagSet"
    assert http_status(err.value) == 404
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "owner", "Value": "ops"}]})
    assert tagset(s3.get_bucket_tagging(Bucket=bucket)) == {"owner": "ops"}
    s3.delete_bucket_tagging(Bucket=bucket)
    with pytest.raises(ClientError) as err:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error_code(err.value) == "NoSuchTagSet"


def test_aws_cli_tagging(aws, s3, bucket):
    s3.put_object(Bucket=bucket, Key="cli", Body=b"x")
    aws(
        "s3api", "put-object-tagging", "--bucket", bucket, "--key", "cli",
        "--tagging", json.dumps({"TagSet": [{"Key": "via", "Value": "cli"}]}),
    )
    out = aws("s3api", "get-object-tagging", "--bucket", bucket, "--key", "cli")
    assert json.loads(out.stdout)["TagSet"] == [{"Key": "via", "Value": "cli"}]
