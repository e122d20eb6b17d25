"""Clients that would hold the gateway open: half-sent request heads, idle
keep-alive connections, bodies that trickle or stall, more connections than
the gateway takes. Each is cut within its limit while other clients are
served, and what a cut-off PUT held (its upload slot) is free again.

The server runs with short limits: --header-read-timeout 2s,
--body-rate-window 2s at 1 KiB/s, one upload slot, 64 connections."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from raw_http import connect, read_error, send_head, signed_head
from tessera_clients import metric_total, s3_client
from tessera_procs import start_server

pytestmark = pytest.mark.tessera

HEADER_TIMEOUT_S = 2.0
BODY_WINDOW_S = 2.0
MAX_CONNECTIONS = 64
HALF_HEADS = 50
ARGS = (
    "--header-read-timeout",
    f"{HEADER_TIMEOUT_S:g}s",
    "--body-rate-window",
    f"{BODY_WINDOW_S:g}s",
    "--body-min-rate",
    "1KiB",
    "--max-concurrent-uploads",
    "1",
    "--upload-slot-wait",
    "30s",
    "--max-connections",
    str(MAX_CONNECTIONS),
)


@pytest.fixture(scope="module")
def guarded(tessera_bin, tmp_path_factory):
    server = start_server(tessera_bin, tmp_path_factory.mktemp("slow-clients"), name="guarded", extra_args=ARGS)
    client = s3_client(server.endpoint, server.access_key, server.secret_key, read_timeout=60)
    client.create_bucket(Bucket="guarded")
    yield server, client
    server.proc.kill()


def closed_by_server(sock: socket.socket, within: float) -> float | None:
    """Seconds until the server closed `sock` (EOF or reset), or None if it
    stayed open for `within` seconds."""
    started = time.monotonic()
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return time.monotonic() - started
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - started
    except TimeoutError:
        return None


def test_half_sent_heads_are_cut_while_others_are_served(guarded):
    server, client = guarded
    socks = []
    for i in range(HALF_HEADS):
        sock, host = connect(server)
        sock.sendall(f"GET /guarded/k{i} HTTP/1.1\r\nHost: {host}\r\nx-amz-date: 2026".encode())
        socks.append(sock)
    started = time.monotonic()
    # Meanwhile an honest client gets through.
    client.put_object(Bucket="guarded", Key="honest", Body=b"served")
    assert client.get_object(Bucket="guarded", Key="honest")["Body"].read() == b"served"
    for sock in socks:
        waited = closed_by_server(sock, within=HEADER_TIMEOUT_S * 5)
        assert waited is not None, "a half-sent head held its connection past the timeout"
        sock.close()
    took = time.monotonic() - started
    assert took < HEADER_TIMEOUT_S * 5, f"{HALF_HEADS} half heads took {took:.1f} s to be cut"
    assert metric_total(server.ops, "tessera_gateway_header_timeouts_total") >= HALF_HEADS


def test_an_idle_keep_alive_connection_is_closed(guarded):
    server, _ = guarded
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "GET", "/", signed_head(server, "GET", "/", b""))
        sock.settimeout(10)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first[:100]
        waited = closed_by_server(sock, within=HEADER_TIMEOUT_S * 5)
    assert waited is not None, "an idle keep-alive connection stayed open"
    assert waited >= HEADER_TIMEOUT_S * 0.5, f"closed after {waited:.1f} s, before the timeout"


def test_a_stalled_body_is_cut_and_frees_its_upload_slot(guarded):
    server, client = guarded
    body = b"x" * 100_000
    headers = signed_head(server, "PUT", "/guarded/stalled", body)
    headers["Content-Length"] = str(len(body))
    sock, host = connect(server)
    with sock:
        send_head(sock, host, "PUT", "/guarded/stalled", headers)
        sock.sendall(body[:10])
        started = time.monotonic()
        status, code, reply = read_error(sock, "400 RequestTimeout")
        took = time.monotonic() - started
    assert (status, code) == (400, "RequestTimeout"), reply
    assert took < BODY_WINDOW_S * 3, f"the stalled body was cut after {took:.1f} s"
    # The only upload slot is free: a PUT goes through at once, not after --upload-slot-wait.
    started = time.monotonic()
    client.put_object(Bucket="guarded", Key="after", Body=b"next")
    assert time.monotonic() - started < 10
    with pytest.raises(Exception):
        client.head_object(Bucket="guarded", Key="stalled")


def test_a_trickling_body_is_cut(guarded):
    server, _ = guarded
    body = b"y" * 100_000
    headers = signed_head(server, "PUT", "/guarded/trickle", body)
    headers["Content-Length"] = str(len(body))
    sock, host = connect(server)
    stop = threading.Event()

    def trickle():
        # 100 bytes every 0.5 s: 200 B/s, under the 1 KiB/s floor.
        for offset in range(0, len(body), 100):
            if stop.wait(0.5):
                return
            try:
                sock.sendall(body[offset : offset + 100])
            except OSError:
                return

    with sock:
        send_head(sock, host, "PUT", "/guarded/trickle", headers)
        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        try:
            status, code, reply = read_error(sock, "400 RequestTimeout")
        finally:
            stop.set()
            sender.join()
    assert (status, code) == (400, "RequestTimeout"), reply
    assert metric_total(server.ops, "tessera_gateway_slow_bodies_total") >= 2


def test_connections_past_the_cap_get_slow_down(guarded):
    server, client = guarded
    held = []
    try:
        # Idle connections up to the cap (the header timeout will close
        # them, so keep the check quick).
        for _ in range(MAX_CONNECTIONS):
            sock, _host = connect(server)
            held.append(sock)
        time.sleep(0.2)
        extra, _host = connect(server)
        with extra:
            status, code, reply = read_error(extra, "503 SlowDown")
        assert (status, code) == (503, "SlowDown"), reply
        assert metric_total(server.ops, "tessera_gateway_connections_refused_total") >= 1
    finally:
        for sock in held:
            sock.close()
    # The held connections are gone: clients are served again.
    deadline = time.monotonic() + 10
    while True:
        try:
            client.put_object(Bucket="guarded", Key="after-cap", Body=b"ok")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
