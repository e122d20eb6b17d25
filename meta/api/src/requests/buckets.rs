//! Requests about buckets and the credentials that reach them.

use crate::records::CorsRule;
use proto::ReplicationConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Secret and owner of an access key, for signature checks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetAccessKey {
    /// The access key id to look up.
    pub access_key: String,
}

/// A user by name.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetUser {
    /// User name.
    pub name: String,
}

/// Creates a bucket owned by `owner`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateBucket {
    /// Bucket name.
    pub name: String,
    /// User who will own it.
    pub owner: String,
    /// Default replication for its objects; None for the cluster default.
    pub replication: Option<ReplicationConfig>,
}

/// A bucket by name (shared: the record is read-only).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetBucket {
    /// Bucket name.
    pub name: String,
}

/// Deletes a bucket; fails with BucketNotEmpty while objects or uploads remain.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteBucket {
    /// Bucket name.
    pub name: String,
}

/// Buckets of `owner`, or every bucket when None.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListBuckets {
    /// Owner to filter by.
    pub owner: Option<String>,
}

/// Replaces the bucket's CORS rules (none: DeleteBucketCors).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketCors {
    /// Bucket name.
    pub bucket: String,
    /// The new rules.
    pub rules: Vec<CorsRule>,
}

/// Replaces a bucket's tags (an empty map deletes them).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketTags {
    /// Bucket name.
    pub name: String,
    /// The new tags.
    pub tags: BTreeMap<String, String>,
}

/// The config new objects get when the request names none: the bucket's
/// default, else the cluster default for the live datanodes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DefaultReplication {
    /// Bucket the object goes into.
    pub bucket: String,
}
