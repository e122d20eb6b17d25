"""Consistency under faults, checked over recorded histories: `tessera check
run` races clients over a few keys (PUT, conditional PUTs, DELETE, GET) and
checks every key's history for linearizability and one winner per
precondition, while these tests SIGKILL and restart meta's leader, a
follower, a datanode and the gateway. A planted fault (PUTs answered before
meta commits them, in test builds only) shows the checker catches what it
must, with a smallest failing history."""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_meta_group import free_port, start_group

from tessera_procs import Proc, process_env, start_server

pytestmark = pytest.mark.tessera

# How long the clients run under faults; the last reads follow.
RUN_S = 40
# A killed process stays down this long before it is started again.
DOWN_S = 1.5
# Between one restart and the next kill.
UP_S = 3.0


def run_check(binary: Path, endpoint: str, access_key: str, secret_key: str, history: Path, *args: str):
    """`tessera check run` in the background; its Popen."""
    env = process_env({"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key, "RUST_BACKTRACE": "0"})
    return subprocess.Popen(
        [str(binary), "check", "run", "--endpoint", endpoint, "--history", str(history), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )


def test_histories_under_kills_of_every_role_are_linearizable(tessera_bin, tmp_path):
    running = start_group(tessera_bin, tmp_path, {m: f"127.0.0.1:{free_port()}" for m in (1, 2, 3)})
    try:
        gateway = running.others[-1]
        datanodes = running.others[:-1]
        # The gateway comes back on its port: the clients know only that one.
        gateway_argv = list(gateway.argv)
        gateway_argv[gateway_argv.index("--listen") + 1] = running.endpoint.removeprefix("http://")
        history = tmp_path / "history.jsonl"
        check = run_check(
            tessera_bin,
            running.endpoint,
            running.creds.access_key,
            running.creds.secret_key,
            history,
            "--duration",
            f"{RUN_S}s",
            "--clients",
            "6",
            "--keys",
            "4",
            "--ops-per-key",
            "100",
        )
        faults: list[str] = []
        env = process_env(running.creds.env())

        def nemesis() -> None:
            nonlocal gateway
            kinds = ["leader", "follower", "datanode", "gateway"]
            deadline = time.monotonic() + RUN_S - DOWN_S - UP_S
            while time.monotonic() < deadline:
                kind = kinds[len(faults) % len(kinds)]
                time.sleep(UP_S)
                if kind in ("leader", "follower"):
                    leader = running.leader()
                    member = leader if kind == "leader" else next(m for m in running.members if m != leader)
                    running.members[member].kill()
                    time.sleep(DOWN_S)
                    running.start_member(member).wait_ready()
                elif kind == "datanode":
                    index = len(faults) % len(datanodes)
                    datanodes[index].kill()
                    time.sleep(DOWN_S)
                    datanodes[index] = Proc(f"check-dn{index}-{len(faults)}", datanodes[index].argv, env, tmp_path)
                    datanodes[index].wait_ready()
                else:
                    gateway.kill()
                    time.sleep(DOWN_S)
                    gateway = Proc(f"check-gateway-{len(faults)}", gateway_argv, env, tmp_path)
                    gateway.wait_ready()
                faults.append(kind)

        with ThreadPoolExecutor(1) as pool:
            faulting = pool.submit(nemesis)
            output, _ = check.communicate(timeout=RUN_S + 240)
            # Raises what the nemesis raised.
            faulting.result(60)
        running.others = [*datanodes, gateway]
        assert set(faults) == {"leader", "follower", "datanode", "gateway"}, faults
        assert check.returncode == 0, output
        assert "PASSED" in output, output
        checked = int(output.split(" operations on ")[0].rsplit("\n", 1)[-1])
        assert checked > 1000, output
        # The faults bit: operations went unanswered (indeterminate to the
        # check) or could not be sent (refused), rather than failing it.
        recorded = history.read_text()
        assert '"outcome":"unknown"' in recorded or '"outcome":"refused"' in recorded, output
    finally:
        running.stop()


def test_the_checker_catches_writes_answered_before_their_commit(tessera_bin, tmp_path):
    server = start_server(tessera_bin, tmp_path, env={"TESSERA_PLANTED_FAULT": "early-ack"})
    try:
        history = tmp_path / "history.jsonl"
        check = run_check(
            tessera_bin, server.endpoint, server.access_key, server.secret_key, history, "--duration", "5s"
        )
        output, _ = check.communicate(timeout=120)
        assert check.returncode == 1, output
        assert "not linearizable; a smallest failing part:" in output, output
        assert "FAILED" in output, output
        # The history was saved, and checking it again finds the same.
        again = subprocess.run(
            [str(tessera_bin), "check", "replay", "--history", str(history)],
            capture_output=True,
            check=False,
            text=True,
            env=process_env({}),
            timeout=60,
        )
        assert again.returncode == 1, again.stdout + again.stderr
        verdict = again.stdout.strip().splitlines()[-1]
        assert verdict.startswith("FAILED: ") and verdict in output, (again.stdout, output)
    finally:
        server.stop()
    assert os.path.getsize(history) > 0
