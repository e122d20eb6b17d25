"""Bucket policies through boto3: put, get, delete and status, S3's
MalformedPolicy refusals, BlockPublicPolicy and RestrictPublicBuckets,
principals (anyone, another user), an explicit Deny over the owner, and
condition operators on the keys clients send (aws:SourceIp,
aws:SecureTransport, aws:CurrentTime, s3:prefix, s3:max-keys,
s3:signatureversion, object tags...). The bucket owner is a user, not root
(root may do anything anywhere)."""

import json

import boto3
import pytest
from botocore.config import Config

from tessera_clients import REGION, empty_and_delete, new_bucket_name, outcome

NO_BLOCK = {
    "BlockPublicAcls": False,
    "IgnorePublicAcls": False,
    "BlockPublicPolicy": False,
    "RestrictPublicBuckets": False,
}


@pytest.fixture(scope="module")
def alice(make_user):
    return make_user("pol")


@pytest.fixture(scope="module")
def bob(make_user):
    return make_user("pol")


@pytest.fixture
def b(s3, alice):
    """A bucket of Alice's, emptied and deleted (by root) afterwards."""
    name = new_bucket_name("pol")
    alice.client.create_bucket(Bucket=name)
    yield name
    empty_and_delete(s3, name)




def document(*statements) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def statement(principal, actions, resources, condition=None, effect="Allow"):
    out = {"Effect": effect, "Principal": principal, "Action": actions, "Resource": resources}
    if condition:
        out["Condition"] = condition
    return out


def test_put_get_delete_and_status(alice, b):
    c = alice.client
    assert outcome(lambda: c.get_bucket_policy(Bucket=b)) == "NoSuchBucketPolicy"
    assert outcome(lambda: c.get_bucket_policy_status(Bucket=b)) == "NoSuchBucketPolicy"
    text = document(statement({"AWS": alice.arn}, "s3:GetObject", f"arn:aws:s3:::{b}/*"))
    c.put_bucket_policy(Bucket=b, Policy=text)
    assert json.loads(c.get_bucket_policy(Bucket=b)["Policy"]) == json.loads(text)
    assert c.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False
    c.delete_bucket_policy(Bucket=b)
    assert outcome(lambda: c.get_bucket_policy(Bucket=b)) == "NoSuchBucketPolicy"


def test_malformed_policies_are_refused(alice, b):
    c = alice.client
    resource = f"arn:aws:s3:::{b}/*"
    for text in [
        "not json",
        document(statement("*", "s3:Fly", resource)),
        document(statement("*", "s3:GetObject", "arn:aws:s3:::someone-else/*")),
        document(statement({"AWS": "bob"}, "s3:GetObject", resource)),
        document(statement("*", "s3:GetObject", resource, {"IpAddress": {"aws:SourceIp": "nowhere"}})),
        json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": resource}]}),
    ]:
        assert outcome(lambda: c.put_bucket_policy(Bucket=b, Policy=text)) == "MalformedPolicy", text


def test_public_policies_and_the_public_access_block(alice, b, anonymous):
    c = alice.client
    c.put_object(Bucket=b, Key="public/page.html", Body=b"hello")
    c.put_object(Bucket=b, Key="private/notes", Body=b"secret")
    public = document(statement("*", "s3:GetObject", f"arn:aws:s3:::{b}/public/*"))
    # New buckets block public policies, as in S3.
    assert outcome(lambda: c.put_bucket_policy(Bucket=b, Policy=public)) == "AccessDenied"
    c.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration=NO_BLOCK)
    c.put_bucket_policy(Bucket=b, Policy=public)
    assert c.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True
    assert anonymous.get_object(Bucket=b, Key="public/page.html")["Body"].read() == b"hello"
    assert outcome(lambda: anonymous.get_object(Bucket=b, Key="private/notes")) == "AccessDenied"
    assert outcome(lambda: anonymous.list_objects_v2(Bucket=b)) == "AccessDenied"
    assert outcome(lambda: anonymous.put_object(Bucket=b, Key="public/x", Body=b"x")) == "AccessDenied"
    # RestrictPublicBuckets: a public policy grants only the owner.
    c.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration=dict(NO_BLOCK, RestrictPublicBuckets=True))
    assert outcome(lambda: anonymous.get_object(Bucket=b, Key="public/page.html")) == "AccessDenied"
    assert c.get_object(Bucket=b, Key="public/page.html")["Body"].read() == b"hello"


def test_another_user_gets_read_only_access_to_a_prefix(alice, bob, b):
    c = alice.client
    c.put_object(Bucket=b, Key="shared/report.csv", Body=b"1,2,3")
    c.put_object(Bucket=b, Key="own/diary", Body=b"dear diary")
    c.put_bucket_policy(
        Bucket=b,
        Policy=document(
            statement({"AWS": bob.arn}, "s3:GetObject", f"arn:aws:s3:::{b}/shared/*"),
            statement(
                {"AWS": [bob.arn]},
                "s3:ListBucket",
                f"arn:aws:s3:::{b}",
                {"StringLike": {"s3:prefix": "shared/*"}, "NumericLessThanEquals": {"s3:max-keys": "100"}},
            ),
        ),
    )
    other = bob.client
    assert other.get_object(Bucket=b, Key="shared/report.csv")["Body"].read() == b"1,2,3"
    assert outcome(lambda: other.get_object(Bucket=b, Key="own/diary")) == "AccessDenied"
    assert outcome(lambda: other.put_object(Bucket=b, Key="shared/x", Body=b"x")) == "AccessDenied"
    listed = other.list_objects_v2(Bucket=b, Prefix="shared/", MaxKeys=100)
    assert [o["Key"] for o in listed["Contents"]] == ["shared/report.csv"]
    assert outcome(lambda: other.list_objects_v2(Bucket=b, Prefix="own/", MaxKeys=100)) == "AccessDenied"
    assert outcome(lambda: other.list_objects_v2(Bucket=b, Prefix="shared/", MaxKeys=1000)) == "AccessDenied"
    assert outcome(lambda: other.list_objects_v2(Bucket=b)) == "AccessDenied"
    # Copying out of the shared prefix into a bucket of Bob's.
    target = new_bucket_name("bob")
    other.create_bucket(Bucket=target)
    try:
        other.copy_object(Bucket=target, Key="copy.csv", CopySource={"Bucket": b, "Key": "shared/report.csv"})
        assert other.get_object(Bucket=target, Key="copy.csv")["Body"].read() == b"1,2,3"
        assert outcome(
            lambda: other.copy_object(Bucket=target, Key="no", CopySource={"Bucket": b, "Key": "own/diary"})
        ) == "AccessDenied"
    finally:
        other.delete_object(Bucket=target, Key="copy.csv")
        other.delete_bucket(Bucket=target)


def test_an_explicit_deny_binds_the_owner_but_not_root(s3, alice, b):
    c = alice.client
    c.put_object(Bucket=b, Key="locked/ledger", Body=b"x")
    c.put_object(Bucket=b, Key="loose/item", Body=b"x")
    c.put_bucket_policy(
        Bucket=b,
        Policy=document(statement("*", ["s3:DeleteObject"], f"arn:aws:s3:::{b}/locked/*", effect="Deny")),
    )
    assert outcome(lambda: c.delete_object(Bucket=b, Key="locked/ledger")) == "AccessDenied"
    result = c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "locked/ledger"}, {"Key": "loose/item"}]})
    assert [d["Key"] for d in result.get("Deleted", [])] == ["loose/item"]
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [("locked/ledger", "AccessDenied")]
    s3.delete_object(Bucket=b, Key="locked/ledger")


def test_condition_keys_clients_send(server, alice, bob, b):
    c, other = alice.client, bob.client
    c.put_object(Bucket=b, Key="k", Body=b"v", Tagging="class=public")
    c.put_object(Bucket=b, Key="hidden", Body=b"v", Tagging="class=internal")
    cases = [
        # (condition on a GetObject grant to Bob, whether Bob may read k)
        ({"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}, True),
        ({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, False),
        ({"NotIpAddress": {"aws:SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}}, True),
        ({"Bool": {"aws:SecureTransport": "false"}}, True),
        ({"Bool": {"aws:SecureTransport": "true"}}, False),
        ({"DateLessThan": {"aws:CurrentTime": "2000-01-01T00:00:00Z"}}, False),
        ({"DateGreaterThan": {"aws:CurrentTime": "2000-01-01T00:00:00Z"}}, True),
        ({"StringEquals": {"aws:username": bob.name}}, True),
        ({"StringEquals": {"s3:signatureversion": "AWS4-HMAC-SHA256"}}, True),
        ({"StringEquals": {"s3:ExistingObjectTag/class": "public"}}, True),
        ({"StringEquals": {"s3:ExistingObjectTag/class": "secret"}}, False),
        ({"Null": {"s3:x-amz-server-side-encryption": "true"}}, True),
        ({"StringEqualsIfExists": {"s3:x-amz-server-side-encryption": "AES256"}}, True),
        ({"StringEquals": {"s3:x-amz-server-side-encryption": "AES256"}}, False),
    ]
    for condition, readable in cases:
        c.put_bucket_policy(
            Bucket=b, Policy=document(statement({"AWS": bob.arn}, "s3:GetObject", f"arn:aws:s3:::{b}/*", condition))
        )
        got = outcome(lambda: other.get_object(Bucket=b, Key="k"))
        assert got == ("ok" if readable else "AccessDenied"), condition
    # Writes held to tags: PutObject only with class=public, and only that tag key.
    c.put_bucket_policy(
        Bucket=b,
        Policy=document(
            statement(
                {"AWS": bob.arn},
                "s3:PutObject",
                f"arn:aws:s3:::{b}/*",
                {
                    "StringEquals": {"s3:RequestObjectTag/class": "public"},
                    "ForAllValues:StringEquals": {"s3:RequestObjectTagKeys": ["class"]},
                },
            )
        ),
    )
    assert outcome(lambda: other.put_object(Bucket=b, Key="t1", Body=b"x", Tagging="class=public")) == "ok"
    assert outcome(lambda: other.put_object(Bucket=b, Key="t2", Body=b"x", Tagging="class=internal")) == "AccessDenied"
    assert outcome(lambda: other.put_object(Bucket=b, Key="t3", Body=b"x", Tagging="class=public&x=1")) == "AccessDenied"
    assert outcome(lambda: other.put_object(Bucket=b, Key="t4", Body=b"x")) == "AccessDenied"
    # SigV2 can be refused by policy.
    c.put_bucket_policy(
        Bucket=b,
        Policy=document(
            statement({"AWS": bob.arn}, "s3:GetObject", f"arn:aws:s3:::{b}/*"),
            statement("*", "s3:*", [f"arn:aws:s3:::{b}", f"arn:aws:s3:::{b}/*"],
                      {"StringEquals": {"s3:signatureversion": "AWS"}}, effect="Deny"),
        ),
    )
    v2 = boto3.session.Session().client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=bob.access_key,
        aws_secret_access_key=bob.secret_key,
        config=Config(signature_version="s3", region_name=REGION, s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}),
    )
    assert outcome(lambda: v2.get_object(Bucket=b, Key="k")) == "AccessDenied"
    assert other.get_object(Bucket=b, Key="k")["Body"].read() == b"v"


def eventually(call, expected: str, within: float = 15.0) -> str:
    """`outcome(call)` once it is `expected` (a user's policy reaches the
    gateway within its credential cache's lifetime), else the last one."""
    import time

    deadline = time.monotonic() + within
    while True:
        got = outcome(call)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_a_user_policy_limits_a_key_to_one_prefix_read_only(server, s3, make_user, tmp_path):
    from tessera_procs import HarnessError

    carol = make_user("pol")
    c = carol.client
    name = new_bucket_name("carol")
    c.create_bucket(Bucket=name)
    try:
        c.put_object(Bucket=name, Key="reports/q1.csv", Body=b"q1")
        c.put_object(Bucket=name, Key="drafts/q2.csv", Body=b"q2")
        read_only = tmp_path / "read-only.json"
        read_only.write_text(
            document(
                {
                    "Effect": "Allow",
                    "Action": ["s3:GetObject"],
                    "Resource": f"arn:aws:s3:::{name}/reports/*",
                },
                {
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": f"arn:aws:s3:::{name}",
                    "Condition": {"StringLike": {"s3:prefix": "reports/*"}},
                },
            )
        )
        server.admin("user", "policy", carol.name, str(read_only))
        # Writes stop once the policy reaches the gateway (a probe key: one
        # that got in before then changes nothing below).
        assert eventually(lambda: c.put_object(Bucket=name, Key="probe", Body=b"x"), "AccessDenied") == (
            "AccessDenied"
        )
        assert c.get_object(Bucket=name, Key="reports/q1.csv")["Body"].read() == b"q1"
        assert outcome(lambda: c.get_object(Bucket=name, Key="drafts/q2.csv")) == "AccessDenied"
        assert [o["Key"] for o in c.list_objects_v2(Bucket=name, Prefix="reports/")["Contents"]] == ["reports/q1.csv"]
        assert outcome(lambda: c.list_objects_v2(Bucket=name)) == "AccessDenied"
        assert outcome(lambda: c.delete_bucket(Bucket=name)) == "AccessDenied"
        # A policy with a Principal is a bucket's, not a user's: refused before it is sent.
        wrong = tmp_path / "wrong.json"
        wrong.write_text(document(statement("*", "s3:GetObject", "*")))
        with pytest.raises(HarnessError, match="Principal"):
            server.admin("user", "policy", carol.name, str(wrong))
        server.admin("user", "policy", carol.name, "--clear")
        assert eventually(lambda: c.put_object(Bucket=name, Key="reports/q3.csv", Body=b"x"), "ok") == "ok"
    finally:
        empty_and_delete(s3, name)


def test_versions_need_the_version_actions(alice, bob, b):
    """With a version id, S3 judges s3:GetObjectVersion, s3:DeleteObjectVersion
    and the other *Version actions instead of the plain ones."""
    c = alice.client
    c.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    old = c.put_object(Bucket=b, Key="k", Body=b"old")["VersionId"]
    c.put_object(Bucket=b, Key="k", Body=b"new")
    arn = f"arn:aws:s3:::{b}/*"
    c.put_bucket_policy(
        Bucket=b,
        Policy=document(statement({"AWS": bob.arn}, ["s3:GetObject", "s3:DeleteObject", "s3:GetObjectTagging"], arn)),
    )
    other = bob.client
    assert other.get_object(Bucket=b, Key="k")["Body"].read() == b"new"
    assert outcome(lambda: other.get_object(Bucket=b, Key="k", VersionId=old)) == "AccessDenied"
    assert outcome(lambda: other.head_object(Bucket=b, Key="k", VersionId=old)) == "403"
    assert outcome(lambda: other.get_object_tagging(Bucket=b, Key="k", VersionId=old)) == "AccessDenied"
    assert outcome(lambda: other.delete_object(Bucket=b, Key="k", VersionId=old)) == "AccessDenied"
    assert outcome(lambda: other.copy_object(
        Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k", "VersionId": old})) == "AccessDenied"
    refused = other.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "k", "VersionId": old}]})
    assert [e["Code"] for e in refused["Errors"]] == ["AccessDenied"]
    # A delete marker belongs to whoever made it.
    c.put_object(Bucket=b, Key="m", Body=b"m")
    other.delete_object(Bucket=b, Key="m")
    markers = c.list_object_versions(Bucket=b, Prefix="m")["DeleteMarkers"]
    assert [m["Owner"]["ID"] for m in markers] == [bob.canonical_id]
    # Without read rights, a deleted key or an absent version says no more than AccessDenied.
    assert outcome(lambda: other.get_object_tagging(Bucket=b, Key="m")) == "AccessDenied"
    absent = "v5n1PPUjOCMHLyyfq0ayjoZ5RZLfVQKA"
    assert outcome(lambda: other.get_object_tagging(Bucket=b, Key="k", VersionId=absent)) == "AccessDenied"
    assert outcome(lambda: c.get_object_tagging(Bucket=b, Key="k", VersionId=absent)) == "NoSuchVersion"
    c.put_bucket_policy(
        Bucket=b,
        Policy=document(statement(
            {"AWS": bob.arn}, ["s3:GetObjectVersion", "s3:GetObjectVersionTagging", "s3:DeleteObjectVersion"], arn,
        )),
    )
    assert other.get_object(Bucket=b, Key="k", VersionId=old)["Body"].read() == b"old"
    assert other.get_object_tagging(Bucket=b, Key="k", VersionId=old)["TagSet"] == []
    # Only the version actions now: the latest without an id is refused.
    assert outcome(lambda: other.get_object(Bucket=b, Key="k")) == "AccessDenied"
    other.delete_object(Bucket=b, Key="k", VersionId=old)
    assert outcome(lambda: c.get_object(Bucket=b, Key="k", VersionId=old)) == "NoSuchVersion"


def test_deny_policies_on_encryption_headers_hold_the_owner_to_them(alice, b):
    """The bucket policies AWS documents for requiring encryption deny the
    owner's own writes that do not meet them, and are judged before the
    encryption headers are read: an unknown algorithm is AccessDenied, not
    a header error."""
    c = alice.client
    objects = f"arn:aws:s3:::{b}/*"

    def deny(condition):
        c.put_bucket_policy(Bucket=b, Policy=document(statement("*", "s3:PutObject", objects, condition, effect="Deny")))

    deny({"Null": {"s3:x-amz-server-side-encryption": "true"}})
    assert outcome(lambda: c.put_object(Bucket=b, Key="plain", Body=b"x")) == "AccessDenied"
    assert outcome(lambda: c.put_object(Bucket=b, Key="sse", Body=b"x", ServerSideEncryption="AES256")) == "ok"
    deny({"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}})
    assert outcome(lambda: c.put_object(Bucket=b, Key="kms", Body=b"x", ServerSideEncryption="aws:kms")) == "AccessDenied"
    assert outcome(lambda: c.put_object(Bucket=b, Key="odd", Body=b"x", ServerSideEncryption="AES192")) == "AccessDenied"
    assert outcome(lambda: c.put_object(Bucket=b, Key="sse2", Body=b"x", ServerSideEncryption="AES256")) == "ok"
    deny({"Null": {"s3:x-amz-server-side-encryption-customer-algorithm": "true"}})
    assert outcome(lambda: c.put_object(Bucket=b, Key="no-c", Body=b"x", ServerSideEncryption="AES256")) == "AccessDenied"
    c.delete_bucket_policy(Bucket=b)
    assert sorted(o["Key"] for o in c.list_objects_v2(Bucket=b).get("Contents", [])) == ["sse", "sse2"]
