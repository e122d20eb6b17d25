"""Bucket CORS (Put/Get/DeleteBucketCors, OPTIONS preflight, Access-Control-*
headers) and browser form uploads (PostObject with a SigV4 policy)."""

import base64
import hashlib
import hmac
import json
import xml.etree.ElementTree as ET

import pytest
import requests
from botocore.exceptions import ClientError

from tessera_clients import error_code, form_post, http_status, s3_error_code

ORIGIN = "http://www.example.com"
RULES = {
    "CORSRules": [
        {
            "AllowedOrigins": [ORIGIN],
            "AllowedMethods": ["PUT", "POST", "DELETE"],
            "AllowedHeaders": ["*"],
            "ExposeHeaders": ["x-amz-server-side-encryption"],
            "MaxAgeSeconds": 3000,
        },
        {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["x-amz-*"]},
    ]
}


def preflight(server, path, origin, method, headers=None):
    request_headers = {"Access-Control-Request-Method": method}
    if origin is not None:
        request_headers["Origin"] = origin
    if headers:
        request_headers["Access-Control-Request-Headers"] = headers
    return requests.options(server.endpoint.rstrip("/") + path, headers=request_headers, timeout=30)


def test_bucket_cors_round_trip_and_delete(s3, bucket):
    with pytest.raises(ClientError) as missing:
        s3.get_bucket_cors(Bucket=bucket)
    assert error_code(missing.value) == "NoSuchCORSConfiguration"
    assert http_status(missing.value) == 404
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    got = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert got[0]["AllowedOrigins"] == [ORIGIN]
    assert got[0]["AllowedMethods"] == ["PUT", "POST", "DELETE"]
    assert got[0]["MaxAgeSeconds"] == 3000
    assert got[1]["AllowedHeaders"] == ["x-amz-*"]
    assert s3.delete_bucket_cors(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError):
        s3.get_bucket_cors(Bucket=bucket)


def test_bad_cors_configuration_is_refused(raw, s3, bucket):
    bad_method = (
        b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
        b"<AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>"
    )
    response = raw.request("PUT", f"/{bucket}", query="cors", body=bad_method)
    assert response.status_code == 400 and s3_error_code(response) == "InvalidRequest"
    response = raw.request("PUT", f"/{bucket}", query="cors", body=b"<CORSConfiguration><oops")
    assert response.status_code == 400 and s3_error_code(response) == "MalformedXML"
    with pytest.raises(ClientError):
        s3.get_bucket_cors(Bucket=bucket)


def test_preflight_is_answered_from_the_rules(server, s3, bucket):
    no_config = preflight(server, f"/{bucket}/k", ORIGIN, "PUT")
    assert no_config.status_code == 403 and s3_error_code(no_config) == "AccessForbidden"
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    allowed = preflight(server, f"/{bucket}/photo.jpg", ORIGIN, "PUT", "Content-Type, X-Amz-Date")
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "PUT" in allowed.headers["Access-Control-Allow-Methods"]
    assert allowed.headers["Access-Control-Allow-Headers"] == "content-type, x-amz-date"
    assert allowed.headers["Access-Control-Max-Age"] == "3000"
    assert allowed.headers["Access-Control-Expose-Headers"] == "x-amz-server-side-encryption"
    anyone_get = preflight(server, f"/{bucket}/photo.jpg", "http://other.test", "GET")
    assert anyone_get.status_code == 200
    assert anyone_get.headers["Access-Control-Allow-Origin"] == "*"
    # Another origin may not PUT; GET may not send a header outside x-amz-*.
    assert preflight(server, f"/{bucket}/k", "http://other.test", "PUT").status_code == 403
    refused = preflight(server, f"/{bucket}/k", "http://other.test", "GET", "Authorization")
    assert refused.status_code == 403 and s3_error_code(refused) == "AccessForbidden"
    assert preflight(server, f"/{bucket}/k", None, "GET").status_code == 400


def test_cors_headers_on_matching_requests(raw, s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    got = raw.request("GET", f"/{bucket}/k", headers={"Origin": "http://any.test"})
    assert got.status_code == 200
    assert got.headers["Access-Control-Allow-Origin"] == "*"
    put = raw.request("PUT", f"/{bucket}/k2", headers={"Origin": ORIGIN}, body=b"x")
    assert put.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert put.headers["Access-Control-Allow-Credentials"] == "true"
    # No Origin, or a method no rule allows for it: no CORS headers.
    assert "Access-Control-Allow-Origin" not in raw.request("GET", f"/{bucket}/k").headers
    deleted = raw.request("DELETE", f"/{bucket}/k2", headers={"Origin": "http://any.test"})
    assert "Access-Control-Allow-Origin" not in deleted.headers


def test_post_object_uploads_with_a_signed_policy(server, s3, bucket):
    post = s3.generate_presigned_post(
        Bucket=bucket,
        Key="uploads/${filename}",
        Fields={"Content-Type": "text/plain", "x-amz-meta-origin": "form"},
        Conditions=[
            ["starts-with", "$key", "uploads/"],
            {"Content-Type": "text/plain"},
            {"x-amz-meta-origin": "form"},
            ["content-length-range", 1, 1024],
        ],
        ExpiresIn=600,
    )
    response = form_post(server, post, b"hello from a form", filename="hello.txt")
    assert response.status_code == 204, response.text
    assert response.headers["ETag"].strip('"')
    obj = s3.get_object(Bucket=bucket, Key="uploads/hello.txt")
    assert obj["Body"].read() == b"hello from a form"
    assert obj["ContentType"] == "text/plain"
    assert obj["Metadata"] == {"origin": "form"}


@pytest.mark.parametrize("status", ["200", "201"])
def test_post_object_success_action_status(server, s3, bucket, status):
    post = s3.generate_presigned_post(
        Bucket=bucket,
        Key="s.txt",
        Fields={"success_action_status": status},
        Conditions=[{"success_action_status": status}],
    )
    response = form_post(server, post, b"x")
    assert response.status_code == int(status), response.text
    if status == "201":
        doc = ET.fromstring(response.content)
        assert doc.tag.endswith("PostResponse")
        assert doc.find("Key").text == "s.txt" and doc.find("Bucket").text == bucket


def test_post_object_success_action_redirect(server, s3, bucket):
    target = "http://app.example.com/done"
    post = s3.generate_presigned_post(
        Bucket=bucket,
        Key="r.txt",
        Fields={"success_action_redirect": target},
        Conditions=[{"success_action_redirect": target}],
    )
    response = form_post(server, post, b"x")
    assert response.status_code == 303, response.text
    location = response.headers["Location"]
    assert location.startswith(target + "?bucket=" + bucket) and "key=r.txt" in location


def test_post_object_refusals(server, s3, bucket):
    post = s3.generate_presigned_post(Bucket=bucket, Key="limited", Conditions=[["content-length-range", 2, 4]])
    too_big = form_post(server, post, b"12345")
    assert too_big.status_code == 400 and s3_error_code(too_big) == "EntityTooLarge"
    too_small = form_post(server, post, b"1")
    assert too_small.status_code == 400 and s3_error_code(too_small) == "EntityTooSmall"
    forged = form_post(server, post, b"123", fields={"x-amz-signature": "0" * 64})
    assert forged.status_code == 403 and s3_error_code(forged) == "SignatureDoesNotMatch"
    other_key = form_post(server, post, b"123", fields={"key": "elsewhere"})
    assert other_key.status_code == 403 and s3_error_code(other_key) == "AccessDenied"
    extra = form_post(server, post, b"123", fields={"x-amz-meta-sneaky": "1"})
    assert extra.status_code == 403 and s3_error_code(extra) == "AccessDenied"
    expired = s3.generate_presigned_post(Bucket=bucket, Key="late", ExpiresIn=-60)
    late = form_post(server, expired, b"123")
    assert late.status_code == 403 and s3_error_code(late) == "AccessDenied"
    assert "expired" in late.text
    unsigned = requests.post(
        server.endpoint + f"/{bucket}", data={"key": "anon"}, files={"file": ("f", b"x")}, timeout=30
    )
    assert unsigned.status_code == 403 and s3_error_code(unsigned) == "AccessDenied"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == [], f"refused uploads left objects: {keys}"
    # The same policy still works within its range.
    assert form_post(server, post, b"123").status_code == 204
    assert s3.get_object(Bucket=bucket, Key="limited")["Body"].read() == b"123"


def error_message(response: requests.Response) -> str:
    return ET.fromstring(response.content).find("Message").text


def test_post_object_missing_fields_and_bad_dates_are_told(server, s3, bucket):
    """S3 names the missing field of a half-signed form (400 InvalidArgument)
    and reads a policy's expiration only in ISO 8601's T form."""
    post = s3.generate_presigned_post(Bucket=bucket, Key="f")
    fields = {k: v for k, v in post["fields"].items() if k != "x-amz-signature"}
    unsigned = requests.post(server.endpoint + f"/{bucket}", data=fields, files={"file": ("f", b"x")}, timeout=30)
    assert unsigned.status_code == 400 and s3_error_code(unsigned) == "InvalidArgument"
    assert "field named 'X-Amz-Signature'" in error_message(unsigned)
    fields = {k: v for k, v in post["fields"].items() if k != "policy"}
    no_policy = requests.post(server.endpoint + f"/{bucket}", data=fields, files={"file": ("f", b"x")}, timeout=30)
    assert no_policy.status_code == 400 and s3_error_code(no_policy) == "InvalidArgument"
    assert "field named 'Policy'" in error_message(no_policy)
    # A policy whose expiration is Python's str(datetime), as a hand-made
    # form might send it, rightly signed (SigV2).
    policy = {"expiration": "2099-01-01 00:00:00.000000+00:00", "conditions": [{"bucket": bucket}, {"key": "f"}]}
    encoded = base64.b64encode(json.dumps(policy).encode())
    secret = server.creds.secret_key.encode()
    spaced = {
        "key": "f",
        "AWSAccessKeyId": server.creds.access_key,
        "policy": encoded.decode(),
        "signature": base64.b64encode(hmac.new(secret, encoded, hashlib.sha1).digest()).decode(),
    }
    bad_date = requests.post(server.endpoint + f"/{bucket}", data=spaced, files={"file": ("f", b"x")}, timeout=30)
    assert bad_date.status_code == 400 and s3_error_code(bad_date) == "InvalidArgument"
    assert "expiration" in error_message(bad_date)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_post_object_is_judged_like_a_put(server, s3, make_user, bucket):
    """A form upload is allowed to whoever may PutObject: anonymous forms
    into a public-write bucket, signed forms of another user the bucket's
    policy lets write; refused to a user it does not."""
    s3.put_bucket_ownership_controls(
        Bucket=bucket, OwnershipControls={"Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    )
    s3.delete_public_access_block(Bucket=bucket)
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    anonymous = requests.post(
        server.endpoint + f"/{bucket}",
        data={
            "key": "anon.txt",
            "Content-Type": "text/plain",
            "tagging": "<Tagging><TagSet><Tag><Key>from</Key><Value>form</Value></Tag></TagSet></Tagging>",
        },
        files={"file": ("f", b"from anyone")},
        timeout=30,
    )
    assert anonymous.status_code == 204, anonymous.text
    assert s3.get_object(Bucket=bucket, Key="anon.txt")["Body"].read() == b"from anyone"
    assert s3.get_object_tagging(Bucket=bucket, Key="anon.txt")["TagSet"] == [{"Key": "from", "Value": "form"}]
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    again = requests.post(
        server.endpoint + f"/{bucket}", data={"key": "anon2"}, files={"file": ("f", b"x")}, timeout=30
    )
    assert again.status_code == 403 and s3_error_code(again) == "AccessDenied"

    writer, stranger = make_user("form-writer"), make_user("form-stranger")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": writer.arn},
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{bucket}/shared/*",
            }
        ],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    allowed = form_post(server, writer.client.generate_presigned_post(Bucket=bucket, Key="shared/w"), b"w")
    assert allowed.status_code == 204, allowed.text
    outside = form_post(server, writer.client.generate_presigned_post(Bucket=bucket, Key="other/w"), b"w")
    assert outside.status_code == 403 and s3_error_code(outside) == "AccessDenied"
    refused = form_post(server, stranger.client.generate_presigned_post(Bucket=bucket, Key="shared/s"), b"s")
    assert refused.status_code == 403 and s3_error_code(refused) == "AccessDenied"
    # Under ObjectWriter the object is the writer's, as with PutObject.
    owner = s3.get_object_acl(Bucket=bucket, Key="shared/w")["Owner"]["ID"]
    assert owner != s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
    s3.delete_bucket_policy(Bucket=bucket)


def test_bucket_post_without_a_form_is_refused(raw, bucket):
    response = raw.request("POST", f"/{bucket}", body=b"not a form")
    assert response.status_code == 412
    assert s3_error_code(response) == "PreconditionFailed"


def test_post_object_streams_a_large_file(server, s3, bucket, tmp_path):
    data = bytes(range(256)) * (24 * 1024)  # 6 MiB
    post = s3.generate_presigned_post(Bucket=bucket, Key="big.bin")
    response = form_post(server, post, data)
    assert response.status_code == 204, response.text
    assert s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == data


def test_cors_headers_on_error_answers(raw, s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    missing = raw.request("GET", f"/{bucket}/no-such-key", headers={"Origin": "http://any.test"})
    assert missing.status_code == 404 and s3_error_code(missing) == "NoSuchKey"
    assert missing.headers["Access-Control-Allow-Origin"] == "*"
