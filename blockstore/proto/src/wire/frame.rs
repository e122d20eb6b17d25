//! The fixed frame header.
//!
//! ```text
//! offset size field
//!      0    4 magic "TSDN"
//!      4    1 version (2)
//!      5    1 kind (request op or reply kind)
//!      6    2 flags (FLAG_TOKEN, on requests only; other bits must be zero)
//!      8    8 request id (a reply echoes its request's)
//!     16    4 message header length
//!     20    4 payload length
//! ```
//! All integers big-endian.

use super::{ProtocolError, FRAME_HEADER_LEN, MAGIC, MAX_HEADER_LEN, MAX_PAYLOAD_LEN, VERSION};

/// Flag: the message header starts with a [`crate::token::BlockToken`]
/// ([`BlockToken::LEN`](crate::token::BlockToken::LEN) bytes), the
/// capability a datanode checks before serving a block request.
pub const FLAG_TOKEN: u16 = 0x0001;
/// Every flag this version defines.
const KNOWN_FLAGS: u16 = FLAG_TOKEN;

/// What a frame carries: one of the requests, or one of the replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// Request: append chunks to an uncommitted block.
    WriteChunks = 0x01,
    /// Request: make a block durable and visible.
    CommitBlock = 0x02,
    /// Request: read a range of a committed block.
    ReadBlock = 0x03,
    /// Request: delete a block, committed or not.
    DeleteBlock = 0x04,
    /// Request: how to reach this datanode from the same host (short-circuit reads).
    LocalInfo = 0x05,
    /// Reply: the request succeeded and has nothing to return.
    Ok = 0x80,
    /// Reply: the request failed.
    Error = 0x81,
    /// Reply: read data follows as the payload.
    ReadData = 0x82,
    /// Reply: the datanode's short-circuit socket and host identity.
    LocalInfoReply = 0x83,
}

impl FrameKind {
    /// The kind with wire value `value`, if any.
    pub fn from_u8(value: u8) -> Option<Self> {
        Some(match value {
            0x01 => Self::WriteChunks,
            0x02 => Self::CommitBlock,
            0x03 => Self::ReadBlock,
            0x04 => Self::DeleteBlock,
            0x05 => Self::LocalInfo,
            0x80 => Self::Ok,
            0x81 => Self::Error,
            0x82 => Self::ReadData,
            0x83 => Self::LocalInfoReply,
            _ => return None,
        })
    }

    /// Whether frames of this kind travel from client to datanode.
    pub fn is_request(self) -> bool {
        (self as u8) < 0x80
    }
}

/// The decoded fixed header of a frame, its sizes already checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the frame carries.
    pub kind: FrameKind,
    /// [`FLAG_TOKEN`] or nothing.
    pub flags: u16,
    /// Chosen by the client per request; echoed by the reply.
    pub request_id: u64,
    /// Length of the message header that follows.
    pub header_len: u32,
    /// Length of the raw payload after the message header.
    pub payload_len: u32,
}

impl FrameHeader {
    /// The wire form of this header.
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut out = [0u8; FRAME_HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = VERSION;
        out[5] = self.kind as u8;
        out[6..8].copy_from_slice(&self.flags.to_be_bytes());
        out[8..16].copy_from_slice(&self.request_id.to_be_bytes());
        out[16..20].copy_from_slice(&self.header_len.to_be_bytes());
        out[20..24].copy_from_slice(&self.payload_len.to_be_bytes());
        out
    }

    /// Parses and checks a header: magic, version, kind, flags, and both
    /// lengths against [`MAX_HEADER_LEN`] and [`MAX_PAYLOAD_LEN`].
    pub fn decode(buf: &[u8; FRAME_HEADER_LEN]) -> Result<Self, ProtocolError> {
        let magic = [buf[0], buf[1], buf[2], buf[3]];
        if magic != MAGIC {
            return Err(ProtocolError::BadMagic(magic));
        }
        if buf[4] != VERSION {
            return Err(ProtocolError::UnsupportedVersion(buf[4]));
        }
        let kind = FrameKind::from_u8(buf[5]).ok_or_else(|| {
            ProtocolError::malformed(format!("unknown frame kind {:#04x}", buf[5]))
        })?;
        let flags = u16::from_be_bytes([buf[6], buf[7]]);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(ProtocolError::malformed(format!(
                "unknown frame flags {flags:#06x}"
            )));
        }
        let request_id = u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
        let header_len = u32::from_be_bytes(buf[16..20].try_into().expect("4 bytes"));
        let payload_len = u32::from_be_bytes(buf[20..24].try_into().expect("4 bytes"));
        check_len("message header", header_len, MAX_HEADER_LEN)?;
        check_len("payload", payload_len, MAX_PAYLOAD_LEN)?;
        Ok(Self {
            kind,
            flags,
            request_id,
            header_len,
            payload_len,
        })
    }
}

/// Refuses a length over `max`.
pub(super) fn check_len(what: &'static str, len: u32, max: u32) -> Result<(), ProtocolError> {
    if len > max {
        return Err(ProtocolError::TooLarge {
            what,
            len: u64::from(len),
            max: u64::from(max),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FrameHeader {
        FrameHeader {
            kind: FrameKind::ReadData,
            flags: 0,
            request_id: 0x0102_0304_0506_0708,
            header_len: 77,
            payload_len: 1 << 20,
        }
    }

    #[test]
    fn round_trip_every_kind() {
        for value in 0..=255u8 {
            let Some(kind) = FrameKind::from_u8(value) else {
                continue;
            };
            assert_eq!(kind as u8, value);
            let header = FrameHeader { kind, ..sample() };
            assert_eq!(FrameHeader::decode(&header.encode()).unwrap(), header);
        }
        assert!(FrameKind::WriteChunks.is_request());
        assert!(!FrameKind::Error.is_request());
    }

    #[test]
    fn lengths_up_to_the_limit_are_accepted() {
        assert!(check_len("x", 10, 10).is_ok());
        assert!(matches!(
            check_len("x", 11, 10),
            Err(ProtocolError::TooLarge {
                len: 11,
                max: 10,
                ..
            })
        ));
    }

    /// The largest write (the largest payload at the smallest chunk size)
    /// carries its CRCs in a message header under the header limit.
    #[test]
    fn the_largest_write_fits_the_header_limit() {
        let crcs = MAX_PAYLOAD_LEN / crate::checksum::MIN_BYTES_PER_CHECKSUM;
        assert!(crcs * 4 + 64 <= MAX_HEADER_LEN);
        assert_eq!(MAX_PAYLOAD_LEN, 64 << 20);
    }

    #[test]
    fn wire_layout_is_fixed() {
        let bytes = sample().encode();
        assert_eq!(&bytes[..6], b"TSDN\x02\x82");
        assert_eq!(&bytes[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[16..20], &[0, 0, 0, 77]);
        assert_eq!(&bytes[20..24], &[0, 0x10, 0, 0]);
    }

    #[test]
    fn corrupt_magic_version_kind_and_flags_are_refused() {
        let good = sample().encode();
        let mut bad = good;
        bad[0] = b'X';
        assert!(matches!(
            FrameHeader::decode(&bad),
            Err(ProtocolError::BadMagic(_))
        ));
        let mut bad = good;
        bad[4] = 1;
        assert!(matches!(
            FrameHeader::decode(&bad),
            Err(ProtocolError::UnsupportedVersion(1))
        ));
        let mut bad = good;
        bad[5] = 0x7f;
        assert!(matches!(
            FrameHeader::decode(&bad),
            Err(ProtocolError::Malformed(_))
        ));
        for flag in [2u16, 0x100, 0x8000] {
            let mut bad = good;
            bad[6..8].copy_from_slice(&flag.to_be_bytes());
            assert!(matches!(
                FrameHeader::decode(&bad),
                Err(ProtocolError::Malformed(_))
            ));
        }
        let mut with_token = good;
        with_token[7] = 1;
        assert_eq!(FrameHeader::decode(&with_token).unwrap().flags, FLAG_TOKEN);
    }

    #[test]
    fn oversized_lengths_are_refused() {
        let header = FrameHeader {
            header_len: MAX_HEADER_LEN + 1,
            ..sample()
        };
        assert!(matches!(
            FrameHeader::decode(&header.encode()),
            Err(ProtocolError::TooLarge {
                what: "message header",
                ..
            })
        ));
        let header = FrameHeader {
            payload_len: u32::MAX,
            ..sample()
        };
        assert!(matches!(
            FrameHeader::decode(&header.encode()),
            Err(ProtocolError::TooLarge {
                what: "payload",
                ..
            })
        ));
    }
}
