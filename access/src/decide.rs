//! The decision for one request, as AWS documents S3's evaluation: a Deny
//! of the bucket policy refuses whatever else grants; the bucket owner may
//! do anything to the bucket and to what it owns; others need a grant of the
//! bucket's ACL (bucket actions, and writes into it), of the object's ACL
//! (reads of an object), or an Allow of the bucket policy (for objects, only
//! those the bucket owner owns). ACLs count only while the bucket's object
//! ownership leaves them on. Public ACL grants (AllUsers,
//! AuthenticatedUsers) are ignored under a public access block that says
//! so, and a public policy grants only the owner under
//! RestrictPublicBuckets.

use crate::acl::{canonical_user_id, Grant, Grantee, ObjectOwnership, PublicAccessBlock};
use crate::policy::{resource_arn, ConditionValues, Policy, PolicyDecision, PolicyRequest};
use crate::Action;

/// Who asks.
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    /// The user whose key signed the request; None when unsigned.
    pub user: Option<&'a str>,
    /// The store's root user, who may do anything.
    pub is_root: bool,
    /// The user's own policy, if an operator gave it one: then the user may
    /// do only what it allows, and nothing it denies.
    pub policy: Option<&'a Policy>,
    /// The policy of the signing key's bucket limits
    /// ([`Policy::of_bucket_rights`]), if it is limited: a ceiling as well,
    /// root's keys included.
    pub key_policy: Option<&'a Policy>,
}

/// What of a bucket decides access.
#[derive(Clone, Copy, Debug)]
pub struct BucketAccess<'a> {
    /// The bucket's name (policies name resources by it).
    pub name: &'a str,
    /// The owner's user name.
    pub owner: &'a str,
    /// The ACL; None: `private` (the owner's FULL_CONTROL).
    pub acl: Option<&'a [Grant]>,
    /// Who owns objects written into it, and whether ACLs count.
    pub ownership: ObjectOwnership,
    /// The public access block, if it has one.
    pub public_access_block: Option<&'a PublicAccessBlock>,
    /// The administrator's switch: anyone may read objects and list.
    pub public_read: bool,
    /// The bucket policy, if it has one.
    pub policy: Option<&'a Policy>,
}

/// What of the request itself decides access: the key it names, and the
/// values of the condition keys policies may test.
#[derive(Clone, Copy)]
pub struct Facts<'a> {
    /// The object key, for actions on one.
    pub key: Option<&'a str>,
    /// The condition keys' values.
    pub values: &'a dyn ConditionValues,
}

/// No key and no condition values (requests that name no object and whose
/// buckets have no policy).
pub struct NoValues;

impl ConditionValues for NoValues {
    fn values(&self, _key: &str) -> Option<Vec<String>> {
        None
    }
}

/// What of an object decides access to it.
#[derive(Clone, Copy, Debug)]
pub struct ObjectAccess<'a> {
    /// The user who owns it; None: the bucket owner.
    pub owner: Option<&'a str>,
    /// The ACL; None: `private`.
    pub acl: Option<&'a [Grant]>,
}

/// The answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The request may go on.
    Allow,
    /// 403 AccessDenied.
    Deny,
}

impl Decision {
    fn from_bool(allowed: bool) -> Self {
        if allowed {
            Self::Allow
        } else {
            Self::Deny
        }
    }
}

impl BucketAccess<'_> {
    /// The owner of an object of this bucket.
    pub fn object_owner<'a>(&'a self, object: &ObjectAccess<'a>) -> &'a str {
        match (self.ownership.acls_enabled(), object.owner) {
            (true, Some(owner)) => owner,
            _ => self.owner,
        }
    }

    fn ignores_public_acls(&self) -> bool {
        self.public_access_block
            .is_some_and(|block| block.ignore_public_acls)
    }
}

/// Whether `acl` (None: only `owner`'s FULL_CONTROL) grants `action` to the requester.
fn acl_grants(
    acl: Option<&[Grant]>,
    owner: &str,
    action: Action,
    requester: &Requester<'_>,
    ignore_public: bool,
) -> bool {
    let Some(wanted) = action.acl_permission() else {
        return false;
    };
    let requester_id = requester.user.map(canonical_user_id);
    let private;
    let grants = match acl {
        Some(grants) => grants,
        None => {
            private = [Grant::full_control(&canonical_user_id(owner))];
            &private[..]
        }
    };
    grants.iter().any(|grant| {
        let applies = match &grant.grantee {
            Grantee::User(id) => requester_id.as_deref() == Some(id.as_str()),
            Grantee::AllUsers => !ignore_public,
            Grantee::AuthenticatedUsers => !ignore_public && requester.user.is_some(),
            Grantee::LogDelivery => false,
        };
        applies && grant.permission.covers(wanted)
    })
}

/// What `policy` says of the request; NotApplicable without one.
fn policy_says(
    policy: Option<&Policy>,
    requester: &Requester<'_>,
    action: Action,
    bucket: &BucketAccess<'_>,
    facts: &Facts<'_>,
) -> PolicyDecision {
    let Some(policy) = policy else {
        return PolicyDecision::NotApplicable;
    };
    let key = if action.on_key() { facts.key } else { None };
    let resource = resource_arn(bucket.name, key);
    policy.evaluate(&PolicyRequest {
        user: requester.user,
        action,
        resource: &resource,
        values: facts.values,
    })
}

/// Whether `requester` may do `action` in `bucket` (to `object`, for the
/// actions judged on an existing object; None there is judged as an object
/// the bucket owner owns with a private ACL).
pub fn decide(
    requester: &Requester<'_>,
    action: Action,
    bucket: &BucketAccess<'_>,
    object: Option<&ObjectAccess<'_>>,
    facts: &Facts<'_>,
) -> Decision {
    let beyond = |ceiling: Option<&Policy>| {
        ceiling.is_some()
            && policy_says(ceiling, requester, action, bucket, facts) != PolicyDecision::Allow
    };
    if beyond(requester.key_policy) {
        return Decision::Deny;
    }
    if requester.is_root {
        return Decision::Allow;
    }
    let policy = policy_says(bucket.policy, requester, action, bucket, facts);
    if policy == PolicyDecision::Deny || beyond(requester.policy) {
        return Decision::Deny;
    }
    if bucket.public_read && matches!(action, Action::GetObject | Action::ListBucket) {
        return Decision::Allow;
    }
    let ignore_public = bucket.ignores_public_acls();
    let acls = bucket.ownership.acls_enabled();
    let object = object.copied().unwrap_or(ObjectAccess {
        owner: None,
        acl: None,
    });
    let (owner, by_acl) = if action.on_object() {
        let owner = bucket.object_owner(&object);
        let granted = acls && acl_grants(object.acl, owner, action, requester, ignore_public);
        (owner, granted)
    } else {
        let granted =
            acls && acl_grants(bucket.acl, bucket.owner, action, requester, ignore_public);
        (bucket.owner, granted)
    };
    // The policy speaks for the bucket owner: of objects, only the ones it owns.
    let restricted = bucket
        .public_access_block
        .is_some_and(|block| block.restrict_public_buckets)
        && bucket.policy.is_some_and(Policy::is_public);
    let by_policy = policy == PolicyDecision::Allow && owner == bucket.owner && !restricted;
    Decision::from_bool(requester.user == Some(owner) || by_acl || by_policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{canned_acl, Permission};

    const NONE: Facts<'static> = Facts {
        key: None,
        values: &NoValues,
    };

    #[test]
    fn no_values_has_no_key() {
        for key in ["aws:username", "s3:prefix", ""] {
            assert_eq!(NoValues.values(key), None);
        }
    }

    const ALICE: Requester<'static> = Requester {
        user: Some("alice"),
        is_root: false,
        policy: None,
        key_policy: None,
    };
    const BOB: Requester<'static> = Requester {
        user: Some("bob"),
        is_root: false,
        policy: None,
        key_policy: None,
    };
    const ANONYMOUS: Requester<'static> = Requester {
        user: None,
        is_root: false,
        policy: None,
        key_policy: None,
    };
    const ROOT: Requester<'static> = Requester {
        user: Some("root"),
        is_root: true,
        policy: None,
        key_policy: None,
    };

    fn bucket<'a>(acl: Option<&'a [Grant]>, ownership: ObjectOwnership) -> BucketAccess<'a> {
        BucketAccess {
            name: "b",
            owner: "alice",
            acl,
            ownership,
            public_access_block: None,
            public_read: false,
            policy: None,
        }
    }

    fn canned(name: &str) -> Vec<Grant> {
        canned_acl(
            name,
            &canonical_user_id("alice"),
            &canonical_user_id("alice"),
        )
        .unwrap()
    }

    use Decision::{Allow, Deny};

    /// Bucket ACL x requester for listing and writing.
    #[test]
    fn bucket_acls_decide_listing_and_writes() {
        // (caller, may list, may write) per canned bucket ACL.
        type Row = (Requester<'static>, Decision, Decision);
        let cases: [(&str, [Row; 3]); 4] = [
            (
                "private",
                [
                    (ALICE, Allow, Allow),
                    (BOB, Deny, Deny),
                    (ANONYMOUS, Deny, Deny),
                ],
            ),
            (
                "public-read",
                [
                    (ALICE, Allow, Allow),
                    (BOB, Allow, Deny),
                    (ANONYMOUS, Allow, Deny),
                ],
            ),
            (
                "public-read-write",
                [
                    (ALICE, Allow, Allow),
                    (BOB, Allow, Allow),
                    (ANONYMOUS, Allow, Allow),
                ],
            ),
            (
                "authenticated-read",
                [
                    (ALICE, Allow, Allow),
                    (BOB, Allow, Deny),
                    (ANONYMOUS, Deny, Deny),
                ],
            ),
        ];
        for (name, rows) in cases {
            let acl = canned(name);
            let b = bucket(Some(&acl), ObjectOwnership::ObjectWriter);
            for (who, list, write) in rows {
                assert_eq!(
                    decide(&who, Action::ListBucket, &b, None, &NONE),
                    list,
                    "{name} {who:?} list"
                );
                assert_eq!(
                    decide(&who, Action::PutObject, &b, None, &NONE),
                    write,
                    "{name} {who:?} write"
                );
                // Only the owner (or a WRITE_ACP grant) changes the ACL.
                let acp = if who.user == Some("alice") {
                    Allow
                } else {
                    Deny
                };
                assert_eq!(decide(&who, Action::PutBucketAcl, &b, None, &NONE), acp);
            }
            assert_eq!(decide(&ROOT, Action::PutBucketAcl, &b, None, &NONE), Allow);
        }
    }

    /// Object ACL x requester for reads; the bucket's ACL does not grant
    /// object reads.
    #[test]
    fn object_acls_decide_reads() {
        let public_bucket = canned("public-read");
        let b = bucket(Some(&public_bucket), ObjectOwnership::ObjectWriter);
        let private = ObjectAccess {
            owner: Some("alice"),
            acl: None,
        };
        for who in [BOB, ANONYMOUS] {
            assert_eq!(
                decide(&who, Action::GetObject, &b, Some(&private), &NONE),
                Deny
            );
        }
        let readable = canned("public-read");
        let public = ObjectAccess {
            owner: Some("alice"),
            acl: Some(&readable),
        };
        for who in [ALICE, BOB, ANONYMOUS] {
            assert_eq!(
                decide(&who, Action::GetObject, &b, Some(&public), &NONE),
                Allow
            );
            let acl_read = if who.user == Some("alice") {
                Allow
            } else {
                Deny
            };
            assert_eq!(
                decide(&who, Action::GetObjectAcl, &b, Some(&public), &NONE),
                acl_read
            );
        }
        // An object Bob wrote is Bob's: the bucket owner cannot read it
        // without a grant, but may delete it.
        let bobs = ObjectAccess {
            owner: Some("bob"),
            acl: None,
        };
        assert_eq!(
            decide(&BOB, Action::GetObject, &b, Some(&bobs), &NONE),
            Allow
        );
        assert_eq!(
            decide(&ALICE, Action::GetObject, &b, Some(&bobs), &NONE),
            Deny
        );
        assert_eq!(
            decide(&ALICE, Action::DeleteObject, &b, Some(&bobs), &NONE),
            Allow
        );
        let shared = [
            Grant::full_control(&canonical_user_id("bob")),
            Grant::new(
                Grantee::User(canonical_user_id("alice")),
                Permission::FullControl,
            ),
        ];
        let bobs_shared = ObjectAccess {
            owner: Some("bob"),
            acl: Some(&shared),
        };
        assert_eq!(
            decide(&ALICE, Action::GetObject, &b, Some(&bobs_shared), &NONE),
            Allow
        );
        assert_eq!(
            decide(
                &ALICE,
                Action::PutObjectTagging,
                &b,
                Some(&bobs_shared),
                &NONE
            ),
            Deny
        );
    }

    /// BucketOwnerEnforced: ACLs decide nothing and the bucket owner owns
    /// every object.
    #[test]
    fn enforced_ownership_turns_acls_off() {
        let public = canned("public-read-write");
        let b = bucket(Some(&public), ObjectOwnership::BucketOwnerEnforced);
        let bobs = ObjectAccess {
            owner: Some("bob"),
            acl: Some(&public),
        };
        assert_eq!(b.object_owner(&bobs), "alice");
        assert_eq!(
            decide(&ALICE, Action::GetObject, &b, Some(&bobs), &NONE),
            Allow
        );
        for who in [BOB, ANONYMOUS] {
            assert_eq!(
                decide(&who, Action::GetObject, &b, Some(&bobs), &NONE),
                Deny
            );
            assert_eq!(decide(&who, Action::PutObject, &b, None, &NONE), Deny);
            assert_eq!(decide(&who, Action::ListBucket, &b, None, &NONE), Deny);
        }
    }

    #[test]
    fn a_public_access_block_can_ignore_public_grants() {
        let acl = canned("public-read");
        let mut b = bucket(Some(&acl), ObjectOwnership::ObjectWriter);
        let block = PublicAccessBlock {
            ignore_public_acls: true,
            ..PublicAccessBlock::ALL
        };
        b.public_access_block = Some(&block);
        assert_eq!(
            decide(&ANONYMOUS, Action::ListBucket, &b, None, &NONE),
            Deny
        );
        assert_eq!(decide(&BOB, Action::ListBucket, &b, None, &NONE), Deny);
        assert_eq!(decide(&ALICE, Action::ListBucket, &b, None, &NONE), Allow);
        let off = PublicAccessBlock {
            ignore_public_acls: false,
            ..PublicAccessBlock::ALL
        };
        b.public_access_block = Some(&off);
        assert_eq!(
            decide(&ANONYMOUS, Action::ListBucket, &b, None, &NONE),
            Allow
        );
    }

    #[test]
    fn the_public_read_switch_opens_reads_only() {
        let mut b = bucket(None, ObjectOwnership::BucketOwnerEnforced);
        b.public_read = true;
        assert_eq!(
            decide(&ANONYMOUS, Action::GetObject, &b, None, &NONE),
            Allow
        );
        assert_eq!(
            decide(&ANONYMOUS, Action::ListBucket, &b, None, &NONE),
            Allow
        );
        assert_eq!(decide(&ANONYMOUS, Action::PutObject, &b, None, &NONE), Deny);
        assert_eq!(
            decide(&ANONYMOUS, Action::GetObjectAcl, &b, None, &NONE),
            Deny
        );
    }

    /// A policy grants others what the bucket owner owns, its Deny refuses
    /// even the owner, and a public policy is restricted to the owner under
    /// RestrictPublicBuckets.
    #[test]
    fn bucket_policies_join_the_decision() {
        let policy = Policy::parse(
            r#"{"Statement":[
                {"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/pub/*"},
                {"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:user/bob"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"},
                {"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/locked/*"}]}"#,
            "b",
        )
        .unwrap();
        let mut b = bucket(None, ObjectOwnership::ObjectWriter);
        b.policy = Some(&policy);
        let at = |key| Facts {
            key: Some(key),
            values: &NoValues,
        };
        assert_eq!(
            decide(&ANONYMOUS, Action::GetObject, &b, None, &at("pub/a")),
            Allow
        );
        assert_eq!(
            decide(&ANONYMOUS, Action::GetObject, &b, None, &at("priv/a")),
            Deny
        );
        assert_eq!(decide(&BOB, Action::PutObject, &b, None, &at("x")), Allow);
        assert_eq!(
            decide(&ANONYMOUS, Action::PutObject, &b, None, &at("x")),
            Deny
        );
        assert_eq!(
            decide(&ALICE, Action::DeleteObject, &b, None, &at("locked/x")),
            Deny
        );
        assert_eq!(
            decide(&ALICE, Action::DeleteObject, &b, None, &at("open/x")),
            Allow
        );
        assert_eq!(
            decide(&ROOT, Action::DeleteObject, &b, None, &at("locked/x")),
            Allow
        );
        // An object Carol owns is not the bucket owner's to give away.
        let carols = ObjectAccess {
            owner: Some("carol"),
            acl: None,
        };
        assert_eq!(
            decide(
                &ANONYMOUS,
                Action::GetObject,
                &b,
                Some(&carols),
                &at("pub/c")
            ),
            Deny
        );
        let restrict = PublicAccessBlock {
            restrict_public_buckets: true,
            ..PublicAccessBlock::ALL
        };
        b.public_access_block = Some(&restrict);
        assert!(policy.is_public());
        assert_eq!(
            decide(&ANONYMOUS, Action::GetObject, &b, None, &at("pub/a")),
            Deny
        );
        assert_eq!(decide(&BOB, Action::PutObject, &b, None, &at("x")), Deny);
        assert_eq!(decide(&ALICE, Action::PutObject, &b, None, &at("x")), Allow);
    }

    /// A user with a policy may do only what it allows, in its own buckets
    /// too; what others grant it still needs its policy's Allow.
    #[test]
    fn a_user_policy_is_a_ceiling() {
        let read_only = Policy::parse_user(
            r#"{"Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:ListBucket"],
                "Resource":["arn:aws:s3:::b","arn:aws:s3:::b/reports/*"]}]}"#,
        )
        .unwrap();
        let alice = Requester {
            policy: Some(&read_only),
            ..ALICE
        };
        let b = bucket(None, ObjectOwnership::BucketOwnerEnforced);
        let at = |key| Facts {
            key: Some(key),
            values: &NoValues,
        };
        assert_eq!(
            decide(&alice, Action::GetObject, &b, None, &at("reports/q1")),
            Allow
        );
        assert_eq!(
            decide(&alice, Action::GetObject, &b, None, &at("diary")),
            Deny
        );
        assert_eq!(
            decide(&alice, Action::PutObject, &b, None, &at("reports/q2")),
            Deny
        );
        assert_eq!(decide(&alice, Action::ListBucket, &b, None, &NONE), Allow);
        let public = canned("public-read-write");
        let open = BucketAccess {
            owner: "carol",
            ..bucket(Some(&public), ObjectOwnership::ObjectWriter)
        };
        assert_eq!(
            decide(&alice, Action::PutObject, &open, None, &at("reports/x")),
            Deny
        );
        assert_eq!(
            decide(&alice, Action::ListBucket, &open, None, &NONE),
            Allow
        );
        assert!(Policy::parse_user(
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*"}]}"#
        )
        .is_err());
    }

    /// A key limited to buckets reaches only those, read-only where the
    /// limit says read, root's keys too.
    #[test]
    fn key_limits_are_a_ceiling() {
        use crate::Right;
        let limit = Policy::of_bucket_rights([("b", Right::Read), ("c", Right::Write)]);
        let b = bucket(None, ObjectOwnership::BucketOwnerEnforced);
        let c = BucketAccess {
            name: "c",
            ..bucket(None, ObjectOwnership::BucketOwnerEnforced)
        };
        let other = BucketAccess {
            name: "bb",
            ..bucket(None, ObjectOwnership::BucketOwnerEnforced)
        };
        let at = |key| Facts {
            key: Some(key),
            values: &NoValues,
        };
        for who in [ALICE, ROOT] {
            let limited = Requester {
                key_policy: Some(&limit),
                ..who
            };
            assert_eq!(
                decide(&limited, Action::GetObject, &b, None, &at("k")),
                Allow
            );
            assert_eq!(decide(&limited, Action::ListBucket, &b, None, &NONE), Allow);
            assert_eq!(
                decide(&limited, Action::GetBucketAcl, &b, None, &NONE),
                Allow
            );
            assert_eq!(
                decide(&limited, Action::PutObject, &b, None, &at("k")),
                Deny
            );
            assert_eq!(
                decide(&limited, Action::PutBucketAcl, &b, None, &NONE),
                Deny
            );
            assert_eq!(
                decide(&limited, Action::PutObject, &c, None, &at("k")),
                Allow
            );
            assert_eq!(
                decide(&limited, Action::DeleteBucket, &c, None, &NONE),
                Allow
            );
            assert_eq!(
                decide(&limited, Action::GetObject, &other, None, &at("k")),
                Deny
            );
        }
        let nothing = Policy::of_bucket_rights([]);
        let shut = Requester {
            key_policy: Some(&nothing),
            ..ROOT
        };
        assert_eq!(decide(&shut, Action::ListBucket, &b, None, &NONE), Deny);
    }
}
