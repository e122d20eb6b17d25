//! Errors of the block store and of the datanode as a whole.

use blockstore::protocol::{ErrorCode, ErrorReply};
use blockstore::BlockKey;
use std::path::PathBuf;

/// Why a block operation failed; each maps to one wire [`ErrorCode`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No committed (or, for writes and commits, open) block with this key.
    #[error("block {0} not found")]
    NotFound(BlockKey),
    /// A chunk arrived with a CRC that does not match its data; the upload was discarded.
    #[error("block {key}: checksum mismatch in the chunk at offset {offset}")]
    ChecksumMismatch { key: BlockKey, offset: u64 },
    /// A write does not continue the block where the previous one ended.
    #[error("block {key}: write at offset {got}, expected a chunk-aligned write at {expected}")]
    BadOffset {
        key: BlockKey,
        expected: u64,
        got: u64,
    },
    /// A read reaches past the end of the block.
    #[error("block {key}: range at {offset} of {length} bytes ends past the block's {block_length} bytes")]
    OutOfRange {
        key: BlockKey,
        offset: u64,
        length: u64,
        block_length: u64,
    },
    /// The request makes no sense in the block's state (bad chunk size,
    /// length mismatch on commit, write to a committed block...).
    #[error("{0}")]
    Invalid(String),
    /// The disk failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A file of the store is not what it should be.
    #[error("corrupt store file {}: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
}

impl StoreError {
    /// An I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// The wire code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::ChecksumMismatch { .. } => ErrorCode::ChecksumMismatch,
            Self::BadOffset { .. } => ErrorCode::BadOffset,
            Self::OutOfRange { .. } => ErrorCode::OutOfRange,
            Self::Invalid(_) => ErrorCode::Invalid,
            Self::Io { .. } | Self::Corrupt { .. } => ErrorCode::Io,
        }
    }

    /// The block offset this error names, if any.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Self::ChecksumMismatch { offset, .. } => Some(*offset),
            Self::BadOffset { expected, .. } => Some(*expected),
            Self::OutOfRange { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// The reply telling a client about this error.
    pub fn to_reply(&self) -> ErrorReply {
        ErrorReply {
            code: self.code(),
            offset: self.offset(),
            message: self.to_string(),
        }
    }

    /// Whether this error means the datanode itself is in trouble (logged
    /// loudly) rather than the request being wrong.
    pub fn is_local_failure(&self) -> bool {
        matches!(self, Self::Io { .. } | Self::Corrupt { .. })
    }
}

/// Why a datanode could not start.
#[derive(Debug, thiserror::Error)]
pub enum DatanodeError {
    /// A setting is unusable.
    #[error("invalid datanode configuration: {0}")]
    Config(String),
    /// The block store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The listening socket could not be opened.
    #[error("listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}
