"""Meta as a group of three or five members (Raft), with datanodes and a
gateway that take every member's address: the leader SIGKILLed under a PUT and
GET load (with a follower too, of five) loses no acknowledged write, the
outage lasts an election, and the killed members catch up when they are back; a member whose data folder was wiped rejoins from
a snapshot streamed by the leader; a leader cut off from the others by a
network partition (members in network namespaces) commits nothing, and
clients racing `If-None-Match: *` PUTs on both sides get one winner per key
at most; a lone meta's folder (of `tessera server --lone-meta` or of
`tessera meta`) becomes a group's, whose new members start from a snapshot
and hold what the lone meta wrote."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tessera_clients import new_bucket_name, s3_client
from tessera_procs import (
    Credentials,
    HarnessError,
    Proc,
    make_certs,
    mint_credentials,
    process_env,
    require,
    run_admin,
    start_cluster,
    start_datanode,
    start_gateway,
    start_server,
    tls_args,
)

pytestmark = pytest.mark.tessera

MEMBERS = (1, 2, 3)
DATANODES = 3
# The longest a client may see meta fail while the group elects a new leader.
ELECTION_OUTAGE_S = 10.0


def free_port() -> int:
    """A port the kernel has just handed out: members must know each
    other's addresses before any of them starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class MetaGroup:
    """`tessera meta` members, three datanodes and a gateway."""

    binary: Path
    work_dir: Path
    creds: Credentials
    addrs: dict[int, str]
    members: dict[int, Proc] = field(default_factory=dict)
    others: list[Proc] = field(default_factory=list)
    endpoint: str = ""
    starts: int = 0
    # Command prefix per member (`ip netns exec NS`) when members run in
    # network namespaces of their own.
    wrap: dict[int, list[str]] = field(default_factory=dict)
    # The cluster CA's folder, when every link runs mutual TLS.
    certs: Path | None = None
    # Flags every member gets besides its own.
    meta_args: tuple[str, ...] = ()
    # Environment variables a member gets besides the credentials.
    env: dict[int, dict[str, str]] = field(default_factory=dict)

    def tls(self, name: str) -> list[str]:
        return tls_args(self.certs, name) if self.certs else []

    @property
    def meta(self) -> str:
        return ",".join(self.addrs.values())

    def member_dir(self, member: int) -> Path:
        return self.work_dir / f"meta{member}"

    def start_member(self, member: int) -> Proc:
        peers = ",".join(f"{i}={addr}" for i, addr in self.addrs.items())
        self.starts += 1
        proc = Proc(
            f"meta{member}-{self.starts}",
            [
                *self.wrap.get(member, []),
                str(self.binary),
                "meta",
                "--data",
                str(self.member_dir(member)),
                "--listen",
                self.addrs[member],
                "--ops-listen",
                "127.0.0.1:0",
                "--node-id",
                str(member),
                "--peers",
                peers,
                *self.tls(f"meta{member}"),
                *self.meta_args,
            ],
            process_env({**self.creds.env(), **self.env.get(member, {})}),
            self.work_dir,
        )
        self.members[member] = proc
        return proc

    def start_gateway(self, meta: str) -> str:
        """A gateway whose --meta is `meta`; its S3 endpoint."""
        gateway = start_gateway(
            self.binary,
            f"group-gateway-{len(self.others)}",
            meta,
            self.work_dir / "gateway.credential",
            self.tls("gateway"),
            process_env(self.creds.env()),
            self.work_dir,
        )
        self.others.append(gateway)
        fields = gateway.wait_ready()
        require(fields, gateway, "s3")
        return fields["s3"]

    def admin(self, *args: str, meta: str | None = None) -> object:
        return run_admin(meta or self.meta, self.creds.admin_token, *args, tls=self.tls("admin") or None)

    def adopted_mark(self, member: int) -> Path:
        """The mark of a lone meta's store in `member`'s data folder."""
        return self.member_dir(member) / "adopted-store"

    def status(self, member: int) -> dict | None:
        """The group as `member` sees it (asked of that member alone)."""
        [answer] = self.admin("meta", "status", meta=self.addrs[member])
        return answer.get("status")

    def voters(self, member: int) -> list[int]:
        """The voters of the group as `member` sees it."""
        return sorted(m["id"] for m in self.status(member)["members"] if m["voter"])

    def statuses(self) -> dict[int, dict]:
        """Each running member's own view of the group."""
        views = {}
        for member in self.addrs:
            if self.members[member].alive() and (view := self.status(member)) is not None:
                views[member] = view
        return views

    def leader(self, timeout: float = 30.0) -> int:
        """The member every running member names as leader."""
        deadline = time.monotonic() + timeout
        views: dict[int, dict] = {}
        while time.monotonic() < deadline:
            views = self.statuses()
            leaders = {v["node_id"] for v in views.values() if v["role"] == "leader"}
            named = {v["leader"] for v in views.values()}
            if len(leaders) == 1 and named == leaders:
                return leaders.pop()
            time.sleep(0.2)
        raise HarnessError(f"the group agreed on no leader within {timeout:.0f} s: {views}")

    def wait_caught_up(self, member: int, index: int, timeout: float = 60.0) -> dict:
        """Wait until `member` has applied the entry at `index`; its status."""
        deadline = time.monotonic() + timeout
        view: dict = {}
        while time.monotonic() < deadline:
            view = self.statuses().get(member, {})
            if (view.get("last_applied") or 0) >= index and view.get("role") in ("follower", "leader"):
                return view
            time.sleep(0.2)
        raise HarnessError(f"member {member} did not apply entry {index} within {timeout:.0f} s: {view}")

    def stop(self) -> None:
        for proc in [*self.others, *self.members.values()]:
            if proc.alive():
                proc.terminate()


def start_group(
    tessera_bin: Path,
    tmp_path: Path,
    addrs: dict[int, str],
    wrap: dict[int, list[str]] | None = None,
    mutual_tls: bool = False,
    datanodes: int = DATANODES,
    meta_args: tuple[str, ...] = (),
    datanode_args: tuple[str, ...] = (),
    member_env: dict[int, dict[str, str]] | None = None,
) -> MetaGroup:
    """Members at `addrs`, `datanodes` datanodes and a gateway given every
    member's address; the root key works when it returns. With
    `mutual_tls`, every link runs it (members on other hosts must).
    `meta_args` and `datanode_args` are added to every member's and
    datanode's flags, `member_env[member]` to that member's environment."""
    creds = Credentials.random()
    running = MetaGroup(tessera_bin, tmp_path, creds, addrs, wrap=wrap or {}, meta_args=meta_args, env=member_env or {})
    if mutual_tls:
        running.certs = tmp_path / "certs"
        hosts = {f"meta{m}": addr.rpartition(":")[0] for m, addr in addrs.items()}
        names = [*hosts, "gateway", "admin", *(f"dn{i}" for i in range(datanodes))]
        make_certs(tessera_bin, running.certs, names, hosts)
    try:
        dn_credentials = [tmp_path / f"dn{i}.credential" for i in range(datanodes)]
        gateway_credential = tmp_path / "gateway.credential"
        running.member_dir(1).mkdir(parents=True, exist_ok=True)
        # The first member's credential key, which the others copy at start.
        mint_credentials(tessera_bin, running.member_dir(1), dn_credentials, gateway_credential)
        for member in addrs:
            running.start_member(member)
        for member in addrs:
            require(running.members[member].wait_ready(), running.members[member], "meta", "ops")
        running.leader()
        env = process_env(creds.env())
        for i in range(datanodes):
            running.others.append(
                start_datanode(
                    tessera_bin,
                    f"group-dn{i}",
                    running.meta,
                    tmp_path / f"dn{i}",
                    dn_credentials[i],
                    [*running.tls(f"dn{i}"), *datanode_args],
                    env,
                    tmp_path,
                )
            )
        for proc in running.others:
            proc.wait_ready()
        running.endpoint = running.start_gateway(running.meta)
        # The root key is written by the group's first leader, just after its election.
        client = s3_client(running.endpoint, creds.access_key, creds.secret_key)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.list_buckets()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    except BaseException:
        running.stop()
        raise
    return running


def local_group(tessera_bin: Path, tmp_path: Path, members: tuple[int, ...] = MEMBERS):
    running = start_group(tessera_bin, tmp_path, {member: f"127.0.0.1:{free_port()}" for member in members})
    yield running
    running.stop()


@pytest.fixture
def group(tessera_bin, tmp_path):
    yield from local_group(tessera_bin, tmp_path)


@pytest.fixture(params=[3, 5], ids=["three", "five"])
def sized_group(request, tessera_bin, tmp_path):
    yield from local_group(tessera_bin, tmp_path, tuple(range(1, request.param + 1)))


@dataclass
class Load:
    """Writers PUT new keys and a reader GETs acknowledged ones until stopped;
    every outcome is kept with its time."""

    client: object
    bucket: str
    acked: dict[str, bytes] = field(default_factory=dict)
    outcomes: list[tuple[float, bool]] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, started: float, ok: bool) -> None:
        with self.lock:
            self.outcomes.append((started, ok))

    def writer(self, name: str, size: int) -> None:
        n = 0
        while not self.stop.is_set():
            key = f"{name}-{n}"
            body = os.urandom(size)
            started = time.monotonic()
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
            except Exception:  # noqa: BLE001 - every failure is counted, none is fatal
                self.note(started, False)
            else:
                with self.lock:
                    self.acked[key] = body
                self.note(started, True)
            n += 1

    def reader(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                keys = list(self.acked)
            if not keys:
                time.sleep(0.01)
                continue
            key = random.choice(keys)
            started = time.monotonic()
            try:
                got = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except Exception:  # noqa: BLE001
                self.note(started, False)
                continue
            if got != self.acked[key]:
                self.wrong.append(key)
            self.note(started, True)

    def longest_failure(self, since: float) -> float:
        """The longest time from `since` on with requests failing and none
        succeeding: how long clients saw meta down."""
        longest = 0.0
        down_from = None
        for started, ok in sorted(self.outcomes):
            if started < since:
                continue
            if ok:
                if down_from is not None:
                    longest = max(longest, started - down_from)
                down_from = None
            elif down_from is None:
                down_from = started
        if down_from is not None:
            longest = max(longest, time.monotonic() - down_from)
        return longest


def test_leader_sigkill_under_load_loses_no_acknowledged_write(sized_group):
    """Of three members the leader is killed; of five, the leader and a
    follower: a majority is left either way."""
    group = sized_group
    client = s3_client(group.endpoint, group.creds.access_key, group.creds.secret_key, read_timeout=60)
    bucket = new_bucket_name("group")
    client.create_bucket(Bucket=bucket)
    load = Load(client, bucket)
    threads = [
        threading.Thread(target=load.writer, args=("small-a", 1000)),
        threading.Thread(target=load.writer, args=("small-b", 1000)),
        threading.Thread(target=load.writer, args=("blocks", 100 * 1024)),
        threading.Thread(target=load.reader),
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(3)
        old_leader = group.leader()
        followers = [m for m in group.addrs if m != old_leader]
        killed = [old_leader, *followers[: (len(group.addrs) - 1) // 2 - 1]]
        acked_before = len(load.acked)
        killed_at = time.monotonic()
        for member in killed:
            group.members[member].kill()
        time.sleep(8)
    finally:
        load.stop.set()
        for thread in threads:
            thread.join()
    assert acked_before > 0, "no PUT succeeded before the kill"
    after = [ok for started, ok in load.outcomes if started > killed_at + ELECTION_OUTAGE_S / 2]
    assert any(after), "no request succeeded after the election"
    outage = load.longest_failure(killed_at - 1)
    failed = sum(1 for _, ok in load.outcomes if not ok)
    print(f"outage {outage:.2f} s, {failed} of {len(load.outcomes)} requests failed, {len(load.acked)} PUTs acked")
    assert outage < ELECTION_OUTAGE_S, f"clients saw meta fail for {outage:.1f} s"
    assert not load.wrong, f"GETs answered other bytes for {load.wrong[:5]}"
    assert len(load.acked) > acked_before, "no PUT succeeded after the kill"

    # Every acknowledged PUT is there, through the new leader.
    new_leader = group.leader()
    assert new_leader not in killed
    for key, body in load.acked.items():
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
    listed = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        listed.update(o["Key"] for o in page.get("Contents", []))
    assert set(load.acked) <= listed

    # The killed members come back and catch up with what was written without them.
    target = group.statuses()[new_leader]["last_applied"]
    for member in killed:
        group.start_member(member).wait_ready()
    for member in killed:
        view = group.wait_caught_up(member, target)
        assert view["role"] == "follower" and view["leader"] == new_leader, view


def put_bodies(client, bucket: str, prefix: str, count: int, size: int) -> dict[str, bytes]:
    """PUTs `count` random bodies of `size` bytes under `prefix`; answers them by key."""
    bodies = {f"{prefix}-{i}": os.urandom(size) for i in range(count)}
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return bodies


def test_wiped_member_rejoins_from_a_snapshot(group):
    client = s3_client(group.endpoint, group.creds.access_key, group.creds.secret_key, read_timeout=60)
    bucket = new_bucket_name("wiped")
    client.create_bucket(Bucket=bucket)
    bodies = put_bodies(client, bucket, "before", 20, 500)

    leader = group.leader()
    victim = next(m for m in MEMBERS if m != leader)
    group.admin("meta", "remove", str(victim))
    group.members[victim].kill()
    shutil.rmtree(group.member_dir(victim))

    # Written while the member is gone, then covered by a snapshot whose
    # log is dropped: the returning member can only get them by snapshot.
    bodies.update(put_bodies(client, bucket, "after", 20, 500))
    snapshot = group.admin("meta", "snapshot")["snapshot"]
    assert snapshot > 0

    group.start_member(victim).wait_ready()
    group.admin("meta", "add", str(victim), group.addrs[victim])
    view = group.wait_caught_up(victim, snapshot)
    assert view["snapshot"] is not None and view["snapshot"] >= snapshot, view
    assert any(m["id"] == victim and m["voter"] for m in view["members"]), view

    # It holds the leader's snapshot byte for byte, and the group's secrets.
    def snapshot_files(member: int) -> dict[str, bytes]:
        folder = group.member_dir(member) / "raft-snapshots"
        return {p.name: p.read_bytes() for p in folder.glob("snapshot-*.redb")}

    leader_snapshots = snapshot_files(leader)
    assert leader_snapshots and snapshot_files(victim) == leader_snapshots
    for name in ("credential-key", "sse-master-key"):
        assert (group.member_dir(victim) / name).read_bytes() == (group.member_dir(leader) / name).read_bytes()

    # With the old leader gone, the two others elect one and serve it all.
    group.members[leader].kill()
    assert group.leader() != leader
    for key, body in bodies.items():
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key


def test_first_member_that_lost_its_log_rejoins_from_a_snapshot(group):
    """The first member, its raft log lost but its store kept, looks like a
    lone meta's store and is marked so; added again, the leader's snapshot
    replaces its store, and the mark goes with it (a mark left would make
    each restart wait to lead the group alone)."""
    client = s3_client(group.endpoint, group.creds.access_key, group.creds.secret_key, read_timeout=60)
    bucket = new_bucket_name("lostlog")
    client.create_bucket(Bucket=bucket)
    bodies = put_bodies(client, bucket, "before", 5, 400)

    victim = MEMBERS[0]
    group.members[victim].kill()
    assert group.leader() != victim
    group.admin("meta", "remove", str(victim))
    (group.member_dir(victim) / "raft-log.redb").unlink()
    bodies.update(put_bodies(client, bucket, "after", 5, 400))
    snapshot = group.admin("meta", "snapshot")["snapshot"]

    mark = group.adopted_mark(victim)
    group.start_member(victim).wait_ready()
    assert mark.exists(), "a store without a log is marked as a lone meta's"
    group.admin("meta", "add", str(victim), group.addrs[victim])
    view = group.wait_caught_up(victim, snapshot)
    assert any(m["id"] == victim and m["voter"] for m in view["members"]), view
    assert not mark.exists(), "the installed snapshot made the store the group's"

    group.members[victim].kill()
    group.start_member(victim).wait_ready()
    group.wait_caught_up(victim, snapshot)
    # With the others gone but one, the returned member and it serve it all.
    leader = group.leader()
    other = next(m for m in MEMBERS if m not in (victim, leader))
    group.members[other].kill()
    for key, body in bodies.items():
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key


def write_small_objects(client, name: str) -> tuple[str, dict[str, bytes]]:
    """A new bucket with ten objects of about 300 bytes, written by a lone
    meta: kept in their meta records, so members serve them without the
    datanodes. Answers the bucket and the bodies by key."""
    bucket = new_bucket_name(name)
    client.create_bucket(Bucket=bucket)
    bodies = {f"lone-{i}": os.urandom(300 + i) for i in range(10)}
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return bucket, bodies


def test_a_lone_server_grows_into_a_group(tessera_bin, tmp_path):
    """A `tessera server --lone-meta`'s folder becomes a group of one when
    the server starts without the flag; restarted on another meta port the
    server records its new address; members started with `--peers` naming
    it join with `meta add` from a snapshot, so they hold what the lone meta
    wrote before the log began too, and serve it all once the server is
    gone."""
    server = start_server(tessera_bin, tmp_path, name="grow", extra_args=("--lone-meta",))
    try:
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        bucket, bodies = write_small_objects(client, "grow")
        server.proc.terminate()

        server = start_server(tessera_bin, tmp_path, name="grow", creds=server.creds)
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        for key, body in bodies.items():
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        first = {f"first-{i}": os.urandom(300 + i) for i in range(10)}
        for key, body in first.items():
            client.put_object(Bucket=bucket, Key=key, Body=body)
        bodies |= first
        old_meta = server.meta
        server.proc.terminate()

        server = start_server(tessera_bin, tmp_path, name="grow", creds=server.creds)
        assert server.meta != old_meta
        client = s3_client(server.endpoint, server.access_key, server.secret_key)
        for key, body in bodies.items():
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        # The leader corrects its own address in the membership just after
        # its start-up writes.
        deadline = time.monotonic() + 20
        while True:
            [answer] = server.admin("meta", "status")
            status = answer["status"]
            if [m["addr"] for m in status["members"]] == [server.meta]:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert status["role"] == "leader" and status["members"] == [{"id": 1, "addr": server.meta, "voter": True}]

        addrs = {node: f"127.0.0.1:{free_port()}" for node in (2, 3)}
        peers = ",".join([f"1={server.meta}", *(f"{node}={addr}" for node, addr in addrs.items())])
        members = {}
        gateway = None
        try:
            for node, addr in addrs.items():
                members[node] = Proc(
                    f"grow-member{node}",
                    [
                        str(tessera_bin),
                        "meta",
                        "--data",
                        str(tmp_path / f"member{node}"),
                        "--listen",
                        addr,
                        "--ops-listen",
                        "127.0.0.1:0",
                        "--node-id",
                        str(node),
                        "--peers",
                        peers,
                    ],
                    process_env(server.creds.env()),
                    tmp_path,
                )
            for node, addr in addrs.items():
                require(members[node].wait_ready(), members[node], "meta")
                server.admin("meta", "add", str(node), addr)
            more = {f"second-{i}": os.urandom(300 + i) for i in range(10)}
            for key, body in more.items():
                client.put_object(Bucket=bucket, Key=key, Body=body)
            bodies |= more
            [answer] = server.admin("meta", "status")
            leader = answer["status"]
            assert sorted((m["id"], m["voter"]) for m in leader["members"]) == [(1, True), (2, True), (3, True)], leader
            # Every write since is committed by them, so each member holds it.
            for node, addr in addrs.items():
                deadline = time.monotonic() + 30
                while True:
                    [answer] = run_admin(addr, server.creds.admin_token, "meta", "status")
                    view = answer["status"]
                    if view["role"] == "follower" and (view["last_applied"] or 0) >= leader["last_log_index"]:
                        break
                    assert time.monotonic() < deadline, view
                    time.sleep(0.2)
                for name in ("credential-key", "sse-master-key"):
                    assert (tmp_path / f"member{node}" / name).read_bytes() == (
                        server.data_dir / "meta" / name
                    ).read_bytes()

            # Without the server, the two members elect a leader and serve
            # every object, those the lone meta wrote among them.
            server.proc.kill()
            deadline = time.monotonic() + 30
            while not any(
                run_admin(addr, server.creds.admin_token, "meta", "status")[0]["status"]["role"] == "leader"
                for addr in addrs.values()
            ):
                assert time.monotonic() < deadline, "members 2 and 3 elected no leader"
                time.sleep(0.2)
            credential = tmp_path / "grow-gateway.credential"
            mint_credentials(tessera_bin, tmp_path / "member2", [], credential)
            gateway = start_gateway(
                tessera_bin,
                "grow-gateway",
                ",".join(addrs.values()),
                credential,
                [],
                process_env(server.creds.env()),
                tmp_path,
            )
            fields = gateway.wait_ready()
            require(fields, gateway, "s3")
            client = s3_client(fields["s3"], server.access_key, server.secret_key)
            for key, body in bodies.items():
                assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key
        finally:
            for proc in [*members.values(), *([gateway] if gateway else [])]:
                proc.terminate()
    finally:
        if server.proc.alive():
            server.proc.terminate()


def lone_meta_and_group(tessera_bin, tmp_path, name: str):
    """A lone meta's cluster that wrote a bucket of small objects and was
    stopped (its meta folder left at `lone/meta`), and a group of three
    members, none started, holding its gateway's credential: (lone, group,
    bucket, bodies)."""
    lone = start_cluster(tessera_bin, tmp_path / "lone")
    try:
        client = s3_client(lone.endpoint, lone.access_key, lone.secret_key)
        bucket, bodies = write_small_objects(client, name)
    finally:
        assert not lone.stop()
    shutil.copy(tmp_path / "lone" / "gateway.credential", tmp_path / "gateway.credential")
    running = MetaGroup(tessera_bin, tmp_path, lone.creds, {m: f"127.0.0.1:{free_port()}" for m in MEMBERS})
    return lone, running, bucket, bodies


def test_a_lone_meta_forms_a_group_of_three(tessera_bin, tmp_path):
    """A lone `tessera meta`'s folder started as the first of three new
    members (`--node-id 1 --peers ...`) forms a group of itself and adds the
    two others from a snapshot: with the first member gone, they serve what
    the lone meta held. Started as another member, it is refused."""
    lone, running, bucket, bodies = lone_meta_and_group(tessera_bin, tmp_path, "formed")
    try:
        # As any member but the first, its records would be in no other
        # member's store: refused, and left as it was.
        shutil.move(tmp_path / "lone" / "meta", running.member_dir(2))
        with pytest.raises(HarnessError, match="exited with status 1"):
            running.start_member(2).wait_ready()
        assert "holds a store and no raft log" in running.members[2].stderr_tail()
        assert not (running.member_dir(2) / "raft-log.redb").exists()
        shutil.move(running.member_dir(2), running.member_dir(1))
        for member in MEMBERS:
            running.start_member(member)
        for member in MEMBERS:
            require(running.members[member].wait_ready(), running.members[member], "meta", "ops")
        assert running.leader() == 1
        serves_lone_objects_without_member_1(running, lone, bucket, bodies)
    finally:
        running.stop()


def serves_lone_objects_without_member_1(running: MetaGroup, lone, bucket: str, bodies: dict[str, bytes]) -> None:
    """Asserts that the group formed around member 1's adopted store takes in
    every peer and drops the store's mark, then, with member 1 killed, that
    the other two serve every object the lone meta wrote."""
    deadline = time.monotonic() + 60
    while running.voters(1) != list(MEMBERS):
        assert time.monotonic() < deadline, running.statuses()
        time.sleep(0.2)
    last = running.status(1)["last_log_index"]
    for member in (2, 3):
        running.wait_caught_up(member, last)
    # Every peer in, the mark that the store came from a lone meta goes.
    deadline = time.monotonic() + 10
    while running.adopted_mark(1).exists():
        assert time.monotonic() < deadline, "the adopted store's mark stayed"
        time.sleep(0.2)

    running.members[1].kill()
    endpoint = running.start_gateway(",".join(running.addrs[m] for m in (2, 3)))
    client = s3_client(endpoint, lone.access_key, lone.secret_key)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.head_bucket(Bucket=bucket)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    for key, body in bodies.items():
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == body, key


def test_a_lone_meta_formation_killed_part_way_resumes(tessera_bin, tmp_path):
    """The first member formed a group of itself around a lone meta's store
    and is part way through adding its peers when it is SIGKILLed: the
    second peer's address is held by a lone meta, which answers as an empty
    peer (so the group forms) but never takes the group's log, so adding it
    cannot finish. Restarted, with the real second member there, the first
    goes on adding its peers, and the group of three holds what the lone
    meta held."""
    lone, running, bucket, bodies = lone_meta_and_group(tessera_bin, tmp_path, "resumed")
    decoy = Proc(
        "decoy",
        [str(tessera_bin), "meta", "--data", str(tmp_path / "decoy"), "--listen", running.addrs[2]]
        + ["--ops-listen", "127.0.0.1:0"],
        process_env(lone.creds.env()),
        tmp_path,
    )
    try:
        require(decoy.wait_ready(), decoy, "meta")
        shutil.move(tmp_path / "lone" / "meta", running.member_dir(1))
        # Member 1 before member 3, which copies the group's secrets from
        # the first peer that answers (the decoy has secrets of its own).
        for member in (1, 3):
            require(running.start_member(member).wait_ready(), running.members[member], "meta", "ops")
        # Member 1 leads a group of itself and waits for the decoy to join
        # it as a voter, with member 3 still to add.
        deadline = time.monotonic() + 30
        while running.voters(1) != [1, 2]:
            assert time.monotonic() < deadline, running.status(1)
            time.sleep(0.2)
        assert running.adopted_mark(1).exists(), "the mark went before every peer was in"

        running.members[1].kill()
        assert decoy.terminate() == 0
        for member in (2, 1):
            require(running.start_member(member).wait_ready(), running.members[member], "meta", "ops")
        serves_lone_objects_without_member_1(running, lone, bucket, bodies)
    finally:
        if decoy.alive():
            decoy.kill()
        running.stop()


class Lab:
    """Each member in a network namespace of its own, all on one bridge (in
    a namespace of its own too) that this namespace also reaches, so that
    the links between members can be cut while every member still reaches
    the gateways and datanodes here, or the link between this namespace and
    one member. Healing and deleting the namespaces undo it all."""

    # Members listen on an address of their own namespace, so this port
    # cannot meet another process's.
    PORT = 9879

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.subnet = f"10.201.{random.randint(1, 250)}"
        self.lab = f"tl{tag}"
        self.spaces = {member: f"tm{tag}{member}" for member in MEMBERS}
        self.cuts: list[tuple[str | None, str]] = []
        self.host_link = f"v{tag}hb"
        self.ip("netns", "add", self.lab)
        self.ip("-n", self.lab, "link", "add", "br0", "type", "bridge")
        self.ip("-n", self.lab, "link", "set", "br0", "up")
        for member, space in self.spaces.items():
            self.ip("netns", "add", space)
            self.ip("-n", space, "link", "set", "lo", "up")
            self.plug(f"v{tag}{member}a", f"v{tag}{member}b", space)
            self.ip("-n", space, "addr", "add", f"{self.addr(member)}/24", "dev", f"v{tag}{member}b")
        self.plug(f"v{tag}ha", self.host_link, None)
        self.ip("addr", "add", f"{self.host_addr}/24", "dev", self.host_link)

    @staticmethod
    def ip(*args: str) -> None:
        result = subprocess.run(["ip", *args], check=False, capture_output=True, timeout=30)
        if result.returncode != 0:
            raise HarnessError(f"ip {' '.join(args)}: {result.stderr.decode(errors='replace')}")

    def plug(self, bridge_end: str, other_end: str, space: str | None) -> None:
        """A veth pair from the bridge to `space` (None: this namespace)."""
        self.ip("link", "add", bridge_end, "type", "veth", "peer", "name", other_end)
        self.ip("link", "set", bridge_end, "netns", self.lab)
        self.ip("-n", self.lab, "link", "set", bridge_end, "master", "br0", "up")
        if space is None:
            self.ip("link", "set", other_end, "up")
        else:
            self.ip("link", "set", other_end, "netns", space)
            self.ip("-n", space, "link", "set", other_end, "up")

    def addr(self, member: int) -> str:
        return f"{self.subnet}.{member}"

    @property
    def host_addr(self) -> str:
        """This namespace's address on the bridge."""
        return f"{self.subnet}.254"

    def wrap(self) -> dict[int, list[str]]:
        return {member: ["ip", "netns", "exec", space] for member, space in self.spaces.items()}

    def cut(self, member: int) -> None:
        """Cuts `member` off from the other members, both ways."""
        for other in MEMBERS:
            if other != member:
                self.blackhole(self.spaces[member], self.addr(other))
                self.blackhole(self.spaces[other], self.addr(member))

    def cut_host(self, member: int) -> None:
        """Cuts this namespace (gateways, datanodes, admin commands) off
        from `member`, both ways; the members still reach each other."""
        self.blackhole(None, self.addr(member))
        self.blackhole(self.spaces[member], self.host_addr)

    def blackhole(self, space: str | None, target: str) -> None:
        """Drops what `space` (None: this namespace) sends to `target`."""
        self.ip(*(["-n", space] if space else []), "route", "add", "blackhole", f"{target}/32")
        self.cuts.append((space, target))

    def heal(self) -> None:
        while self.cuts:
            space, target = self.cuts.pop()
            self.ip(*(["-n", space] if space else []), "route", "del", "blackhole", f"{target}/32")

    def close(self) -> None:
        try:
            # A route left in this namespace would outlive the lab's.
            self.heal()
        finally:
            for space in [*self.spaces.values(), self.lab]:
                subprocess.run(["ip", "netns", "del", space], check=False, capture_output=True, timeout=30)


@pytest.fixture
def lab_group(tessera_bin, tmp_path):
    lab = Lab()
    try:
        addrs = {member: f"{lab.addr(member)}:{Lab.PORT}" for member in MEMBERS}
        running = start_group(tessera_bin, tmp_path, addrs, lab.wrap(), mutual_tls=True)
        try:
            yield lab, running
        finally:
            lab.heal()
            running.stop()
    finally:
        lab.close()


def test_a_partitioned_leader_cannot_commit(lab_group):
    lab, group = lab_group
    leader = group.leader()
    others = [m for m in MEMBERS if m != leader]
    # Clients on each side: one gateway reaches only the old leader, one
    # only the other two members.
    lonely = group.start_gateway(group.addrs[leader])
    majority = group.start_gateway(",".join(group.addrs[m] for m in others))
    clients = {
        side: s3_client(endpoint, group.creds.access_key, group.creds.secret_key, read_timeout=5)
        for side, endpoint in (("lonely", lonely), ("majority", majority))
    }
    bucket = new_bucket_name("split")
    clients["majority"].create_bucket(Bucket=bucket)
    clients["majority"].put_object(Bucket=bucket, Key="read", Body=b"before")

    lab.cut(leader)
    # Meta's own writes straight at the cut-off leader (its reads, which
    # every S3 request starts with, already fail without a majority): each
    # waits in its log until the partition heals, then fails.
    names = [new_bucket_name("race") for _ in range(5)]
    created: list[tuple[str, str, bool]] = []

    def create(side: str, meta: str, name: str) -> None:
        try:
            group.admin("bucket", "create", name, meta=meta)
            won = True
        except HarnessError:
            won = False
        with lock:
            created.append((name, side, won))

    lock = threading.Lock()
    majority_meta = ",".join(group.addrs[m] for m in others)
    creators = [threading.Thread(target=create, args=("lonely", group.addrs[leader], n)) for n in names]
    for thread in creators:
        thread.start()
    bodies = {(side, key): f"{side} {key} {secrets.token_hex(8)}".encode() for side in clients for key in range(30)}
    history: list[tuple[int, str, str]] = []

    def race(side: str, key: int) -> None:
        try:
            clients[side].put_object(Bucket=bucket, Key=f"k{key}", Body=bodies[(side, key)], IfNoneMatch="*")
            outcome = "won"
        except Exception as exc:  # noqa: BLE001 - every refusal or timeout is a loss
            outcome = type(exc).__name__
        with lock:
            history.append((key, side, outcome))

    threads = [threading.Thread(target=race, args=(side, key)) for key in range(30) for side in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The majority has a leader of its own by now: the cut-off one must not
    # serve what it holds as current (its read lease ran out without a
    # majority's answers).
    clients["majority"].put_object(Bucket=bucket, Key="read", Body=b"after")
    try:
        stale = clients["lonely"].get_object(Bucket=bucket, Key="read")["Body"].read()
    except Exception:  # noqa: BLE001 - a refusal or a timeout is the right outcome
        stale = None
    assert stale != b"before", "the cut-off leader served a read it could not know was current"
    for name in names:
        create("majority", majority_meta, name)
    time.sleep(1)
    lab.heal()
    for thread in creators:
        thread.join()
    won = [(name, side) for name, side, ok in created if ok]
    assert sorted(won) == sorted((name, "majority") for name in names), created
    listed = [b["name"] for b in group.admin("bucket", "list") if b["name"] in names]
    assert sorted(listed) == sorted(names)
    new_leader = group.leader()
    assert new_leader in others

    winners: dict[int, list[str]] = {}
    for key, side, outcome in history:
        if outcome == "won":
            winners.setdefault(key, []).append(side)
    assert all(len(sides) <= 1 for sides in winners.values()), winners
    assert not [k for k, sides in winners.items() if "lonely" in sides], "the cut-off leader committed"
    assert len(winners) >= 25, f"the majority side won only {len(winners)} of 30 keys: {history}"
    for key, [side] in winners.items():
        got = clients["majority"].get_object(Bucket=bucket, Key=f"k{key}")["Body"].read()
        assert got == bodies[(side, key)], key
