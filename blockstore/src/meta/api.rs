//! The metadata API: one request enum, one response enum, one error enum.
//! `MetaService::handle` serves it in-process; the RPC server carries the same
//! values over TCP, so a gateway or datanode cannot tell which one it talks to.

use super::types::*;
use super::upload_listing::{UploadPage, UploadQuery};
use crate::ids::{BlockKey, DatanodeId};
use crate::layout::ReplicationConfig;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Everything meta can be asked.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MetaRequest {
    /// A datanode starts or heartbeats: registers it, refreshes capacity, and
    /// answers with block files it must delete.
    Heartbeat(DatanodeReport),
    /// Secret and owner of an access key, for SigV4 checks.
    GetAccessKey {
        /// The access key id to look up.
        access_key: String,
    },
    /// A user by name.
    GetUser {
        /// User name.
        name: String,
    },
    /// Creates a bucket owned by `owner`.
    CreateBucket {
        /// Bucket name.
        name: String,
        /// User who will own it.
        owner: String,
        /// Default replication for its objects; None for the cluster default.
        replication: Option<ReplicationConfig>,
    },
    /// A bucket by name.
    GetBucket {
        /// Bucket name.
        name: String,
    },
    /// Fails with BucketNotEmpty while objects or uploads remain.
    DeleteBucket {
        /// Bucket name.
        name: String,
    },
    /// Buckets of `owner`, or every bucket when None.
    ListBuckets {
        /// Owner to filter by.
        owner: Option<String>,
    },
    /// Replaces the bucket's CORS rules (none: DeleteBucketCors).
    SetBucketCors {
        /// Bucket name.
        bucket: String,
        /// The new rules.
        rules: Vec<CorsRule>,
    },
    /// The config new objects get when the request names none: the bucket's
    /// default, else the cluster default for the live datanodes.
    DefaultReplication {
        /// Bucket the object goes into.
        bucket: String,
    },
    /// Picks `config.width()` distinct healthy datanodes with free space, none
    /// of `exclude`, under a fresh block id.
    AllocateBlock {
        /// How the block group is protected, which sets how many datanodes it needs.
        config: ReplicationConfig,
        /// Datanodes not to use (e.g. ones that just failed).
        exclude: Vec<DatanodeId>,
    },
    /// Makes `record` the visible object at (bucket, key) atomically; the
    /// blocks of an object it replaces are queued for deletion.
    CommitObject {
        /// The object to commit.
        record: ObjectRecord,
        /// Checked inside the commit transaction; PreconditionFailed (or
        /// NoSuchKey for `EtagMatches` on a missing key) when it does not hold.
        #[serde(default)]
        condition: Option<WriteCondition>,
    },
    /// The visible object at (bucket, key), if any.
    GetObject {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// Removes the object (no error when absent) and queues its blocks for deletion.
    DeleteObject {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// One page of a bucket's objects.
    ListObjects {
        /// Bucket name.
        bucket: String,
        /// Only keys starting with this.
        prefix: String,
        /// Start strictly after this key.
        start_after: Option<String>,
        /// Roll keys up to common prefixes at this delimiter.
        delimiter: Option<String>,
        /// Most entries to return.
        max_keys: u32,
    },
    /// Block files written for a PUT that did not commit: delete them.
    DiscardBlocks {
        /// The groups to delete.
        groups: Vec<BlockGroup>,
    },
    /// Starts a multipart upload.
    CreateUpload {
        /// The new upload.
        record: UploadRecord,
    },
    /// An upload in progress, checked against its bucket and key.
    GetUpload {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
    },
    /// Stores a part, replacing (and queueing for deletion) an older one of the same number.
    CommitPart {
        /// The part to store.
        part: PartRecord,
    },
    /// One page of an upload's parts, in number order.
    ListParts {
        /// Upload id.
        upload_id: String,
        /// Parts with a number strictly greater than this.
        after_part: u32,
        /// Most parts to return.
        max_parts: u32,
    },
    /// Checks the named parts (InvalidPart, InvalidPartOrder, EntityTooSmall),
    /// splices their blocks into one object without copying data, commits it,
    /// and frees the parts not named.
    CompleteUpload {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
        /// The parts to join, in order.
        parts: Vec<CompletedPart>,
        /// Checked against the key's current object inside the transaction.
        #[serde(default)]
        condition: Option<WriteCondition>,
    },
    /// Drops an upload and queues its parts' blocks for deletion.
    AbortUpload {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
    },
    /// One page of the uploads in progress in a bucket.
    ListUploads {
        /// Bucket name.
        bucket: String,
        /// Prefix, markers, delimiter and page size.
        query: UploadQuery,
    },
    /// A client read bad data (a checksum mismatch) from one block file: meta
    /// records it so the replica can be repaired or dropped.
    ReportBadReplica {
        /// The block file that failed its checksum.
        block: BlockKey,
        /// The datanode that served it.
        datanode: DatanodeId,
        /// What the client saw (error text, address).
        reason: String,
    },
    /// Replaces a bucket's tags (an empty map deletes them).
    SetBucketTags {
        /// Bucket name.
        name: String,
        /// The new tags.
        tags: std::collections::BTreeMap<String, String>,
    },
    /// Part of a datanode's block report: committed block files it holds
    /// and their ages. Meta queues for deletion the ones nothing references
    /// that were allocated longer ago than the orphan grace period.
    BlockReport {
        /// The reporting datanode.
        datanode: DatanodeId,
        /// One piece of its block list (at most `MAX_REPORTED_BLOCKS`).
        blocks: Vec<super::block_reports::ReportedBlock>,
    },
    /// Administrative operations; refused unless `token` is the admin token.
    Admin {
        /// Admin token presented by the caller.
        token: String,
        /// The operation to run.
        op: AdminOp,
    },
}

/// Operations of `tessera admin`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum AdminOp {
    /// Creates a user.
    CreateUser {
        /// User name.
        name: String,
    },
    /// Deletes a user that owns no buckets.
    DeleteUser {
        /// User name.
        name: String,
    },
    /// Every user.
    ListUsers,
    /// A new access key (and secret) for `user`.
    CreateKey {
        /// User the key is for.
        user: String,
    },
    /// Revokes an access key.
    DeleteKey {
        /// The access key id.
        access_key: String,
    },
    /// Access keys of `user`, or all keys when None.
    ListKeys {
        /// User to filter by.
        user: Option<String>,
    },
    /// Creates a bucket for `owner`.
    CreateBucket {
        /// Bucket name.
        name: String,
        /// User who will own it.
        owner: String,
        /// Default replication for its objects; None for the cluster default.
        replication: Option<ReplicationConfig>,
    },
    /// Deletes an empty bucket.
    DeleteBucket {
        /// Bucket name.
        name: String,
    },
    /// Every bucket.
    ListBuckets,
    /// Limits an access key to some buckets (None lifts the limit).
    LimitKey {
        /// The access key id.
        access_key: String,
        /// The buckets it may reach, with their rights.
        grants: Option<Vec<BucketGrant>>,
    },
    /// Lets anonymous callers read a bucket's objects and list it, or not.
    SetBucketPublicRead {
        /// Bucket name.
        name: String,
        /// On or off.
        public_read: bool,
    },
    /// Cluster overview.
    Status,
}

/// Everything meta can answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MetaResponse {
    /// Success with nothing to return.
    Done,
    /// Block files the heartbeating datanode must delete.
    Deletions(Vec<BlockKey>),
    /// The access key, if it exists.
    AccessKey(Option<AccessKeyRecord>),
    /// The user, if it exists.
    User(Option<UserRecord>),
    /// The bucket, if it exists.
    Bucket(Option<Arc<BucketRecord>>),
    /// A list of buckets.
    Buckets(Vec<BucketRecord>),
    /// The default replication asked for.
    Replication(ReplicationConfig),
    /// A freshly allocated block group.
    Allocated(BlockGroup),
    /// The object, if it exists.
    Object(Option<Arc<ObjectRecord>>),
    /// The removed object, if there was one.
    Removed(Option<ObjectRecord>),
    /// A page of objects.
    Listing(ListPage),
    /// The upload, if it exists.
    Upload(Option<UploadRecord>),
    /// A page of parts.
    Parts {
        /// Parts on this page, in number order.
        parts: Vec<PartRecord>,
        /// Whether more parts follow.
        is_truncated: bool,
    },
    /// A page of uploads in progress.
    Uploads(UploadPage),
    /// A list of users.
    Users(Vec<UserRecord>),
    /// A list of access keys.
    Keys(Vec<AccessKeyRecord>),
    /// A newly created access key.
    Key(AccessKeyRecord),
    /// The cluster overview.
    Status(ClusterStatus),
    /// Block files of a block report queued for deletion as orphans.
    OrphansQueued(u64),
}

/// Why meta refused or failed a request. Carried over the wire as is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MetaError {
    /// The bucket does not exist.
    #[error("no such bucket {0}")]
    NoSuchBucket(String),
    /// Another user owns a bucket of this name.
    #[error("bucket {0} already exists")]
    BucketAlreadyExists(String),
    /// The caller already owns this bucket.
    #[error("bucket {0} already exists and is yours")]
    BucketAlreadyOwnedByYou(String),
    /// The bucket still holds objects or uploads.
    #[error("bucket {0} is not empty")]
    BucketNotEmpty(String),
    /// The object does not exist.
    #[error("no such key {0}")]
    NoSuchKey(String),
    /// The upload does not exist or belongs elsewhere.
    #[error("no such upload {0}")]
    NoSuchUpload(String),
    /// A named part is missing or its ETag differs.
    #[error("part {0} was not uploaded or its ETag does not match")]
    InvalidPart(u32),
    /// Parts are not listed in ascending order.
    #[error("parts must be listed in ascending order")]
    InvalidPartOrder,
    /// A conditional write's condition did not hold.
    #[error("the write's precondition does not hold")]
    PreconditionFailed,
    /// A part other than the last is below the minimum size.
    #[error("part {0} is smaller than the 5 MiB minimum")]
    EntityTooSmall(u32),
    /// Too few healthy datanodes with free space to place a block group.
    #[error("need {needed} healthy datanodes with free space, have {available}")]
    NotEnoughDatanodes {
        /// Datanodes the block group needs.
        needed: usize,
        /// Datanodes that qualify.
        available: usize,
    },
    /// The user does not exist.
    #[error("no such user {0}")]
    NoSuchUser(String),
    /// A user of this name already exists.
    #[error("user {0} already exists")]
    UserExists(String),
    /// The user still owns buckets.
    #[error("user {0} still owns buckets")]
    UserHasBuckets(String),
    /// The access key does not exist.
    #[error("no such access key {0}")]
    NoSuchAccessKey(String),
    /// The admin token is missing or wrong.
    #[error("admin token missing or wrong")]
    Unauthorized,
    /// The connection did not present the cluster token (or presented a wrong one).
    #[error("meta refused the connection: {0}")]
    Unauthenticated(String),
    /// The request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The metadata store failed.
    #[error("metadata store: {0}")]
    Store(String),
    /// Meta could not be reached.
    #[error("metadata service unreachable: {0}")]
    Transport(String),
    /// Meta answered with something unexpected.
    #[error("metadata protocol: {0}")]
    Protocol(String),
}

impl MetaError {
    /// True when the request may have been applied although it failed: the
    /// answer was lost in transit or the store failed mid-way. Callers must not
    /// undo such a request (e.g. discard the blocks of a commit that may have
    /// landed); every other error is a definite refusal.
    pub fn may_have_applied(&self) -> bool {
        matches!(
            self,
            Self::Transport(_) | Self::Store(_) | Self::Protocol(_)
        )
    }
}

/// A handle on meta, in-process or remote; cheap to clone.
#[derive(Clone)]
pub enum MetaClient {
    /// Meta running in this process.
    Local(Arc<super::service::MetaService>),
    /// Meta reached over TCP.
    Remote(Arc<super::rpc::RemoteMeta>),
}

fn unexpected(resp: MetaResponse) -> MetaError {
    MetaError::Protocol(format!("unexpected response {resp:?}"))
}

macro_rules! expect {
    ($resp:expr, $pat:pat => $out:expr) => {
        match $resp {
            $pat => Ok($out),
            other => Err(unexpected(other)),
        }
    };
}

impl MetaClient {
    /// Sends one request and waits for its answer.
    pub async fn call(&self, request: MetaRequest) -> Result<MetaResponse, MetaError> {
        match self {
            Self::Local(service) => service.handle(request).await,
            Self::Remote(remote) => remote.call(request).await,
        }
    }

    /// Registers or refreshes a datanode; returns block files to delete.
    pub async fn heartbeat(&self, report: DatanodeReport) -> Result<Vec<BlockKey>, MetaError> {
        expect!(self.call(MetaRequest::Heartbeat(report)).await?, MetaResponse::Deletions(d) => d)
    }

    /// Secret and owner of an access key, for SigV4 checks.
    pub async fn get_access_key(
        &self,
        access_key: &str,
    ) -> Result<Option<AccessKeyRecord>, MetaError> {
        let req = MetaRequest::GetAccessKey {
            access_key: access_key.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::AccessKey(k) => k)
    }

    /// A user by name.
    pub async fn get_user(&self, name: &str) -> Result<Option<UserRecord>, MetaError> {
        let req = MetaRequest::GetUser {
            name: name.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::User(u) => u)
    }

    /// Creates a bucket owned by `owner`.
    pub async fn create_bucket(
        &self,
        name: &str,
        owner: &str,
        replication: Option<ReplicationConfig>,
    ) -> Result<(), MetaError> {
        let req = MetaRequest::CreateBucket {
            name: name.to_string(),
            owner: owner.to_string(),
            replication,
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// A bucket by name (shared: the record is read-only).
    pub async fn get_bucket(&self, name: &str) -> Result<Option<Arc<BucketRecord>>, MetaError> {
        let req = MetaRequest::GetBucket {
            name: name.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Bucket(b) => b)
    }

    /// Deletes an empty bucket.
    pub async fn delete_bucket(&self, name: &str) -> Result<(), MetaError> {
        let req = MetaRequest::DeleteBucket {
            name: name.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// Buckets of `owner`, or every bucket when None.
    pub async fn list_buckets(&self, owner: Option<&str>) -> Result<Vec<BucketRecord>, MetaError> {
        let req = MetaRequest::ListBuckets {
            owner: owner.map(str::to_string),
        };
        expect!(self.call(req).await?, MetaResponse::Buckets(b) => b)
    }

    /// Replaces the CORS rules of `bucket`; an empty list removes them.
    pub async fn set_bucket_cors(
        &self,
        bucket: &str,
        rules: Vec<CorsRule>,
    ) -> Result<(), MetaError> {
        let req = MetaRequest::SetBucketCors {
            bucket: bucket.to_string(),
            rules,
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// The replication new objects in `bucket` get when the request names none.
    pub async fn default_replication(&self, bucket: &str) -> Result<ReplicationConfig, MetaError> {
        let req = MetaRequest::DefaultReplication {
            bucket: bucket.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Replication(r) => r)
    }

    /// Allocates a block group on distinct healthy datanodes, avoiding `exclude`.
    pub async fn allocate_block(
        &self,
        config: ReplicationConfig,
        exclude: Vec<DatanodeId>,
    ) -> Result<BlockGroup, MetaError> {
        let req = MetaRequest::AllocateBlock { config, exclude };
        expect!(self.call(req).await?, MetaResponse::Allocated(g) => g)
    }

    /// Makes `record` the visible object at its key.
    pub async fn commit_object(&self, record: ObjectRecord) -> Result<(), MetaError> {
        self.commit_object_if(record, None).await
    }

    /// Makes `record` the visible object at its key if `condition` holds,
    /// checked in the same transaction as the commit.
    pub async fn commit_object_if(
        &self,
        record: ObjectRecord,
        condition: Option<WriteCondition>,
    ) -> Result<(), MetaError> {
        let req = MetaRequest::CommitObject { record, condition };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// Replaces a bucket's tags.
    pub async fn set_bucket_tags(
        &self,
        name: &str,
        tags: std::collections::BTreeMap<String, String>,
    ) -> Result<(), MetaError> {
        let req = MetaRequest::SetBucketTags {
            name: name.to_string(),
            tags,
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// The visible object at (bucket, key), if any (shared: the record is
    /// read-only, and the same `Arc` answers while the object is unchanged).
    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<Arc<ObjectRecord>>, MetaError> {
        let req = MetaRequest::GetObject {
            bucket: bucket.to_string(),
            key: key.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Object(o) => o)
    }

    /// Removes an object; returns it if it existed.
    pub async fn delete_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<ObjectRecord>, MetaError> {
        let req = MetaRequest::DeleteObject {
            bucket: bucket.to_string(),
            key: key.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Removed(o) => o)
    }

    /// One page of a bucket's objects.
    pub async fn list_objects(
        &self,
        bucket: &str,
        prefix: &str,
        start_after: Option<String>,
        delimiter: Option<String>,
        max_keys: u32,
    ) -> Result<ListPage, MetaError> {
        let req = MetaRequest::ListObjects {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            start_after,
            delimiter,
            max_keys,
        };
        expect!(self.call(req).await?, MetaResponse::Listing(p) => p)
    }

    /// Deletes the blocks of a write that did not commit.
    pub async fn discard_blocks(&self, groups: Vec<BlockGroup>) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::DiscardBlocks { groups }).await?, MetaResponse::Done => ())
    }

    /// Starts a multipart upload.
    pub async fn create_upload(&self, record: UploadRecord) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::CreateUpload { record }).await?, MetaResponse::Done => ())
    }

    /// An upload in progress, checked against its bucket and key.
    pub async fn get_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<Option<UploadRecord>, MetaError> {
        let req = MetaRequest::GetUpload {
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Upload(u) => u)
    }

    /// Stores a part, replacing an older one of the same number.
    pub async fn commit_part(&self, part: PartRecord) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::CommitPart { part }).await?, MetaResponse::Done => ())
    }

    /// One page of an upload's parts, and whether more follow.
    pub async fn list_parts(
        &self,
        upload_id: &str,
        after_part: u32,
        max_parts: u32,
    ) -> Result<(Vec<PartRecord>, bool), MetaError> {
        let req = MetaRequest::ListParts {
            upload_id: upload_id.to_string(),
            after_part,
            max_parts,
        };
        expect!(self.call(req).await?, MetaResponse::Parts { parts, is_truncated } => (parts, is_truncated))
    }

    /// Joins the named parts into one object and commits it.
    pub async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: Vec<CompletedPart>,
    ) -> Result<ObjectRecord, MetaError> {
        self.complete_upload_if(bucket, key, upload_id, parts, None)
            .await
    }

    /// Like `complete_upload`, if `condition` holds for the key's current object.
    pub async fn complete_upload_if(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: Vec<CompletedPart>,
        condition: Option<WriteCondition>,
    ) -> Result<ObjectRecord, MetaError> {
        let req = MetaRequest::CompleteUpload {
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
            parts,
            condition,
        };
        match self.call(req).await? {
            MetaResponse::Object(Some(o)) => Ok(Arc::unwrap_or_clone(o)),
            other => Err(unexpected(other)),
        }
    }

    /// Drops an upload and its parts.
    pub async fn abort_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(), MetaError> {
        let req = MetaRequest::AbortUpload {
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// One page of the uploads in progress in a bucket.
    pub async fn list_uploads(
        &self,
        bucket: &str,
        query: UploadQuery,
    ) -> Result<UploadPage, MetaError> {
        let req = MetaRequest::ListUploads {
            bucket: bucket.to_string(),
            query,
        };
        expect!(self.call(req).await?, MetaResponse::Uploads(u) => u)
    }

    /// Reports a block file that failed its checksum on a read.
    pub async fn report_bad_replica(
        &self,
        block: BlockKey,
        datanode: DatanodeId,
        reason: String,
    ) -> Result<(), MetaError> {
        let req = MetaRequest::ReportBadReplica {
            block,
            datanode,
            reason,
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    /// Sends one piece of a block report; answers how many of its blocks
    /// were queued for deletion as orphans.
    pub async fn block_report(
        &self,
        datanode: DatanodeId,
        blocks: Vec<super::block_reports::ReportedBlock>,
    ) -> Result<u64, MetaError> {
        let req = MetaRequest::BlockReport { datanode, blocks };
        expect!(self.call(req).await?, MetaResponse::OrphansQueued(n) => n)
    }

    /// Runs an admin operation with `token`.
    pub async fn admin(&self, token: &str, op: AdminOp) -> Result<MetaResponse, MetaError> {
        self.call(MetaRequest::Admin {
            token: token.to_string(),
            op,
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::MetaError;

    #[test]
    fn only_lost_answers_may_have_applied() {
        // A commit whose answer was lost may have landed: its blocks must not be discarded.
        assert!(MetaError::Transport("reset".into()).may_have_applied());
        assert!(MetaError::Store("io".into()).may_have_applied());
        assert!(MetaError::Protocol("garbled".into()).may_have_applied());
        // Refusals are definite: nothing was stored, so the blocks can go.
        assert!(!MetaError::NoSuchBucket("b".into()).may_have_applied());
        assert!(!MetaError::NoSuchUpload("u".into()).may_have_applied());
        assert!(!MetaError::InvalidRequest("x".into()).may_have_applied());
    }
}
