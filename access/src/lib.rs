//! Who may do what in S3: the vocabulary of access control lists, object
//! ownership and public access blocks (kept in meta's bucket and object
//! records), bucket policies in the IAM policy language, the IAM action each
//! S3 operation is, and [`decide`], which
//! judges one request against the bucket's and the object's settings as
//! AWS documents it. Pure: no I/O, no clock.

mod acl;
mod action;
mod decide;
pub mod policy;

pub use acl::{
    canned_acl, canonical_user_id, grants_from_headers, AclError, Grant, Grantee, ObjectOwnership,
    Permission, PublicAccessBlock, GRANT_HEADERS, MAX_GRANTS,
};
pub use action::{Action, Right};
pub use decide::{decide, BucketAccess, Decision, Facts, NoValues, ObjectAccess, Requester};
pub use policy::{ConditionValues, MalformedPolicy, Policy};
