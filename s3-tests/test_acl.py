"""ACLs, object ownership and public access blocks, through boto3 as three
callers: the bucket owner, another user and an unsigned client. New buckets
start as S3's do since April 2023 (BucketOwnerEnforced, every public access
block flag on); the matrices open a bucket up first, as a user must on S3."""

import itertools

import pytest
import requests

from tessera_clients import empty_and_delete, new_bucket_name, outcome, s3_client
from tessera_procs import start_server

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


@pytest.fixture(scope="module")
def owner(make_user):
    """The owner of the buckets under test: a user, not root (root may do
    anything anywhere)."""
    return make_user("acl").client


@pytest.fixture(scope="module")
def other(make_user):
    """Another user: (client, canonical id)."""
    user = make_user("acl")
    return user.client, user.canonical_id


@pytest.fixture
def open_bucket(s3, owner):
    """A bucket of `owner` whose ACLs count (ObjectWriter), with no public
    access block."""
    name = new_bucket_name("acl")
    owner.create_bucket(Bucket=name, ObjectOwnership="ObjectWriter")
    owner.delete_public_access_block(Bucket=name)
    yield name
    empty_and_delete(s3, name)


def test_new_buckets_start_with_acls_off_and_public_access_blocked(s3, bucket):
    controls = s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]
    assert controls["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert block == {
        "BlockPublicAcls": True,
        "IgnorePublicAcls": True,
        "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True,
    }
    assert outcome(lambda: s3.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="public-read")) == (
        "AccessControlListNotSupported"
    )
    assert outcome(lambda: s3.put_bucket_acl(Bucket=bucket, ACL="public-read")) == "AccessControlListNotSupported"
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="bucket-owner-full-control")
    acl = s3.get_object_acl(Bucket=bucket, Key="k")
    assert [(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]] == [(acl["Owner"]["ID"], "FULL_CONTROL")]
    for ownership, code in [
        (None, "InvalidBucketAclWithObjectOwnership"),
        ("ObjectWriter", "InvalidBucketAclWithBlockPublicAccessError"),
    ]:
        kwargs = {"ObjectOwnership": ownership} if ownership else {}
        assert outcome(lambda: s3.create_bucket(Bucket=new_bucket_name(), ACL="public-read", **kwargs)) == code


@pytest.mark.tessera
def test_server_wide_defaults_let_applications_that_set_acls_work(tessera_bin, tmp_path):
    """With `--default-object-ownership ObjectWriter` and
    `--default-block-public-access false`, a bucket made with no settings
    takes `x-amz-acl: public-read` as applications written before 2023
    send it (Mastodon, PeerTube), and an unsigned client reads the object."""
    server = start_server(
        tessera_bin,
        tmp_path,
        extra_args=("--default-object-ownership", "ObjectWriter", "--default-block-public-access", "false"),
    )
    try:
        s3 = s3_client(server.endpoint, server.access_key, server.secret_key)
        bucket = new_bucket_name("legacy")
        s3.create_bucket(Bucket=bucket)
        controls = s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]
        assert controls["Rules"] == [{"ObjectOwnership": "ObjectWriter"}]
        assert outcome(lambda: s3.get_public_access_block(Bucket=bucket)) == "NoSuchPublicAccessBlockConfiguration"
        s3.put_object(Bucket=bucket, Key="avatar.png", Body=b"png", ACL="public-read")
        page = requests.get(f"{server.endpoint}/{bucket}/avatar.png", timeout=30)
        assert (page.status_code, page.content) == (200, b"png")
        # A bucket asked for explicitly still gets what it asks.
        strict = new_bucket_name("strict")
        s3.create_bucket(Bucket=strict, ObjectOwnership="BucketOwnerEnforced")
        assert outcome(lambda: s3.put_object(Bucket=strict, Key="k", Body=b"x", ACL="public-read")) == (
            "AccessControlListNotSupported"
        )
    finally:
        server.stop()


def test_ownership_and_block_settings_can_be_changed_and_removed(owner, open_bucket):
    b = open_bucket
    owner.put_bucket_ownership_controls(
        Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    )
    rules = owner.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"]["Rules"]
    assert rules == [{"ObjectOwnership": "BucketOwnerPreferred"}]
    owner.put_bucket_acl(Bucket=b, ACL="public-read")
    # ACLs off while the ACL grants others: refused, as S3 does.
    assert (
        outcome(
            lambda: owner.put_bucket_ownership_controls(
                Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
            )
        )
        == "InvalidBucketAclWithObjectOwnership"
    )
    owner.delete_bucket_ownership_controls(Bucket=b)
    assert outcome(lambda: owner.get_bucket_ownership_controls(Bucket=b)) == "OwnershipControlsNotFoundError"
    assert outcome(lambda: owner.get_public_access_block(Bucket=b)) == "NoSuchPublicAccessBlockConfiguration"
    owner.put_public_access_block(
        Bucket=b,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": False,
            "BlockPublicPolicy": False,
            "RestrictPublicBuckets": False,
        },
    )
    assert owner.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]["BlockPublicAcls"] is True


def expected(bucket_acl: str, object_acl: str, who: str) -> dict[str, str]:
    """What S3 answers `who` for a bucket and object with these canned ACLs."""
    owner = who == "owner"
    signed = who != "anonymous"
    bucket_read = (
        owner or bucket_acl in ("public-read", "public-read-write") or (bucket_acl == "authenticated-read" and signed)
    )
    bucket_write = owner or bucket_acl == "public-read-write"
    object_read = owner or object_acl == "public-read" or (object_acl == "authenticated-read" and signed)
    return {
        "get": "ok" if object_read else "AccessDenied",
        "list": "ok" if bucket_read else "AccessDenied",
        "put": "ok" if bucket_write else "AccessDenied",
        "missing": "NoSuchKey" if bucket_read else "AccessDenied",
    }


def test_acl_matrix(owner, open_bucket, other, anonymous):
    """Bucket ACL x object ACL x owner / another user / anonymous, for GET,
    listing, PUT and a GET of a key that does not exist."""
    b = open_bucket
    callers = {"owner": owner, "other": other[0], "anonymous": anonymous}
    bucket_acls = ["private", "public-read", "public-read-write", "authenticated-read"]
    object_acls = ["private", "public-read", "authenticated-read"]
    for object_acl in object_acls:
        owner.put_object(Bucket=b, Key=f"obj-{object_acl}", Body=object_acl.encode(), ACL=object_acl)
    failures = []
    for bucket_acl, object_acl, who in itertools.product(bucket_acls, object_acls, callers):
        owner.put_bucket_acl(Bucket=b, ACL=bucket_acl)
        client = callers[who]
        seen = {
            "get": outcome(lambda: client.get_object(Bucket=b, Key=f"obj-{object_acl}")["Body"].read()),
            "list": outcome(lambda: client.list_objects_v2(Bucket=b)),
            "put": outcome(lambda: client.put_object(Bucket=b, Key=f"by-{who}", Body=b"w")),
            "missing": outcome(lambda: client.get_object(Bucket=b, Key="never-written")),
        }
        want = expected(bucket_acl, object_acl, who)
        if seen != want:
            failures.append((bucket_acl, object_acl, who, seen, want))
    assert not failures, "\n".join(map(str, failures))


def test_grants_by_id_and_documents(owner, open_bucket, other):
    b = open_bucket
    client, other_id = other
    owner.put_object(Bucket=b, Key="shared", Body=b"for bob", GrantRead=f'id="{other_id}"')
    assert client.get_object(Bucket=b, Key="shared")["Body"].read() == b"for bob"
    acl = owner.get_object_acl(Bucket=b, Key="shared")
    # Grant headers replace the whole ACL: only the listed grant.
    assert [(g["Grantee"].get("ID"), g["Permission"]) for g in acl["Grants"]] == [(other_id, "READ")]
    # An AccessControlPolicy body: owner FULL_CONTROL, everyone READ_ACP.
    policy = {
        "Owner": acl["Owner"],
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": acl["Owner"]["ID"]}, "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ_ACP"},
        ],
    }
    owner.put_object_acl(Bucket=b, Key="shared", AccessControlPolicy=policy)
    assert outcome(lambda: client.get_object(Bucket=b, Key="shared")) == "AccessDenied"
    seen = client.get_object_acl(Bucket=b, Key="shared")["Grants"]
    assert {(g["Grantee"].get("URI"), g["Permission"]) for g in seen} == {
        (None, "FULL_CONTROL"),
        (ALL_USERS, "READ_ACP"),
    }
    for kwargs, code in [
        ({"ACL": "private", "GrantRead": f'id="{other_id}"'}, "InvalidRequest"),
        ({"GrantRead": 'id="not-an-id"'}, "InvalidArgument"),
        ({"GrantRead": 'uri="http://example.com/group"'}, "InvalidArgument"),
        ({"GrantRead": 'emailAddress="someone@example.com"'}, "UnresolvableGrantByEmailAddress"),
        ({"ACL": "no-such-acl"}, "InvalidArgument"),
    ]:
        assert outcome(lambda: owner.put_object(Bucket=b, Key="bad", Body=b"x", **kwargs)) == code, kwargs


def test_object_writer_owns_what_it_writes(owner, open_bucket, other):
    b = open_bucket
    client, other_id = other
    owner.put_bucket_acl(
        Bucket=b, GrantWrite=f'id="{other_id}"', GrantFullControl=f'id="{owner.list_buckets()["Owner"]["ID"]}"'
    )
    client.put_object(Bucket=b, Key="bobs", Body=b"mine")
    assert client.get_object_acl(Bucket=b, Key="bobs")["Owner"]["ID"] == other_id
    # The bucket owner cannot read it without a grant, but may delete it.
    assert outcome(lambda: owner.get_object(Bucket=b, Key="bobs")) == "AccessDenied"
    client.put_object(Bucket=b, Key="bobs-shared", Body=b"ours", ACL="bucket-owner-full-control")
    assert owner.get_object(Bucket=b, Key="bobs-shared")["Body"].read() == b"ours"
    owner.delete_object(Bucket=b, Key="bobs")
    # BucketOwnerPreferred: bucket-owner-full-control hands the object over.
    owner.put_bucket_ownership_controls(
        Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    )
    client.put_object(Bucket=b, Key="handed-over", Body=b"yours", ACL="bucket-owner-full-control")
    owner_id = owner.list_buckets()["Owner"]["ID"]
    assert owner.get_object_acl(Bucket=b, Key="handed-over")["Owner"]["ID"] == owner_id
    client.put_object(Bucket=b, Key="kept", Body=b"still mine")
    assert client.get_object_acl(Bucket=b, Key="kept")["Owner"]["ID"] == other_id


def test_public_access_block_flags(owner, open_bucket, anonymous):
    b = open_bucket
    owner.put_object(Bucket=b, Key="public", Body=b"hello", ACL="public-read")
    assert anonymous.get_object(Bucket=b, Key="public")["Body"].read() == b"hello"
    settings = {
        "BlockPublicAcls": False,
        "IgnorePublicAcls": True,
        "BlockPublicPolicy": False,
        "RestrictPublicBuckets": False,
    }
    owner.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration=settings)
    assert outcome(lambda: anonymous.get_object(Bucket=b, Key="public")) == "AccessDenied"
    settings.update(BlockPublicAcls=True, IgnorePublicAcls=False)
    owner.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration=settings)
    assert anonymous.get_object(Bucket=b, Key="public")["Body"].read() == b"hello"
    assert outcome(lambda: owner.put_object_acl(Bucket=b, Key="public", ACL="public-read-write")) == "AccessDenied"
    assert outcome(lambda: owner.put_object(Bucket=b, Key="new", Body=b"x", ACL="authenticated-read")) == "AccessDenied"
    owner.put_object(Bucket=b, Key="new", Body=b"x", ACL="private")


def test_unsigned_get_of_public_object_with_plain_http(server, owner, open_bucket):
    """What a browser does with a public object's URL."""
    owner.put_object(Bucket=open_bucket, Key="page.html", Body=b"<p>hi</p>", ACL="public-read", ContentType="text/html")
    page = requests.get(f"{server.endpoint}/{open_bucket}/page.html", timeout=30)
    assert page.status_code == 200 and page.content == b"<p>hi</p>"
    owner.put_object_acl(Bucket=open_bucket, Key="page.html", ACL="private")
    assert requests.get(f"{server.endpoint}/{open_bucket}/page.html", timeout=30).status_code == 403
