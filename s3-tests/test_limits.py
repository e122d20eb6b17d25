"""Limits and bad input: bucket names, key length, odd keys, XML and header
sizes, missing or wrong Content-Length, and `Expect: 100-continue` answered
only once the request is authorised. None of it may corrupt or lose other data."""

import http.client
import socket
from urllib.parse import urlsplit

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tessera_clients import REGION, error_code, http_status, s3_error_code
from tessera_procs import random_secret


def signed_head(server, method, path, body, headers=None, secret=None):
    """SigV4 headers for `method path` whose payload hash covers `body`."""
    request = AWSRequest(method=method, url=server.endpoint.rstrip("/") + path, data=body, headers=headers or {})
    S3SigV4Auth(Credentials(server.access_key, secret or server.secret_key), "s3", REGION).add_auth(request)
    return dict(request.headers.items())


def connect(server):
    parts = urlsplit(server.endpoint)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    return sock, f"{parts.hostname}:{parts.port}"


def send_head(sock, host, method, path, headers):
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items() if name.lower() != "host"]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())


def read_response(sock):
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read()


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


def test_malformed_and_oversized_xml(raw, bucket):
    junk = raw.request("POST", f"/{bucket}", query="delete", body=b"<Delete><Object><Key>a</Key>", headers={
        "Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="})
    assert junk.status_code == 400 and s3_error_code(junk) in ("MalformedXML", "BadDigest", "InvalidDigest")
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


def test_oversized_header_section_is_refused_and_the_server_goes_on(server, s3, bucket):
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "GET", f"/{bucket}", {"X-Huge": "h" * (1024 * 1024)})
        try:
            status, _ = read_response(sock)
            assert 400 <= status < 500
        except (ConnectionError, http.client.HTTPException):
            pass  # closing the connection is a refusal too
    s3.put_object(Bucket=bucket, Key="after", Body=b"still serving")
    assert s3.get_object(Bucket=bucket, Key="after")["Body"].read() == b"still serving"


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


def test_body_shorter_than_declared_is_incomplete_body(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="short", Body=b"previous version")
    body = b"0123456789"
    headers = signed_head(server, "PUT", f"/{bucket}/short", body)
    headers["Content-Length"] = str(len(body))
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/short", headers)
        sock.sendall(body[:5])
        sock.shutdown(socket.SHUT_WR)
        try:
            status, reply = read_response(sock)
            assert status == 400, reply
            assert b"IncompleteBody" in reply
        except (ConnectionError, http.client.HTTPException):
            pass  # the server may also just drop a client that went away
    # The earlier version is untouched either way.
    assert s3.get_object(Bucket=bucket, Key="short")["Body"].read() == b"previous version"


def test_body_longer_than_declared_is_refused(server, s3, bucket):
    """An aws-chunked body carrying more bytes than x-amz-decoded-content-length."""
    s3.put_object(Bucket=bucket, Key="long", Body=b"previous version")
    payload = b"0123456789"
    framed = b"a\r\n" + payload + b"\r\n0\r\n\r\n"
    headers = signed_streaming(server, f"/{bucket}/long", {
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": "5",
        "Content-Length": str(len(framed)),
    })
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", f"/{bucket}/long", headers)
        sock.sendall(framed)
        status, reply = read_response(sock)
    assert status == 400, reply
    assert b"IncompleteBody" in reply
    assert s3.get_object(Bucket=bucket, Key="long")["Body"].read() == b"previous version"


def signed_streaming(server, path, headers):
    """SigV4 headers declaring STREAMING-UNSIGNED-PAYLOAD-TRAILER as the payload."""

    class StreamingAuth(S3SigV4Auth):
        def payload(self, request):
            return "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

    request = AWSRequest(method="PUT", url=server.endpoint.rstrip("/") + path, headers=headers)
    StreamingAuth(Credentials(server.access_key, server.secret_key), "s3", REGION).add_auth(request)
    return dict(request.headers.items())


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

