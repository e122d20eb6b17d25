"""Object lock through boto3: buckets created with lock, the lock
configuration and its default retention, GOVERNANCE and COMPLIANCE retention
per version (lengthened freely, shortened or removed only in GOVERNANCE with
the bypass header and permission), legal holds, and the deletes S3 refuses:
a protected version cannot be removed, whatever the client tries."""

import datetime
import json
import time

import pytest
from botocore.exceptions import ClientError

from tessera_clients import error_code, http_status, new_bucket_name, response_headers

# COMPLIANCE retentions in these tests end this soon, so that the bucket can
# be emptied afterwards.
SHORT = 4


def utc_in(seconds: float) -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


def code_of(call) -> tuple[int, str]:
    with pytest.raises(ClientError) as err:
        call()
    return http_status(err.value), error_code(err.value)


def empty_locked(s3, bucket):
    """Lifts legal holds, waits out COMPLIANCE retention, deletes every
    version with the GOVERNANCE bypass, then the bucket."""
    deadline = time.monotonic() + SHORT + 5
    while True:
        listed = s3.list_object_versions(Bucket=bucket)
        entries = listed.get("Versions", []) + listed.get("DeleteMarkers", [])
        if not entries:
            break
        for entry in entries:
            key, version = entry["Key"], entry["VersionId"]
            try:
                s3.put_object_legal_hold(Bucket=bucket, Key=key, VersionId=version, LegalHold={"Status": "OFF"})
            except ClientError:
                pass  # a delete marker
            try:
                s3.delete_object(Bucket=bucket, Key=key, VersionId=version, BypassGovernanceRetention=True)
            except ClientError:
                assert time.monotonic() < deadline, f"{key} {version} still locked"
        time.sleep(0.5)
    s3.delete_bucket(Bucket=bucket)


@pytest.fixture
def locked(s3):
    name = new_bucket_name("lock")
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    yield name
    empty_locked(s3, name)


def test_a_bucket_created_with_lock(s3, locked, bucket):
    assert s3.get_bucket_versioning(Bucket=locked)["Status"] == "Enabled"
    config = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert config == {"ObjectLockEnabled": "Enabled"}
    assert code_of(lambda: s3.put_bucket_versioning(
        Bucket=locked, VersioningConfiguration={"Status": "Suspended"})) == (409, "InvalidBucketState")
    # A bucket without lock: no configuration, and none without versioning.
    assert code_of(lambda: s3.get_object_lock_configuration(Bucket=bucket)) == (
        404, "ObjectLockConfigurationNotFoundError")
    enabled = {"ObjectLockEnabled": "Enabled"}
    assert code_of(lambda: s3.put_object_lock_configuration(
        Bucket=bucket, ObjectLockConfiguration=enabled)) == (409, "InvalidBucketState")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration=enabled)
    assert s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"] == enabled


def test_lock_configuration_bodies(s3, locked):
    def put(rule):
        config = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": rule}}
        return lambda: s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration=config)

    assert code_of(put({"Mode": "GOVERNANCE", "Days": 1, "Years": 1})) == (400, "MalformedXML")
    assert code_of(put({"Mode": "GOVERNANCE"})) == (400, "MalformedXML")
    assert code_of(put({"Mode": "GOVERNANCE", "Days": 0})) == (400, "InvalidRetentionPeriod")
    assert code_of(put({"Mode": "COMPLIANCE", "Years": 101})) == (400, "InvalidRetentionPeriod")
    put({"Mode": "COMPLIANCE", "Years": 2})()
    rule = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]["Rule"]
    assert rule == {"DefaultRetention": {"Mode": "COMPLIANCE", "Years": 2}}
    # A configuration without a rule clears the default.
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    assert "Rule" not in s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]


def test_default_retention_protects_new_versions(s3, locked):
    s3.put_object_lock_configuration(
        Bucket=locked,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
        },
    )
    before = utc_in(0)
    version = s3.put_object(Bucket=locked, Key="k", Body=b"x")["VersionId"]
    head = s3.head_object(Bucket=locked, Key="k")
    assert head["ObjectLockMode"] == "GOVERNANCE"
    until = head["ObjectLockRetainUntilDate"]
    assert before + datetime.timedelta(days=1) - datetime.timedelta(seconds=5) <= until <= utc_in(86400 + 5)
    retention = s3.get_object_retention(Bucket=locked, Key="k", VersionId=version)["Retention"]
    assert retention == {"Mode": "GOVERNANCE", "RetainUntilDate": until}
    # The version cannot go; the key can (a delete marker), and overwrites make versions.
    assert code_of(lambda: s3.delete_object(Bucket=locked, Key="k", VersionId=version)) == (403, "AccessDenied")
    assert s3.delete_object(Bucket=locked, Key="k")["DeleteMarker"] is True
    s3.put_object(Bucket=locked, Key="k", Body=b"y")
    assert s3.get_object(Bucket=locked, Key="k", VersionId=version)["Body"].read() == b"x"
    # Explicit headers win over the default.
    explicit = utc_in(3600).replace(microsecond=0)
    s3.put_object(Bucket=locked, Key="e", Body=b"e", ObjectLockMode="COMPLIANCE",
                  ObjectLockRetainUntilDate=utc_in(SHORT))
    s3.put_object(Bucket=locked, Key="g", Body=b"g", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=explicit)
    assert s3.head_object(Bucket=locked, Key="e")["ObjectLockMode"] == "COMPLIANCE"
    assert s3.head_object(Bucket=locked, Key="g")["ObjectLockRetainUntilDate"] == explicit


def test_governance_yields_only_to_the_bypass(s3, locked):
    until = utc_in(3600).replace(microsecond=0)
    version = s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockMode="GOVERNANCE",
                            ObjectLockRetainUntilDate=until)["VersionId"]

    def retain(mode, when, **kwargs):
        return lambda: s3.put_object_retention(
            Bucket=locked, Key="k", VersionId=version, Retention={"Mode": mode, "RetainUntilDate": when}, **kwargs)

    assert code_of(retain("GOVERNANCE", until - datetime.timedelta(minutes=1))) == (403, "AccessDenied")
    assert code_of(retain("COMPLIANCE", until)) == (403, "AccessDenied")
    retain("GOVERNANCE", until + datetime.timedelta(minutes=1))()  # lengthening needs nothing
    retain("GOVERNANCE", until, BypassGovernanceRetention=True)()
    assert s3.get_object_retention(Bucket=locked, Key="k", VersionId=version)["Retention"]["RetainUntilDate"] == until
    assert code_of(lambda: s3.delete_object(Bucket=locked, Key="k", VersionId=version)) == (403, "AccessDenied")
    s3.delete_object(Bucket=locked, Key="k", VersionId=version, BypassGovernanceRetention=True)
    assert code_of(lambda: s3.head_object(Bucket=locked, Key="k", VersionId=version))[0] == 404


def test_compliance_cannot_be_shortened_or_bypassed(s3, locked):
    until = utc_in(SHORT)
    version = s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockMode="COMPLIANCE",
                            ObjectLockRetainUntilDate=until)["VersionId"]
    for mode, when in (("COMPLIANCE", until - datetime.timedelta(seconds=1)), ("GOVERNANCE", utc_in(3600))):
        assert code_of(lambda: s3.put_object_retention(
            Bucket=locked, Key="k", VersionId=version, BypassGovernanceRetention=True,
            Retention={"Mode": mode, "RetainUntilDate": when})) == (403, "AccessDenied")
    assert code_of(lambda: s3.delete_object(
        Bucket=locked, Key="k", VersionId=version, BypassGovernanceRetention=True)) == (403, "AccessDenied")
    reply = s3.delete_objects(Bucket=locked, BypassGovernanceRetention=True,
                              Delete={"Objects": [{"Key": "k", "VersionId": version}]})
    assert [(e["Key"], e["Code"]) for e in reply["Errors"]] == [("k", "AccessDenied")]
    # Once the retention has passed, the version goes like any other.
    time.sleep(max(0.0, (until - utc_in(0)).total_seconds()) + 0.5)
    s3.delete_object(Bucket=locked, Key="k", VersionId=version)


def test_legal_hold_blocks_every_delete(s3, locked):
    version = s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockLegalHoldStatus="ON")["VersionId"]
    assert s3.head_object(Bucket=locked, Key="k")["ObjectLockLegalHoldStatus"] == "ON"
    assert s3.get_object_legal_hold(Bucket=locked, Key="k")["LegalHold"] == {"Status": "ON"}
    assert code_of(lambda: s3.delete_object(
        Bucket=locked, Key="k", VersionId=version, BypassGovernanceRetention=True)) == (403, "AccessDenied")
    # Tags and ACLs of a held version change in place and leave the hold.
    s3.put_object_tagging(Bucket=locked, Key="k", VersionId=version, Tagging={"TagSet": [{"Key": "t", "Value": "1"}]})
    assert s3.get_object_legal_hold(Bucket=locked, Key="k", VersionId=version)["LegalHold"] == {"Status": "ON"}
    s3.put_object_legal_hold(Bucket=locked, Key="k", VersionId=version, LegalHold={"Status": "OFF"})
    assert s3.get_object_legal_hold(Bucket=locked, Key="k", VersionId=version)["LegalHold"] == {"Status": "OFF"}
    s3.delete_object(Bucket=locked, Key="k", VersionId=version)
    other = s3.put_object(Bucket=locked, Key="o", Body=b"o")["VersionId"]
    assert code_of(lambda: s3.get_object_legal_hold(Bucket=locked, Key="o")) == (404, "NoSuchObjectLockConfiguration")
    assert code_of(lambda: s3.get_object_retention(Bucket=locked, Key="o", VersionId=other)) == (
        404, "NoSuchObjectLockConfiguration")
    assert code_of(lambda: s3.put_object_legal_hold(
        Bucket=locked, Key="o", LegalHold={"Status": "on"})) == (400, "MalformedXML")


def test_lock_headers_are_checked(s3, locked, bucket):
    def put(**kwargs):
        return lambda: s3.put_object(Bucket=locked, Key="h", Body=b"h", **kwargs)

    assert code_of(put(ObjectLockMode="GOVERNANCE")) == (400, "InvalidArgument")
    assert code_of(put(ObjectLockRetainUntilDate=utc_in(60))) == (400, "InvalidArgument")
    assert code_of(put(ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=utc_in(-60))) == (400, "InvalidArgument")
    assert code_of(put(ObjectLockLegalHoldStatus="MAYBE")) == (400, "InvalidArgument")
    assert code_of(lambda: s3.put_object(Bucket=bucket, Key="h", Body=b"h", ObjectLockLegalHoldStatus="ON")) == (
        400, "InvalidRequest")
    s3.put_object(Bucket=bucket, Key="h", Body=b"h")
    assert code_of(lambda: s3.get_object_retention(Bucket=bucket, Key="h")) == (400, "InvalidRequest")
    # The bypass header means nothing without lock, and S3 refuses it there.
    for bypass in (True, False):
        assert code_of(lambda: s3.delete_object(Bucket=bucket, Key="h", BypassGovernanceRetention=bypass)) == (
            400, "InvalidArgument")
        assert code_of(lambda: s3.delete_objects(
            Bucket=bucket, BypassGovernanceRetention=bypass, Delete={"Objects": [{"Key": "h"}]})) == (
            400, "InvalidArgument")
    assert s3.get_object(Bucket=bucket, Key="h")["Body"].read() == b"h"
    assert code_of(lambda: s3.put_object_retention(
        Bucket=locked, Key="missing", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": utc_in(60)})) == (
        404, "NoSuchKey")
    s3.put_object(Bucket=locked, Key="p", Body=b"p")
    assert code_of(lambda: s3.put_object_retention(
        Bucket=locked, Key="p", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": utc_in(-60)})) == (
        400, "InvalidArgument")


def test_copies_and_multipart_uploads_take_their_own_lock(s3, locked):
    s3.put_object(Bucket=locked, Key="src", Body=b"s", ObjectLockLegalHoldStatus="ON")
    s3.copy_object(Bucket=locked, Key="copy", CopySource={"Bucket": locked, "Key": "src"})
    head = s3.head_object(Bucket=locked, Key="copy")
    assert "ObjectLockLegalHoldStatus" not in head and "ObjectLockMode" not in head
    until = utc_in(3600).replace(microsecond=0)
    upload = s3.create_multipart_upload(Bucket=locked, Key="mp", ObjectLockMode="GOVERNANCE",
                                        ObjectLockRetainUntilDate=until)["UploadId"]
    part = s3.upload_part(Bucket=locked, Key="mp", UploadId=upload, PartNumber=1, Body=b"m" * 100)
    done = s3.complete_multipart_upload(Bucket=locked, Key="mp", UploadId=upload,
                                        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    head = s3.head_object(Bucket=locked, Key="mp")
    assert (head["ObjectLockMode"], head["ObjectLockRetainUntilDate"]) == ("GOVERNANCE", until)
    assert code_of(lambda: s3.delete_object(Bucket=locked, Key="mp", VersionId=done["VersionId"])) == (
        403, "AccessDenied")


def test_the_bypass_needs_its_permission(s3, locked, make_user):
    user = make_user("lock")
    version = s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockMode="GOVERNANCE",
                            ObjectLockRetainUntilDate=utc_in(3600))["VersionId"]

    def allow(*actions):
        s3.put_bucket_policy(Bucket=locked, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": user.arn}, "Action": list(actions),
            "Resource": f"arn:aws:s3:::{locked}/*"}]}))

    allow("s3:DeleteObjectVersion")
    delete = lambda: user.client.delete_object(  # noqa: E731
        Bucket=locked, Key="k", VersionId=version, BypassGovernanceRetention=True)
    assert code_of(delete) == (403, "AccessDenied")
    allow("s3:DeleteObjectVersion", "s3:BypassGovernanceRetention")
    delete()
    s3.delete_bucket_policy(Bucket=locked)
    assert "x-amz-version-id" in response_headers(s3.put_object(Bucket=locked, Key="k", Body=b"x"))
