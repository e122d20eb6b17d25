"""The ops port (/health, /metrics) and graceful shutdown on SIGTERM."""

import hashlib
import json
import re
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests

from tessera_clients import MIB, s3_client
from tessera_procs import process_env, run_admin, start_server

pytestmark = pytest.mark.tessera


def test_health_is_ok(server):
    response = requests.get(f"{server.ops}/health", timeout=10)
    assert response.status_code == 200
    assert response.text.strip() == "ok"


def test_metrics_count_s3_requests(server, s3):
    s3.list_buckets()
    response = requests.get(f"{server.ops}/metrics", timeout=10)
    assert response.status_code == 200
    assert "tessera_s3_requests_total" in response.text
    samples = [
        line
        for line in response.text.splitlines()
        if line.startswith("tessera_s3_requests_total") and not line.startswith("#")
    ]
    assert samples, "a request was made, so the counter has a sample"
    assert sum(float(line.rsplit(" ", 1)[-1]) for line in samples) >= 1


def test_every_metric_family_has_help(server, s3):
    """After S3 traffic, every family on /metrics (gateway, meta,
    datanodes and block client in one process) has a HELP line, and none
    is there twice."""
    s3.create_bucket(Bucket="help-check")
    s3.put_object(Bucket="help-check", Key="k", Body=b"x" * 100_000)
    s3.get_object(Bucket="help-check", Key="k")["Body"].read()
    text = requests.get(f"{server.ops}/metrics", timeout=10).text
    typed = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    assert len(typed) > 30, text[:2000]
    assert len(typed) == len(set(typed)), "a family is there twice"
    assert sorted(set(typed) - helped) == [], "families without HELP"


def test_status_counts_groups_as_they_are_written_and_right_after_a_start(tessera_bin, tmp_path):
    """`tessera admin status` counts a group healthy once its object is
    committed (not at the next redundancy scan, minutes later); a restarted
    server says it has not counted yet until its first scan, seconds
    later, and never shows 0 for what it holds."""
    server = start_server(tessera_bin, tmp_path, name="counted")
    s3 = s3_client(server.endpoint, server.access_key, server.secret_key)
    s3.create_bucket(Bucket="counted")
    for i in range(6):
        s3.put_object(Bucket="counted", Key=f"k{i}", Body=bytes([i]) * 300_000)
    upload = s3.create_multipart_upload(Bucket="counted", Key="parts")["UploadId"]
    etag = s3.upload_part(Bucket="counted", Key="parts", UploadId=upload, PartNumber=1, Body=b"p" * 300_000)["ETag"]
    s3.complete_multipart_upload(
        Bucket="counted", Key="parts", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
    )

    def healthy(server) -> int | None:
        groups = run_admin(server.meta, server.creds.admin_token, "status")["block_groups"]
        return groups["healthy"] if groups["counted"] else None

    assert healthy(server) == 7
    server.stop()
    again = start_server(tessera_bin, tmp_path, name="counted", creds=server.creds)
    try:
        seen = [healthy(again)]
        deadline = time.monotonic() + 30
        while seen[-1] is None and time.monotonic() < deadline:
            time.sleep(0.2)
            seen.append(healthy(again))
        assert seen[-1] == 7 and set(seen) <= {None, 7}, seen
    finally:
        again.stop()


def test_admin_options_go_before_or_after_the_operation(server, tessera_bin):
    """`tessera admin status --json --meta ...` works as `tessera admin
    --json --meta ... status` does: what operators type first."""
    answers = []
    for argv in (
        ["--json", "--meta", server.meta, "--token", server.creds.admin_token, "status"],
        ["status", "--json", "--meta", server.meta, "--token", server.creds.admin_token],
    ):
        result = subprocess.run(
            [str(tessera_bin), "admin", *argv], capture_output=True, text=True, timeout=30, check=False
        )
        assert result.returncode == 0, result.stderr
        answers.append(json.loads(result.stdout))
    assert answers[0].keys() == answers[1].keys() and "datanodes" in answers[1], answers


def test_admin_prints_sizes_and_instants_for_people(server, tessera_bin):
    """Without --json, capacities are in binary units and times in UTC, not
    raw bytes and Unix milliseconds; --json keeps the raw numbers."""
    admin = [str(tessera_bin), "admin", "--meta", server.meta, "--token", server.creds.admin_token]
    shown = subprocess.run([*admin, "status"], capture_output=True, text=True, timeout=30, check=True).stdout
    datanode_rows = [line for line in shown.splitlines() if re.match(r"^[0-9a-f]{8}-", line)]
    assert datanode_rows and all(re.search(r"\d\.\d [KMGT]iB", row) for row in datanode_rows), shown
    assert re.search(r"last scan (never|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", shown), shown
    without_ids = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "", shown)
    assert not re.search(r"\d{10,}", without_ids), f"a raw number left: {shown}"
    users = subprocess.run([*admin, "user", "list"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert re.search(r"created=\d{4}-\d\d-\d\dT", users), users
    raw = json.loads(subprocess.run([*admin, "--json", "status"], capture_output=True, text=True, timeout=30, check=True).stdout)
    assert isinstance(raw["datanodes"][0]["capacity"], int)


def test_a_port_in_use_or_a_file_for_data_fails_at_once_naming_it(tessera_bin, tmp_path):
    """A first start whose port is taken stops before it makes its data
    folder or credentials, naming the flag and the address; a --data that
    names a file fails naming that file."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = tmp_path / "never-made"
        ports = ["--meta-listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--console-listen", "off"]
        result = run_server(tessera_bin, ["--data", str(data), "--listen", f"127.0.0.1:{port}", *ports])
        assert result.returncode != 0
        assert f"--listen 127.0.0.1:{port} cannot be bound" in result.stderr, result.stderr
        assert not data.exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = run_server(tessera_bin, ["--data", str(a_file), "--listen", "127.0.0.1:0", *ports])
    assert result.returncode != 0
    assert f"making the data folder {a_file}" in result.stderr, result.stderr


def run_server(tessera_bin, args: list[str]) -> subprocess.CompletedProcess:
    env = process_env({"RUST_BACKTRACE": "0"})
    return subprocess.run(
        [str(tessera_bin), "server", *args], capture_output=True, text=True, timeout=30, env=env, check=False
    )


def test_sigterm_finishes_an_in_flight_get(tessera_bin, tmp_path, big_file):
    path, expected_sha = big_file
    size = path.stat().st_size
    own = start_server(tessera_bin, tmp_path, name="sigterm-server")
    try:
        client = s3_client(own.endpoint, own.access_key, own.secret_key)
        client.create_bucket(Bucket="drain")
        with open(path, "rb") as f:
            client.put_object(Bucket="drain", Key="big", Body=f)

        first_mib_read = threading.Event()
        outcome = {}

        def slow_reader():
            try:
                body = client.get_object(Bucket="drain", Key="big")["Body"]
                digest = hashlib.sha256()
                first = body.read(MIB)
                digest.update(first)
                total = len(first)
                first_mib_read.set()
                for block in body.iter_chunks(chunk_size=MIB):
                    digest.update(block)
                    total += len(block)
                    # Slow enough that the server is still sending when SIGTERM lands.
                    time.sleep(0.01)
                outcome["sha"], outcome["size"] = digest.hexdigest(), total
            except Exception as exc:  # noqa: BLE001 -- any failure is reported by the main thread
                outcome["error"] = exc
                first_mib_read.set()

        reader = threading.Thread(target=slow_reader, daemon=True)
        reader.start()
        assert first_mib_read.wait(60), "GET did not start"
        assert "error" not in outcome, outcome
        own.proc.popen.send_signal(signal.SIGTERM)

        reader.join(180)
        assert not reader.is_alive(), "GET did not finish after SIGTERM"
        assert "error" not in outcome, f"GET broke off after SIGTERM: {outcome.get('error')!r}"
        assert outcome["size"] == size
        assert outcome["sha"] == expected_sha

        try:
            code = own.proc.popen.wait(20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"server did not exit within 20 s of SIGTERM\n{own.proc.describe()}")
        assert code == 0, f"graceful shutdown exits 0, got {code}\n{own.proc.describe()}"
    finally:
        if own.proc.alive():
            own.proc.kill()
