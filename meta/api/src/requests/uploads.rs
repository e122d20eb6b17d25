//! Requests of multipart uploads.

use crate::records::{CompletedPart, PartRecord, UploadQuery, UploadRecord, WriteCondition};
use serde::{Deserialize, Serialize};

/// Starts a multipart upload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateUpload {
    /// The new upload.
    pub record: UploadRecord,
}

/// An upload in progress, checked against its bucket and key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetUpload {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// Upload id.
    pub upload_id: String,
}

/// Stores a part, replacing (and queueing for deletion) an older one of the
/// same number.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommitPart {
    /// The part to store.
    pub part: PartRecord,
}

/// One page of an upload's parts, in number order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListParts {
    /// Upload id.
    pub upload_id: String,
    /// Parts with a number strictly greater than this.
    pub after_part: u32,
    /// Most parts to return.
    pub max_parts: u32,
}

/// Checks the named parts (InvalidPart, InvalidPartOrder, EntityTooSmall),
/// splices their blocks into one object without copying data, commits it,
/// frees the parts not named, and answers the new object.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompleteUpload {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// Upload id.
    pub upload_id: String,
    /// The parts to join, in order.
    pub parts: Vec<CompletedPart>,
    /// Checked against the key's current object inside the transaction.
    #[serde(default)]
    pub condition: Option<WriteCondition>,
}

/// Drops an upload and queues its parts' blocks for deletion.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AbortUpload {
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// Upload id.
    pub upload_id: String,
}

/// One page of the uploads in progress in a bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListUploads {
    /// Bucket name.
    pub bucket: String,
    /// Prefix, markers, delimiter and page size.
    pub query: UploadQuery,
}
