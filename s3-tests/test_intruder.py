"""An intruder on the same host: another local user, or a process that can
reach the datanode and meta ports without any credential. It must not read
the data folder, nor read, write or delete a block."""

from __future__ import annotations

import json
import os
import socket
import stat
import struct

import pytest

from tessera_clients import metric_total, s3_client
from tessera_procs import Proc, healthy_datanodes, process_env, start_server

pytestmark = pytest.mark.tessera


def test_a_fresh_data_folder_is_its_owners_alone(tessera_bin, tmp_path):
    """Every folder is 0700 and every file and socket 0600 or stricter:
    block files, sidecars, the database and the saved secrets."""
    server = start_server(tessera_bin, tmp_path, name="private", generated_secrets=True)
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        client.create_bucket(Bucket="private")
        client.put_object(Bucket="private", Key="k", Body=b"secret bytes" * 1000)
        seen = {"folders": 0, "files": 0, "sockets": 0}
        open_to_others = []
        for path in [server.data_dir, *server.data_dir.rglob("*")]:
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                seen["folders"] += 1
            elif stat.S_ISSOCK(mode):
                seen["sockets"] += 1
            else:
                seen["files"] += 1
            if mode & 0o077:
                open_to_others.append(f"{oct(mode & 0o777)} {path.relative_to(server.data_dir)}")
        assert not open_to_others, f"readable by others: {open_to_others[:10]}"
        # The walk saw the store: block files, the meta database, sockets.
        assert seen["files"] >= 10 and seen["sockets"] >= 5 and seen["folders"] > 256, seen
        names = {p.name for p in server.data_dir.rglob("*")}
        assert {"meta.redb", "root-credentials", "admin-token", "credential-key"} <= names, names
    finally:
        server.proc.kill()


def test_the_root_secret_is_printed_once_and_logs_have_no_colour_codes(tessera_bin, tmp_path):
    """The generated root secret is shown at the first start only: a later
    start's log (kept by a journal or a file) names the access key and the
    file that holds the secret. Logs to a file carry no ANSI escapes."""
    server = start_server(tessera_bin, tmp_path, name="once", generated_secrets=True)
    server.proc.terminate()
    first = server.proc.log_path.read_text()
    assert server.secret_key in first
    again = Proc("once-again", server.proc.argv, process_env({}), tmp_path)
    try:
        client = s3_client(again.wait_ready()["s3"], server.access_key, server.secret_key)
        client.list_buckets()
    finally:
        again.terminate()
    second = again.log_path.read_text()
    assert server.secret_key not in second, second
    assert f"root access key {server.access_key} (its secret is in " in second, second
    for log in (first, second):
        assert "\x1b[" not in log, log[:2000]


# The datanode protocol (blockstore/proto/src/wire): a 24-byte frame header,
# then the message header, then the payload.
WRITE_CHUNKS, COMMIT_BLOCK, READ_BLOCK, DELETE_BLOCK = 1, 2, 3, 4
ERROR_REPLY = 0x81
ACCESS_DENIED = 8
FLAG_TOKEN = 1
TOKEN_LEN = 61


def frame(kind: int, message: bytes, payload: bytes = b"", token: bytes | None = None) -> bytes:
    flags = 0
    if token is not None:
        flags, message = FLAG_TOKEN, token + message
    return b"TSDN" + struct.pack(">BBHQII", 2, kind, flags, 7, len(message), len(payload)) + message + payload


def block_key(block: int, index: int) -> bytes:
    return struct.pack(">QB", block, index)


def refusal_code(stream: socket.socket, request: bytes) -> int:
    """Sends one request frame and returns the error code of the reply."""
    stream.sendall(request)
    head = stream.recv(24, socket.MSG_WAITALL)
    magic, _version, kind, _flags, _id, header_len, payload_len = struct.unpack(">4sBBHQII", head)
    assert magic == b"TSDN" and payload_len == 0, head
    message = stream.recv(header_len, socket.MSG_WAITALL)
    assert kind == ERROR_REPLY, f"the datanode obeyed: reply kind {kind:#x}"
    return struct.unpack(">H", message[:2])[0]


def test_block_frames_without_a_token_are_refused(tessera_bin, tmp_path):
    """A process with no credential sends read, write, commit and delete
    frames for every likely block to every datanode port, with no token and
    with forged ones: each is refused, and the object reads back whole."""
    server = start_server(tessera_bin, tmp_path, name="tokens")
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        client.create_bucket(Bucket="guarded")
        body = os.urandom(3 * 1024 * 1024 + 5)
        client.put_object(Bucket="guarded", Key="k", Body=body)
        datanodes = healthy_datanodes(server.admin("status"))
        assert len(datanodes) == 5, datanodes
        forged = os.urandom(TOKEN_LEN)
        sent = 0
        for node in datanodes:
            host, port = node["address"].rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as stream:
                for block in range(1, 6):
                    for index in range(5):
                        key = block_key(block, index)
                        payload = b"\0" * 100
                        requests = [
                            frame(READ_BLOCK, key + struct.pack(">QQ", 0, 1 << 20)),
                            frame(DELETE_BLOCK, key),
                            frame(COMMIT_BLOCK, key + struct.pack(">Q", 0)),
                            frame(WRITE_CHUNKS, key + struct.pack(">QIII", 0, 16384, 1, 0), payload),
                            frame(DELETE_BLOCK, key, token=forged),
                            frame(READ_BLOCK, key + struct.pack(">QQ", 0, 10), token=forged),
                        ]
                        for request in requests:
                            assert refusal_code(stream, request) == ACCESS_DENIED
                            sent += 1
        refused = metric_total(server.ops, "tessera_datanode_token_refusals_total")
        assert refused == sent, (refused, sent)
        assert client.get_object(Bucket="guarded", Key="k")["Body"].read() == body
    finally:
        server.proc.kill()


def meta_rpc(address: str, secret: str, request: object) -> object:
    """One request over meta's RPC (u32 length + JSON frames): handshake with
    `secret`, then `request`; the reply, or the handshake's refusal."""
    host, port = address.rsplit(":", 1)

    def exchange(stream: socket.socket, value: object) -> object:
        body = json.dumps(value).encode()
        stream.sendall(struct.pack(">I", len(body)) + body)
        (length,) = struct.unpack(">I", stream.recv(4, socket.MSG_WAITALL))
        return json.loads(stream.recv(length, socket.MSG_WAITALL))

    with socket.create_connection((host, int(port)), timeout=10) as stream:
        hello = exchange(stream, {"token": secret, "version": META_RPC_VERSION})
        if "Err" in hello:
            return hello
        return exchange(stream, request)


META_RPC_VERSION = 4


def test_a_datanode_credential_is_worth_its_own_heartbeats_only(tessera_bin, tmp_path):
    """A stolen datanode credential, used against the meta port of a real
    server: no S3 secret, no listing, no deletion, no heartbeat for another
    datanode; a rotated one is refused at the handshake."""
    server = start_server(tessera_bin, tmp_path, name="credentials")
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        client.create_bucket(Bucket="kept")
        client.put_object(Bucket="kept", Key="k", Body=b"kept")
        minted = server.admin("credential", "datanode")
        credential = minted["credential"]
        own_id = credential.split(".")[1]
        victim = healthy_datanodes(server.admin("status"))[0]
        report = {"addr": "127.0.0.1:1", "local_socket": None, "capacity": 1, "used": 0, "blocks": 0, "deleted": []}
        refused = [
            {"GetAccessKey": {"access_key": server.access_key}},
            {"ListBuckets": {"owner": None}},
            {"DeleteObject": {"bucket": "kept", "key": "k"}},
            {"Heartbeat": {"report": {"id": victim["id"], **report}}},
            {"MintCredential": {"principal": "Admin", "rotate": True}},
        ]
        for request in refused:
            assert meta_rpc(server.meta, credential, request) == {"Err": "Unauthorized"}, request
        own = meta_rpc(server.meta, credential, {"Heartbeat": {"report": {"id": own_id, **report}}})
        assert "Ok" in own, own
        # The victim still has its own address, and the object is whole.
        after = {n["id"]: n["address"] for n in server.admin("status")["datanodes"]}
        assert after[victim["id"]] == victim["address"]
        assert client.get_object(Bucket="kept", Key="k")["Body"].read() == b"kept"

        server.admin("credential", "datanode", "--id", own_id, "--rotate")
        stale = meta_rpc(server.meta, credential, {"ListBuckets": {"owner": None}})
        assert "rotated" in stale["Err"]["Unauthenticated"], stale
    finally:
        server.proc.kill()
