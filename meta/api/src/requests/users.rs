//! Requests of `tessera admin`: users, access keys, bucket settings only an
//! operator changes, and the cluster overview. They need [`super::Role::Admin`].

use crate::principal::Principal;
use crate::records::BucketGrant;
use serde::{Deserialize, Serialize};

/// Creates a user.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateUser {
    /// User name.
    pub name: String,
}

/// Gives a user a policy (None: removes it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetUserPolicy {
    /// User name.
    pub name: String,
    /// The policy, JSON; checked by the caller.
    pub policy: Option<String>,
}

/// Deletes a user that owns no buckets.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteUser {
    /// User name.
    pub name: String,
}

/// Every user.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListUsers;

/// A new access key (and secret) for `user`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateKey {
    /// User the key is for.
    pub user: String,
}

/// Revokes an access key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteKey {
    /// The access key id.
    pub access_key: String,
}

/// Access keys of `user`, or all keys when None.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListKeys {
    /// User to filter by.
    pub user: Option<String>,
}

/// Limits an access key to some buckets (None lifts the limit).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LimitKey {
    /// The access key id.
    pub access_key: String,
    /// The buckets it may reach, with their rights.
    pub grants: Option<Vec<BucketGrant>>,
}

/// Lets anonymous callers read a bucket's objects and list it, or not.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketPublicRead {
    /// Bucket name.
    pub name: String,
    /// On or off.
    pub public_read: bool,
}

/// The cluster overview: datanodes, counts, pending deletions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetClusterStatus;

/// The credential of a datanode or a gateway, at its current generation; with
/// `rotate`, at a new generation, after which every older one is refused.
/// Answers the credential's text.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MintCredential {
    /// Whom it is for.
    pub principal: Principal,
    /// Whether to refuse the holder's earlier credentials from now on.
    pub rotate: bool,
}
