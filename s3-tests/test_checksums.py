"""Additional checksums kept with objects and parts: returned by GetObject
and HeadObject with checksum mode, by GetObjectAttributes, and for
multipart objects as FULL_OBJECT (combined part CRCs) or COMPOSITE."""

import base64
import hashlib
import os
import zlib

import pytest
import requests
from botocore.exceptions import ClientError

from tessera_clients import MIB, error_code, http_status, md5_b64, s3_error_code, signed_headers


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def crc32_b64(data: bytes) -> str:
    return b64(zlib.crc32(data).to_bytes(4, "big"))


def _reflected_table(poly: int) -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _reflected_table(0x82F63B78)
_CRC64NVME = _reflected_table(0x9A6C9329AC4BC9B5)


def reflected_crc(data: bytes, table: list[int], width: int) -> bytes:
    """A reflected CRC with all-ones init and xor-out (CRC32C, CRC64/NVME),
    in pure Python: botocore needs awscrt for these two."""
    mask = (1 << width) - 1
    crc = mask
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return (crc ^ mask).to_bytes(width // 8, "big")


def crc32c_b64(data: bytes) -> str:
    return b64(reflected_crc(data, _CRC32C, 32))


def crc64nvme_b64(data: bytes) -> str:
    return b64(reflected_crc(data, _CRC64NVME, 64))


def sha1_b64(data: bytes) -> str:
    return b64(hashlib.sha1(data).digest())


def sha256_b64(data: bytes) -> str:
    return b64(hashlib.sha256(data).digest())


# x-amz-checksum-<name>, the name S3's messages use, and the value in Python.
CHECKSUMS = [
    ("crc32", "CRC32", crc32_b64),
    ("crc32c", "CRC32C", crc32c_b64),
    ("crc64nvme", "CRC64NVME", crc64nvme_b64),
    ("sha1", "SHA1", sha1_b64),
    ("sha256", "SHA256", sha256_b64),
]


def assert_bad_checksum(response: requests.Response, name: str) -> None:
    """400 BadDigest with S3's message naming the algorithm."""
    assert response.status_code == 400, response.text
    assert s3_error_code(response) == "BadDigest", response.text
    message = f"The {name} you specified did not match the calculated checksum."
    assert f"<Message>{message}</Message>" in response.text, response.text


def test_python_crcs_match_the_catalogue():
    assert reflected_crc(b"123456789", _CRC32C, 32).hex() == "e3069283"
    assert reflected_crc(b"123456789", _CRC64NVME, 64).hex() == "ae8b14860a799888"
    assert zlib.crc32(b"123456789").to_bytes(4, "big").hex() == "cbf43926"


def test_put_checksums_are_returned(s3, bucket):
    data = os.urandom(70_000)
    sha = b64(hashlib.sha256(data).digest())
    s3.put_object(Bucket=bucket, Key="sha", Body=data, ChecksumSHA256=sha)
    head = s3.head_object(Bucket=bucket, Key="sha", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == sha
    assert head["ChecksumType"] == "FULL_OBJECT"
    got = s3.get_object(Bucket=bucket, Key="sha", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == sha
    assert got["Body"].read() == data
    # Without checksum mode nothing is sent.
    assert "ChecksumSHA256" not in s3.head_object(Bucket=bucket, Key="sha")
    # A ranged read has no whole-object checksum.
    ranged = s3.get_object(Bucket=bucket, Key="sha", Range="bytes=0-9", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in ranged


@pytest.mark.parametrize("algorithm,compute", [("CRC32", crc32_b64), ("SHA1", sha1_b64), ("SHA256", sha256_b64)])
def test_sdk_checksum_is_kept(s3, bucket, algorithm, compute):
    data = os.urandom(10_000)
    expected = compute(data)
    put = s3.put_object(Bucket=bucket, Key="k", Body=data, ChecksumAlgorithm=algorithm)
    assert put[f"Checksum{algorithm}"] == expected
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == expected
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == expected
    assert got["Body"].read() == data
    attributes = s3.get_object_attributes(
        Bucket=bucket, Key="k", ObjectAttributes=["ETag", "Checksum", "ObjectSize", "StorageClass"]
    )
    assert attributes["Checksum"][f"Checksum{algorithm}"] == expected
    assert attributes["ObjectSize"] == len(data)
    assert attributes["StorageClass"] == "STANDARD"
    assert f'"{attributes["ETag"]}"' == head["ETag"]


@pytest.mark.parametrize("algorithm,compute", [("crc32c", crc32c_b64), ("crc64nvme", crc64nvme_b64)])
def test_crc32c_and_crc64nvme_are_kept(raw, s3, bucket, algorithm, compute):
    data = os.urandom(3000)
    value = compute(data)
    reply = raw.request("PUT", f"/{bucket}/k", headers={f"x-amz-checksum-{algorithm}": value}, body=data)
    assert reply.status_code == 200, reply.text
    assert reply.headers[f"x-amz-checksum-{algorithm}"] == value
    head = raw.request("HEAD", f"/{bucket}/k", headers={"x-amz-checksum-mode": "ENABLED"})
    assert head.headers[f"x-amz-checksum-{algorithm}"] == value
    assert head.headers["x-amz-checksum-type"] == "FULL_OBJECT"
    bad = raw.request("PUT", f"/{bucket}/k2", headers={f"x-amz-checksum-{algorithm}": value}, body=data + b"!")
    assert_bad_checksum(bad, algorithm.upper())
    assert raw.request("HEAD", f"/{bucket}/k2").status_code == 404


@pytest.mark.parametrize("header,name,compute", CHECKSUMS, ids=[c[0] for c in CHECKSUMS])
def test_wrong_checksum_header_is_bad_digest(raw, s3, bucket, header, name, compute):
    """A well-formed x-amz-checksum-* value of other bytes: 400 BadDigest,
    and the earlier version stays."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"previous version")
    data = os.urandom(5000)
    wrong = compute(data[:-1])
    bad = raw.request("PUT", f"/{bucket}/k", headers={f"x-amz-checksum-{header}": wrong}, body=data)
    assert_bad_checksum(bad, name)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"previous version"
    good = raw.request("PUT", f"/{bucket}/k", headers={f"x-amz-checksum-{header}": compute(data)}, body=data)
    assert good.status_code == 200, good.text
    assert good.headers[f"x-amz-checksum-{header}"] == compute(data)


def test_upload_part_with_wrong_content_md5_is_bad_digest(raw, s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    data = os.urandom(1000)
    query = f"partNumber=1&uploadId={upload}"
    bad = raw.request("PUT", f"/{bucket}/mp", query=query, headers={"Content-MD5": md5_b64(b"other")}, body=data)
    assert bad.status_code == 400, bad.text
    assert s3_error_code(bad) == "BadDigest", bad.text
    assert s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)


def test_delete_objects_with_wrong_content_md5_is_bad_digest(raw, s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"kept")
    document = b"<Delete><Object><Key>a</Key></Object></Delete>"
    bad = raw.request(
        "POST", f"/{bucket}", query="delete", headers={"Content-MD5": md5_b64(document + b" ")}, body=document
    )
    assert bad.status_code == 400, bad.text
    assert s3_error_code(bad) == "BadDigest", bad.text
    assert s3.get_object(Bucket=bucket, Key="a")["Body"].read() == b"kept"
    good = raw.request("POST", f"/{bucket}", query="delete", headers={"Content-MD5": md5_b64(document)}, body=document)
    assert good.status_code == 200, good.text
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_upload_part_with_wrong_checksum_is_bad_digest(raw, s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ChecksumAlgorithm="CRC32")["UploadId"]
    data = os.urandom(1000)
    query = f"partNumber=1&uploadId={upload}"
    bad = raw.request(
        "PUT", f"/{bucket}/mp", query=query, headers={"x-amz-checksum-crc32": crc32_b64(b"other")}, body=data
    )
    assert_bad_checksum(bad, "CRC32")
    assert s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)


def test_complete_with_a_part_checksum_that_differs_is_invalid_part(s3, bucket):
    """CompleteMultipartUpload naming a part by its ETag but with a
    ChecksumCRC32 other than the uploaded part's: 400 InvalidPart, nothing
    is committed and the upload can still complete."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ChecksumAlgorithm="CRC32")["UploadId"]
    data = os.urandom(1000)
    reply = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, Body=data, ChecksumAlgorithm="CRC32")
    assert reply["ChecksumCRC32"] == crc32_b64(data)
    wrong = {"PartNumber": 1, "ETag": reply["ETag"], "ChecksumCRC32": crc32_b64(data + b"!")}
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={"Parts": [wrong]})
    assert (http_status(refused.value), error_code(refused.value)) == (400, "InvalidPart")
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="mp")
    assert http_status(missing.value) == 404
    right = {"PartNumber": 1, "ETag": reply["ETag"], "ChecksumCRC32": reply["ChecksumCRC32"]}
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={"Parts": [right]})
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == data


def test_payload_hash_mismatch_is_xamz_content_sha256_mismatch(raw, s3, bucket):
    """A request signed for one body (x-amz-content-sha256 its SHA-256)
    carrying another of the same length: 400 XAmzContentSHA256Mismatch."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"previous version")
    signed_for, sent = b"a" * 1000, b"b" * 1000
    headers = signed_headers(raw, "PUT", f"/{bucket}/k", body=signed_for)
    bad = requests.put(raw.url(f"/{bucket}/k"), headers=headers, data=sent, timeout=60)
    assert bad.status_code == 400, bad.text
    assert s3_error_code(bad) == "XAmzContentSHA256Mismatch", bad.text
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"previous version"


def multipart(s3, bucket, key, parts, algorithm, kind=None):
    extra = {"ChecksumType": kind} if kind else {}
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm, **extra)["UploadId"]
    done = []
    for number, data in enumerate(parts, 1):
        reply = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data, ChecksumAlgorithm=algorithm
        )
        entry = {"PartNumber": number, "ETag": reply["ETag"]}
        entry[f"Checksum{algorithm}"] = reply[f"Checksum{algorithm}"]
        done.append(entry)
    reply = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done})
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert reply[f"Checksum{algorithm}"] == head[f"Checksum{algorithm}"]
    assert reply["ChecksumType"] == head["ChecksumType"]
    return done


def test_multipart_crc32_full_object_combines_part_crcs(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(1234)]
    multipart(s3, bucket, "full", parts, "CRC32", "FULL_OBJECT")
    head = s3.head_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == crc32_b64(b"".join(parts))
    assert head["ChecksumType"] == "FULL_OBJECT"
    # boto3 verifies a full-object checksum against the body it reads.
    body = s3.get_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")["Body"].read()
    assert body == b"".join(parts)


def test_multipart_composite_is_checksum_of_part_checksums(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(100)]
    done = multipart(s3, bucket, "composite", parts, "CRC32")
    digests = b"".join(base64.b64decode(p["ChecksumCRC32"]) for p in done)
    head = s3.head_object(Bucket=bucket, Key="composite", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == f"{crc32_b64(digests)}-2"
    assert head["ChecksumType"] == "COMPOSITE"
    attributes = s3.get_object_attributes(
        Bucket=bucket, Key="composite", ObjectAttributes=["ObjectParts", "Checksum"], MaxParts=1
    )
    object_parts = attributes["ObjectParts"]
    assert object_parts["TotalPartsCount"] == 2
    assert object_parts["IsTruncated"] is True
    assert [(p["PartNumber"], p["Size"], p["ChecksumCRC32"]) for p in object_parts["Parts"]] == [
        (1, 5 * MIB, done[0]["ChecksumCRC32"])
    ]
    part = s3.head_object(Bucket=bucket, Key="composite", PartNumber=2, ChecksumMode="ENABLED")
    assert part["ChecksumCRC32"] == done[1]["ChecksumCRC32"]


@pytest.mark.parametrize(
    "algorithm,compute,kind",
    [("crc64nvme", crc64nvme_b64, None), ("crc32c", crc32c_b64, "FULL_OBJECT")],
)
def test_multipart_crc_full_object_without_reading_data(raw, s3, bucket, algorithm, compute, kind):
    """The object CRC is the combination of the part CRCs (CRC64NVME is
    full-object by default)."""
    parts = [bytes(range(256)) * (5 * MIB // 256), os.urandom(777)]
    extra = {"ChecksumType": kind} if kind else {}
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ChecksumAlgorithm=algorithm.upper(), **extra)[
        "UploadId"
    ]
    done = []
    for number, data in enumerate(parts, 1):
        reply = raw.request(
            "PUT",
            f"/{bucket}/mp",
            query=f"partNumber={number}&uploadId={upload}",
            headers={f"x-amz-checksum-{algorithm}": compute(data)},
            body=data,
        )
        assert reply.status_code == 200, reply.text
        done.append({"PartNumber": number, "ETag": reply.headers["ETag"]})
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={"Parts": done})
    head = raw.request("HEAD", f"/{bucket}/mp", headers={"x-amz-checksum-mode": "ENABLED"})
    assert head.headers[f"x-amz-checksum-{algorithm}"] == compute(b"".join(parts))
    assert head.headers["x-amz-checksum-type"] == "FULL_OBJECT"


def test_aws_cli_reads_checksums(aws, s3, bucket):
    import json

    data = os.urandom(1000)
    s3.put_object(Bucket=bucket, Key="cli", Body=data, ChecksumAlgorithm="CRC32")
    out = json.loads(
        aws(
            "s3api",
            "get-object-attributes",
            "--bucket",
            bucket,
            "--key",
            "cli",
            "--object-attributes",
            "Checksum",
            "ObjectSize",
        ).stdout
    )
    assert out["Checksum"]["ChecksumCRC32"] == crc32_b64(data)
    assert out["ObjectSize"] == 1000


def test_complete_checks_the_object_checksum_it_names(s3, bucket):
    """An `x-amz-checksum-*` header on CompleteMultipartUpload names the
    object's checksum (full-object, or composite with or without its `-N`),
    as the SDKs' helpers compute it: a right one completes, a wrong one is
    400 BadDigest before anything is committed, the upload still there."""
    parts = [b"A" * 5 * MIB, b"B" * 5 * MIB, b"C" * 1234]

    def upload(key, algorithm, kind):
        upload_id = s3.create_multipart_upload(
            Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm, ChecksumType=kind
        )["UploadId"]
        done = []
        for number, data in enumerate(parts, 1):
            reply = s3.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data, ChecksumAlgorithm=algorithm
            )
            done.append(
                {"PartNumber": number, "ETag": reply["ETag"], f"Checksum{algorithm}": reply[f"Checksum{algorithm}"]}
            )
        return upload_id, done

    def complete(key, upload_id, done, **claimed):
        return s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}, **claimed
        )

    full = crc32_b64(b"".join(parts))
    upload_id, done = upload("full", "CRC32", "FULL_OBJECT")
    with pytest.raises(ClientError) as wrong:
        complete("full", upload_id, done, ChecksumCRC32=crc32_b64(b"other"))
    assert (http_status(wrong.value), error_code(wrong.value)) == (400, "BadDigest")
    assert "CRC32 you specified did not match" in wrong.value.response["Error"]["Message"]
    assert s3.list_parts(Bucket=bucket, Key="full", UploadId=upload_id)["Parts"], "the upload is still there"
    reply = complete("full", upload_id, done, ChecksumCRC32=full)
    assert (reply["ChecksumCRC32"], reply["ChecksumType"]) == (full, "FULL_OBJECT")

    digests = b"".join(base64.b64decode(sha256_b64(p)) for p in parts)
    composite = f"{sha256_b64(digests)}-3"
    for key, claimed in (("composite", composite), ("composite-bare", composite.rsplit("-", 1)[0])):
        upload_id, done = upload(key, "SHA256", "COMPOSITE")
        with pytest.raises(ClientError) as wrong:
            complete(key, upload_id, done, ChecksumSHA256=sha256_b64(b"other"))
        assert error_code(wrong.value) == "BadDigest"
        reply = complete(key, upload_id, done, ChecksumSHA256=claimed)
        assert (reply["ChecksumSHA256"], reply["ChecksumType"]) == (composite, "COMPOSITE")
        # A part read by number carries that part's checksum.
        second = s3.get_object(Bucket=bucket, Key=key, PartNumber=2, ChecksumMode="ENABLED")
        assert (second["ChecksumSHA256"], second["ChecksumType"]) == (sha256_b64(parts[1]), "COMPOSITE")
        assert second["Body"].read() == parts[1]
