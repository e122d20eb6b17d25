//! The metadata API: one request enum, one response enum, one error enum.
//! `MetaService::handle` serves it in-process; the RPC server carries the same
//! values over TCP, so a gateway or datanode cannot tell which one it talks to.

use super::types::*;
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
        access_key: String,
    },
    GetUser {
        name: String,
    },
    CreateBucket {
        name: String,
        owner: String,
        replication: Option<ReplicationConfig>,
    },
    GetBucket {
        name: String,
    },
    /// Fails with BucketNotEmpty while objects or uploads remain.
    DeleteBucket {
        name: String,
    },
    /// Buckets of `owner`, or every bucket when None.
    ListBuckets {
        owner: Option<String>,
    },
    /// The config new objects get when the request names none: the bucket's
    /// default, else the cluster default for the live datanodes.
    DefaultReplication {
        bucket: String,
    },
    /// Picks `config.width()` distinct healthy datanodes with free space, none
    /// of `exclude`, under a fresh block id.
    AllocateBlock {
        config: ReplicationConfig,
        exclude: Vec<DatanodeId>,
    },
    /// Makes `record` the visible object at (bucket, key) atomically; the
    /// blocks of an object it replaces are queued for deletion.
    CommitObject {
        record: ObjectRecord,
    },
    GetObject {
        bucket: String,
        key: String,
    },
    /// Removes the object (no error when absent) and queues its blocks for deletion.
    DeleteObject {
        bucket: String,
        key: String,
    },
    ListObjects {
        bucket: String,
        prefix: String,
        /// Start strictly after this key.
        start_after: Option<String>,
        delimiter: Option<String>,
        max_keys: u32,
    },
    /// Block files written for a PUT that did not commit: delete them.
    DiscardBlocks {
        groups: Vec<BlockGroup>,
    },
    CreateUpload {
        record: UploadRecord,
    },
    GetUpload {
        bucket: String,
        key: String,
        upload_id: String,
    },
    /// Stores a part, replacing (and queueing for deletion) an older one of the same number.
    CommitPart {
        part: PartRecord,
    },
    ListParts {
        upload_id: String,
        /// Parts with a number strictly greater than this.
        after_part: u32,
        max_parts: u32,
    },
    /// Checks the named parts (InvalidPart, InvalidPartOrder, EntityTooSmall),
    /// splices their blocks into one object without copying data, commits it,
    /// and frees the parts not named.
    CompleteUpload {
        bucket: String,
        key: String,
        upload_id: String,
        parts: Vec<CompletedPart>,
    },
    AbortUpload {
        bucket: String,
        key: String,
        upload_id: String,
    },
    ListUploads {
        bucket: String,
    },
    /// Administrative operations; refused unless `token` is the admin token.
    Admin {
        token: String,
        op: AdminOp,
    },
}

/// Operations of `tessera admin`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum AdminOp {
    CreateUser {
        name: String,
    },
    DeleteUser {
        name: String,
    },
    ListUsers,
    /// A new access key (and secret) for `user`.
    CreateKey {
        user: String,
    },
    DeleteKey {
        access_key: String,
    },
    ListKeys {
        user: Option<String>,
    },
    CreateBucket {
        name: String,
        owner: String,
        replication: Option<ReplicationConfig>,
    },
    DeleteBucket {
        name: String,
    },
    ListBuckets,
    Status,
}

/// Everything meta can answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MetaResponse {
    Done,
    Deletions(Vec<BlockKey>),
    AccessKey(Option<AccessKeyRecord>),
    User(Option<UserRecord>),
    Bucket(Option<BucketRecord>),
    Buckets(Vec<BucketRecord>),
    Replication(ReplicationConfig),
    Allocated(BlockGroup),
    Object(Option<ObjectRecord>),
    /// The removed object, if there was one.
    Removed(Option<ObjectRecord>),
    Listing(ListPage),
    Upload(Option<UploadRecord>),
    Parts {
        parts: Vec<PartRecord>,
        is_truncated: bool,
    },
    Uploads(Vec<UploadRecord>),
    Users(Vec<UserRecord>),
    Keys(Vec<AccessKeyRecord>),
    Key(AccessKeyRecord),
    Status(ClusterStatus),
}

/// Why meta refused or failed a request. Carried over the wire as is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MetaError {
    #[error("no such bucket {0}")]
    NoSuchBucket(String),
    #[error("bucket {0} already exists")]
    BucketAlreadyExists(String),
    #[error("bucket {0} already exists and is yours")]
    BucketAlreadyOwnedByYou(String),
    #[error("bucket {0} is not empty")]
    BucketNotEmpty(String),
    #[error("no such key {0}")]
    NoSuchKey(String),
    #[error("no such upload {0}")]
    NoSuchUpload(String),
    #[error("part {0} was not uploaded or its ETag does not match")]
    InvalidPart(u32),
    #[error("parts must be listed in ascending order")]
    InvalidPartOrder,
    #[error("part {0} is smaller than the 5 MiB minimum")]
    EntityTooSmall(u32),
    #[error("need {needed} healthy datanodes with free space, have {available}")]
    NotEnoughDatanodes { needed: usize, available: usize },
    #[error("no such user {0}")]
    NoSuchUser(String),
    #[error("user {0} already exists")]
    UserExists(String),
    #[error("user {0} still owns buckets")]
    UserHasBuckets(String),
    #[error("no such access key {0}")]
    NoSuchAccessKey(String),
    #[error("admin token missing or wrong")]
    Unauthorized,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("metadata store: {0}")]
    Store(String),
    #[error("metadata service unreachable: {0}")]
    Transport(String),
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
    Local(Arc<super::service::MetaService>),
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

    pub async fn get_access_key(
        &self,
        access_key: &str,
    ) -> Result<Option<AccessKeyRecord>, MetaError> {
        let req = MetaRequest::GetAccessKey {
            access_key: access_key.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::AccessKey(k) => k)
    }

    pub async fn get_user(&self, name: &str) -> Result<Option<UserRecord>, MetaError> {
        let req = MetaRequest::GetUser {
            name: name.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::User(u) => u)
    }

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

    pub async fn get_bucket(&self, name: &str) -> Result<Option<BucketRecord>, MetaError> {
        let req = MetaRequest::GetBucket {
            name: name.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Bucket(b) => b)
    }

    pub async fn delete_bucket(&self, name: &str) -> Result<(), MetaError> {
        let req = MetaRequest::DeleteBucket {
            name: name.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Done => ())
    }

    pub async fn list_buckets(&self, owner: Option<&str>) -> Result<Vec<BucketRecord>, MetaError> {
        let req = MetaRequest::ListBuckets {
            owner: owner.map(str::to_string),
        };
        expect!(self.call(req).await?, MetaResponse::Buckets(b) => b)
    }

    pub async fn default_replication(&self, bucket: &str) -> Result<ReplicationConfig, MetaError> {
        let req = MetaRequest::DefaultReplication {
            bucket: bucket.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Replication(r) => r)
    }

    pub async fn allocate_block(
        &self,
        config: ReplicationConfig,
        exclude: Vec<DatanodeId>,
    ) -> Result<BlockGroup, MetaError> {
        let req = MetaRequest::AllocateBlock { config, exclude };
        expect!(self.call(req).await?, MetaResponse::Allocated(g) => g)
    }

    pub async fn commit_object(&self, record: ObjectRecord) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::CommitObject { record }).await?, MetaResponse::Done => ())
    }

    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<ObjectRecord>, MetaError> {
        let req = MetaRequest::GetObject {
            bucket: bucket.to_string(),
            key: key.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Object(o) => o)
    }

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

    pub async fn discard_blocks(&self, groups: Vec<BlockGroup>) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::DiscardBlocks { groups }).await?, MetaResponse::Done => ())
    }

    pub async fn create_upload(&self, record: UploadRecord) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::CreateUpload { record }).await?, MetaResponse::Done => ())
    }

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

    pub async fn commit_part(&self, part: PartRecord) -> Result<(), MetaError> {
        expect!(self.call(MetaRequest::CommitPart { part }).await?, MetaResponse::Done => ())
    }

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

    pub async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: Vec<CompletedPart>,
    ) -> Result<ObjectRecord, MetaError> {
        let req = MetaRequest::CompleteUpload {
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
            parts,
        };
        match self.call(req).await? {
            MetaResponse::Object(Some(o)) => Ok(o),
            other => Err(unexpected(other)),
        }
    }

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

    pub async fn list_uploads(&self, bucket: &str) -> Result<Vec<UploadRecord>, MetaError> {
        let req = MetaRequest::ListUploads {
            bucket: bucket.to_string(),
        };
        expect!(self.call(req).await?, MetaResponse::Uploads(u) => u)
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
