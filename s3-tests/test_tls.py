"""HTTPS on the S3 port: `tessera server --tls-cert --tls-key` with a
self-signed certificate made by openssl, used by boto3 and aws-cli; a
client that does not trust it, or speaks plain HTTP, gets nothing; SIGHUP
puts a renewed certificate in place for new connections without a restart."""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
import requests
from botocore.exceptions import SSLError

from tessera_clients import AwsCli, console_session, rclone, rclone_env, s3_client
from tessera_procs import start_server

pytestmark = pytest.mark.tessera


def make_cert(folder, name: str) -> tuple[str, str]:
    """A self-signed P-256 certificate for localhost and 127.0.0.1."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def served_certificate(endpoint: str) -> str:
    host, port = endpoint.removeprefix("https://").rsplit(":", 1)
    return ssl.get_server_certificate((host, int(port)))


def same_certificate(pem_a: str, pem_b: str) -> bool:
    return ssl.PEM_cert_to_DER_cert(pem_a) == ssl.PEM_cert_to_DER_cert(pem_b)


@pytest.fixture
def https_server(tessera_bin, tmp_path):
    cert, key = make_cert(tmp_path, "first")
    live_cert, live_key = tmp_path / "live.crt", tmp_path / "live.key"
    live_cert.write_bytes(open(cert, "rb").read())
    live_key.write_bytes(open(key, "rb").read())
    server = start_server(
        tessera_bin, tmp_path, name="https", extra_args=("--tls-cert", str(live_cert), "--tls-key", str(live_key))
    )
    yield server, str(live_cert), live_key, tmp_path
    server.proc.kill()


def test_boto3_and_aws_cli_round_trip_over_https(https_server):
    server, ca, _key, tmp_path = https_server
    assert server.endpoint.startswith("https://127.0.0.1:"), server.endpoint
    client = s3_client(server.endpoint, server.access_key, server.secret_key, verify=ca)
    client.create_bucket(Bucket="secure")
    body = os.urandom(5 * 1024 * 1024 + 3)
    client.put_object(Bucket="secure", Key="k", Body=body)
    assert client.get_object(Bucket="secure", Key="k")["Body"].read() == body

    cli = AwsCli(server.endpoint, server.access_key, server.secret_key, tmp_path / "aws")
    cli.env["AWS_CA_BUNDLE"] = ca
    source = tmp_path / "upload.bin"
    source.write_bytes(os.urandom(9 * 1024 * 1024))
    cli("s3", "cp", str(source), "s3://secure/cli.bin")
    cli("s3", "cp", "s3://secure/cli.bin", str(tmp_path / "download.bin"))
    assert (tmp_path / "download.bin").read_bytes() == source.read_bytes()
    assert "cli.bin" in cli("s3", "ls", "s3://secure/").stdout

    # Customer keys (SSE-C) travel over HTTPS without any setting.
    key = os.urandom(32)
    sse_c_params = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    client.put_object(Bucket="secure", Key="sse-c", Body=body, **sse_c_params)
    assert client.get_object(Bucket="secure", Key="sse-c", **sse_c_params)["Body"].read() == body
    (tmp_path / "key.bin").write_bytes(key)
    fileb = f"fileb://{tmp_path / 'key.bin'}"
    cli("s3", "cp", str(source), "s3://secure/cli-sse-c.bin", "--sse-c", "AES256", "--sse-c-key", fileb)
    cli("s3", "cp", "s3://secure/cli-sse-c.bin", str(tmp_path / "sse-c.bin"), "--sse-c", "AES256", "--sse-c-key", fileb)
    assert (tmp_path / "sse-c.bin").read_bytes() == source.read_bytes()

    # rclone too, which refuses to send SSE-C keys over plain HTTP.
    if shutil.which("rclone"):
        env = rclone_env(server.endpoint, server.access_key, server.secret_key, tmp_path)
        sse_c = ["--ca-cert", ca, "--s3-sse-customer-algorithm", "AES256"]
        sse_c += ["--s3-sse-customer-key-base64", base64.b64encode(key).decode()]
        multipart = ["--s3-upload-cutoff", "1M", "--s3-chunk-size", "5M"]
        rclone(env, "copyto", *sse_c, *multipart, str(source), "tessera:secure/rclone.bin")
        assert client.head_object(Bucket="secure", Key="rclone.bin", **sse_c_params)["SSECustomerAlgorithm"] == "AES256"
        rclone(env, "copyto", *sse_c, "tessera:secure/rclone.bin", str(tmp_path / "rclone.bin"))
        assert (tmp_path / "rclone.bin").read_bytes() == source.read_bytes()


def test_the_console_acts_through_the_https_gateway(https_server):
    """`tessera server --tls-cert` serves its console too, which reaches the
    gateway over HTTPS trusting the gateway's own certificate."""
    server, ca, _key, _tmp = https_server
    client = s3_client(server.endpoint, server.access_key, server.secret_key, verify=ca)
    client.create_bucket(Bucket="console-tls")
    http, csrf = console_session(server.console, server.access_key, server.secret_key)
    assert "console-tls" in http.get(server.console + "/buckets", timeout=30).text
    body = os.urandom(100_000)
    put = http.post(
        server.console + "/buckets/console-tls/upload?key=via-console",
        data=body,
        headers={"x-csrf-token": csrf, "content-type": "application/octet-stream"},
        timeout=30,
    )
    assert put.status_code == 200, put.text
    assert client.get_object(Bucket="console-tls", Key="via-console")["Body"].read() == body
    got = http.get(server.console + "/buckets/console-tls/download?key=via-console", timeout=30)
    assert got.content == body
    # Share links name the HTTPS endpoint.
    page = http.post(
        server.console + "/buckets/console-tls/share",
        data={"csrf": csrf, "key": "via-console", "expires": "900"},
        timeout=30,
    ).text
    link = html.unescape(re.search(r'id="share-link" type="text" readonly value="([^"]+)"', page).group(1))
    assert link.startswith(server.endpoint + "/console-tls/via-console?"), link
    assert requests.get(link, verify=ca, timeout=30).content == body


def test_untrusted_and_plain_http_clients_get_nothing(https_server):
    server, _ca, _key, _tmp = https_server
    # The system's CAs do not know the self-signed certificate.
    untrusting = s3_client(server.endpoint, server.access_key, server.secret_key)
    with pytest.raises(SSLError):
        untrusting.list_buckets()
    # Plain HTTP on the HTTPS port: no HTTP answer.
    plain = server.endpoint.replace("https://", "http://")
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{plain}/", timeout=10)


def test_sighup_reloads_the_certificate_for_new_connections(https_server):
    server, live_cert, live_key, tmp_path = https_server
    before = served_certificate(server.endpoint)
    assert same_certificate(before, open(live_cert).read())
    # A broken pair on SIGHUP: the old certificate stays in service.
    live_key.write_text("not a key")
    server.proc.popen.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert same_certificate(served_certificate(server.endpoint), before)
    # A renewed pair: new connections get it.
    cert, key = make_cert(tmp_path, "second")
    os.replace(cert, live_cert)
    os.replace(key, live_key)
    server.proc.popen.send_signal(signal.SIGHUP)
    renewed = open(live_cert).read()
    deadline = time.monotonic() + 10
    while not same_certificate(served_certificate(server.endpoint), renewed):
        assert time.monotonic() < deadline, "the renewed certificate was not served"
        time.sleep(0.1)
    client = s3_client(server.endpoint, server.access_key, server.secret_key, verify=live_cert)
    client.create_bucket(Bucket="renewed")
    assert server.proc.popen.poll() is None


def test_a_handshake_that_never_comes_is_cut(tessera_bin, tmp_path):
    cert, key = make_cert(tmp_path, "slow")
    server = start_server(
        tessera_bin,
        tmp_path,
        name="slowtls",
        extra_args=("--tls-cert", cert, "--tls-key", key, "--header-read-timeout", "1s"),
    )
    try:
        host, port = server.endpoint.removeprefix("https://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(100) == b""
            assert time.monotonic() - started < 8
    finally:
        server.proc.kill()
