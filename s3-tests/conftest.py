"""Fixtures shared by the conformance tests: a `tessera server` for the
session, a multi-process cluster per module, S3 clients and scratch buckets.

The tests are functions of an endpoint and a key pair: with S3_TEST_ENDPOINT,
S3_TEST_ACCESS_KEY and S3_TEST_SECRET_KEY set, they run against that S3 server
instead, and the tests marked `tessera` (admin, ops port, own processes) are
skipped."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

import tessera_procs
from tessera_clients import (
    MIB,
    AwsCli,
    RawS3,
    S3User,
    anonymous_client,
    empty_and_delete,
    new_bucket_name,
    s3_client,
    write_random_file,
)
from tessera_procs import HarnessError, find_binary, find_key, start_cluster, start_server

BIG_OBJECT_SIZE = 100 * MIB
EXTERNAL_ENDPOINT = os.environ.get("S3_TEST_ENDPOINT")


@dataclass
class ExternalServer:
    """Another S3 server under test; it has no admin, ops port or processes."""

    endpoint: str
    access_key: str
    secret_key: str


def pytest_collection_modifyitems(config, items):
    if not EXTERNAL_ENDPOINT:
        return
    skip = pytest.mark.skip(reason=f"needs tessera itself; testing {EXTERNAL_ENDPOINT}")
    for item in items:
        if "tessera" in item.keywords or {"tessera_bin", "cluster"} & set(item.fixturenames):
            item.add_marker(skip)


def pytest_report_header(config):
    try:
        return f"tessera binary: {find_binary()}"
    except HarnessError as exc:
        return f"tessera binary: MISSING ({exc})"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """On a failing run, show the tail of every tessera process's stderr."""
    if exitstatus == 0 or not tessera_procs.STARTED:
        return
    terminalreporter.section("tessera process logs (tails)")
    for proc in tessera_procs.STARTED:
        terminalreporter.write_line(proc.describe(lines=40))


def pytest_unconfigure(config):
    # Safety net: nothing started by the suite outlives it.
    for proc in tessera_procs.STARTED:
        if proc.alive():
            proc.kill()


@pytest.fixture(scope="session")
def tessera_bin():
    try:
        return find_binary()
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)


def stop_checked(proc) -> None:
    """SIGTERM a process that should still be running; fail if it crashed
    earlier or does not exit within 20 s."""
    if not proc.alive():
        code = proc.popen.returncode
        pytest.fail(f"{proc.name} exited on its own during the tests (status {code})\n{proc.describe()}", pytrace=False)
    try:
        proc.terminate()
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def server(request, tmp_path_factory):
    """`tessera server` on port 0 with random root keys and admin token."""
    if EXTERNAL_ENDPOINT:
        yield ExternalServer(EXTERNAL_ENDPOINT, os.environ["S3_TEST_ACCESS_KEY"], os.environ["S3_TEST_SECRET_KEY"])
        return
    tessera_bin = request.getfixturevalue("tessera_bin")
    try:
        srv = start_server(tessera_bin, tmp_path_factory.mktemp("server"))
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield srv
    stop_checked(srv.proc)


@pytest.fixture(scope="session")
def s3(server):
    """boto3 client for the session server, signed as the root user."""
    return s3_client(server.endpoint, server.access_key, server.secret_key)


@pytest.fixture(scope="session")
def raw(server):
    """Raw SigV4-signed HTTP requests to the session server."""
    return RawS3(server.endpoint, server.access_key, server.secret_key)


@pytest.fixture(scope="session")
def aws(server, tmp_path_factory):
    """The aws CLI pointed at the session server: `aws("s3", "ls")`."""
    return AwsCli(server.endpoint, server.access_key, server.secret_key, tmp_path_factory.mktemp("aws"))


@pytest.fixture(scope="session")
def anonymous(server):
    """boto3 signing nothing, against the session server."""
    return anonymous_client(server.endpoint)


@pytest.fixture(scope="session")
def make_user(server):
    """Makes a new user of the session server: `make_user("prefix")`."""

    def make(prefix: str = "user") -> S3User:
        name = f"{prefix}-{os.urandom(5).hex()}"
        created = server.admin("user", "create", name)
        access_key, secret_key = find_key(created, "access_key"), find_key(created, "secret_key")
        return S3User(name, s3_client(server.endpoint, access_key, secret_key), access_key, secret_key)

    return make


@pytest.fixture
def bucket(s3):
    """A fresh bucket owned by root, emptied and deleted after the test."""
    name = new_bucket_name()
    s3.create_bucket(Bucket=name)
    yield name
    empty_and_delete(s3, name)


@pytest.fixture(scope="session")
def big_file(tmp_path_factory):
    """(path, sha256) of a 100 MiB file of random bytes."""
    path = tmp_path_factory.mktemp("big") / "100MiB.bin"
    return path, write_random_file(path, BIG_OBJECT_SIZE)


@pytest.fixture(scope="module", params=["plain", "mutual-tls"])
def cluster(request, tessera_bin, tmp_path_factory):
    """Separate meta, five datanodes and a gateway, once with clear-text internal
    links and once with mutual TLS on all of them; datanodes may be killed by tests."""
    mutual_tls = request.param == "mutual-tls"
    try:
        running = start_cluster(
            tessera_bin, tmp_path_factory.mktemp("cluster"), datanodes=5, mutual_tls=mutual_tls
        )
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield running
    crashed = [p.describe() for i, p in enumerate(running.datanodes) if i not in running.killed and not p.alive()]
    for proc in (running.meta_proc, running.gateway_proc):
        if not proc.alive():
            crashed.append(proc.describe())
    problems = running.stop()
    if crashed or problems:
        pytest.fail("cluster processes misbehaved:\n" + "\n".join(crashed + problems), pytrace=False)
