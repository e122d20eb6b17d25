"""Limits and bad input: bucket names, key length, odd keys, XML and header
sizes, missing or wrong Content-Length, and `Expect: 100-continue` answered
only once the request is authorised. None of it may corrupt or lose other data."""

import socket

import pytest
from botocore.exceptions import ClientError

from raw_http import connect, read_error, read_response, send_head, signed_head, signed_streaming
from tessera_clients import error_code, http_status, md5_b64, s3_error_code
from tessera_procs import random_secret


@pytest.mark.parametrize(
    "name",
    [
        "ab",
        "Upper-Case",
        "under_score",
        "-leading",
        "trailing-",
        "192.168.5.4",
        "a..b",
        "a" * 64,
        "xn--punycode",
        "ends-s3alias",
    ],
)
def test_invalid_bucket_names(raw, name):
    response = raw.request("PUT", f"/{name}")
    assert response.status_code == 400, response.text
    assert s3_error_code(response) == "InvalidBucketName"


def test_key_length_limit_is_1024_bytes(s3, bucket):
    longest = "k" * 1024
    s3.put_object(Bucket=bucket, Key=longest, Body=b"fits")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"too long")
    assert error_code(refused.value) == "KeyTooLongError"
    assert http_status(refused.value) == 400
    # Multi-byte characters count as their UTF-8 bytes.
    with pytest.raises(ClientError):
        s3.put_object(Bucket=bucket, Key="\u00e9" * 513, Body=b"x")
    assert s3.get_object(Bucket=bucket, Key=longest)["Body"].read() == b"fits"


@pytest.mark.parametrize("key", ["../x", "a//b", ".", "./y", "a/./b", "a/../b", "..", "/lead", "trail/"])
def test_dot_and_slash_keys_are_plain_names(s3, bucket, key):
    s3.put_object(Bucket=bucket, Key="x", Body=b"the x object")
    s3.put_object(Bucket=bucket, Key="b", Body=b"the b object")
    s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert key in keys
    # The neighbours a path-normalising server would have overwritten are intact.
    assert s3.get_object(Bucket=bucket, Key="x")["Body"].read() == b"the x object"
    assert s3.get_object(Bucket=bucket, Key="b")["Body"].read() == b"the b object"


def test_control_characters_in_keys_round_trip(s3, bucket):
    keys = ["ctl\x01one", "tab\tkey", "del\x7f", "nl\nkey", "cr\rkey"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    # boto3 lists with encoding-type=url and decodes, as S3 recommends for such keys.
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(listed, key=lambda k: k.encode()) == sorted(keys, key=lambda k: k.encode())
    for key in keys:
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()


def test_invalid_utf8_key_is_invalid_uri(raw, s3, bucket):
    s3.put_object(Bucket=bucket, Key="keep", Body=b"kept")
    response = raw.request("PUT", f"/{bucket}/bad%FF%FEkey", body=b"x")
    assert response.status_code == 400, response.text
    assert s3_error_code(response) == "InvalidURI"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["keep"]


@pytest.mark.parametrize(
    "document",
    [b"<Delete><Object><Key>a</Key>", b"<Delete><Object><Key>a</Key></Object></Delet>", b"not xml at all"],
    ids=["unclosed", "mismatched-end-tag", "not-xml"],
)
def test_delete_objects_with_malformed_xml_is_malformed_xml(raw, s3, bucket, document):
    """The body's Content-MD5 is right, so only the XML parser can refuse it."""
    s3.put_object(Bucket=bucket, Key="a", Body=b"kept")
    junk = raw.request("POST", f"/{bucket}", query="delete", body=document, headers={"Content-MD5": md5_b64(document)})
    assert junk.status_code == 400, junk.text
    assert s3_error_code(junk) == "MalformedXML", junk.text
    assert s3.get_object(Bucket=bucket, Key="a")["Body"].read() == b"kept"


def test_malformed_and_oversized_xml(raw, bucket):
    unclosed = raw.request("PUT", f"/{bucket}", query="cors", body=b"<CORSConfiguration><CORSRule>")
    assert unclosed.status_code == 400 and s3_error_code(unclosed) == "MalformedXML"
    rule = b"<CORSRule><AllowedOrigin>http://o.example</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"
    huge = b"<CORSConfiguration>" + rule * 800 + b"</CORSConfiguration>"
    assert len(huge) > 64 * 1024
    too_big = raw.request("PUT", f"/{bucket}", query="cors", body=huge)
    assert too_big.status_code == 400 and s3_error_code(too_big) == "MaxMessageLengthExceeded"
    too_many = b"<CORSConfiguration>" + rule * 101 + b"</CORSConfiguration>"
    response = raw.request("PUT", f"/{bucket}", query="cors", body=too_many)
    assert response.status_code == 400 and s3_error_code(response) == "InvalidRequest"


@pytest.mark.parametrize("size", [8 * 1024, 64 * 1024], ids=["8KiB", "64KiB"])
def test_oversized_header_section_is_refused_and_the_server_goes_on(server, s3, bucket, size):
    """S3 refuses a header section over its limit (8 KiB) with 400
    RequestHeaderSectionTooLarge, before authentication."""
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "GET", f"/{bucket}", {"X-Huge": "h" * size})
        status, code, reply = read_error(sock, "400 RequestHeaderSectionTooLarge")
    s3.put_object(Bucket=bucket, Key="after", Body=b"still serving")
    assert s3.get_object(Bucket=bucket, Key="after")["Body"].read() == b"still serving"
    assert (status, code) == (400, "RequestHeaderSectionTooLarge"), reply


def test_header_section_past_the_http_read_buffer_is_431(server, s3, bucket):
    """A header section too big for the HTTP layer's read buffer (hyper's,
    about 400 KiB) is refused there, before S3 parsing: 431 Request Header
    Fields Too Large, not S3's 400 (a documented departure); other
    connections are unaffected."""
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "GET", f"/{bucket}", {"X-Huge": "h" * (1024 * 1024)})
        status, _reply = read_response(sock)
    assert status == 431
    s3.put_object(Bucket=bucket, Key="after-431", Body=b"still serving")
    assert s3.get_object(Bucket=bucket, Key="after-431")["Body"].read() == b"still serving"


def test_metadata_over_2kb_is_refused(s3, bucket):
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key="m", Body=b"x", Metadata={"big": "v" * 2100})
    assert error_code(refused.value) == "MetadataTooLarge"


def test_put_without_content_length_is_missing_content_length(server, s3, bucket):
    body = b"0123456789"
    headers = signed_head(server, "PUT", f"/{bucket}/chunked", body)
    headers.pop("Content-Length", None)
    headers["Transfer-Encoding"] = "chunked"
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/chunked", headers)
        sock.sendall(b"a\r\n" + body + b"\r\n0\r\n\r\n")
        status, reply = read_response(sock)
    assert status == 411, reply
    assert b"<Code>MissingContentLength</Code>" in reply
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="chunked")


def put_half_of_body(server, target):
    """PUTs `target` signed for a 10-byte body, sends 5 bytes and closes
    its side; returns (status, S3 code, reply)."""
    body = b"0123456789"
    headers = signed_head(server, "PUT", target, body)
    headers["Content-Length"] = str(len(body))
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", target, headers)
        sock.sendall(body[:5])
        sock.shutdown(socket.SHUT_WR)
        return read_error(sock, "400 IncompleteBody")


def test_body_shorter_than_declared_is_incomplete_body(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="short", Body=b"previous version")
    status, code, reply = put_half_of_body(server, f"/{bucket}/short")
    assert (status, code) == (400, "IncompleteBody"), reply
    assert s3.get_object(Bucket=bucket, Key="short")["Body"].read() == b"previous version"


def test_upload_part_shorter_than_declared_is_incomplete_body(server, s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    status, code, reply = put_half_of_body(server, f"/{bucket}/mp?partNumber=1&uploadId={upload}")
    assert (status, code) == (400, "IncompleteBody"), reply
    assert s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)


@pytest.mark.parametrize("cut", ["mid-chunk", "before-decoded-length"])
def test_truncated_aws_chunked_body_is_incomplete_body(server, s3, bucket, cut):
    """An aws-chunked body that stops inside a chunk (the client then closes
    its side), or whose chunks end before x-amz-decoded-content-length."""
    s3.put_object(Bucket=bucket, Key="cut", Body=b"previous version")
    payload = b"0123456789"
    framed = b"a\r\n" + payload + b"\r\n0\r\n\r\n"
    decoded = len(payload) if cut == "mid-chunk" else len(payload) + 10
    headers = signed_streaming(
        server,
        f"/{bucket}/cut",
        {
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(decoded),
            "Content-Length": str(len(framed)),
        },
    )
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/cut", headers)
        if cut == "mid-chunk":
            sock.sendall(framed[:8])
            sock.shutdown(socket.SHUT_WR)
        else:
            sock.sendall(framed)
        status, code, reply = read_error(sock, "400 IncompleteBody")
    assert (status, code) == (400, "IncompleteBody"), reply
    assert s3.get_object(Bucket=bucket, Key="cut")["Body"].read() == b"previous version"


def test_body_longer_than_declared_is_refused(server, s3, bucket):
    """An aws-chunked body carrying more bytes than x-amz-decoded-content-length."""
    s3.put_object(Bucket=bucket, Key="long", Body=b"previous version")
    payload = b"0123456789"
    framed = b"a\r\n" + payload + b"\r\n0\r\n\r\n"
    headers = signed_streaming(
        server,
        f"/{bucket}/long",
        {
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": "5",
            "Content-Length": str(len(framed)),
        },
    )
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/long", headers)
        sock.sendall(framed)
        status, code, reply = read_error(sock, "400 IncompleteBody")
    assert (status, code) == (400, "IncompleteBody"), reply
    assert s3.get_object(Bucket=bucket, Key="long")["Body"].read() == b"previous version"


def test_expect_continue_is_answered_only_once_authorised(server, s3, bucket):
    body = b"x" * 4096
    # A refused request gets its error without sending the body.
    bad = signed_head(server, "PUT", f"/{bucket}/expect", body, secret=random_secret())
    bad.update({"Expect": "100-continue", "Content-Length": str(len(body))})
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/expect", bad)
        status, reply = read_response(sock)
    assert status == 403, reply
    assert b"SignatureDoesNotMatch" in reply
    # An authorised one is told to continue, then stores the body.
    good = signed_head(server, "PUT", f"/{bucket}/expect", body)
    good.update({"Expect": "100-continue", "Content-Length": str(len(body))})
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/expect", good)
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = sock.recv(1)
            assert chunk, "connection closed before 100 Continue"
            interim += chunk
        assert interim.startswith(b"HTTP/1.1 100"), interim
        sock.sendall(body)
        status, reply = read_response(sock)
    assert status == 200, reply
    assert s3.get_object(Bucket=bucket, Key="expect")["Body"].read() == body
    # Refused for a missing bucket too, before the body.
    missing = signed_head(server, "PUT", "/no-such-bucket-expect/k", body)
    missing.update({"Expect": "100-continue", "Content-Length": str(len(body))})
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", "/no-such-bucket-expect/k", missing)
        status, reply = read_response(sock)
    assert status == 404 and b"NoSuchBucket" in reply
