//! Access control lists as S3 keeps them (grants of a permission to a
//! canonical user or a group), the canned ACLs and `x-amz-grant-*` headers
//! that make them, object ownership and public access blocks.

use serde::{Deserialize, Serialize};

/// The most grants an ACL may hold.
pub const MAX_GRANTS: usize = 100;

/// An ACL permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Permission {
    /// Every other permission.
    FullControl,
    /// Buckets: create, overwrite and delete objects.
    Write,
    /// Change the ACL.
    WriteAcp,
    /// Buckets: list; objects: read.
    Read,
    /// Read the ACL.
    ReadAcp,
}

impl Permission {
    /// Every permission, in S3's order.
    pub const ALL: [Permission; 5] = [
        Permission::FullControl,
        Permission::Write,
        Permission::WriteAcp,
        Permission::Read,
        Permission::ReadAcp,
    ];

    /// The name in ACL documents and grant headers: `FULL_CONTROL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::FullControl => "FULL_CONTROL",
            Permission::Write => "WRITE",
            Permission::WriteAcp => "WRITE_ACP",
            Permission::Read => "READ",
            Permission::ReadAcp => "READ_ACP",
        }
    }

    /// The permission named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Whether holding `self` grants `wanted`.
    pub fn covers(self, wanted: Permission) -> bool {
        self == Permission::FullControl || self == wanted
    }
}

/// Who a grant is to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Grantee {
    /// One user, by canonical ID.
    User(String),
    /// Anyone, signed or not.
    AllUsers,
    /// Anyone who signs a request with a key of this store.
    AuthenticatedUsers,
    /// S3's log delivery group (kept and shown; no process of Tessera is in it).
    LogDelivery,
}

impl Grantee {
    /// The group URIs of S3.
    pub const ALL_USERS_URI: &'static str = "http://acs.amazonaws.com/groups/global/AllUsers";
    /// See [`Grantee::ALL_USERS_URI`].
    pub const AUTHENTICATED_USERS_URI: &'static str =
        "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
    /// See [`Grantee::ALL_USERS_URI`].
    pub const LOG_DELIVERY_URI: &'static str = "http://acs.amazonaws.com/groups/s3/LogDelivery";

    /// The group of `uri`, or InvalidGroupUri.
    pub fn group(uri: &str) -> Result<Self, AclError> {
        match uri {
            Self::ALL_USERS_URI => Ok(Self::AllUsers),
            Self::AUTHENTICATED_USERS_URI => Ok(Self::AuthenticatedUsers),
            Self::LOG_DELIVERY_URI => Ok(Self::LogDelivery),
            _ => Err(AclError::InvalidGroupUri(uri.to_string())),
        }
    }

    /// A user by canonical ID (64 lower-case hex digits), or InvalidId.
    pub fn user(id: &str) -> Result<Self, AclError> {
        let id = id.trim();
        if id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Self::User(id.to_string()))
        } else {
            Err(AclError::InvalidId(id.to_string()))
        }
    }

    /// The group's URI; None for a user.
    pub fn uri(&self) -> Option<&'static str> {
        match self {
            Self::User(_) => None,
            Self::AllUsers => Some(Self::ALL_USERS_URI),
            Self::AuthenticatedUsers => Some(Self::AUTHENTICATED_USERS_URI),
            Self::LogDelivery => Some(Self::LOG_DELIVERY_URI),
        }
    }

    /// Whether a grant to this grantee makes its resource public (AllUsers
    /// or AuthenticatedUsers, as S3 judges it).
    pub fn is_public(&self) -> bool {
        matches!(self, Self::AllUsers | Self::AuthenticatedUsers)
    }
}

/// One grant of an ACL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Grant {
    /// Who.
    pub grantee: Grantee,
    /// What.
    pub permission: Permission,
}

impl Grant {
    /// `permission` to `grantee`.
    pub fn new(grantee: Grantee, permission: Permission) -> Self {
        Self {
            grantee,
            permission,
        }
    }

    /// FULL_CONTROL to the user `owner_id`: the ACL of `private`.
    pub fn full_control(owner_id: &str) -> Self {
        Self::new(Grantee::User(owner_id.to_string()), Permission::FullControl)
    }
}

/// Who owns the objects written into a bucket, and whether ACLs count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectOwnership {
    /// The bucket owner owns every object; ACLs are off (the default for
    /// new buckets, as in S3 since April 2023).
    #[default]
    BucketOwnerEnforced,
    /// The bucket owner owns objects written with `bucket-owner-full-control`.
    BucketOwnerPreferred,
    /// The writer owns the object.
    ObjectWriter,
}

impl ObjectOwnership {
    /// The name in S3 documents and headers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BucketOwnerEnforced => "BucketOwnerEnforced",
            Self::BucketOwnerPreferred => "BucketOwnerPreferred",
            Self::ObjectWriter => "ObjectWriter",
        }
    }

    /// The setting named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::BucketOwnerEnforced,
            Self::BucketOwnerPreferred,
            Self::ObjectWriter,
        ]
        .into_iter()
        .find(|o| o.as_str() == name)
    }

    /// Whether ACLs decide anything in the bucket.
    pub fn acls_enabled(self) -> bool {
        self != Self::BucketOwnerEnforced
    }
}

/// A bucket's public access block: each flag stops one way of making the
/// bucket or its objects public.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicAccessBlock {
    /// Refuse requests that set a public ACL.
    pub block_public_acls: bool,
    /// Ignore the public grants of ACLs.
    pub ignore_public_acls: bool,
    /// Refuse bucket policies that make the bucket public.
    pub block_public_policy: bool,
    /// A public bucket policy grants only the owner's requests.
    pub restrict_public_buckets: bool,
}

impl PublicAccessBlock {
    /// Every flag on: new buckets start so, as in S3 since April 2023.
    pub const ALL: Self = Self {
        block_public_acls: true,
        ignore_public_acls: true,
        block_public_policy: true,
        restrict_public_buckets: true,
    };
}

/// Why an ACL, as requested, cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// A canned ACL S3 does not know.
    #[error("invalid canned ACL {0:?}")]
    InvalidCannedAcl(String),
    /// A grant header value that is not `type="value", ...`.
    #[error("argument format not recognized in {header}: {value:?}")]
    GrantFormat {
        /// The header.
        header: &'static str,
        /// Its value.
        value: String,
    },
    /// A group URI S3 does not have.
    #[error("invalid group uri {0:?}")]
    InvalidGroupUri(String),
    /// A canonical user ID that is not one.
    #[error("invalid id {0:?}")]
    InvalidId(String),
    /// A grant to an email address: there are none to resolve.
    #[error("no account has the email address {0:?}")]
    UnresolvableEmail(String),
    /// Both `x-amz-acl` and an `x-amz-grant-*` header.
    #[error("both a canned ACL and grant headers")]
    CannedAndGrants,
    /// More than [`MAX_GRANTS`] grants.
    #[error("more than {MAX_GRANTS} grants")]
    TooManyGrants,
}

/// The canonical user ID S3 shows for `user` (as Owner, Initiator and ACL
/// grantee): 64 hex digits, the same in every answer, derived from the name
/// so that no record has to carry it.
pub fn canonical_user_id(user: &str) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"tessera canonical user id\0");
    hasher.update(user.as_bytes());
    hex::encode(hasher.finalize())
}

/// The grants of canned ACL `name` for a resource owned by `owner_id`
/// (for objects, `bucket_owner_id` owns the bucket), owner first.
pub fn canned_acl(
    name: &str,
    owner_id: &str,
    bucket_owner_id: &str,
) -> Result<Vec<Grant>, AclError> {
    let mut grants = vec![Grant::full_control(owner_id)];
    let bucket_owner = || Grantee::User(bucket_owner_id.to_string());
    match name {
        "private" => {}
        "public-read" => grants.push(Grant::new(Grantee::AllUsers, Permission::Read)),
        "public-read-write" => {
            grants.push(Grant::new(Grantee::AllUsers, Permission::Read));
            grants.push(Grant::new(Grantee::AllUsers, Permission::Write));
        }
        "authenticated-read" => {
            grants.push(Grant::new(Grantee::AuthenticatedUsers, Permission::Read))
        }
        "bucket-owner-read" if bucket_owner_id != owner_id => {
            grants.push(Grant::new(bucket_owner(), Permission::Read))
        }
        "bucket-owner-full-control" if bucket_owner_id != owner_id => {
            grants.push(Grant::new(bucket_owner(), Permission::FullControl))
        }
        "bucket-owner-read" | "bucket-owner-full-control" => {}
        "log-delivery-write" => {
            grants.push(Grant::new(Grantee::LogDelivery, Permission::Write));
            grants.push(Grant::new(Grantee::LogDelivery, Permission::ReadAcp));
        }
        other => return Err(AclError::InvalidCannedAcl(other.to_string())),
    }
    Ok(grants)
}

/// The `x-amz-grant-*` headers and the permission each grants.
pub const GRANT_HEADERS: [(&str, Permission); 5] = [
    ("x-amz-grant-full-control", Permission::FullControl),
    ("x-amz-grant-write", Permission::Write),
    ("x-amz-grant-write-acp", Permission::WriteAcp),
    ("x-amz-grant-read", Permission::Read),
    ("x-amz-grant-read-acp", Permission::ReadAcp),
];

/// The ACL a request's `x-amz-acl` or `x-amz-grant-*` headers ask for, if
/// any: `header` reads one header's value. Grant headers replace the whole
/// ACL (no grant to the owner is added), as in S3.
pub fn grants_from_headers<'a>(
    header: impl Fn(&str) -> Option<&'a str>,
    owner_id: &str,
    bucket_owner_id: &str,
) -> Result<Option<Vec<Grant>>, AclError> {
    let canned = header("x-amz-acl");
    let mut grants = Vec::new();
    let mut any_grant_header = false;
    for (name, permission) in GRANT_HEADERS {
        let Some(value) = header(name) else { continue };
        any_grant_header = true;
        for grantee in parse_grantees(name, value)? {
            grants.push(Grant::new(grantee, permission));
        }
    }
    match (canned, any_grant_header) {
        (Some(_), true) => Err(AclError::CannedAndGrants),
        (Some(name), false) => canned_acl(name.trim(), owner_id, bucket_owner_id).map(Some),
        (None, true) if grants.len() > MAX_GRANTS => Err(AclError::TooManyGrants),
        (None, true) => Ok(Some(grants)),
        (None, false) => Ok(None),
    }
}

/// `id="..."`, `uri="..."` or `emailAddress="..."`, comma-separated.
fn parse_grantees(header: &'static str, value: &str) -> Result<Vec<Grantee>, AclError> {
    let format = || AclError::GrantFormat {
        header,
        value: value.to_string(),
    };
    let mut grantees = Vec::new();
    for item in value.split(',') {
        let (kind, raw) = item.trim().split_once('=').ok_or_else(format)?;
        let raw = raw.trim();
        let text = raw
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .unwrap_or(raw);
        grantees.push(match kind.trim() {
            "id" => Grantee::user(text)?,
            "uri" => Grantee::group(text)?,
            "emailAddress" => return Err(AclError::UnresolvableEmail(text.to_string())),
            _ => return Err(format()),
        });
    }
    Ok(grantees)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> String {
        canonical_user_id(name)
    }

    #[test]
    fn canonical_ids_are_64_hex_and_distinct() {
        let a = id("alice");
        assert_eq!(a.len(), 64);
        assert!(Grantee::user(&a).is_ok());
        assert_ne!(a, id("bob"));
        assert_eq!(a, id("alice"));
    }

    /// The canned ACL table of S3's documentation.
    #[test]
    fn canned_acls_grant_what_s3_documents() {
        let (alice, bob) = (id("alice"), id("bob"));
        let user = |i: &str| Grantee::User(i.to_string());
        let grants = |name| canned_acl(name, &alice, &bob).unwrap();
        let owner = Grant::full_control(&alice);
        assert_eq!(grants("private"), std::slice::from_ref(&owner));
        assert_eq!(
            grants("public-read"),
            [
                owner.clone(),
                Grant::new(Grantee::AllUsers, Permission::Read)
            ]
        );
        assert_eq!(
            grants("public-read-write"),
            [
                owner.clone(),
                Grant::new(Grantee::AllUsers, Permission::Read),
                Grant::new(Grantee::AllUsers, Permission::Write)
            ]
        );
        assert_eq!(
            grants("authenticated-read"),
            [
                owner.clone(),
                Grant::new(Grantee::AuthenticatedUsers, Permission::Read)
            ]
        );
        assert_eq!(
            grants("bucket-owner-read"),
            [owner.clone(), Grant::new(user(&bob), Permission::Read)]
        );
        assert_eq!(
            grants("bucket-owner-full-control"),
            [
                owner.clone(),
                Grant::new(user(&bob), Permission::FullControl)
            ]
        );
        // The writer owns the bucket too: one grant.
        for name in ["bucket-owner-read", "bucket-owner-full-control"] {
            assert_eq!(
                canned_acl(name, &alice, &alice).unwrap(),
                std::slice::from_ref(&owner)
            );
        }
        assert_eq!(
            canned_acl("fake-acl", &alice, &bob),
            Err(AclError::InvalidCannedAcl("fake-acl".into()))
        );
    }

    #[test]
    fn grant_headers_replace_the_acl() {
        let bob = id("bob");
        let read = format!("id=\"{bob}\", uri=\"{}\"", Grantee::ALL_USERS_URI);
        let headers = [
            ("x-amz-grant-read", read.as_str()),
            (
                "x-amz-grant-write-acp",
                "uri=http://acs.amazonaws.com/groups/s3/LogDelivery",
            ),
        ];
        let get = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let grants = grants_from_headers(get, &id("alice"), &id("alice"))
            .unwrap()
            .unwrap();
        assert_eq!(
            grants,
            [
                Grant::new(Grantee::LogDelivery, Permission::WriteAcp),
                Grant::new(Grantee::User(bob.clone()), Permission::Read),
                Grant::new(Grantee::AllUsers, Permission::Read),
            ]
        );
        assert_eq!(grants_from_headers(|_| None, &bob, &bob), Ok(None));
        let both = |name: &str| match name {
            "x-amz-acl" => Some("private"),
            "x-amz-grant-read" => Some(read.as_str()),
            _ => None,
        };
        assert_eq!(
            grants_from_headers(both, &bob, &bob),
            Err(AclError::CannedAndGrants)
        );
    }

    #[test]
    fn bad_grant_headers_are_named() {
        let check = |value: &'static str| {
            grants_from_headers(
                move |name| (name == "x-amz-grant-read").then_some(value),
                "a",
                "a",
            )
        };
        assert!(matches!(
            check("fakekey=\"1\""),
            Err(AclError::GrantFormat { .. })
        ));
        assert!(matches!(
            check("no equals sign"),
            Err(AclError::GrantFormat { .. })
        ));
        assert!(matches!(
            check("id=\"wrong-id\""),
            Err(AclError::InvalidId(_))
        ));
        assert!(matches!(
            check("uri=\"http://example.com/g\""),
            Err(AclError::InvalidGroupUri(_))
        ));
        assert!(matches!(
            check("emailAddress=\"a@b.c\""),
            Err(AclError::UnresolvableEmail(_))
        ));
    }

    #[test]
    fn groups_are_named_by_their_uris() {
        for group in [
            Grantee::AllUsers,
            Grantee::AuthenticatedUsers,
            Grantee::LogDelivery,
        ] {
            let uri = group.uri().expect("a group has a URI");
            assert!(uri.starts_with("http://acs.amazonaws.com/groups/"));
            assert_eq!(Grantee::group(uri), Ok(group));
        }
        assert_eq!(Grantee::User(id("alice")).uri(), None);
        assert!(Grantee::AllUsers.is_public());
        assert!(Grantee::AuthenticatedUsers.is_public());
        assert!(!Grantee::LogDelivery.is_public());
        assert!(!Grantee::User(id("alice")).is_public());
    }

    #[test]
    fn user_ids_are_64_lower_case_hex_digits() {
        let alice = id("alice");
        assert_eq!(Grantee::user(&alice), Ok(Grantee::User(alice.clone())));
        // Right length, not hex; hex, wrong length; upper case.
        for bad in [
            "g".repeat(64),
            alice[..63].to_string(),
            format!("{alice}0"),
            alice.to_uppercase(),
        ] {
            assert_eq!(Grantee::user(&bad), Err(AclError::InvalidId(bad.clone())));
        }
    }

    #[test]
    fn at_most_max_grants_grants() {
        let alice = id("alice");
        let header = |count: usize| {
            let value = vec![format!("id=\"{alice}\""); count].join(",");
            grants_from_headers(
                |name| (name == "x-amz-grant-read").then_some(value.as_str()),
                &alice,
                &alice,
            )
        };
        assert_eq!(header(MAX_GRANTS).unwrap().unwrap().len(), MAX_GRANTS);
        assert_eq!(header(MAX_GRANTS + 1), Err(AclError::TooManyGrants));
    }

    #[test]
    fn names_round_trip() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
        }
        assert_eq!(Permission::parse("read"), None);
        for o in [
            "BucketOwnerEnforced",
            "BucketOwnerPreferred",
            "ObjectWriter",
        ] {
            assert_eq!(ObjectOwnership::parse(o).unwrap().as_str(), o);
        }
        assert_eq!(ObjectOwnership::parse("Other"), None);
        assert!(Permission::FullControl.covers(Permission::ReadAcp));
        assert!(!Permission::Read.covers(Permission::Write));
    }
}
