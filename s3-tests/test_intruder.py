"""An intruder on the same host: another local user, or a process that can
reach the datanode and meta ports without any credential. It must not read
the data folder, nor read, write or delete a block."""

from __future__ import annotations

import stat

import pytest

from tessera_clients import s3_client
from tessera_procs import start_server

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
        assert {"meta.redb", "root-credentials", "admin-token", "cluster-token"} <= names, names
    finally:
        server.proc.kill()
