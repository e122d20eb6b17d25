"""Multipart uploads: ETags, ListParts, ListMultipartUploads, abort, the
part-size and part-list errors, and aws-cli's own multipart copy."""

import hashlib
import os

import pytest
from botocore.exceptions import ClientError

from tessera_clients import MIB, error_code, http_status, md5_hex, sha256_hex, sha256_of_file, write_random_file


def multipart_etag(parts):
    """md5 of the concatenated binary part MD5s, then -N, quoted."""
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(joined).hexdigest()}-{len(parts)}"'


def upload_parts(s3, bucket, key, upload_id, parts):
    etags = []
    for number, data in enumerate(parts, 1):
        reply = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data)
        assert reply["ETag"] == f'"{md5_hex(data)}"', f"part {number} ETag is its MD5"
        etags.append(reply["ETag"])
    return etags


def completed(etags):
    return {"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]}


def test_three_parts_etag_list_parts_and_bytes(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(1 * MIB)]
    whole = b"".join(parts)
    created = s3.create_multipart_upload(
        Bucket=bucket, Key="mp/three", ContentType="application/x-tessera-test", Metadata={"origin": "multipart"}
    )
    upload_id = created["UploadId"]
    assert upload_id

    etags = upload_parts(s3, bucket, "mp/three", upload_id, parts)

    listed = s3.list_parts(Bucket=bucket, Key="mp/three", UploadId=upload_id)
    assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in listed["Parts"]] == [
        (1, 5 * MIB, etags[0]),
        (2, 5 * MIB, etags[1]),
        (3, 1 * MIB, etags[2]),
    ]
    assert listed["IsTruncated"] is False

    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp/three", UploadId=upload_id, MultipartUpload=completed(etags)
    )
    assert done["ETag"] == multipart_etag(parts)
    assert done["Key"] == "mp/three"

    got = s3.get_object(Bucket=bucket, Key="mp/three")
    assert got["ContentLength"] == len(whole)
    assert got["ETag"] == multipart_etag(parts)
    assert got["ContentType"] == "application/x-tessera-test"
    assert got["Metadata"] == {"origin": "multipart"}
    assert sha256_hex(got["Body"].read()) == sha256_hex(whole)

    # A range across the boundary of parts 1 and 2.
    start, end = 5 * MIB - 7, 5 * MIB + 7
    ranged = s3.get_object(Bucket=bucket, Key="mp/three", Range=f"bytes={start}-{end}")
    assert ranged["Body"].read() == whole[start : end + 1]

    listing = s3.list_objects_v2(Bucket=bucket, Prefix="mp/")
    assert [(o["Key"], o["Size"], o["ETag"]) for o in listing["Contents"]] == [
        ("mp/three", len(whole), multipart_etag(parts))
    ]

    # The upload is gone once completed.
    with pytest.raises(ClientError) as gone:
        s3.list_parts(Bucket=bucket, Key="mp/three", UploadId=upload_id)
    assert error_code(gone.value) == "NoSuchUpload"


def test_single_small_part_is_allowed(s3, bucket):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp/one")["UploadId"]
    etags = upload_parts(s3, bucket, "mp/one", upload_id, [b"z"])
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp/one", UploadId=upload_id, MultipartUpload=completed(etags)
    )
    assert done["ETag"] == multipart_etag([b"z"])
    assert s3.get_object(Bucket=bucket, Key="mp/one")["Body"].read() == b"z"


def test_reuploaded_part_replaces_the_first(s3, bucket):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp/again")["UploadId"]
    upload_parts(s3, bucket, "mp/again", upload_id, [b"first try"])
    etags = upload_parts(s3, bucket, "mp/again", upload_id, [b"second"])
    listed = s3.list_parts(Bucket=bucket, Key="mp/again", UploadId=upload_id)
    assert [(p["PartNumber"], p["Size"]) for p in listed["Parts"]] == [(1, 6)]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp/again", UploadId=upload_id, MultipartUpload=completed(etags))
    assert s3.get_object(Bucket=bucket, Key="mp/again")["Body"].read() == b"second"


def test_list_multipart_uploads(s3, bucket):
    first = s3.create_multipart_upload(Bucket=bucket, Key="mp/a")["UploadId"]
    second = s3.create_multipart_upload(Bucket=bucket, Key="mp/b")["UploadId"]
    uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert sorted((u["Key"], u["UploadId"]) for u in uploads) == [("mp/a", first), ("mp/b", second)]


def test_abort(s3, bucket):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp/aborted")["UploadId"]
    upload_parts(s3, bucket, "mp/aborted", upload_id, [os.urandom(MIB)])
    aborted = s3.abort_multipart_upload(Bucket=bucket, Key="mp/aborted", UploadId=upload_id)
    assert http_status(aborted) == 204

    with pytest.raises(ClientError) as listing:
        s3.list_parts(Bucket=bucket, Key="mp/aborted", UploadId=upload_id)
    assert error_code(listing.value) == "NoSuchUpload"
    assert http_status(listing.value) == 404

    with pytest.raises(ClientError) as part:
        s3.upload_part(Bucket=bucket, Key="mp/aborted", UploadId=upload_id, PartNumber=2, Body=b"late")
    assert error_code(part.value) == "NoSuchUpload"

    with pytest.raises(ClientError) as complete:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="mp/aborted",
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]},
        )
    assert error_code(complete.value) == "NoSuchUpload"

    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=bucket, Key="mp/aborted")
    assert http_status(head.value) == 404


def test_part_smaller_than_5_mib_before_the_last_is_entity_too_small(s3, bucket):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp/small")["UploadId"]
    etags = upload_parts(s3, bucket, "mp/small", upload_id, [os.urandom(MIB), os.urandom(MIB)])
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="mp/small", UploadId=upload_id, MultipartUpload=completed(etags)
        )
    assert error_code(refused.value) == "EntityTooSmall"
    assert http_status(refused.value) == 400
    with pytest.raises(ClientError) as head:
        s3.head_object(Bucket=bucket, Key="mp/small")
    assert http_status(head.value) == 404


def test_unknown_part_or_wrong_etag_is_invalid_part(s3, bucket):
    # Part 1 is 5 MiB so that naming it before another part is not EntityTooSmall.
    first = os.urandom(5 * MIB)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp/invalid")["UploadId"]
    etags = upload_parts(s3, bucket, "mp/invalid", upload_id, [first])

    with pytest.raises(ClientError) as missing:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="mp/invalid",
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 2, "ETag": etags[0]}]},
        )
    assert error_code(missing.value) == "InvalidPart"
    assert http_status(missing.value) == 400

    wrong = f'"{md5_hex(b"not the part")}"'
    with pytest.raises(ClientError) as mismatch:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="mp/invalid",
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": wrong}]},
        )
    assert error_code(mismatch.value) == "InvalidPart"

    # The upload survives a refused completion.
    s3.complete_multipart_upload(Bucket=bucket, Key="mp/invalid", UploadId=upload_id, MultipartUpload=completed(etags))
    assert sha256_hex(s3.get_object(Bucket=bucket, Key="mp/invalid")["Body"].read()) == sha256_hex(first)


def test_parts_out_of_order_is_invalid_part_order(s3, bucket):
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp/order")["UploadId"]
    etags = upload_parts(s3, bucket, "mp/order", upload_id, [os.urandom(5 * MIB), b"tail"])
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="mp/order",
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": etags[1]}, {"PartNumber": 1, "ETag": etags[0]}]},
        )
    assert error_code(refused.value) == "InvalidPartOrder"
    assert http_status(refused.value) == 400


def test_aws_cli_cp_64_mib_up_and_down(aws, s3, bucket, tmp_path):
    source = tmp_path / "source.bin"
    expected = write_random_file(source, 64 * MIB)
    aws("s3", "cp", str(source), f"s3://{bucket}/cli/64MiB.bin")

    head = s3.head_object(Bucket=bucket, Key="cli/64MiB.bin")
    assert head["ContentLength"] == 64 * MIB
    assert "-" in head["ETag"], "aws-cli uploads files above 8 MiB in parts"

    target = tmp_path / "back.bin"
    aws("s3", "cp", f"s3://{bucket}/cli/64MiB.bin", str(target))
    assert target.stat().st_size == 64 * MIB
    assert sha256_of_file(target) == expected


def test_retried_completion_answers_the_same_etag(s3, bucket):
    """A client whose completion answer was lost completes again: S3 answers
    it as the first time; other parts, or a later object, name no upload."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key="retried")
    parts = [os.urandom(5 * MIB), b"tail"]
    etags = upload_parts(s3, bucket, "retried", upload["UploadId"], parts)
    first = s3.complete_multipart_upload(
        Bucket=bucket, Key="retried", UploadId=upload["UploadId"], MultipartUpload=completed(etags)
    )
    again = s3.complete_multipart_upload(
        Bucket=bucket, Key="retried", UploadId=upload["UploadId"], MultipartUpload=completed(etags)
    )
    assert again["ETag"] == first["ETag"] == multipart_etag(parts)
    assert s3.get_object(Bucket=bucket, Key="retried")["Body"].read() == b"".join(parts)
    with pytest.raises(ClientError) as fewer:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="retried", UploadId=upload["UploadId"], MultipartUpload=completed(etags[:1])
        )
    assert error_code(fewer.value) == "NoSuchUpload"
    s3.put_object(Bucket=bucket, Key="retried", Body=b"newer")
    with pytest.raises(ClientError) as replaced:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="retried", UploadId=upload["UploadId"], MultipartUpload=completed(etags)
        )
    assert error_code(replaced.value) == "NoSuchUpload"
