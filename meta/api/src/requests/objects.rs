//! Requests about committed objects.

use crate::records::{ObjectRecord, WriteCondition};
use serde::{Deserialize, Serialize};

/// Makes `record` the visible object at (bucket, key) atomically; the blocks
/// of an object it replaces are queued for deletion.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommitObject {
    /// The object to commit.
    pub record: ObjectRecord,
    /// Checked inside the commit transaction; PreconditionFailed (or NoSuchKey
    /// for `EtagMatches` on a missing key) when it does not hold.
    #[serde(default)]
    pub condition: Option<WriteCondition>,
}

/// The visible object at (bucket, key), if any (shared: the record is
/// read-only, and the same `Arc` answers while the object is unchanged).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetObject {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
}

/// Removes the object (no error when absent), queues its blocks for deletion
/// and answers it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteObject {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
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
