//! Errors of the block store and of the datanode as a whole.

use proto::token::TokenError;
use proto::wire::{ErrorCode, ErrorReply};
use proto::BlockKey;
use std::path::PathBuf;

/// Why a block operation failed; each maps to one wire [`ErrorCode`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No committed (or, for writes and commits, open) block with this key.
    #[error("block {0} not found")]
    NotFound(BlockKey),
    /// A chunk arrived with a CRC that does not match its data; the upload was discarded.
    #[error("block {key}: checksum mismatch in the chunk at offset {offset}")]
    ChecksumMismatch {
        /// The block being written.
        key: BlockKey,
        /// Block offset of the chunk that failed its CRC.
        offset: u64,
    },
    /// A write does not continue the block where the previous one ended.
    #[error("block {key}: write at offset {got}, expected a chunk-aligned write at {expected}")]
    BadOffset {
        /// The block being written.
        key: BlockKey,
        /// Where the next write must start.
        expected: u64,
        /// Where the write actually started.
        got: u64,
    },
    /// A read reaches past the end of the block.
    #[error("block {key}: range at {offset} of {length} bytes ends past the block's {block_length} bytes")]
    OutOfRange {
        /// The block being read.
        key: BlockKey,
        /// Start of the requested range.
        offset: u64,
        /// Length of the requested range.
        length: u64,
        /// The block's committed length.
        block_length: u64,
    },
    /// The request makes no sense in the block's state (bad chunk size,
    /// length mismatch on commit, write to a committed block...).
    #[error("{0}")]
    Invalid(String),
    /// The disk failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done when the disk failed.
        context: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The request carried no block token that allows it.
    #[error("block {key}: {reason}")]
    Denied {
        /// The block asked for.
        key: BlockKey,
        /// What is wrong with the token.
        reason: TokenError,
    },
    /// A file of the store is not what it should be.
    #[error("corrupt store file {}: {reason}", path.display())]
    Corrupt {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
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
            Self::Denied { .. } => ErrorCode::AccessDenied,
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
        /// The address that could not be bound.
        addr: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
}
