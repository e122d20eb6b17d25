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
    /// Too many replicas or cells failed to serve or store the data.
    #[error("data unavailable: {0}")]
    Unavailable(String),
    /// The stream was closed.
    #[error("stream closed")]
    Closed,
    /// Meta refused or failed.
    #[error(transparent)]
    Meta(#[from] MetaError),
}
