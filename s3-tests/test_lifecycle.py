"""Bucket lifecycle through boto3 and aws-cli: configurations put, read back
and refused as S3 refuses them, the x-amz-expiration and x-amz-abort-date
headers, and the rules applied by meta's lifecycle passes on a server whose
lifecycle day lasts seconds: expiration by prefix, tags and size, versions
and delete markers, object lock keeping versions, incomplete uploads, and a
pass cut short by SIGKILL going on after the restart."""

import datetime
import email.utils
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from tessera_clients import (
    RawS3,
    empty_and_delete,
    error_code,
    http_status,
    md5_b64,
    new_bucket_name,
    response_headers,
    s3_client,
)
from tessera_procs import start_server

# The short-day server's lifecycle day, in seconds.
DAY_S = 2
# Longest wait for a rule to act: a few days and passes, with room for a
# loaded machine.
ACT_TIMEOUT_S = 60.0


def code_of(call) -> tuple[int, str]:
    with pytest.raises(ClientError) as err:
        call()
    return http_status(err.value), error_code(err.value)


def rule(rule_id, *, prefix=None, filter=None, **actions):
    """A boto3 lifecycle rule: a Filter on `prefix` unless `filter` is given."""
    body = {"ID": rule_id, "Status": "Enabled", **actions}
    body["Filter"] = filter if filter is not None else ({"Prefix": prefix} if prefix is not None else {})
    return body


def put_rules(s3, bucket, *rules):
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": list(rules)})


def keys_of(s3, bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def versions_of(s3, bucket, key):
    """(version id, is marker) of `key`, newest first."""
    listed = s3.list_object_versions(Bucket=bucket, Prefix=key)
    entries = [(v["VersionId"], False, v["LastModified"]) for v in listed.get("Versions", []) if v["Key"] == key]
    entries += [(m["VersionId"], True, m["LastModified"]) for m in listed.get("DeleteMarkers", []) if m["Key"] == key]
    entries.sort(key=lambda e: e[2], reverse=True)
    return [(version, marker) for version, marker, _ in entries]


def wait_for(what, check, timeout=ACT_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.25)


def lifecycle_status(server):
    return server.admin("status")["lifecycle"]


def wait_for_two_passes(server):
    """Waits until a pass that started after this call has ended, twice
    over: whatever was due before the call has been acted on."""
    since = int(time.time() * 1000)
    for _ in range(2):

        def ended_since(since=since):
            last = lifecycle_status(server).get("last")
            return last if last and last["started"] > since else None

        since = wait_for("a lifecycle pass", ended_since)["started"]


@pytest.fixture(scope="module")
def short_day(tessera_bin, tmp_path_factory):
    """A server whose lifecycle day lasts DAY_S seconds."""
    srv = start_server(
        tessera_bin,
        tmp_path_factory.mktemp("lifecycle"),
        name="lifecycle",
        extra_args=("--lifecycle-day", f"{DAY_S}s", "--deletion-delay", "1s"),
    )
    yield srv
    srv.proc.terminate()


@pytest.fixture
def short(short_day):
    """A client of the short-day server and a fresh bucket there."""
    s3 = s3_client(short_day.endpoint, short_day.access_key, short_day.secret_key)
    name = new_bucket_name("lc")
    s3.create_bucket(Bucket=name)
    yield s3, name
    empty_and_delete(s3, name)


def test_configurations_read_back_as_put(s3, bucket, aws, tmp_path):
    assert code_of(lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket)) == (
        404,
        "NoSuchLifecycleConfiguration",
    )
    rules = [
        rule("all", Expiration={"Days": 30}),
        rule("logs", prefix="logs/", Expiration={"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)}),
        rule("tagged", filter={"Tag": {"Key": "class", "Value": "temp"}}, Expiration={"Days": 1}),
        rule(
            "and",
            filter={
                "And": {
                    "Prefix": "tmp/",
                    "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
                    "ObjectSizeGreaterThan": 10,
                    "ObjectSizeLessThan": 1000,
                }
            },
            NoncurrentVersionExpiration={"NoncurrentDays": 3, "NewerNoncurrentVersions": 2},
        ),
        rule(
            "markers",
            prefix="old/",
            Expiration={"ExpiredObjectDeleteMarker": True},
            AbortIncompleteMultipartUpload={"DaysAfterInitiation": 7},
        ),
        {**rule("off", Expiration={"Days": 5}), "Status": "Disabled"},
    ]
    put_rules(s3, bucket, *rules)
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert response_headers(got)["x-amz-transition-default-minimum-object-size"] == "all_storage_classes_128K"
    assert got["Rules"] == rules
    # aws-cli reads the same document, and replaces it whole.
    shown = json.loads(aws("s3api", "get-bucket-lifecycle-configuration", "--bucket", bucket).stdout)
    assert [r["ID"] for r in shown["Rules"]] == [r["ID"] for r in rules]
    replacement = tmp_path / "lifecycle.json"
    replacement.write_text(
        json.dumps({"Rules": [{"Prefix": "legacy/", "Status": "Enabled", "Expiration": {"Days": 2}}]})
    )
    aws(
        "s3api",
        "put-bucket-lifecycle-configuration",
        "--bucket",
        bucket,
        "--lifecycle-configuration",
        f"file://{replacement}",
    )
    (only,) = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert only["Prefix"] == "legacy/" and "Filter" not in only
    assert len(only["ID"]) > 0, "a rule put without an ID gets one"
    s3.delete_bucket_lifecycle(Bucket=bucket)
    s3.delete_bucket_lifecycle(Bucket=bucket)
    assert code_of(lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket))[1] == "NoSuchLifecycleConfiguration"


@pytest.mark.parametrize(
    ("bad_rule", "status", "code"),
    [
        (rule("r", Expiration={"Days": 0}), 400, "InvalidArgument"),
        (
            rule("r", Expiration={"Date": datetime.datetime(2030, 1, 1, 12, tzinfo=datetime.UTC)}),
            400,
            "InvalidArgument",
        ),
        (rule("r", Expiration={"Days": 1, "ExpiredObjectDeleteMarker": True}), 400, "MalformedXML"),
        (rule("r"), 400, "InvalidRequest"),
        (
            rule(
                "r",
                filter={"Tag": {"Key": "k", "Value": "v"}},
                AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1},
            ),
            400,
            "InvalidRequest",
        ),
        (rule("r", NoncurrentVersionExpiration={"NoncurrentDays": 0}), 400, "InvalidArgument"),
        (rule("x" * 256, Expiration={"Days": 1}), 400, "InvalidArgument"),
        ({"ID": "r", "Status": "enabled", "Filter": {}, "Expiration": {"Days": 1}}, 400, "MalformedXML"),
        (rule("r", Transitions=[{"Days": 1, "StorageClass": "GLACIER"}]), 501, "NotImplemented"),
    ],
)
def test_configurations_s3_refuses_are_refused(s3, bucket, bad_rule, status, code):
    assert code_of(lambda: put_rules(s3, bucket, bad_rule)) == (status, code)
    assert code_of(
        lambda: put_rules(s3, bucket, rule("a", Expiration={"Days": 1}), rule("a", Expiration={"Days": 2}))
    ) == (
        400,
        "InvalidArgument",
    )
    assert code_of(lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket))[1] == "NoSuchLifecycleConfiguration"


def test_a_configuration_must_be_vouched_for(server, bucket):
    raw = RawS3(server.endpoint, server.access_key, server.secret_key)
    body = (
        b"<LifecycleConfiguration><Rule><ID>r</ID><Filter/><Status>Enabled</Status>"
        b"<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>"
    )
    bare = raw.request("PUT", f"/{bucket}", query="lifecycle", body=body)
    assert bare.status_code == 400 and b"InvalidRequest" in bare.content, bare.text
    assert b"Content-MD5" in bare.content
    wrong = raw.request("PUT", f"/{bucket}", query="lifecycle", body=body, headers={"Content-MD5": md5_b64(b"other")})
    assert wrong.status_code == 400 and b"BadDigest" in wrong.content, wrong.text
    good = raw.request("PUT", f"/{bucket}", query="lifecycle", body=body, headers={"Content-MD5": md5_b64(body)})
    assert good.status_code == 200, good.text


def expiry_of(headers):
    """(expiry date, rule id) of an x-amz-expiration header."""
    value = headers["x-amz-expiration"]
    date = value.split('expiry-date="', 1)[1].split('"', 1)[0]
    rule_id = value.split('rule-id="', 1)[1].split('"', 1)[0]
    return email.utils.parsedate_to_datetime(date), rule_id


def midnight_after(moment, days):
    """S3's expiry: `days` after `moment`, then on to the next midnight UTC."""
    at = moment + datetime.timedelta(days=days)
    midnight = at.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight if midnight == at else midnight + datetime.timedelta(days=1)


def test_clients_are_told_when_their_objects_expire(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put_rules(
        s3,
        bucket,
        rule("docs", prefix="docs/", Expiration={"Days": 3}),
        rule("soon", prefix="docs/", Expiration={"Days": 2}),
        rule("temp", filter={"Tag": {"Key": "class", "Value": "temp"}}, Expiration={"Days": 1}),
        rule("uploads", prefix="docs/", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 4}),
    )
    put = s3.put_object(Bucket=bucket, Key="docs/a", Body=b"a")
    head = s3.head_object(Bucket=bucket, Key="docs/a")
    expected = midnight_after(head["LastModified"], 2)
    for answer in (put, head, s3.get_object(Bucket=bucket, Key="docs/a")):
        assert expiry_of(response_headers(answer)) == (expected, "soon")
    # A read naming a version is not told, as in S3.
    named = s3.head_object(Bucket=bucket, Key="docs/a", VersionId=put["VersionId"])
    assert "x-amz-expiration" not in response_headers(named)
    # Tag filters are judged against the object's tags.
    s3.put_object(Bucket=bucket, Key="other", Body=b"o", Tagging="class=temp")
    s3.put_object(Bucket=bucket, Key="plain", Body=b"p")
    tagged = s3.head_object(Bucket=bucket, Key="other")
    assert expiry_of(response_headers(tagged))[1] == "temp"
    assert "x-amz-expiration" not in response_headers(s3.head_object(Bucket=bucket, Key="plain"))
    copied = s3.copy_object(Bucket=bucket, Key="docs/copy", CopySource={"Bucket": bucket, "Key": "plain"})
    assert expiry_of(response_headers(copied))[1] == "soon"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="docs/big")
    (listed,) = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert upload["AbortRuleId"] == "uploads"
    assert upload["AbortDate"] == midnight_after(listed["Initiated"].replace(microsecond=0), 4)
    parts = s3.list_parts(Bucket=bucket, Key="docs/big", UploadId=upload["UploadId"])
    assert (parts["AbortRuleId"], parts["AbortDate"]) == ("uploads", upload["AbortDate"])
    part = s3.upload_part(Bucket=bucket, Key="docs/big", UploadId=upload["UploadId"], PartNumber=1, Body=b"x")
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="docs/big",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert expiry_of(response_headers(done))[1] == "soon"


def test_objects_expire_by_prefix_tags_and_size(short, short_day):
    s3, bucket = short
    put_rules(
        s3,
        bucket,
        rule("tmp", prefix="tmp/", Expiration={"Days": 1}),
        rule(
            "temp-tag",
            filter={"And": {"Prefix": "tag/", "Tags": [{"Key": "class", "Value": "temp"}]}},
            Expiration={"Days": 1},
        ),
        rule("big", filter={"And": {"Prefix": "size/", "ObjectSizeGreaterThan": 100}}, Expiration={"Days": 1}),
        {**rule("disabled", prefix="keep/", Expiration={"Days": 1}), "Status": "Disabled"},
    )
    for key in ("tmp/a", "tmp/b", "keep/a"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    s3.put_object(Bucket=bucket, Key="tag/temp", Body=b"x", Tagging="class=temp")
    s3.put_object(Bucket=bucket, Key="tag/kept", Body=b"x", Tagging="class=gold")
    s3.put_object(Bucket=bucket, Key="size/large", Body=b"x" * 1000)
    s3.put_object(Bucket=bucket, Key="size/small", Body=b"x" * 10)
    survivors = ["keep/a", "size/small", "tag/kept"]
    wait_for("the due objects to expire", lambda: keys_of(s3, bucket) == survivors)
    wait_for_two_passes(short_day)
    assert keys_of(s3, bucket) == survivors


def test_versions_and_markers_expire_in_their_turn(short, short_day):
    s3, bucket = short
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put_rules(
        s3,
        bucket,
        rule(
            "versions",
            prefix="k",
            Expiration={"Days": 1},
            NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 1},
        ),
        rule("markers", prefix="m", Expiration={"ExpiredObjectDeleteMarker": True}),
    )
    written = [s3.put_object(Bucket=bucket, Key="k", Body=str(n).encode())["VersionId"] for n in range(3)]
    # A key left with only its delete marker: the marker goes.
    lone = s3.put_object(Bucket=bucket, Key="m", Body=b"m")["VersionId"]
    s3.delete_object(Bucket=bucket, Key="m")
    s3.delete_object(Bucket=bucket, Key="m", VersionId=lone)

    # The current version expires behind a marker; of the noncurrent ones
    # only the newest stays.
    def settled():
        versions = versions_of(s3, bucket, "k")
        return len(versions) == 2 and versions[0][1] and versions[1] == (written[-1], False)

    wait_for("k to keep a marker and its newest noncurrent version", settled)
    wait_for("m's lone marker to go", lambda: versions_of(s3, bucket, "m") == [])
    wait_for_two_passes(short_day)
    assert settled()
    assert code_of(lambda: s3.head_object(Bucket=bucket, Key="k"))[0] == 404


def test_object_lock_keeps_versions_until_it_ends(short_day):
    s3 = s3_client(short_day.endpoint, short_day.access_key, short_day.secret_key)
    bucket = new_bucket_name("lclock")
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    put_rules(s3, bucket, rule("noncurrent", NoncurrentVersionExpiration={"NoncurrentDays": 1}))
    hold_s = 12
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=hold_s)
    locked = s3.put_object(
        Bucket=bucket, Key="k", Body=b"v1", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until
    )["VersionId"]
    current = s3.put_object(Bucket=bucket, Key="k", Body=b"v2")["VersionId"]
    # The noncurrent version is due within a few seconds, but stays locked.
    wait_for(
        "a pass to find the locked version",
        lambda: (lifecycle_status(short_day).get("last") or {}).get("locked", 0) > 0,
    )
    assert datetime.datetime.now(datetime.UTC) < until, "the machine is too slow for this test's timing"
    assert [v for v, _ in versions_of(s3, bucket, "k")] == [current, locked]
    wait_for(
        "the version to go once its retention ended",
        lambda: [v for v, _ in versions_of(s3, bucket, "k")] == [current],
        timeout=hold_s + ACT_TIMEOUT_S,
    )
    s3.delete_object(Bucket=bucket, Key="k", VersionId=current)
    s3.delete_bucket(Bucket=bucket)


def test_incomplete_uploads_are_aborted(short):
    s3, bucket = short
    put_rules(s3, bucket, rule("abort", prefix="mp/", AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1}))
    doomed = s3.create_multipart_upload(Bucket=bucket, Key="mp/a")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="mp/a", UploadId=doomed, PartNumber=1, Body=b"part")
    kept = s3.create_multipart_upload(Bucket=bucket, Key="other/b")["UploadId"]

    def uploads():
        return sorted(u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))

    wait_for("the upload under mp/ to be aborted", lambda: uploads() == [kept])
    assert code_of(lambda: s3.list_parts(Bucket=bucket, Key="mp/a", UploadId=doomed))[1] == "NoSuchUpload"
    s3.abort_multipart_upload(Bucket=bucket, Key="other/b", UploadId=kept)


def test_a_pass_cut_by_sigkill_goes_on_after_the_restart(tessera_bin, tmp_path):
    """Meta dies (with the whole server) in the middle of a pass that is
    expiring objects; after the restart the pass goes on where its last
    committed batch left it: every due object goes, no other does."""
    args = ("--lifecycle-day", "3s", "--lifecycle-batch", "2")
    own = start_server(tessera_bin, tmp_path, name="restart", extra_args=args)
    try:
        s3 = s3_client(own.endpoint, own.access_key, own.secret_key)
        bucket = "lifecycle-restart"
        s3.create_bucket(Bucket=bucket)
        doomed = [f"tmp/{n:04}" for n in range(600)]
        kept = [f"keep/{n:02}" for n in range(20)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: s3.put_object(Bucket=bucket, Key=key, Body=key.encode()), doomed + kept))
        put_rules(s3, bucket, rule("tmp", prefix="tmp/", Expiration={"Days": 1}))

        def expiring():
            running = lifecycle_status(own).get("running")
            return running if running and running.get("expired", 0) > 0 else None

        before = wait_for("a pass expiring objects", expiring, timeout=120)
        own.proc.kill()
    finally:
        own.proc.kill()
    again = start_server(tessera_bin, tmp_path, name="restart", extra_args=args, creds=own.creds)
    try:
        s3 = s3_client(again.endpoint, again.access_key, again.secret_key)
        assert 0 < before["expired"], before
        wait_for("every due object to expire", lambda: keys_of(s3, bucket) == kept, timeout=120)
        log = again.proc.log_path.read_text(errors="replace")
        assert "lifecycle pass goes on after a restart" in log
        for key in kept:
            assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()
    finally:
        assert again.proc.terminate() == 0
