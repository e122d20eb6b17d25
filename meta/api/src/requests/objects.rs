//! Requests about committed objects.

use crate::naming::VersionRef;
use crate::records::{Grant, ObjectRecord, Retention, VersionStamp, WriteCondition};
use proto::ObjectId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Makes `record` the visible object at (bucket, key) atomically. Without
/// versioning the blocks of an object it replaces are queued for deletion;
/// with versioning the object it replaces stays as an older version (and a
/// suspended bucket's null version is replaced). Answers the version made.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommitObject {
    /// The object to commit.
    pub record: ObjectRecord,
    /// Checked inside the commit transaction; PreconditionFailed (or NoSuchKey
    /// for `EtagMatches` on a missing key) when it does not hold.
    #[serde(default)]
    pub condition: Option<WriteCondition>,
}

/// The visible object at (bucket, key), or the version named, if any
/// (shared: the record is read-only, and the same `Arc` answers while the
/// object is unchanged). A delete marker is the error `DeleteMarker`; a
/// named version that does not exist, `NoSuchVersion`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetObject {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// The version asked for; None: the latest.
    #[serde(default)]
    pub version: Option<VersionRef>,
}

/// Deletes as S3's DeleteObject does: without a version, removes the object
/// (no versioning) or puts a delete marker on top (versioning); with one,
/// removes that version for good. Blocks no version uses any more are
/// queued for deletion. No error when there is nothing to delete.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteObject {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// The version to remove; None: the key as a whole.
    #[serde(default)]
    pub version: Option<VersionRef>,
    /// The caller may remove a version under GOVERNANCE retention.
    #[serde(default)]
    pub bypass_governance: bool,
    /// Who owns a delete marker this makes (the caller), when not the
    /// bucket owner.
    #[serde(default)]
    pub marker_owner: Option<String>,
}

/// Changes the object lock of one version in place, as S3 allows: a
/// retention may be lengthened, and shortened or removed only in GOVERNANCE
/// mode with `bypass_governance`; a legal hold may change at any time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetObjectLock {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// The version; None: the latest.
    pub version: Option<VersionRef>,
    /// What changes.
    pub change: LockChange,
    /// The caller may shorten or remove a GOVERNANCE retention.
    pub bypass_governance: bool,
}

/// One object lock setting of a version and its new value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockChange {
    /// PutObjectRetention (None: remove it).
    Retention(Option<Retention>),
    /// PutObjectLegalHold.
    LegalHold(bool),
}

/// What a DeleteObject did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    /// The object removed for good, if one was.
    pub removed: Option<ObjectRecord>,
    /// The delete marker made, or the version removed (a delete marker when
    /// `delete_marker` is set); None when nothing versioned happened.
    pub version: Option<VersionStamp>,
}

/// Replaces the tags and the ACL of one version in place: no new version is
/// made, and its object lock is left as it is. PreconditionFailed when the
/// version is no longer `id`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UpdateObject {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// The version as it was read.
    pub id: ObjectId,
    /// Its sequence number (`VersionStamp::seq`), to find it among the
    /// older versions.
    pub seq: u64,
    /// Its new tags.
    pub tags: BTreeMap<String, String>,
    /// Its new ACL.
    pub acl: Option<Vec<Grant>>,
}

/// One page of a bucket's versions and delete markers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListObjectVersions {
    /// Bucket name.
    pub bucket: String,
    /// Only keys starting with this.
    pub prefix: String,
    /// Start after this key (all of its versions, when no version marker).
    pub key_marker: Option<String>,
    /// With `key_marker`: start after this version of it.
    pub version_marker: Option<VersionRef>,
    /// Roll keys up to common prefixes at this delimiter.
    pub delimiter: Option<String>,
    /// Most entries to return.
    pub max_keys: u32,
}

/// One page of a bucket's objects.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListObjects {
    /// Bucket name.
    pub bucket: String,
    /// Only keys starting with this.
    pub prefix: String,
    /// Start strictly after this key.
    pub start_after: Option<String>,
    /// Roll keys up to common prefixes at this delimiter.
    pub delimiter: Option<String>,
    /// Most entries to return.
    pub max_keys: u32,
}
