//! Requests and replies, and their compact big-endian message headers.
//!
//! ```text
//! BlockKey     block u64, index u8
//! WriteChunks  key, offset u64, bytes_per_checksum u32, count u32, crc u32 x count   (payload: data)
//! CommitBlock  key, length u64
//! ReadBlock    key, offset u64, length u64
//! DeleteBlock  key
//! LocalInfo    (empty)
//! Ok           (empty)
//! Error        code u16, has_offset u8, offset u64, message_len u32, message (UTF-8)
//! ReadData     offset u64, length u64, bytes_per_checksum u32, count u32, crc u32 x count  (payload: data)
//! LocalInfoReply  3 x (len u32, UTF-8): host token, datanode id, socket path
//! ```

use super::frame::FrameKind;
use super::ProtocolError;
use crate::checksum;
use crate::ids::{BlockId, BlockKey};
use std::fmt;

/// Append data to an uncommitted block; the data is the frame's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteChunks {
    /// The block being uploaded.
    pub key: BlockKey,
    /// Block offset of the first byte; chunk-aligned, and equal to the bytes
    /// already written.
    pub offset: u64,
    /// Chunk size of the block; the same for every write of one upload.
    pub bytes_per_checksum: u32,
    /// CRC32C of each chunk of the payload.
    pub crcs: Vec<u32>,
}

/// What a client asks a datanode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Append checksummed chunks to an open block.
    WriteChunks(WriteChunks),
    /// Make the block durable at exactly `length` bytes and visible to reads.
    CommitBlock {
        /// The block to commit.
        key: BlockKey,
        /// Its final length in bytes.
        length: u64,
    },
    /// Read `[offset, offset + length)` of a committed block.
    ReadBlock {
        /// The block to read.
        key: BlockKey,
        /// First byte of the range.
        offset: u64,
        /// Bytes to read.
        length: u64,
    },
    /// Delete the block, committed or not; absent is not an error.
    DeleteBlock {
        /// The block to delete.
        key: BlockKey,
    },
    /// Where a client on the same host can get block files directly (see
    /// [`crate::wire::local`]); refused when the datanode serves no socket.
    LocalInfo,
}

/// Why a datanode refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// No such block.
    NotFound = 1,
    /// A chunk failed its CRC on arrival; the offset names it.
    ChecksumMismatch = 2,
    /// A write's offset does not continue the block; the offset is the expected one.
    BadOffset = 3,
    /// A read reaches past the end of the block.
    OutOfRange = 4,
    /// The request is invalid here (bad chunk size, length mismatch, block already committed...).
    Invalid = 5,
    /// The datanode's disk failed.
    Io = 6,
    /// The frame could not be decoded; the datanode closes the connection.
    Protocol = 7,
    /// The request carried no valid block token for this block and operation.
    AccessDenied = 8,
}

impl ErrorCode {
    fn from_u16(value: u16) -> Option<Self> {
        Some(match value {
            1 => Self::NotFound,
            2 => Self::ChecksumMismatch,
            3 => Self::BadOffset,
            4 => Self::OutOfRange,
            5 => Self::Invalid,
            6 => Self::Io,
            7 => Self::Protocol,
            8 => Self::AccessDenied,
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::NotFound => "not found",
            Self::ChecksumMismatch => "checksum mismatch",
            Self::BadOffset => "bad offset",
            Self::OutOfRange => "out of range",
            Self::Invalid => "invalid request",
            Self::Io => "i/o error",
            Self::Protocol => "protocol error",
            Self::AccessDenied => "access denied",
        };
        f.write_str(name)
    }
}

/// A refusal: its code, the block offset it concerns when there is one, and a
/// human-readable message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReply {
    /// What went wrong, for programs.
    pub code: ErrorCode,
    /// The block offset concerned (the bad chunk, the expected write offset...).
    pub offset: Option<u64>,
    /// What went wrong, for people.
    pub message: String,
}

/// The small header of a read reply; `length` raw data bytes follow it as the
/// frame's payload. The range is the request's, widened to chunk boundaries
/// (clamped to the block's end) so that every CRC covers whole chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadData {
    /// Block offset of the first byte sent; chunk-aligned.
    pub offset: u64,
    /// Bytes sent.
    pub length: u64,
    /// The block's chunk size.
    pub bytes_per_checksum: u32,
    /// CRC32C of each chunk sent.
    pub crcs: Vec<u32>,
}

/// How to reach a datanode's short-circuit socket, and whether it is on
/// the asking client's host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalInfo {
    /// The datanode host's [`host_token`](crate::wire::local::host_token):
    /// the client uses the socket only when it computes the same token.
    pub host_token: String,
    /// The datanode's identity, which its socket repeats, so that a client
    /// cannot mistake another datanode's socket at that path for this one.
    pub datanode_id: String,
    /// Path of the Unix socket.
    pub socket_path: String,
}

/// What a datanode answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The request succeeded with nothing to return.
    Ok,
    /// The request was refused.
    Error(ErrorReply),
    /// Data for a read, followed by its payload.
    ReadData(ReadData),
    /// Answer to [`Request::LocalInfo`].
    LocalInfo(LocalInfo),
}

impl Request {
    /// The block this request concerns (block 0 for [`Request::LocalInfo`],
    /// which concerns none; block ids start at 1).
    pub fn key(&self) -> BlockKey {
        match self {
            Self::WriteChunks(w) => w.key,
            Self::CommitBlock { key, .. }
            | Self::ReadBlock { key, .. }
            | Self::DeleteBlock { key } => *key,
            Self::LocalInfo => BlockKey::new(BlockId(0), 0),
        }
    }

    /// The frame kind carrying this request.
    pub fn kind(&self) -> FrameKind {
        match self {
            Self::WriteChunks(_) => FrameKind::WriteChunks,
            Self::CommitBlock { .. } => FrameKind::CommitBlock,
            Self::ReadBlock { .. } => FrameKind::ReadBlock,
            Self::DeleteBlock { .. } => FrameKind::DeleteBlock,
            Self::LocalInfo => FrameKind::LocalInfo,
        }
    }

    /// Appends the message header to `out`.
    pub fn encode_header(&self, out: &mut Vec<u8>) {
        match self {
            Self::WriteChunks(w) => {
                put_key(out, w.key);
                out.extend_from_slice(&w.offset.to_be_bytes());
                out.extend_from_slice(&w.bytes_per_checksum.to_be_bytes());
                put_crcs(out, &w.crcs);
            }
            Self::CommitBlock { key, length } => {
                put_key(out, *key);
                out.extend_from_slice(&length.to_be_bytes());
            }
            Self::ReadBlock {
                key,
                offset,
                length,
            } => {
                put_key(out, *key);
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(&length.to_be_bytes());
            }
            Self::DeleteBlock { key } => put_key(out, *key),
            Self::LocalInfo => {}
        }
    }

    /// Decodes the message header of a request frame of `kind` whose payload
    /// is `payload_len` bytes, checking that the two agree.
    pub fn decode(kind: FrameKind, header: &[u8], payload_len: u32) -> Result<Self, ProtocolError> {
        let mut d = Decoder { buf: header };
        let request = match kind {
            FrameKind::WriteChunks => {
                let key = d.key()?;
                let offset = d.u64("offset")?;
                let bytes_per_checksum = d.u32("bytes per checksum")?;
                checksum::validate_bytes_per_checksum(bytes_per_checksum)
                    .map_err(|e| ProtocolError::malformed(e.to_string()))?;
                let crcs = d.crcs()?;
                check_crc_count(crcs.len(), u64::from(payload_len), bytes_per_checksum)?;
                if offset.checked_add(u64::from(payload_len)).is_none() {
                    return Err(ProtocolError::malformed("write range overflows"));
                }
                Self::WriteChunks(WriteChunks {
                    key,
                    offset,
                    bytes_per_checksum,
                    crcs,
                })
            }
            FrameKind::CommitBlock => Self::CommitBlock {
                key: d.key()?,
                length: d.u64("length")?,
            },
            FrameKind::ReadBlock => Self::ReadBlock {
                key: d.key()?,
                offset: d.u64("offset")?,
                length: d.u64("length")?,
            },
            FrameKind::DeleteBlock => Self::DeleteBlock { key: d.key()? },
            FrameKind::LocalInfo => Self::LocalInfo,
            other => {
                return Err(ProtocolError::malformed(format!(
                    "{other:?} is not a request"
                )))
            }
        };
        d.finish()?;
        if kind != FrameKind::WriteChunks && payload_len != 0 {
            return Err(ProtocolError::malformed(format!(
                "{kind:?} carries no payload, got {payload_len} bytes"
            )));
        }
        Ok(request)
    }
}

impl Reply {
    /// The frame kind carrying this reply.
    pub fn kind(&self) -> FrameKind {
        match self {
            Self::Ok => FrameKind::Ok,
            Self::Error(_) => FrameKind::Error,
            Self::ReadData(_) => FrameKind::ReadData,
            Self::LocalInfo(_) => FrameKind::LocalInfoReply,
        }
    }

    /// Length of the payload that follows this reply's header.
    pub fn payload_len(&self) -> u64 {
        match self {
            Self::ReadData(r) => r.length,
            _ => 0,
        }
    }

    /// Appends the message header to `out`.
    pub fn encode_header(&self, out: &mut Vec<u8>) {
        match self {
            Self::Ok => {}
            Self::Error(e) => {
                out.extend_from_slice(&(e.code as u16).to_be_bytes());
                out.push(u8::from(e.offset.is_some()));
                out.extend_from_slice(&e.offset.unwrap_or(0).to_be_bytes());
                let message = truncate_utf8(&e.message, MAX_ERROR_MESSAGE_LEN).as_bytes();
                out.extend_from_slice(&(message.len() as u32).to_be_bytes());
                out.extend_from_slice(message);
            }
            Self::ReadData(r) => {
                out.extend_from_slice(&r.offset.to_be_bytes());
                out.extend_from_slice(&r.length.to_be_bytes());
                out.extend_from_slice(&r.bytes_per_checksum.to_be_bytes());
                put_crcs(out, &r.crcs);
            }
            Self::LocalInfo(info) => {
                for text in [&info.host_token, &info.datanode_id, &info.socket_path] {
                    let text = truncate_utf8(text, MAX_ERROR_MESSAGE_LEN).as_bytes();
                    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
                    out.extend_from_slice(text);
                }
            }
        }
    }

    /// Decodes the message header of a reply frame of `kind` whose payload is
    /// `payload_len` bytes, checking that the two agree.
    pub fn decode(kind: FrameKind, header: &[u8], payload_len: u32) -> Result<Self, ProtocolError> {
        let mut d = Decoder { buf: header };
        let reply = match kind {
            FrameKind::Ok => Self::Ok,
            FrameKind::Error => {
                let raw = d.u16("error code")?;
                let code = ErrorCode::from_u16(raw)
                    .ok_or_else(|| ProtocolError::malformed(format!("unknown error code {raw}")))?;
                let has_offset = d.u8("offset flag")?;
                let offset = d.u64("offset")?;
                let offset = match has_offset {
                    0 => None,
                    1 => Some(offset),
                    other => {
                        return Err(ProtocolError::malformed(format!(
                            "offset flag {other} is neither 0 nor 1"
                        )))
                    }
                };
                let message = d.string()?;
                Self::Error(ErrorReply {
                    code,
                    offset,
                    message,
                })
            }
            FrameKind::ReadData => {
                let offset = d.u64("offset")?;
                let length = d.u64("length")?;
                let bytes_per_checksum = d.u32("bytes per checksum")?;
                checksum::validate_bytes_per_checksum(bytes_per_checksum)
                    .map_err(|e| ProtocolError::malformed(e.to_string()))?;
                let crcs = d.crcs()?;
                if length != u64::from(payload_len) {
                    return Err(ProtocolError::malformed(format!(
                        "read reply announces {length} bytes but carries {payload_len}"
                    )));
                }
                if !offset.is_multiple_of(u64::from(bytes_per_checksum)) {
                    return Err(ProtocolError::malformed(format!(
                        "read reply offset {offset} is not chunk-aligned"
                    )));
                }
                check_crc_count(crcs.len(), length, bytes_per_checksum)?;
                Self::ReadData(ReadData {
                    offset,
                    length,
                    bytes_per_checksum,
                    crcs,
                })
            }
            FrameKind::LocalInfoReply => Self::LocalInfo(LocalInfo {
                host_token: d.string()?,
                datanode_id: d.string()?,
                socket_path: d.string()?,
            }),
            other => {
                return Err(ProtocolError::malformed(format!(
                    "{other:?} is not a reply"
                )))
            }
        };
        d.finish()?;
        if kind != FrameKind::ReadData && payload_len != 0 {
            return Err(ProtocolError::malformed(format!(
                "{kind:?} carries no payload, got {payload_len} bytes"
            )));
        }
        Ok(reply)
    }
}

fn check_crc_count(
    count: usize,
    data_len: u64,
    bytes_per_checksum: u32,
) -> Result<(), ProtocolError> {
    let expected = checksum::chunk_count(data_len, bytes_per_checksum);
    if count as u64 != expected {
        return Err(ProtocolError::malformed(format!(
            "{count} checksums for {data_len} bytes at {bytes_per_checksum} bytes per checksum (need {expected})"
        )));
    }
    Ok(())
}

/// Longest error message sent; longer ones are cut (at a character boundary).
const MAX_ERROR_MESSAGE_LEN: usize = 4096;

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn put_key(out: &mut Vec<u8>, key: BlockKey) {
    out.extend_from_slice(&key.block.0.to_be_bytes());
    out.push(key.index);
}

fn put_crcs(out: &mut Vec<u8>, crcs: &[u32]) {
    out.extend_from_slice(&(crcs.len() as u32).to_be_bytes());
    out.reserve(crcs.len() * 4);
    for crc in crcs {
        out.extend_from_slice(&crc.to_be_bytes());
    }
}

/// A cursor over a fully read message header; every read is bounds-checked
/// and every count is checked against the bytes left before allocating.
struct Decoder<'a> {
    buf: &'a [u8],
}

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ProtocolError> {
        if self.buf.len() < n {
            return Err(ProtocolError::malformed(format!(
                "message header ends inside {field}"
            )));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ProtocolError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, ProtocolError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, ProtocolError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, ProtocolError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    fn key(&mut self) -> Result<BlockKey, ProtocolError> {
        let block = self.u64("block id")?;
        let index = self.u8("block index")?;
        Ok(BlockKey::new(BlockId(block), index))
    }

    fn crcs(&mut self) -> Result<Vec<u32>, ProtocolError> {
        let count = self.u32("checksum count")? as usize;
        if count > self.buf.len() / 4 {
            return Err(ProtocolError::malformed(format!(
                "{count} checksums announced, {} bytes left",
                self.buf.len()
            )));
        }
        let raw = self.take(count * 4, "checksums")?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    fn string(&mut self) -> Result<String, ProtocolError> {
        let len = self.u32("message length")? as usize;
        let raw = self.take(len, "message")?;
        String::from_utf8(raw.to_vec())
            .map_err(|_| ProtocolError::malformed("error message is not UTF-8"))
    }

    fn finish(self) -> Result<(), ProtocolError> {
        if !self.buf.is_empty() {
            return Err(ProtocolError::malformed(format!(
                "{} trailing bytes in message header",
                self.buf.len()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn key() -> BlockKey {
        BlockKey::new(BlockId(0xdead_beef_0102_0304), 7)
    }

    /// One of each request, with the payload length it travels with.
    pub(crate) fn sample_requests() -> Vec<(Request, u32)> {
        vec![
            (
                Request::WriteChunks(WriteChunks {
                    key: key(),
                    offset: 16384,
                    bytes_per_checksum: 1024,
                    crcs: vec![1, 2, 0xffff_ffff],
                }),
                2049,
            ),
            (
                Request::WriteChunks(WriteChunks {
                    key: key(),
                    offset: 0,
                    bytes_per_checksum: 16384,
                    crcs: vec![],
                }),
                0,
            ),
            (
                Request::CommitBlock {
                    key: key(),
                    length: u64::MAX,
                },
                0,
            ),
            (
                Request::ReadBlock {
                    key: key(),
                    offset: 5,
                    length: 1 << 40,
                },
                0,
            ),
            (Request::DeleteBlock { key: key() }, 0),
            (Request::LocalInfo, 0),
        ]
    }

    /// One of each reply.
    pub(crate) fn sample_replies() -> Vec<Reply> {
        vec![
            Reply::Ok,
            Reply::Error(ErrorReply {
                code: ErrorCode::ChecksumMismatch,
                offset: Some(32768),
                message: "chunk at 32768 failed — ünïcode".into(),
            }),
            Reply::Error(ErrorReply {
                code: ErrorCode::NotFound,
                offset: None,
                message: String::new(),
            }),
            Reply::ReadData(ReadData {
                offset: 4096,
                length: 1500,
                bytes_per_checksum: 1024,
                crcs: vec![0xabcd_ef01, 7],
            }),
            Reply::LocalInfo(LocalInfo {
                host_token: "boot/host".into(),
                datanode_id: "dn-1".into(),
                socket_path: "/tmp/dn.sock".into(),
            }),
        ]
    }

    #[test]
    fn every_request_round_trips() {
        for (request, payload_len) in sample_requests() {
            let mut buf = Vec::new();
            request.encode_header(&mut buf);
            let back = Request::decode(request.kind(), &buf, payload_len).unwrap();
            assert_eq!(back, request);
        }
    }

    #[test]
    fn every_reply_round_trips() {
        for reply in sample_replies() {
            let mut buf = Vec::new();
            reply.encode_header(&mut buf);
            let back = Reply::decode(reply.kind(), &buf, reply.payload_len() as u32).unwrap();
            assert_eq!(back, reply);
        }
    }

    #[test]
    fn every_short_header_is_malformed() {
        for (request, payload_len) in sample_requests() {
            let mut buf = Vec::new();
            request.encode_header(&mut buf);
            for cut in 0..buf.len() {
                let err = Request::decode(request.kind(), &buf[..cut], payload_len).unwrap_err();
                assert!(matches!(err, ProtocolError::Malformed(_)), "{err:?}");
            }
        }
        for reply in sample_replies() {
            let mut buf = Vec::new();
            reply.encode_header(&mut buf);
            for cut in 0..buf.len() {
                let err = Reply::decode(reply.kind(), &buf[..cut], reply.payload_len() as u32)
                    .unwrap_err();
                assert!(matches!(err, ProtocolError::Malformed(_)), "{err:?}");
            }
        }
    }

    /// A checksum count that cannot fit the bytes left is refused as such
    /// before any checksum is read; bytes after a whole header, as trailing.
    #[test]
    fn refusals_name_a_lying_checksum_count_and_trailing_bytes() {
        let (request, payload_len) = sample_requests()
            .into_iter()
            .find(|(r, _)| matches!(r, Request::WriteChunks(w) if w.crcs.len() > 1))
            .expect("a write with checksums");
        let Request::WriteChunks(write) = &request else {
            unreachable!()
        };
        let mut header = Vec::new();
        request.encode_header(&mut header);
        // Key (9), offset (8), bytes per checksum (4), then the count.
        let count_at = 21;
        let announced = write.crcs.len() as u32 + 1;
        let mut lying = header.clone();
        lying[count_at..count_at + 4].copy_from_slice(&announced.to_be_bytes());
        let malformed = |header: &[u8]| match Request::decode(request.kind(), header, payload_len) {
            Err(ProtocolError::Malformed(text)) => text,
            other => panic!("expected a malformed header, got {other:?}"),
        };
        let text = malformed(&lying);
        assert!(
            text.contains(&format!("{announced} checksums announced")),
            "{text}"
        );
        let mut trailing = header;
        trailing.extend_from_slice(&[0; 5]);
        let text = malformed(&trailing);
        assert!(text.contains("5 trailing bytes"), "{text}");
    }

    #[test]
    fn long_error_messages_are_cut_at_a_char_boundary() {
        let reply = Reply::Error(ErrorReply {
            code: ErrorCode::Io,
            offset: None,
            // The limit falls inside the last character that would fit.
            message: format!("a{}", "é".repeat(5000)),
        });
        let mut buf = Vec::new();
        reply.encode_header(&mut buf);
        let Reply::Error(back) = Reply::decode(FrameKind::Error, &buf, 0).unwrap() else {
            panic!("not an error reply");
        };
        let expected = format!("a{}", "é".repeat((MAX_ERROR_MESSAGE_LEN - 2) / 2));
        assert_eq!(back.message, expected);
    }

    #[test]
    fn every_error_code_round_trips_with_its_own_name() {
        let codes = [
            ErrorCode::NotFound,
            ErrorCode::ChecksumMismatch,
            ErrorCode::BadOffset,
            ErrorCode::OutOfRange,
            ErrorCode::Invalid,
            ErrorCode::Io,
            ErrorCode::Protocol,
            ErrorCode::AccessDenied,
        ];
        let mut names = std::collections::HashSet::new();
        for code in codes {
            let reply = Reply::Error(ErrorReply {
                code,
                offset: Some(3),
                message: "m".into(),
            });
            let mut buf = Vec::new();
            reply.encode_header(&mut buf);
            assert_eq!(Reply::decode(FrameKind::Error, &buf, 0).unwrap(), reply);
            let name = code.to_string();
            assert!(!name.is_empty());
            assert!(names.insert(name), "{code:?} shares its name");
        }
        assert_eq!(ErrorCode::from_u16(0), None);
        assert_eq!(ErrorCode::from_u16(9), None);
    }

    #[test]
    fn trailing_bytes_are_malformed() {
        let mut buf = Vec::new();
        Request::DeleteBlock { key: key() }.encode_header(&mut buf);
        buf.push(0);
        assert!(Request::decode(FrameKind::DeleteBlock, &buf, 0).is_err());
    }

    #[test]
    fn inconsistent_lengths_are_malformed() {
        let (write, payload_len) = sample_requests().remove(0);
        let mut buf = Vec::new();
        write.encode_header(&mut buf);
        // Three CRCs cover 2049..=3072 bytes at 1 KiB per checksum, no more, no less.
        assert!(Request::decode(FrameKind::WriteChunks, &buf, payload_len + 1024).is_err());
        assert!(Request::decode(FrameKind::WriteChunks, &buf, 2048).is_err());
        assert!(Request::decode(FrameKind::WriteChunks, &buf, 3072).is_ok());

        let mut buf = Vec::new();
        Request::DeleteBlock { key: key() }.encode_header(&mut buf);
        assert!(Request::decode(FrameKind::DeleteBlock, &buf, 1).is_err());

        let read = sample_replies().pop().unwrap();
        let mut buf = Vec::new();
        read.encode_header(&mut buf);
        assert!(Reply::decode(FrameKind::ReadData, &buf, 1499).is_err());
    }

    #[test]
    fn huge_checksum_count_is_refused_before_allocating() {
        let mut buf = Vec::new();
        put_key(&mut buf, key());
        buf.extend_from_slice(&0u64.to_be_bytes());
        buf.extend_from_slice(&1024u32.to_be_bytes());
        buf.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = Request::decode(FrameKind::WriteChunks, &buf, 0).unwrap_err();
        assert!(matches!(err, ProtocolError::Malformed(_)));
    }

    #[test]
    fn bad_codes_and_chunk_sizes_are_malformed() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&999u16.to_be_bytes());
        buf.push(0);
        buf.extend_from_slice(&0u64.to_be_bytes());
        buf.extend_from_slice(&0u32.to_be_bytes());
        assert!(Reply::decode(FrameKind::Error, &buf, 0).is_err());

        let mut buf = Vec::new();
        Reply::ReadData(ReadData {
            offset: 0,
            length: 0,
            bytes_per_checksum: 0,
            crcs: vec![],
        })
        .encode_header(&mut buf);
        assert!(Reply::decode(FrameKind::ReadData, &buf, 0).is_err());
        assert!(Request::decode(FrameKind::Ok, &[], 0).is_err());
        assert!(Reply::decode(FrameKind::ReadBlock, &[], 0).is_err());
    }
}
