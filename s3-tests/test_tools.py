"""Smoke tests with other S3 clients: rclone and s3cmd copy a folder tree up
and back, and the copy must equal the original byte for byte. Each test is
skipped, saying why, when its tool is not installed (scripts/test.sh installs
both from Debian)."""

import filecmp
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tessera_clients import REGION, empty_and_delete, new_bucket_name, rclone, rclone_env


def make_tree(root: Path) -> list[str]:
    """A small tree with nested folders, an empty file, spaces, UTF-8 names and a 3 MiB file."""
    files = {
        "top.txt": b"top level\n",
        "empty.bin": b"",
        "dir one/nested/deep.txt": b"deep\n" * 100,
        "dir one/\u00fcmlaut-\U0001f600.txt": b"unicode name\n",
        "data/big.bin": os.urandom(3 * 1024 * 1024),
    }
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return sorted(files)


def assert_same_tree(left: Path, right: Path, names: list[str]) -> None:
    for name in names:
        assert (right / name).is_file(), f"{name} missing after the round trip"
        assert filecmp.cmp(left / name, right / name, shallow=False), f"{name} differs"
    copied = sorted(str(p.relative_to(right)) for p in right.rglob("*") if p.is_file())
    assert copied == names


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, f"{argv[0]} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture
def tree_bucket(s3):
    name = new_bucket_name("tool")
    s3.create_bucket(Bucket=name)
    yield name
    empty_and_delete(s3, name)


@pytest.mark.skipif(shutil.which("rclone") is None, reason="rclone is not installed (apt-get install rclone)")
def test_rclone_copies_a_tree_up_and_back(server, s3, tree_bucket, tmp_path):
    source, back = tmp_path / "source", tmp_path / "back"
    names = make_tree(source)
    env = rclone_env(server.endpoint, server.access_key, server.secret_key, tmp_path)
    # Small chunks so the 3 MiB file goes up as a multipart upload.
    rclone(env, "copy", "--s3-upload-cutoff", "1M", "--s3-chunk-size", "5M", str(source), f"tessera:{tree_bucket}/tree")
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=tree_bucket)["Contents"])
    assert listed == [f"tree/{n}" for n in names]
    rclone(env, "copy", f"tessera:{tree_bucket}/tree", str(back))
    assert_same_tree(source, back, names)
    rclone(env, "check", str(source), f"tessera:{tree_bucket}/tree")


def s3cmd(server, tmp_path, signature_v2: bool = False, location: str | None = REGION) -> list[str]:
    """The s3cmd command line for `server`; with `location` None its
    config names no region, as a new user's does (s3cmd then signs for
    `US` and learns the region from the server's answer)."""
    host = urlsplit(server.endpoint).netloc
    config = tmp_path / "s3cfg"
    config.write_text(
        "[default]\n"
        f"access_key = {server.access_key}\n"
        f"secret_key = {server.secret_key}\n"
        f"host_base = {host}\n"
        f"host_bucket = {host}\n" + (f"bucket_location = {location}\n" if location else "") + "use_https = False\n"
        f"signature_v2 = {signature_v2}\n"
        "multipart_chunk_size_mb = 5\n"
    )
    return ["s3cmd", "-c", str(config), "--no-progress"]


needs_s3cmd = pytest.mark.skipif(shutil.which("s3cmd") is None, reason="s3cmd is not installed (apt-get install s3cmd)")


@needs_s3cmd
@pytest.mark.parametrize("signature_v2", [False, True], ids=["sigv4", "sigv2"])
def test_s3cmd_copies_a_tree_up_and_back(server, s3, tree_bucket, tmp_path, signature_v2):
    source, back = tmp_path / "source", tmp_path / "back"
    names = make_tree(source)
    base = s3cmd(server, tmp_path, signature_v2)
    run(base + ["sync", f"{source}/", f"s3://{tree_bucket}/tree/"])
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=tree_bucket)["Contents"])
    assert listed == [f"tree/{n}" for n in names]
    back.mkdir()
    run(base + ["sync", f"s3://{tree_bucket}/tree/", f"{back}/"])
    assert_same_tree(source, back, names)
    listing = run(base + ["ls", "--recursive", f"s3://{tree_bucket}/"]).stdout
    assert "tree/data/big.bin" in listing


@needs_s3cmd
def test_s3cmd_makes_a_bucket_with_no_region_configured(server, s3, tmp_path):
    """s3cmd's first request is signed for region `US`: the answer,
    AuthorizationHeaderMalformed, names the endpoint's region in a
    `Region` element, which s3cmd reads to sign again, as with AWS."""
    bucket = new_bucket_name("s3cmd")
    made = run(s3cmd(server, tmp_path, location=None) + ["mb", f"s3://{bucket}"])
    assert f"Bucket 's3://{bucket}/' created" in made.stdout, made.stdout + made.stderr
    s3.head_bucket(Bucket=bucket)
