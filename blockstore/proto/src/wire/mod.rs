//! The datanode wire protocol: length-prefixed binary frames over TCP.
//!
//! Every frame starts with a fixed [`FRAME_HEADER_LEN`]-byte header (magic,
//! version, kind, flags, request id, header length, payload length) that is
//! read in one small read and checked, sizes included, before anything is
//! allocated. Then comes the message header, a compact big-endian encoding of
//! a [`Request`] or [`Reply`] (after the request's block token, when
//! [`FLAG_TOKEN`] is set), then the raw payload: the data of a write, or
//! the data of a read reply. Payload bytes never sit inside the message header,
//! so a datanode can send a read's data straight from the block file.
//!
//! One connection carries one request at a time: request, reply, next request.

mod frame;
mod io;
pub mod local;
mod message;

pub use frame::{FrameHeader, FrameKind, FLAG_TOKEN};
pub use io::{
    encode_reply_head, encode_request_head, read_frame_header, read_payload_into, read_reply,
    read_request, write_frame, write_reply, write_request, Incoming,
};
pub use message::{ErrorCode, ErrorReply, LocalInfo, ReadData, Reply, Request, WriteChunks};

/// First bytes of every frame.
pub const MAGIC: [u8; 4] = *b"TSDN";
/// The protocol version this code speaks; a frame of another version is refused.
pub const VERSION: u8 = 2;
/// Size of the fixed frame header.
pub const FRAME_HEADER_LEN: usize = 24;
/// Largest message header accepted (a write of the largest payload with the
/// smallest chunk size needs 512 KiB of checksums).
pub const MAX_HEADER_LEN: u32 = 1024 * 1024;
/// Largest payload accepted in one frame; larger writes and reads are split.
pub const MAX_PAYLOAD_LEN: u32 = 64 * 1024 * 1024;

/// Why a frame could not be read, decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The frame does not start with [`MAGIC`]: not our protocol, or the stream lost sync.
    #[error("bad frame magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// The peer speaks a protocol version this code does not.
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// A length field exceeds its limit; refused before allocating.
    #[error("{what} of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Which length field.
        what: &'static str,
        /// Its value.
        len: u64,
        /// The limit it exceeds.
        max: u64,
    },
    /// The stream ended inside a frame.
    #[error("stream ended inside the {0}")]
    Truncated(&'static str),
    /// The frame is structurally wrong (unknown kind or code, bad field values,
    /// inconsistent lengths, trailing bytes).
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The peer closed the connection cleanly where a frame was expected.
    #[error("connection closed by peer")]
    Closed,
    /// Reading or writing the stream failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl ProtocolError {
    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Self::Malformed(message.into())
    }
}
