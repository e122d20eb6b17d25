"""S3 clients for the conformance tests: boto3, raw SigV4-signed HTTP and the
aws CLI, all written as functions of an endpoint and a key pair so the same
tests can run against any S3 server."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import boto3
import botocore.auth
import botocore.awsrequest
import botocore.credentials
import requests
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-east-1"
MIB = 1024 * 1024


def s3_client(
    endpoint: str, access_key: str, secret_key: str, *, read_timeout: float = 300, verify: str | None = None
) -> object:
    """A boto3 S3 client: path-style, SigV4, no retries (so an error reaches
    the test as the server sent it), botocore's default checksum behaviour;
    `verify` is the CA bundle for an HTTPS endpoint."""
    config = Config(
        region_name=REGION,
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        retries={"max_attempts": 1, "mode": "standard"},
        connect_timeout=10,
        read_timeout=read_timeout,
        max_pool_connections=32,
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=config,
        verify=verify,
    )


def outcome(call) -> str:
    """ "ok", or the S3 error code `call` raised (for tables of expected answers)."""
    try:
        call()
        return "ok"
    except ClientError as exc:
        return error_code(exc) or str(http_status(exc))


def anonymous_client(endpoint: str) -> object:
    """A boto3 S3 client that signs nothing (a browser, curl, a public link)."""
    config = Config(
        signature_version=UNSIGNED,
        region_name=REGION,
        s3={"addressing_style": "path"},
        retries={"max_attempts": 1, "mode": "standard"},
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)


@dataclass
class S3User:
    """A user of the store with a key pair and a boto3 client signing with it."""

    name: str
    client: object
    access_key: str
    secret_key: str

    @property
    def arn(self) -> str:
        """The user's ARN, as policies name it."""
        return f"arn:aws:iam::000000000000:user/{self.name}"

    @property
    def canonical_id(self) -> str:
        """The user's canonical ID, as S3 shows owners."""
        return self.client.list_buckets()["Owner"]["ID"]


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def http_status(exc_or_response: object) -> int:
    response = exc_or_response.response if isinstance(exc_or_response, ClientError) else exc_or_response
    return response["ResponseMetadata"]["HTTPStatusCode"]


def response_headers(exc_or_response: object) -> dict[str, str]:
    response = exc_or_response.response if isinstance(exc_or_response, ClientError) else exc_or_response
    return response["ResponseMetadata"]["HTTPHeaders"]


def quote_key(key: str) -> str:
    """URI-encode an object key the way SigV4 expects it in the path."""
    return urllib.parse.quote(key, safe="/~")


@dataclass
class RawS3:
    """Hand-built requests signed with SigV4 (or not signed at all), for what
    boto3 will not send: odd headers, anonymous requests, exact status lines."""

    endpoint: str
    access_key: str | None
    secret_key: str | None

    def url(self, path: str, query: str = "") -> str:
        url = self.endpoint.rstrip("/") + path
        return url + ("?" + query if query else "")

    def request(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        sign: bool = True,
        stream: bool = False,
        timeout: float = 120,
    ) -> requests.Response:
        """Send `method path?query`; `path` must already be URI-encoded."""
        url = self.url(path, query)
        headers = dict(headers or {})
        if sign:
            if self.access_key is None or self.secret_key is None:
                raise ValueError("signing needs a key pair")
            aws_request = botocore.awsrequest.AWSRequest(method=method, url=url, data=body, headers=headers)
            creds = botocore.credentials.Credentials(self.access_key, self.secret_key)
            botocore.auth.S3SigV4Auth(creds, "s3", REGION).add_auth(aws_request)
            headers = dict(aws_request.headers.items())
        return requests.request(
            method, url, headers=headers, data=body, stream=stream, timeout=timeout, allow_redirects=False
        )


def s3_error_code(response: requests.Response) -> str | None:
    """The <Code> of an S3 XML error body, if any."""
    try:
        root = ET.fromstring(response.content)
    except ET.ParseError:
        return None
    for element in root.iter():
        if element.tag.rsplit("}", 1)[-1] == "Code":
            return element.text
    return None


def aws_executable() -> str:
    """The aws CLI beside this Python (the test venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "aws"
    if beside.is_file():
        return str(beside)
    found = shutil.which("aws")
    if found is None:
        raise RuntimeError("aws CLI not found: install the `awscli` package into the test venv")
    return found


class AwsCli:
    """Runs the aws CLI against one endpoint with one key pair and no user
    configuration, path-style."""

    def __init__(self, endpoint: str, access_key: str, secret_key: str, config_dir: Path):
        self.endpoint = endpoint
        config_dir.mkdir(parents=True, exist_ok=True)
        config = config_dir / "config"
        config.write_text("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env.update(
            {
                "AWS_ACCESS_KEY_ID": access_key,
                "AWS_SECRET_ACCESS_KEY": secret_key,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_CONFIG_FILE": str(config),
                "AWS_SHARED_CREDENTIALS_FILE": str(config_dir / "credentials-none"),
                "AWS_MAX_ATTEMPTS": "1",
                "AWS_PAGER": "",
            }
        )

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        argv = [aws_executable(), "--endpoint-url", self.endpoint, *args]
        result = subprocess.run(
            argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"aws {' '.join(args)} exited {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
            )
        return result


def new_bucket_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


def empty_and_delete(client, bucket: str) -> None:
    """Abort uploads, delete every version and delete marker, then the bucket."""
    try:
        uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    except ClientError:
        uploads = []
    for upload in uploads:
        client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    versions = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
            versions.append((entry["Key"], entry["VersionId"]))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda v: client.delete_object(Bucket=bucket, Key=v[0], VersionId=v[1]), versions))
    client.delete_bucket(Bucket=bucket)


def write_random_file(path: Path, size: int, chunk: int = MIB) -> str:
    """Write `size` random bytes to `path` in chunks; return their SHA-256."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        left = size
        while left:
            block = os.urandom(min(chunk, left))
            digest.update(block)
            out.write(block)
            left -= len(block)
    return digest.hexdigest()


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of_body(body: object) -> tuple[str, int]:
    """Hash a boto3 StreamingBody chunk by chunk; return (hex digest, bytes read)."""
    digest = hashlib.sha256()
    total = 0
    for block in body.iter_chunks(chunk_size=MIB):
        digest.update(block)
        total += len(block)
    return digest.hexdigest(), total


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def metric_total(ops: str, name: str) -> float:
    """The sum of every sample of the Prometheus metric `name` at `ops`/metrics
    (0 while the metric has no sample yet, as a counter never incremented)."""
    response = requests.get(f"{ops.rstrip('/')}/metrics", timeout=10)
    response.raise_for_status()
    total = 0.0
    for line in response.text.splitlines():
        if line.startswith("#"):
            continue
        sample, _, value = line.rpartition(" ")
        if sample == name or sample.startswith(name + "{"):
            total += float(value)
    return total


def signed_headers(
    raw: RawS3, method: str, path: str, *, query: str = "", headers: dict[str, str] | None = None, body: bytes = b""
) -> dict[str, str]:
    """The headers `raw` would sign for `method path?query` with `body` (its
    SHA-256 in x-amz-content-sha256), to send with another body or by hand."""
    if raw.access_key is None or raw.secret_key is None:
        raise ValueError("signing needs a key pair")
    aws_request = botocore.awsrequest.AWSRequest(
        method=method, url=raw.url(path, query), data=body, headers=dict(headers or {})
    )
    creds = botocore.credentials.Credentials(raw.access_key, raw.secret_key)
    botocore.auth.S3SigV4Auth(creds, "s3", REGION).add_auth(aws_request)
    return dict(aws_request.headers.items())


def md5_b64(data: bytes) -> str:
    """Content-MD5 of `data`: base64 of the binary digest."""
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def form_post(server, post, data: bytes, filename="upload.bin", fields=None):
    """POSTs a browser-style form upload of `data` made from boto3's generate_presigned_post `post`."""
    form = dict(post["fields"])
    form.update(fields or {})
    return requests.post(
        post["url"] if post["url"].startswith("http") else server.endpoint + post["url"],
        data=form,
        files={"file": (filename, data)},
        timeout=60,
        allow_redirects=False,
    )


def rclone_env(endpoint: str, access_key: str, secret_key: str, work: Path) -> dict[str, str]:
    """An environment in which rclone's remote `tessera:` is this endpoint,
    path-style, with no configuration file of the user's."""
    # rclone's S3 backend fails on AWS_CA_BUNDLE with its own HTTP transport.
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    env.update(
        RCLONE_CONFIG_TESSERA_TYPE="s3",
        RCLONE_CONFIG_TESSERA_PROVIDER="Other",
        RCLONE_CONFIG_TESSERA_ACCESS_KEY_ID=access_key,
        RCLONE_CONFIG_TESSERA_SECRET_ACCESS_KEY=secret_key,
        RCLONE_CONFIG_TESSERA_ENDPOINT=endpoint,
        RCLONE_CONFIG_TESSERA_REGION=REGION,
        RCLONE_CONFIG_TESSERA_FORCE_PATH_STYLE="true",
        RCLONE_CONFIG=str(work / "rclone.conf"),
    )
    return env


def rclone(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Runs rclone with `args` in `env`; fails the test when it fails."""
    result = subprocess.run(["rclone", *args], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode == 0, f"rclone failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def console_session(console: str, access_key: str, secret_key: str) -> tuple[requests.Session, str]:
    """A plain HTTP client signed in to the web console at `console`, and
    the CSRF token of its pages."""
    http = requests.Session()
    form = http.get(console + "/login", timeout=30)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text).group(1)
    answer = http.post(
        console + "/login",
        data={"csrf": token, "access_key": access_key, "secret_key": secret_key},
        timeout=30,
    )
    assert answer.status_code == 200 and answer.url.endswith("/buckets"), answer.text[:500]
    csrf = re.search(r'<meta name="csrf-token" content="([0-9a-f]+)"', answer.text).group(1)
    return http, csrf
