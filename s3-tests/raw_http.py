"""HTTP/1.1 by hand over a socket, for tests that must control every byte:
half-sent heads, bodies shorter than declared, stalled connections."""

from __future__ import annotations

import http.client
import socket
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tessera_clients import REGION


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


def read_error(sock, expected):
    """(status, S3 error code, body) of the response on `sock`; a connection
    closed, reset or silent for the socket's timeout instead fails the test:
    S3 answers the refusal (`expected` names it for the message)."""
    try:
        status, reply = read_response(sock)
    except (OSError, http.client.HTTPException) as exc:
        pytest.fail(f"no response where {expected} was due: {type(exc).__name__}: {exc}", pytrace=False)
    try:
        code = ET.fromstring(reply).findtext("Code")
    except ET.ParseError:
        code = None
    return status, code, reply


def signed_streaming(server, path, headers):
    """SigV4 headers declaring STREAMING-UNSIGNED-PAYLOAD-TRAILER as the payload."""

    class StreamingAuth(S3SigV4Auth):
        def payload(self, request):
            return "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

    request = AWSRequest(method="PUT", url=server.endpoint.rstrip("/") + path, headers=headers)
    StreamingAuth(Credentials(server.access_key, server.secret_key), "s3", REGION).add_auth(request)
    return dict(request.headers.items())
