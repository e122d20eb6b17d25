//! Requests about buckets and the credentials that reach them.

use crate::lifecycle::LifecycleRule;
use crate::records::{
    BucketEncryption, CorsRule, Grant, ObjectLock, ObjectOwnership, PublicAccessBlock, Versioning,
};
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
    /// Its ACL, object ownership and public access block.
    #[serde(default)]
    pub access: NewBucketAccess,
    /// Object lock enabled (which enables versioning).
    #[serde(default)]
    pub object_lock: bool,
}

/// The access settings a bucket is created with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewBucketAccess {
    /// The ACL; None: `private`.
    pub acl: Option<Vec<Grant>>,
    /// Who owns the objects written into it.
    pub ownership: ObjectOwnership,
    /// The public access block; None: none.
    pub public_access_block: Option<PublicAccessBlock>,
}

impl Default for NewBucketAccess {
    /// As S3 creates buckets since April 2023: ACLs off (BucketOwnerEnforced)
    /// and every public access block flag on.
    fn default() -> Self {
        Self {
            acl: None,
            ownership: ObjectOwnership::BucketOwnerEnforced,
            public_access_block: Some(PublicAccessBlock::ALL),
        }
    }
}

/// Enables or suspends a bucket's versioning.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketVersioning {
    /// Bucket name.
    pub bucket: String,
    /// The new state.
    pub versioning: Versioning,
}

/// Sets a bucket's object lock configuration (enabling object lock, which
/// needs versioning enabled).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetObjectLockConfiguration {
    /// Bucket name.
    pub bucket: String,
    /// The configuration.
    pub lock: ObjectLock,
}

/// Changes one access setting of a bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketAccess {
    /// Bucket name.
    pub bucket: String,
    /// The setting and its new value.
    pub change: BucketAccessChange,
}

/// One access setting of a bucket and its new value (None: removed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BucketAccessChange {
    /// PutBucketAcl.
    Acl(Option<Vec<Grant>>),
    /// Put/DeleteBucketOwnershipControls.
    Ownership(Option<ObjectOwnership>),
    /// Put/DeletePublicAccessBlock.
    PublicAccessBlock(Option<PublicAccessBlock>),
    /// Put/DeleteBucketPolicy (the JSON as put).
    Policy(Option<String>),
}

/// A bucket by name (shared: the record is read-only).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetBucket {
    /// Bucket name.
    pub name: String,
}

/// Deletes a bucket and aborts its multipart uploads in progress; fails with
/// BucketNotEmpty while objects, versions or delete markers remain.
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

/// Replaces a bucket's lifecycle rules (none: DeleteBucketLifecycle).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketLifecycle {
    /// Bucket name.
    pub bucket: String,
    /// The new rules.
    pub rules: Vec<LifecycleRule>,
}

/// Replaces a bucket's default encryption (None: DeleteBucketEncryption).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBucketEncryption {
    /// Bucket name.
    pub bucket: String,
    /// The new default.
    pub encryption: Option<BucketEncryption>,
}

/// Makes a key of the built-in key service (`tessera admin kms key create`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateKmsKey {
    /// Its alias, without `alias/`.
    pub alias: String,
}

/// Every key of the built-in key service.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListKmsKeys;

/// The id of the KMS key a write names (an id, a key ARN, `alias/NAME` or
/// an alias ARN), or of the default key (`aws/s3`, made at its first use)
/// when it names none; KmsKeyNotFound otherwise.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResolveKmsKey {
    /// The key as the write names it.
    pub key: Option<String>,
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
