//! Errors of the client streams.

use meta_api::MetaError;
use proto::ids::BlockKey;

/// Why a read or write through the client failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting to or talking with a datanode failed.
    #[error("datanode {addr}: {message}")]
    Io {
        /// The datanode's address.
        addr: String,
        /// What went wrong.
        message: String,
    },
    /// A datanode did not answer within the deadline.
    #[error("datanode {addr} timed out")]
    Timeout {
        /// The datanode's address.
        addr: String,
    },
    /// A frame from a datanode was malformed.
    #[error("datanode {addr} protocol error: {message}")]
    Protocol {
        /// The datanode's address.
        addr: String,
        /// What was malformed.
        message: String,
    },
    /// Data failed its CRC32C check.
    #[error("checksum mismatch in {block} at offset {offset}")]
    Checksum {
        /// The block whose data was bad.
        block: BlockKey,
        /// Block offset of the failing chunk.
        offset: u64,
    },
    /// The datanode refused the request.
    #[error("datanode {addr} refused: {message}")]
    Remote {
        /// The datanode's address.
        addr: String,
        /// The datanode's error message.
        message: String,
    },
    /// The datanode answered that it holds no such block file: the file is
    /// gone from there, not merely out of reach.
    #[error("datanode {addr} holds no block file {block}")]
    Missing {
        /// The datanode's address.
        addr: String,
        /// The block file it does not hold.
        block: BlockKey,
    },
    /// Too many replicas or cells failed to serve or store the data.
    #[error("data unavailable: {0}")]
    Unavailable(String),
    /// Too few block files of a group are left to read it: the datanodes
    /// of the others answered that theirs are missing or corrupt, so no
    /// retry will read it (unlike [`ClientError::Unavailable`]).
    #[error("data lost: {0}")]
    Lost(String),
    /// The stream was closed.
    #[error("stream closed")]
    Closed,
    /// Meta refused or failed.
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl ClientError {
    /// Whether the bytes asked for are gone from where this error came
    /// from (missing or corrupt there), rather than out of reach for now.
    pub fn is_gone(&self) -> bool {
        matches!(self, Self::Missing { .. } | Self::Checksum { .. })
    }
}
