//! Why meta refused or failed a request: one enum, carried over the wire as is.

use serde::{Deserialize, Serialize};

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
    /// The version does not exist.
    #[error("no such version {0}")]
    NoSuchVersion(String),
    /// The version asked for, or the latest one, is a delete marker.
    #[error("{key} is a delete marker")]
    DeleteMarker {
        /// Object key.
        key: String,
        /// The marker's version id (None: null).
        version_id: Option<String>,
        /// Whether the request named this version (else it asked for the latest).
        named: bool,
    },
    /// The version is protected by object lock (retention or legal hold).
    #[error("the version is protected by object lock")]
    ObjectLocked,
    /// The bucket's state does not allow the change (suspending versioning
    /// of a bucket with object lock, object lock without versioning).
    #[error("{0}")]
    InvalidBucketState(String),
    /// The bucket has no object lock.
    #[error("the bucket has no object lock configuration")]
    NoObjectLock,
    /// The version has no retention or legal hold to show.
    #[error("the version has no object lock configuration")]
    NoSuchObjectLockConfiguration,
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
    /// No key of the key service answers to this id, ARN or alias.
    #[error("no KMS key {0}")]
    KmsKeyNotFound(String),
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
    /// The connection's principal may not send this request (an admin
    /// request with a gateway's credential, a datanode speaking for another).
    #[error("this connection's credential may not send this request (admin requests need the admin token)")]
    Unauthorized,
    /// The connection presented no valid credential or admin token.
    #[error("meta refused the connection: {0}")]
    Unauthenticated(String),
    /// The request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The metadata store failed.
    #[error("metadata store: {0}")]
    Store(String),
    /// Meta's disk is full (or failing): writes are refused until one
    /// succeeds again. This one was refused before it ran, or its commit
    /// was undone when meta opened its database again before the commit's
    /// flush; the database, not this answer, tells which, so it counts as
    /// [`MetaError::may_have_applied`].
    #[error("metadata store out of space, writes refused until space is freed: {0}")]
    OutOfSpace(String),
    /// This member of a meta group is not its leader (or knows of none yet):
    /// the request is to go to the leader, whose address it names when known.
    /// Nothing was applied.
    #[error("this meta is not the group's leader (leader: {})", leader.as_deref().unwrap_or("unknown"))]
    NotLeader {
        /// The leader's meta address, when this member knows it.
        leader: Option<String>,
    },
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
    /// landed: the orphan cleaner frees them if it did not); every other
    /// error is a definite refusal.
    pub fn may_have_applied(&self) -> bool {
        matches!(
            self,
            Self::Transport(_) | Self::Store(_) | Self::Protocol(_) | Self::OutOfSpace(_)
        )
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
        // A full disk's refusal may be a commit a reopen undid.
        assert!(MetaError::OutOfSpace("full".into()).may_have_applied());
        // Refusals are definite: nothing was stored, so the blocks can go.
        assert!(!MetaError::NoSuchBucket("b".into()).may_have_applied());
        assert!(!MetaError::NoSuchUpload("u".into()).may_have_applied());
        assert!(!MetaError::InvalidRequest("x".into()).may_have_applied());
    }
}
