//! Records kept by the metadata service. They travel inside `MetaRequest` and
//! `MetaResponse`, so they are plain serde data with no behaviour of their own.

use crate::ids::{BlockId, BlockKey, DatanodeId, ObjectId};
use crate::layout::ReplicationConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Milliseconds since the Unix epoch; every timestamp in meta uses it.
pub type UnixMillis = i64;

/// Where one internal block (EC) or one replica of a block lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLocation {
    /// Internal block index within the group (0 for replicas).
    pub index: u8,
    pub datanode: DatanodeId,
    /// The datanode's address when the record was read (meta refreshes it from
    /// the registry on every lookup, so a restarted datanode on a new port is found).
    pub addr: String,
}

/// One block group (EC) or replicated block of an object, in object order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockGroup {
    pub block: BlockId,
    /// Bytes of object data in this group (its real length; padding not counted).
    pub length: u64,
    pub replicas: Vec<ReplicaLocation>,
}

impl BlockGroup {
    /// Every block file of this group, with the datanode that holds it.
    pub fn block_keys(&self) -> impl Iterator<Item = (BlockKey, &ReplicaLocation)> {
        self.replicas
            .iter()
            .map(|r| (BlockKey::new(self.block, r.index), r))
    }
}

/// Size and ETag of one part of a completed multipart object, kept for
/// GetObject?partNumber and for ListParts after completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartSummary {
    pub number: u32,
    pub size: u64,
    /// Hex MD5 of the part, without quotes.
    pub etag: String,
}

/// A committed object: visible to readers from the moment it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    pub id: ObjectId,
    pub bucket: String,
    pub key: String,
    pub size: u64,
    /// Hex MD5 of the body, or `md5(part md5s)-N` for multipart; without quotes.
    pub etag: String,
    pub content_type: Option<String>,
    /// Other standard headers kept as sent (Content-Encoding, Cache-Control, ...),
    /// by lower-case header name.
    pub headers: BTreeMap<String, String>,
    /// `x-amz-meta-*` values, by lower-case name without the prefix.
    pub user_metadata: BTreeMap<String, String>,
    pub created: UnixMillis,
    pub replication: ReplicationConfig,
    pub groups: Vec<BlockGroup>,
    /// Parts in order for a multipart object; empty for a single PUT.
    pub parts: Vec<PartSummary>,
}

/// One entry of an object listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSummary {
    pub key: String,
    pub size: u64,
    pub etag: String,
    pub created: UnixMillis,
}

/// A page of a listing, in UTF-8 byte order of keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPage {
    pub objects: Vec<ObjectSummary>,
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub common_prefixes: Vec<String>,
    pub is_truncated: bool,
    /// When truncated: the last key or common prefix returned; the next page
    /// starts strictly after it.
    pub next_marker: Option<String>,
}

/// A bucket and who owns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    pub name: String,
    /// User name of the owner.
    pub owner: String,
    pub created: UnixMillis,
    /// Default replication for new objects; None means "the cluster default".
    pub replication: Option<ReplicationConfig>,
}

/// A multipart upload in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    pub upload_id: String,
    pub bucket: String,
    pub key: String,
    pub owner: String,
    pub created: UnixMillis,
    pub content_type: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub user_metadata: BTreeMap<String, String>,
    pub replication: ReplicationConfig,
}

/// One uploaded part; a re-upload of the same number replaces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    pub upload_id: String,
    pub number: u32,
    pub size: u64,
    /// Hex MD5 of the part, without quotes.
    pub etag: String,
    pub created: UnixMillis,
    pub groups: Vec<BlockGroup>,
}

/// A part named in CompleteMultipartUpload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedPart {
    pub number: u32,
    /// The ETag the client sent, with or without quotes.
    pub etag: String,
}

/// A user: owns buckets and access keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    pub name: String,
    pub created: UnixMillis,
    /// The root user may reach every bucket.
    pub is_root: bool,
}

/// An S3 access key and its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKeyRecord {
    pub access_key: String,
    pub secret_key: String,
    pub user: String,
    pub created: UnixMillis,
}

/// Liveness of a datanode as meta sees it from heartbeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DatanodeState {
    /// Heartbeats arrive; gets new blocks.
    Healthy,
    /// Missed heartbeats for the stale interval; gets no new blocks.
    Stale,
    /// Missed heartbeats for the dead interval; gets no new blocks.
    Dead,
}

/// A registered datanode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatanodeRecord {
    pub id: DatanodeId,
    /// TCP address clients use for the block protocol.
    pub addr: String,
    /// Unix socket for short-circuit reads, when the datanode offers one.
    pub local_socket: Option<String>,
    pub capacity: u64,
    pub used: u64,
    pub blocks: u64,
    pub last_heartbeat: UnixMillis,
    pub state: DatanodeState,
}

/// What a datanode reports on each heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatanodeReport {
    pub id: DatanodeId,
    pub addr: String,
    pub local_socket: Option<String>,
    pub capacity: u64,
    pub used: u64,
    pub blocks: u64,
    /// Block files deleted since the last heartbeat, acknowledging earlier commands.
    pub deleted: Vec<BlockKey>,
}

/// Cluster overview for `tessera admin status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub datanodes: Vec<DatanodeRecord>,
    pub buckets: u64,
    pub objects: u64,
    pub pending_deletions: u64,
}
