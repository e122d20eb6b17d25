"""AWS Signature Version 2: the presigned links of aws-cli v1 and boto3,
whole requests signed by boto3's `s3` signer (the header form), SigV2 browser
forms, and S3's answers to bad, expired and skewed signatures. A server
started with --sigv2 false answers every SigV2 request as S3 answers an
unknown mechanism."""

import base64
import hashlib
import hmac
import time
from email.utils import formatdate

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from tessera_clients import REGION, empty_and_delete, error_code, new_bucket_name, s3_client, s3_error_code
from tessera_procs import start_server


def v2_client(server, secret=None, **config):
    """boto3 signing every request with SigV2 (`signature_version="s3"`)."""
    return boto3.session.Session().client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=secret or server.secret_key,
        config=Config(
            region_name=REGION,
            signature_version="s3",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            **config,
        ),
    )


def sign_v2(secret: str, string_to_sign: str) -> str:
    digest = hmac.new(secret.encode(), string_to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def test_boto3_default_presigned_get_is_sigv2_and_works(server, s3, bucket):
    """boto3 with no signature setting presigns with SigV2 query parameters."""
    s3.put_object(Bucket=bucket, Key="shared/report.txt", Body=b"quarterly figures")
    default = boto3.session.Session().client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name=REGION,
    )
    url = default.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "shared/report.txt"}, ExpiresIn=300
    )
    assert "AWSAccessKeyId=" in url and "Signature=" in url, url
    fetched = requests.get(url, timeout=30)
    assert fetched.status_code == 200, fetched.text
    assert fetched.content == b"quarterly figures"


def test_aws_cli_presign_link_works(server, s3, bucket, aws):
    s3.put_object(Bucket=bucket, Key="a b/é.txt", Body=b"shared by the cli")
    url = aws("s3", "presign", f"s3://{bucket}/a b/é.txt", "--expires-in", "120").stdout.strip()
    assert "AWSAccessKeyId=" in url, url
    fetched = requests.get(url, timeout=30)
    assert fetched.status_code == 200, (url, fetched.text)
    assert fetched.content == b"shared by the cli"


def test_presigned_put_and_response_overrides(server, s3, bucket):
    client = v2_client(server)
    put_url = client.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "up.txt", "ContentType": "text/plain"}, ExpiresIn=60
    )
    stored = requests.put(put_url, data=b"uploaded by link", headers={"Content-Type": "text/plain"}, timeout=30)
    assert stored.status_code == 200, stored.text
    head = s3.head_object(Bucket=bucket, Key="up.txt")
    assert head["ContentType"] == "text/plain"
    # The link signed text/plain: another Content-Type is another request.
    forged = requests.put(put_url, data=b"x", headers={"Content-Type": "text/html"}, timeout=30)
    assert forged.status_code == 403 and s3_error_code(forged) == "SignatureDoesNotMatch"
    get_url = client.generate_presigned_url(
        "get_object",
        Params={"Bucket": bucket, "Key": "up.txt", "ResponseContentDisposition": "attachment; filename=x.txt"},
        ExpiresIn=60,
    )
    fetched = requests.get(get_url, timeout=30)
    assert fetched.status_code == 200, fetched.text
    assert fetched.headers["Content-Disposition"] == "attachment; filename=x.txt"
    # Overrides are signed: changing one breaks the link.
    tampered = requests.get(get_url.replace("x.txt", "y.txt"), timeout=30)
    assert tampered.status_code == 403 and s3_error_code(tampered) == "SignatureDoesNotMatch"


def test_whole_api_with_header_signatures(server, s3):
    """The header form through boto3's SigV2 signer: bucket, objects with
    metadata, sub-resources (tagging, uploads, uploadId, partNumber), copy,
    listing, deletes."""
    client = v2_client(server)
    name = new_bucket_name("v2")
    client.create_bucket(Bucket=name)
    try:
        client.put_object(Bucket=name, Key="dir/one", Body=b"1" * 10, Metadata={"colour": "blue"})
        got = client.get_object(Bucket=name, Key="dir/one")
        assert got["Body"].read() == b"1" * 10 and got["Metadata"] == {"colour": "blue"}
        client.put_object_tagging(Bucket=name, Key="dir/one", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
        assert client.get_object_tagging(Bucket=name, Key="dir/one")["TagSet"] == [{"Key": "k", "Value": "v"}]
        client.copy_object(Bucket=name, Key="dir/two", CopySource={"Bucket": name, "Key": "dir/one"})
        upload = client.create_multipart_upload(Bucket=name, Key="big")
        part = client.upload_part(
            Bucket=name, Key="big", UploadId=upload["UploadId"], PartNumber=1, Body=b"p" * (5 * 1024 * 1024)
        )
        client.complete_multipart_upload(
            Bucket=name,
            Key="big",
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
        keys = [o["Key"] for o in client.list_objects_v2(Bucket=name)["Contents"]]
        assert keys == ["big", "dir/one", "dir/two"]
        client.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "dir/one"}, {"Key": "dir/two"}]})
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"]] == ["big"]
    finally:
        empty_and_delete(s3, name)


def test_header_signature_refusals(server, bucket):
    with pytest.raises(ClientError) as wrong:
        v2_client(server, secret="not the secret").head_bucket(Bucket=bucket)
    assert wrong.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # A request signed with the right secret but sent twenty minutes late.
    date = formatdate(time.time() - 20 * 60, usegmt=True)
    signature = sign_v2(server.secret_key, f"GET\n\n\n{date}\n/{bucket}")
    late = requests.get(
        f"{server.endpoint}/{bucket}",
        headers={"Date": date, "Authorization": f"AWS {server.access_key}:{signature}"},
        timeout=30,
    )
    assert late.status_code == 403 and s3_error_code(late) == "RequestTimeTooSkewed", late.text
    # The same request in time is served: only the clock refused it.
    date = formatdate(time.time(), usegmt=True)
    signature = sign_v2(server.secret_key, f"GET\n\n\n{date}\n/{bucket}")
    fresh = requests.get(
        f"{server.endpoint}/{bucket}",
        headers={"Date": date, "Authorization": f"AWS {server.access_key}:{signature}"},
        timeout=30,
    )
    assert fresh.status_code == 200, fresh.text
    undated = requests.get(
        f"{server.endpoint}/{bucket}", headers={"Authorization": f"AWS {server.access_key}:{signature}"}, timeout=30
    )
    assert undated.status_code == 403 and s3_error_code(undated) == "AccessDenied"
    # A date before 1970 is no valid date (AccessDenied), a date in 2010 a
    # skewed one, as S3 tells them apart.
    for old_date, code in (
        ("Tue, 07 Jul 1950 21:53:04 GMT", "AccessDenied"),
        ("Tue, 07 Jul 2010 21:53:04 GMT", "RequestTimeTooSkewed"),
    ):
        old_signature = sign_v2(server.secret_key, f"GET\n\n\n\nx-amz-date:{old_date}\n/{bucket}")
        dated = requests.get(
            f"{server.endpoint}/{bucket}",
            headers={"x-amz-date": old_date, "Authorization": f"AWS {server.access_key}:{old_signature}"},
            timeout=30,
        )
        assert dated.status_code == 403 and s3_error_code(dated) == code, (old_date, dated.text)
    unknown = requests.get(
        f"{server.endpoint}/{bucket}",
        headers={"Date": date, "Authorization": f"AWS NOSUCHKEY:{signature}"},
        timeout=30,
    )
    assert unknown.status_code == 403 and s3_error_code(unknown) == "InvalidAccessKeyId"
    malformed = requests.get(
        f"{server.endpoint}/{bucket}", headers={"Date": date, "Authorization": "AWS no-colon"}, timeout=30
    )
    assert malformed.status_code == 400 and s3_error_code(malformed) == "InvalidArgument"


def test_query_signature_refusals(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    expires = int(time.time()) - 1
    signature = sign_v2(server.secret_key, f"GET\n\n\n{expires}\n/{bucket}/k")
    params = {"AWSAccessKeyId": server.access_key, "Expires": str(expires), "Signature": signature}
    expired = requests.get(f"{server.endpoint}/{bucket}/k", params=params, timeout=30)
    assert expired.status_code == 403 and s3_error_code(expired) == "AccessDenied"
    assert "expired" in expired.text
    # Pushing Expires forward breaks the signature.
    params["Expires"] = str(expires + 3600)
    extended = requests.get(f"{server.endpoint}/{bucket}/k", params=params, timeout=30)
    assert extended.status_code == 403 and s3_error_code(extended) == "SignatureDoesNotMatch"
    # A link to one key does not open another.
    expires = int(time.time()) + 60
    signature = sign_v2(server.secret_key, f"GET\n\n\n{expires}\n/{bucket}/k")
    params = {"AWSAccessKeyId": server.access_key, "Expires": str(expires), "Signature": signature}
    assert requests.get(f"{server.endpoint}/{bucket}/k", params=params, timeout=30).content == b"v"
    other = requests.get(f"{server.endpoint}/{bucket}/other", params=params, timeout=30)
    assert other.status_code == 403 and s3_error_code(other) == "SignatureDoesNotMatch"
    missing = requests.get(f"{server.endpoint}/{bucket}/k", params={"AWSAccessKeyId": "x", "Signature": "y"}, timeout=30)
    assert missing.status_code == 403 and s3_error_code(missing) == "AccessDenied"


def test_sigv2_browser_form(server, s3, bucket):
    client = v2_client(server)
    post = client.generate_presigned_post(
        bucket, "forms/${filename}", Conditions=[["content-length-range", 1, 100]], ExpiresIn=60
    )
    assert "signature" in post["fields"] and "AWSAccessKeyId" in post["fields"], post["fields"]
    sent = requests.post(post["url"], data=post["fields"], files={"file": ("note.txt", b"form body")}, timeout=30)
    assert sent.status_code == 204, sent.text
    assert s3.get_object(Bucket=bucket, Key="forms/note.txt")["Body"].read() == b"form body"
    forged = dict(post["fields"], signature=sign_v2("wrong", post["fields"]["policy"]))
    refused = requests.post(post["url"], data=forged, files={"file": ("x.txt", b"x")}, timeout=30)
    assert refused.status_code == 403 and s3_error_code(refused) == "SignatureDoesNotMatch"


def test_sigv2_can_be_turned_off(tessera_bin, tmp_path_factory):
    server = start_server(tessera_bin, tmp_path_factory.mktemp("nosigv2"), name="nosigv2", extra_args=("--sigv2", "false"))
    try:
        with pytest.raises(ClientError) as refused:
            v2_client(server).list_buckets()
        assert error_code(refused.value) == "InvalidRequest"
        assert "AWS4-HMAC-SHA256" in refused.value.response["Error"]["Message"]
        url = v2_client(server).generate_presigned_url("list_buckets", ExpiresIn=60)
        link = requests.get(url, timeout=30)
        assert link.status_code == 400 and s3_error_code(link) == "InvalidRequest"
        # SigV4 is unaffected.
        s3_client(server.endpoint, server.access_key, server.secret_key).list_buckets()
    finally:
        server.proc.terminate()
