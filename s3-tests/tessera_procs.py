"""Start, watch and stop `tessera` processes for the conformance tests.

Every role is started on port 0 and announces its real addresses in one
`READY key=value ...` line on stdout; that line is the only thing we wait for.
stderr goes to a log file per process so a failure can show what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import string
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0

# Every process started by this module, so a failing run can print their logs.
STARTED: list[Proc] = []


class HarnessError(Exception):
    """A tessera process did not start, announce itself or stop as expected."""


def find_binary() -> Path:
    """The tessera binary under test: $TESSERA_BIN, else the static release
    build, else the plain release build, else the debug build."""
    explicit = os.environ.get("TESSERA_BIN")
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise HarnessError(f"TESSERA_BIN={explicit} is not an executable file")
        return path
    candidates = [
        REPO_ROOT / "target/x86_64-unknown-linux-gnu/release/tessera",
        REPO_ROOT / "target/release/tessera",
        REPO_ROOT / "target/debug/tessera",
    ]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise HarnessError(
        "no tessera binary: set TESSERA_BIN or build one with "
        "`cargo build` (looked at " + ", ".join(str(c) for c in candidates) + ")"
    )


def random_access_key() -> str:
    alphabet = string.ascii_uppercase + string.digits
    return "TK" + "".join(secrets.choice(alphabet) for _ in range(18))


def random_secret() -> str:
    alphabet = string.ascii_letters + string.digits + "/+"
    return "".join(secrets.choice(alphabet) for _ in range(40))


@dataclass(frozen=True)
class Credentials:
    """Root S3 keys and the admin token meta is started with. Separate
    datanodes and gateways present credentials of their own (see
    `mint_credentials`)."""

    access_key: str
    secret_key: str
    admin_token: str

    @staticmethod
    def random() -> Credentials:
        return Credentials(random_access_key(), random_secret(), secrets.token_hex(16))

    def env(self) -> dict[str, str]:
        return {
            "TESSERA_ROOT_ACCESS_KEY": self.access_key,
            "TESSERA_ROOT_SECRET_KEY": self.secret_key,
            "TESSERA_ADMIN_TOKEN": self.admin_token,
        }


def process_env(extra: dict[str, str]) -> dict[str, str]:
    """The caller's environment without stray TESSERA_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
    env.setdefault("RUST_LOG", "info")
    env.setdefault("RUST_BACKTRACE", "1")
    # Panics keep their backtraces; an error a process exits with does not
    # capture one (symbolising a large binary's debug info on a loaded
    # machine can outlast a harness's wait for the exit).
    env.setdefault("RUST_LIB_BACKTRACE", "0")
    env.setdefault("NO_COLOR", "1")
    env.update(extra)
    return env


class Proc:
    """One running tessera process whose stdout is watched for its READY line."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path):
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.stderr.log"
        self.stdout_lines: list[str] = []
        self.ready: dict[str, str] | None = None
        self._ready_event = threading.Event()
        # Open for the life of the process, closed when it is reaped.
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )
        STARTED.append(self)
        self._reader = threading.Thread(target=self._read_stdout, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        # Keep draining stdout for the whole life of the process so it can never
        # block on a full pipe.
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.stdout_lines.append(line)
            if self.ready is None and line.startswith("READY "):
                self.ready = parse_ready_line(line)
                self._ready_event.set()
        self._ready_event.set()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, str]:
        """Block until the READY line arrives; raise with the logs otherwise."""
        ended = self._ready_event.wait(timeout)
        if self.ready is not None:
            return self.ready
        status = self.popen.poll()
        if status is None and ended:
            # Its stdout closed: it is exiting, though the kernel may not
            # have made it a zombie yet.
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = self.popen.wait(5)
        reason = (
            f"exited with status {status}" if status is not None else f"printed no READY line within {timeout:.0f} s"
        )
        self.kill()
        raise HarnessError(f"{self.name} {reason}\n{self.describe()}")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait; SIGKILL and raise if it does not exit in time."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(
                f"{self.name} did not exit within {timeout:.0f} s of SIGTERM\n{self.describe()}"
            ) from None
        self._log.close()
        return code

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        self._log.close()

    def stderr_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def describe(self, lines: int = 60) -> str:
        return (
            f"--- {self.name}: {' '.join(self.argv)}\n"
            f"--- stdout:\n" + "\n".join(self.stdout_lines[-20:]) + "\n"
            f"--- stderr ({self.log_path}), last {lines} lines:\n" + self.stderr_tail(lines)
        )


def parse_ready_line(line: str) -> dict[str, str]:
    """`READY s3=http://h:p meta=h:p` -> {"s3": "http://h:p", "meta": "h:p"}."""
    fields: dict[str, str] = {}
    for part in line.split()[1:]:
        key, sep, value = part.partition("=")
        if sep:
            fields[key] = value
    return fields


def require(fields: dict[str, str], proc: Proc, *keys: str) -> None:
    missing = [k for k in keys if k not in fields]
    if missing:
        proc.kill()
        raise HarnessError(f"{proc.name} READY line lacks {missing}: {fields}\n{proc.describe()}")


@dataclass
class Server:
    """`tessera server`: meta, five datanodes and the S3 gateway in one process."""

    proc: Proc
    endpoint: str
    meta: str
    ops: str
    creds: Credentials
    data_dir: Path
    console: str = ""

    @property
    def access_key(self) -> str:
        return self.creds.access_key

    @property
    def secret_key(self) -> str:
        return self.creds.secret_key

    @property
    def admin_token(self) -> str:
        return self.creds.admin_token

    def admin(self, *args: str) -> object:
        return run_admin(self.meta, self.admin_token, *args)

    def stop(self) -> None:
        self.proc.terminate()


def start_server(
    binary: Path,
    work_dir: Path,
    name: str = "server",
    extra_args: tuple[str, ...] = (),
    creds: Credentials | None = None,
    data_dir: Path | None = None,
    generated_secrets: bool = False,
    env: dict[str, str] | None = None,
) -> Server:
    """Start `tessera server` on port 0 everywhere and wait for READY.

    `creds=None` gives fresh random credentials; pass the same ones (and name)
    to restart a server over its data folder. With `generated_secrets` the
    server is given none and generates and saves its own, as it does for a
    user who sets nothing; `env` adds to its environment. The data folder is
    `work_dir/<name>-data` unless `data_dir` says otherwise; logs stay in
    `work_dir`."""
    creds = creds or Credentials.random()
    data_dir = data_dir or work_dir / f"{name}-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        str(binary),
        "server",
        "--data",
        str(data_dir),
        "--listen",
        "127.0.0.1:0",
        "--meta-listen",
        "127.0.0.1:0",
        "--ops-listen",
        "127.0.0.1:0",
        "--console-listen",
        "127.0.0.1:0",
        "--console-sample-interval",
        "1s",
        *extra_args,
    ]
    extra = {} if generated_secrets else creds.env()
    proc = Proc(name, argv, process_env({**extra, **(env or {})}), work_dir)
    fields = proc.wait_ready()
    require(fields, proc, "s3", "meta", "ops")
    if generated_secrets:
        creds = saved_credentials(proc.log_path, data_dir / "meta")
    return Server(proc, fields["s3"], fields["meta"], fields["ops"], creds, data_dir, fields.get("console", ""))


def saved_credentials(log_path: Path, meta_dir: Path) -> Credentials:
    """The credentials a server generated: the root keys it printed, the
    tokens it saved in its meta folder."""
    printed = dict(
        line.strip().split("=", 1) for line in log_path.read_text().splitlines() if line.strip().startswith("AWS_")
    )
    return Credentials(
        printed["AWS_ACCESS_KEY_ID"],
        printed["AWS_SECRET_ACCESS_KEY"],
        (meta_dir / "admin-token").read_text().strip(),
    )


def run_admin(meta: str, token: str, *args: str, timeout: float = 30.0, tls: list[str] | None = None) -> object:
    """Run `tessera admin --json ...` (with `tls`, the --cluster-* flags of
    a mutual-TLS cluster) and return its parsed JSON output."""
    argv = [str(find_binary()), "admin", "--meta", meta, "--token", token, "--json", *(tls or []), *args]
    result = subprocess.run(
        argv,
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        env=process_env({}),
    )
    if result.returncode != 0:
        raise HarnessError(
            f"{' '.join(argv[1:])} exited {result.returncode}\n"
            f"stdout: {result.stdout.decode(errors='replace')}\n"
            f"stderr: {result.stderr.decode(errors='replace')}"
        )
    text = result.stdout.decode("utf-8", "replace").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"`tessera admin --json {' '.join(args)}` printed no JSON ({exc}): {text!r}") from None


def wait_for(what: str, check, timeout: float = 60.0, every: float = 0.2):
    """Calls `check` until it answers something true, and returns that;
    fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last})")


def find_key(value: object, key: str) -> object | None:
    """The first value stored under `key` anywhere in a JSON document."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        for nested in value.values():
            found = find_key(nested, key)
            if found is not None:
                return found
    elif isinstance(value, list):
        for nested in value:
            found = find_key(nested, key)
            if found is not None:
                return found
    return None


def healthy_datanodes(status: object) -> list[dict]:
    """Datanodes of `admin status --json` whose state is Healthy."""
    nodes = find_key(status, "datanodes")
    if not isinstance(nodes, list):
        return []
    return [n for n in nodes if isinstance(n, dict) and str(n.get("state", "")).lower() == "healthy"]


@dataclass
class Cluster:
    """Separate meta, datanode and gateway processes."""

    meta_proc: Proc
    meta: str
    datanodes: list[Proc]
    gateway_proc: Proc
    endpoint: str
    gateway_ops: str
    creds: Credentials
    work_dir: Path
    meta_ops: str = ""
    certs: Path | None = None
    killed: list[int] = field(default_factory=list)

    @property
    def access_key(self) -> str:
        return self.creds.access_key

    @property
    def secret_key(self) -> str:
        return self.creds.secret_key

    def admin(self, *args: str) -> object:
        tls = tls_args(self.certs, "admin") if self.certs else None
        return run_admin(self.meta, self.creds.admin_token, *args, tls=tls)

    def status(self) -> object:
        return self.admin("status")

    def wait_datanodes(self, count: int, timeout: float = 30.0) -> object:
        """Wait until meta reports at least `count` healthy datanodes; return the status."""
        deadline = time.monotonic() + timeout
        status: object = None
        while time.monotonic() < deadline:
            status = self.status()
            if len(healthy_datanodes(status)) >= count:
                return status
            time.sleep(0.25)
        raise HarnessError(f"meta did not report {count} healthy datanodes within {timeout:.0f} s: {status}")

    def kill_datanode(self, index: int) -> None:
        """SIGKILL datanode `index` (no chance to flush or say goodbye)."""
        self.datanodes[index].kill()
        self.killed.append(index)

    def wait_dead(self, index: int, timeout: float = 30.0) -> int:
        """Wait until meta declares datanode `index` dead; return when that
        was seen (Unix ms): scans from then on count it lost, where one
        between its kill and that moment still finds every group whole."""
        address = self.datanodes[index].ready["datanode"]

        def dead() -> bool:
            nodes = find_key(self.status(), "datanodes")
            return any(n["address"] == address and n["state"] == "dead" for n in nodes)

        wait_for(f"datanode {index} declared dead", dead, timeout)
        return int(time.time() * 1000)

    def stop(self) -> list[str]:
        """Stop every process (gateway, datanodes, meta); return the problems seen."""
        problems = []
        for proc in [self.gateway_proc, *self.datanodes, self.meta_proc]:
            if not proc.alive():
                continue
            try:
                proc.terminate()
            except HarnessError as exc:
                problems.append(str(exc))
        return problems


def make_certs(binary: Path, certs: Path, names: list[str], hosts: dict[str, str] | None = None) -> None:
    """A cluster CA in `certs` and a certificate for each of `names`, dialled
    at 127.0.0.1 or localhost (or at `hosts[name]`), as `tessera admin certs`
    makes them."""
    argv = [str(binary), "admin", "certs", "--dir", str(certs)]
    for name in names:
        argv += ["--node", f"{name}={(hosts or {}).get(name, '127.0.0.1,localhost')}"]
    result = subprocess.run(
        argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, env=process_env({})
    )
    if result.returncode != 0:
        raise HarnessError(f"making certificates failed: {result.stderr.decode(errors='replace')}")


def tls_args(certs: Path, name: str) -> list[str]:
    """The --cluster-* flags of process `name` of the CA in `certs`."""
    return [
        "--cluster-ca",
        str(certs / "ca.pem"),
        "--cluster-cert",
        str(certs / f"{name}.pem"),
        "--cluster-key",
        str(certs / f"{name}.key"),
    ]


def mint_credentials(binary: Path, meta_dir: Path, files: list[Path], gateway: Path) -> None:
    """Mint a datanode credential into each of `files` and the gateway's into
    `gateway`, offline with meta's credential key (created in `meta_dir`), as
    docker-compose's secrets service does."""
    argv = [str(binary), "admin", "credential", "files", "--key-file", str(meta_dir / "credential-key")]
    for file in files:
        argv += ["--datanode", str(file)]
    argv += ["--gateway", f"gateway={gateway}"]
    result = subprocess.run(
        argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=process_env({})
    )
    if result.returncode != 0:
        raise HarnessError(f"minting credentials failed: {result.stderr.decode(errors='replace')}")


def start_role(
    binary: Path, role: str, name: str, meta: str, credential: Path, args: list[str], env: dict[str, str], log_dir: Path
) -> Proc:
    """A datanode or gateway (`role`) of the meta at `meta` (one address or
    a group's list), presenting the credential in `credential`."""
    return Proc(
        name,
        [
            str(binary),
            role,
            "--meta",
            meta,
            "--listen",
            "127.0.0.1:0",
            "--ops-listen",
            "127.0.0.1:0",
            "--credential-file",
            str(credential),
            *args,
        ],
        env,
        log_dir,
    )


def start_datanode(
    binary: Path,
    name: str,
    meta: str,
    data: Path | list[Path],
    credential: Path,
    args: list[str],
    env: dict[str, str],
    log_dir: Path,
) -> Proc:
    """A datanode storing in `data`, one folder or a disk list (see `start_role`)."""
    folders = ",".join(str(d) for d in data) if isinstance(data, list) else str(data)
    return start_role(binary, "datanode", name, meta, credential, ["--data", folders, *args], env, log_dir)


def start_gateway(
    binary: Path, name: str, meta: str, credential: Path, args: list[str], env: dict[str, str], log_dir: Path
) -> Proc:
    """A gateway (see `start_role`)."""
    return start_role(binary, "gateway", name, meta, credential, args, env, log_dir)


def start_cluster(
    binary: Path,
    work_dir: Path,
    datanodes: int = 5,
    *,
    meta_args: tuple[str, ...] = (),
    datanode_args: tuple[str, ...] = (),
    gateway_args: tuple[str, ...] = (),
    mutual_tls: bool = False,
    locations: list[str] | None = None,
    disks: dict[int, list[Path]] | None = None,
) -> Cluster:
    """Start meta, `datanodes` datanodes and a gateway as separate processes;
    `*_args` are appended to each role's command line. With `mutual_tls`,
    every internal link runs mutual TLS with a CA made for the cluster.
    `locations` gives each datanode its --location (/zone/rack/host);
    `disks` gives datanodes by index several data folders instead of one."""
    creds = Credentials.random()
    env = process_env(creds.env())
    started: list[Proc] = []
    certs = work_dir / "certs" if mutual_tls else None
    if certs:
        make_certs(binary, certs, ["meta", "gateway", "admin", *(f"dn{i}" for i in range(datanodes))])

    def tls(name: str) -> list[str]:
        return tls_args(certs, name) if certs else []

    try:
        meta_dir = work_dir / "meta"
        meta_dir.mkdir(parents=True, exist_ok=True)
        dn_credentials = [work_dir / f"dn{i}.credential" for i in range(datanodes)]
        gateway_credential = work_dir / "gateway.credential"
        mint_credentials(binary, meta_dir, dn_credentials, gateway_credential)
        meta_proc = Proc(
            "cluster-meta",
            [
                str(binary),
                "meta",
                "--data",
                str(meta_dir),
                "--listen",
                "127.0.0.1:0",
                "--ops-listen",
                "127.0.0.1:0",
                *tls("meta"),
                *meta_args,
            ],
            env,
            work_dir,
        )
        started.append(meta_proc)
        fields = meta_proc.wait_ready()
        require(fields, meta_proc, "meta", "ops")
        meta = fields["meta"]

        nodes = []
        for i in range(datanodes):
            dn_dir = work_dir / f"dn{i}"
            dn_dir.mkdir(parents=True, exist_ok=True)
            proc = start_datanode(
                binary,
                f"cluster-dn{i}",
                meta,
                (disks or {}).get(i, dn_dir),
                dn_credentials[i],
                [*tls(f"dn{i}"), *datanode_args, *(["--location", locations[i]] if locations else [])],
                env,
                work_dir,
            )
            started.append(proc)
            nodes.append(proc)
        for proc in nodes:
            require(proc.wait_ready(), proc, "datanode", "ops")

        gateway = start_gateway(
            binary, "cluster-gateway", meta, gateway_credential, [*tls("gateway"), *gateway_args], env, work_dir
        )
        started.append(gateway)
        gw_fields = gateway.wait_ready()
        require(gw_fields, gateway, "s3", "ops")
        cluster = Cluster(
            meta_proc, meta, nodes, gateway, gw_fields["s3"], gw_fields["ops"], creds, work_dir, fields["ops"], certs
        )
        cluster.wait_datanodes(datanodes)
        return cluster
    except BaseException:
        for proc in reversed(started):
            proc.kill()
        raise
