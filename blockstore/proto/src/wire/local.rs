//! The short-circuit protocol: messages on a datanode's Unix socket, by which
//! a client on the same host gets the open file holding a committed block
//! (its data file or its volume, passed with SCM_RIGHTS), where in it the
//! block starts, and its CRCs, and learns which blocks it must stop reading
//! from such files.
//!
//! ```text
//! frame header (12 bytes, big-endian)
//! offset size field
//!      0    4 magic "TSLC"
//!      4    1 version (3)
//!      5    1 kind
//!      6    2 reserved, zero
//!      8    4 body length (at most MAX_LOCAL_BODY_LEN)
//!
//! bodies
//! OpenBlock  0x01  key (block u64, index u8), block token (BlockToken::LEN bytes)
//! Watch      0x02  (empty)
//! Replica    0x81  offset u64, length u64, bytes_per_checksum u32, count u32, crc u32 x count  (+ 1 fd)
//! Watching   0x82  datanode_id_len u32, datanode id (UTF-8)
//! Revoked    0x83  count u32, key x count
//! Refused    0x84  message_len u32, message (UTF-8)
//! ```
//!
//! One connection carries one `OpenBlock` at a time (request, reply, next
//! request), or a single `Watch`, after which the datanode only pushes: first
//! `Watching` with its identity, then `Revoked` with the keys of blocks it
//! deleted. The descriptor travels in the same `sendmsg` as the `Replica`
//! frame's first bytes.

use super::ProtocolError;
use crate::checksum;
use crate::ids::{BlockId, BlockKey};
use crate::token::BlockToken;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use tokio::io::Interest;
use tokio::net::UnixStream;

/// First bytes of every short-circuit frame.
pub const LOCAL_MAGIC: [u8; 4] = *b"TSLC";
/// Short-circuit protocol version spoken here; other versions are refused.
pub const LOCAL_VERSION: u8 = 3;
/// Size of the fixed frame header.
pub const LOCAL_HEADER_LEN: usize = 12;
/// Largest body accepted: a replica reply with the CRCs of a 4 GiB block at
/// the smallest chunk size (32 MiB of them) fits; anything larger is refused
/// before allocating.
pub const MAX_LOCAL_BODY_LEN: u32 = 33 * 1024 * 1024;
/// Longest identity or refusal message accepted.
const MAX_TEXT_LEN: usize = 4096;
/// Most keys in one `Revoked` frame (a longer list is split by the sender).
pub const MAX_REVOKED_PER_FRAME: usize = 4096;

const OPEN_BLOCK: u8 = 0x01;
const WATCH: u8 = 0x02;
const REPLICA: u8 = 0x81;
const WATCHING: u8 = 0x82;
const REVOKED: u8 = 0x83;
const REFUSED: u8 = 0x84;

/// What a client asks on the Unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalRequest {
    /// Send the open data file of committed block `key` and its CRCs; the
    /// token must allow reading it.
    OpenBlock(BlockKey, BlockToken),
    /// Turn this connection into a stream of revocations.
    Watch,
}

/// Where a block is in the file that comes with this message, its size
/// and its CRCs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaInfo {
    /// Offset in the file of the block's first byte (0 for a data file of
    /// its own, the record's data in a volume).
    pub offset: u64,
    /// Bytes in the block.
    pub length: u64,
    /// Chunk size of the CRCs.
    pub bytes_per_checksum: u32,
    /// CRC32C of every chunk of the block.
    pub crcs: Vec<u32>,
}

/// What a datanode answers or pushes on the Unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalReply {
    /// The block's data file (passed alongside) and its checksums.
    Replica(ReplicaInfo),
    /// Watch accepted; `datanode_id` lets the client check it reached the
    /// datanode it asked over TCP, not another one behind the same path.
    Watching {
        /// The datanode's persistent identity.
        datanode_id: String,
    },
    /// These blocks were deleted (or replaced): drop their descriptors.
    Revoked(Vec<BlockKey>),
    /// The request was refused (no such committed block, disk error...).
    Refused(String),
}

impl LocalRequest {
    /// The whole frame, header included.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let kind = match self {
            Self::OpenBlock(key, token) => {
                put_key(&mut body, *key);
                body.extend_from_slice(&token.encode());
                OPEN_BLOCK
            }
            Self::Watch => WATCH,
        };
        frame(kind, body)
    }

    /// Decodes a request body of `kind`.
    pub fn decode(kind: u8, body: &[u8]) -> Result<Self, ProtocolError> {
        let mut d = Cursor(body);
        let request = match kind {
            OPEN_BLOCK => {
                let key = d.key()?;
                let token = BlockToken::decode(d.take(BlockToken::LEN, "block token")?)
                    .map_err(|e| ProtocolError::malformed(e.to_string()))?;
                Self::OpenBlock(key, token)
            }
            WATCH => Self::Watch,
            other => {
                return Err(ProtocolError::malformed(format!(
                    "unknown short-circuit request {other:#04x}"
                )))
            }
        };
        d.finish()?;
        Ok(request)
    }
}

impl LocalReply {
    /// The whole frame, header included.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let kind = match self {
            Self::Replica(r) => {
                body.extend_from_slice(&r.offset.to_be_bytes());
                body.extend_from_slice(&r.length.to_be_bytes());
                body.extend_from_slice(&r.bytes_per_checksum.to_be_bytes());
                body.extend_from_slice(&(r.crcs.len() as u32).to_be_bytes());
                for crc in &r.crcs {
                    body.extend_from_slice(&crc.to_be_bytes());
                }
                REPLICA
            }
            Self::Watching { datanode_id } => {
                put_text(&mut body, datanode_id);
                WATCHING
            }
            Self::Revoked(keys) => {
                body.extend_from_slice(&(keys.len() as u32).to_be_bytes());
                for key in keys {
                    put_key(&mut body, *key);
                }
                REVOKED
            }
            Self::Refused(message) => {
                put_text(&mut body, message);
                REFUSED
            }
        };
        frame(kind, body)
    }

    /// Decodes a reply body of `kind`, checking counts against the bytes
    /// present and the CRC count against the block length.
    pub fn decode(kind: u8, body: &[u8]) -> Result<Self, ProtocolError> {
        let mut d = Cursor(body);
        let reply = match kind {
            REPLICA => {
                let offset = d.u64("offset")?;
                let length = d.u64("length")?;
                let bytes_per_checksum = d.u32("bytes per checksum")?;
                checksum::validate_bytes_per_checksum(bytes_per_checksum)
                    .map_err(|e| ProtocolError::malformed(e.to_string()))?;
                let count = d.count(4, "checksum count")?;
                if count as u64 != checksum::chunk_count(length, bytes_per_checksum) {
                    return Err(ProtocolError::malformed(format!(
                        "{count} checksums for a block of {length} bytes"
                    )));
                }
                let crcs = (0..count)
                    .map(|_| d.u32("checksum"))
                    .collect::<Result<_, _>>()?;
                Self::Replica(ReplicaInfo {
                    offset,
                    length,
                    bytes_per_checksum,
                    crcs,
                })
            }
            WATCHING => Self::Watching {
                datanode_id: d.text()?,
            },
            REVOKED => {
                let count = d.count(9, "key count")?;
                let keys = (0..count).map(|_| d.key()).collect::<Result<_, _>>()?;
                Self::Revoked(keys)
            }
            REFUSED => Self::Refused(d.text()?),
            other => {
                return Err(ProtocolError::malformed(format!(
                    "unknown short-circuit reply {other:#04x}"
                )))
            }
        };
        d.finish()?;
        Ok(reply)
    }
}

fn frame(kind: u8, body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(LOCAL_HEADER_LEN + body.len());
    out.extend_from_slice(&LOCAL_MAGIC);
    out.push(LOCAL_VERSION);
    out.push(kind);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Checks a frame header; returns the kind and the body length.
pub fn decode_header(buf: &[u8; LOCAL_HEADER_LEN]) -> Result<(u8, u32), ProtocolError> {
    let magic = [buf[0], buf[1], buf[2], buf[3]];
    if magic != LOCAL_MAGIC {
        return Err(ProtocolError::BadMagic(magic));
    }
    if buf[4] != LOCAL_VERSION {
        return Err(ProtocolError::UnsupportedVersion(buf[4]));
    }
    if buf[6..8] != [0, 0] {
        return Err(ProtocolError::malformed(
            "reserved header bytes are not zero",
        ));
    }
    let body_len = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
    super::frame::check_len("short-circuit body", body_len, MAX_LOCAL_BODY_LEN)?;
    Ok((buf[5], body_len))
}

fn put_key(out: &mut Vec<u8>, key: BlockKey) {
    out.extend_from_slice(&key.block.0.to_be_bytes());
    out.push(key.index);
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    let mut end = text.len().min(MAX_TEXT_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u32).to_be_bytes());
    out.extend_from_slice(&text.as_bytes()[..end]);
}

/// Bounds-checked reads over a body.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ProtocolError> {
        if self.0.len() < n {
            return Err(ProtocolError::malformed(format!(
                "body ends inside {field}"
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, ProtocolError> {
        let b = self.take(4, field)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, ProtocolError> {
        let b = self.take(8, field)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    fn key(&mut self) -> Result<BlockKey, ProtocolError> {
        let block = self.u64("block id")?;
        let index = self.take(1, "block index")?[0];
        Ok(BlockKey::new(BlockId(block), index))
    }

    /// A count of items of `item_len` bytes each, checked against what is left.
    fn count(&mut self, item_len: usize, field: &'static str) -> Result<usize, ProtocolError> {
        let count = self.u32(field)? as usize;
        if count > self.0.len() / item_len {
            return Err(ProtocolError::malformed(format!(
                "{count} items announced, {} bytes left",
                self.0.len()
            )));
        }
        Ok(count)
    }

    fn text(&mut self) -> Result<String, ProtocolError> {
        let len = self.u32("text length")? as usize;
        if len > MAX_TEXT_LEN {
            return Err(ProtocolError::malformed(format!("text of {len} bytes")));
        }
        let raw = self.take(len, "text")?;
        String::from_utf8(raw.to_vec()).map_err(|_| ProtocolError::malformed("text is not UTF-8"))
    }

    fn finish(self) -> Result<(), ProtocolError> {
        if !self.0.is_empty() {
            return Err(ProtocolError::malformed(format!(
                "{} trailing bytes in body",
                self.0.len()
            )));
        }
        Ok(())
    }
}

/// Writes all of `bytes` to `stream`, passing `fd` (if any) with the first
/// bytes that go out.
pub async fn send_with_fd(
    stream: &UnixStream,
    bytes: &[u8],
    fd: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    let mut sent = 0;
    let mut fd = fd;
    while sent < bytes.len() {
        stream.writable().await?;
        let result = stream.try_io(Interest::WRITABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            let fds;
            if let Some(fd) = fd {
                fds = [fd];
                control.push(SendAncillaryMessage::ScmRights(&fds));
            }
            let iov = [IoSlice::new(&bytes[sent..])];
            rustix::net::sendmsg(stream.as_fd(), &iov, &mut control, SendFlags::NOSIGNAL)
                .map_err(std::io::Error::from)
        });
        match result {
            Ok(n) => {
                sent += n;
                fd = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills `buf` from `stream`, appending any descriptors that arrive to `fds`
/// (close-on-exec). A clean end of stream before the first byte is
/// [`ProtocolError::Closed`]; inside the buffer, [`ProtocolError::Truncated`].
async fn recv_exact_with_fds(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    what: &'static str,
) -> Result<(), ProtocolError> {
    let mut got = 0;
    while got < buf.len() {
        stream.readable().await?;
        let result = stream.try_io(Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut iov = [IoSliceMut::new(&mut buf[got..])];
            let msg = rustix::net::recvmsg(
                stream.as_fd(),
                &mut iov,
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .map_err(std::io::Error::from)?;
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            Ok(msg)
        });
        match result {
            Ok(msg) if msg.flags.contains(ReturnFlags::CTRUNC) => {
                return Err(ProtocolError::malformed("too many descriptors passed"));
            }
            Ok(msg) if msg.bytes == 0 => {
                return Err(if got == 0 {
                    ProtocolError::Closed
                } else {
                    ProtocolError::Truncated(what)
                });
            }
            Ok(msg) => got += msg.bytes,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads one frame whose body is at most `max_body` bytes: its kind and
/// body, plus any descriptors that came with it.
async fn read_frame(
    stream: &UnixStream,
    max_body: u32,
) -> Result<(u8, Vec<u8>, Vec<OwnedFd>), ProtocolError> {
    let mut fds = Vec::new();
    let mut header = [0u8; LOCAL_HEADER_LEN];
    recv_exact_with_fds(stream, &mut header, &mut fds, "frame header").await?;
    let (kind, body_len) = decode_header(&header)?;
    super::frame::check_len("short-circuit body", body_len, max_body)?;
    let mut body = vec![0u8; body_len as usize];
    match recv_exact_with_fds(stream, &mut body, &mut fds, "body").await {
        Err(ProtocolError::Closed) => return Err(ProtocolError::Truncated("body")),
        other => other?,
    }
    Ok((kind, body, fds))
}

/// Largest request body: a block key and its token.
const MAX_REQUEST_BODY_LEN: u32 = 9 + BlockToken::LEN as u32;

/// Reads one request (requests never carry descriptors; any sent are closed).
pub async fn read_local_request(stream: &UnixStream) -> Result<LocalRequest, ProtocolError> {
    let (kind, body, _fds) = read_frame(stream, MAX_REQUEST_BODY_LEN).await?;
    LocalRequest::decode(kind, &body)
}

/// Reads one reply and the descriptor passed with it: exactly one with
/// [`LocalReply::Replica`], none otherwise.
pub async fn read_local_reply(
    stream: &UnixStream,
) -> Result<(LocalReply, Option<OwnedFd>), ProtocolError> {
    let (kind, body, mut fds) = read_frame(stream, MAX_LOCAL_BODY_LEN).await?;
    let reply = LocalReply::decode(kind, &body)?;
    match (&reply, fds.len()) {
        (LocalReply::Replica(_), 1) => Ok((reply, fds.pop())),
        (LocalReply::Replica(_), n) => Err(ProtocolError::malformed(format!(
            "a replica reply came with {n} descriptors"
        ))),
        (_, 0) => Ok((reply, None)),
        (_, n) => Err(ProtocolError::malformed(format!(
            "{n} unexpected descriptors"
        ))),
    }
}

/// What identifies this host to a datanode's `LocalInfo` reply: the kernel's
/// boot id and the host name. Two processes may share descriptors through a
/// Unix socket only when both agree (a container with its own hostname, or
/// another machine, gets a different token). `None` when either cannot be
/// read (not Linux, no /proc): short-circuit is then off.
pub fn host_token() -> Option<String> {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let boot_id = read("/proc/sys/kernel/random/boot_id")?;
    let hostname = read("/proc/sys/kernel/hostname")?;
    Some(format!("{boot_id}/{hostname}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> BlockKey {
        BlockKey::new(BlockId(n), (n % 7) as u8)
    }

    /// The token is this kernel's boot id and host name, as /proc has them.
    #[test]
    fn host_token_names_this_boot_and_host() {
        let token = host_token().expect("Linux has both");
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(token, format!("{}/{}", boot.trim(), host.trim()));
    }

    /// The CRCs of a 4 GiB block at the smallest chunk size fit one body.
    #[test]
    fn the_largest_replica_fits_a_body() {
        let crcs = (4u64 << 30) / u64::from(crate::checksum::MIN_BYTES_PER_CHECKSUM);
        assert!(crcs * 4 + 64 <= u64::from(MAX_LOCAL_BODY_LEN));
        assert!(u64::from(MAX_LOCAL_BODY_LEN) <= 2 * crcs * 4);
    }

    /// A text over the limit is cut at the last character boundary under it.
    #[test]
    fn long_texts_are_cut_between_characters() {
        let text = format!("{}é and more", "a".repeat(MAX_TEXT_LEN - 1));
        let mut out = Vec::new();
        put_text(&mut out, &text);
        let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        assert_eq!(len, MAX_TEXT_LEN - 1);
        assert_eq!(&out[4..], "a".repeat(MAX_TEXT_LEN - 1).as_bytes());
    }

    fn samples() -> Vec<LocalReply> {
        vec![
            LocalReply::Replica(ReplicaInfo {
                offset: 1 << 33,
                length: 40_000,
                bytes_per_checksum: 16384,
                crcs: vec![1, 2, 0xffff_ffff],
            }),
            LocalReply::Replica(ReplicaInfo {
                offset: 0,
                length: 0,
                bytes_per_checksum: 512,
                crcs: vec![],
            }),
            LocalReply::Watching {
                datanode_id: "dn-ünï".into(),
            },
            LocalReply::Revoked(vec![key(1), key(u64::MAX)]),
            LocalReply::Refused("block not found".into()),
        ]
    }

    fn split(frame: &[u8]) -> (u8, &[u8]) {
        let header: [u8; LOCAL_HEADER_LEN] = frame[..LOCAL_HEADER_LEN].try_into().unwrap();
        let (kind, len) = decode_header(&header).unwrap();
        assert_eq!(len as usize, frame.len() - LOCAL_HEADER_LEN);
        (kind, &frame[LOCAL_HEADER_LEN..])
    }

    #[test]
    fn every_message_round_trips() {
        let signer = crate::token::TokenKey {
            id: 1,
            secret: [3; 32],
            retire_at: u64::MAX,
        };
        let token = BlockToken::sign(&signer, BlockId(9), 4, crate::token::Modes::READ, 5);
        for request in [LocalRequest::OpenBlock(key(9), token), LocalRequest::Watch] {
            let frame = request.encode();
            let (kind, body) = split(&frame);
            assert_eq!(LocalRequest::decode(kind, body).unwrap(), request);
        }
        for reply in samples() {
            let frame = reply.encode();
            let (kind, body) = split(&frame);
            assert_eq!(LocalReply::decode(kind, body).unwrap(), reply);
        }
    }

    #[test]
    fn every_cut_body_is_malformed() {
        for reply in samples() {
            let frame = reply.encode();
            let (kind, body) = split(&frame);
            for cut in 0..body.len() {
                assert!(
                    LocalReply::decode(kind, &body[..cut]).is_err(),
                    "{reply:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn bad_headers_and_lying_counts_are_refused() {
        let good: [u8; LOCAL_HEADER_LEN] = LocalRequest::Watch.encode()[..].try_into().unwrap();
        let mut bad = good;
        bad[0] = b'X';
        assert!(matches!(
            decode_header(&bad),
            Err(ProtocolError::BadMagic(_))
        ));
        let mut bad = good;
        bad[4] = 1;
        assert!(matches!(
            decode_header(&bad),
            Err(ProtocolError::UnsupportedVersion(1))
        ));
        let mut bad = good;
        bad[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            decode_header(&bad),
            Err(ProtocolError::TooLarge { .. })
        ));

        // Four CRCs announced for a block needing three.
        let mut body = Vec::new();
        body.extend_from_slice(&40_000u64.to_be_bytes());
        body.extend_from_slice(&16384u32.to_be_bytes());
        body.extend_from_slice(&4u32.to_be_bytes());
        body.extend_from_slice(&[0; 16]);
        assert!(LocalReply::decode(REPLICA, &body).is_err());
        // A huge key count with nothing behind it.
        assert!(LocalReply::decode(REVOKED, &u32::MAX.to_be_bytes()).is_err());
        assert!(LocalRequest::decode(0x7f, &[]).is_err());
        assert!(LocalRequest::decode(WATCH, &[0]).is_err());
    }

    /// What a refusal says: a count that cannot fit the bytes left is named
    /// as such before any item is read, bytes left after a whole message as
    /// trailing; texts may be as long as the limit and no longer.
    #[test]
    fn refusals_name_the_lie() {
        let malformed = |kind, body: &[u8]| match LocalReply::decode(kind, body) {
            Err(ProtocolError::Malformed(text)) => text,
            other => panic!("expected a malformed reply, got {other:?}"),
        };
        // Two keys of 9 bytes announced, 10 bytes behind the count.
        let mut body = 2u32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0; 10]);
        assert!(malformed(REVOKED, &body).contains("2 items announced"));
        // One key announced and present, 10 bytes more.
        let mut body = 1u32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0; 19]);
        assert!(malformed(REVOKED, &body).contains("10 trailing bytes"));

        let text = |len: usize| {
            let mut body = (len as u32).to_be_bytes().to_vec();
            body.extend_from_slice("a".repeat(len).as_bytes());
            body
        };
        assert_eq!(
            LocalReply::decode(REFUSED, &text(MAX_TEXT_LEN)).unwrap(),
            LocalReply::Refused("a".repeat(MAX_TEXT_LEN))
        );
        let long = malformed(REFUSED, &text(MAX_TEXT_LEN + 1));
        assert!(long.contains("text of 4097 bytes"), "{long}");
    }

    /// A send to a peer that is gone fails instead of spinning.
    #[tokio::test]
    async fn sending_to_a_closed_peer_is_an_error_not_a_spin() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(a);
        let bytes = vec![0u8; 1 << 20];
        let sent = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            send_with_fd(&b, &bytes, None),
        );
        let error = sent.await.expect("the send returns").unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
    }

    /// Several MB of CRCs outgrow the socket's buffer: sends wait for room
    /// and reads come in pieces, and the reply still arrives whole with its
    /// descriptor. Cut inside its body, a reply is truncated, not closed.
    #[tokio::test]
    async fn requests_cross_a_socket_and_oversized_ones_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let signer = crate::token::TokenKey {
            id: 2,
            secret: [8; 32],
            retire_at: u64::MAX,
        };
        let token = BlockToken::sign(&signer, BlockId(4), 1, crate::token::Modes::READ, 9);
        let open_block = LocalRequest::OpenBlock(key(4), token);
        // The largest request: one byte more is refused before decoding.
        let largest_body = open_block.encode().len() - LOCAL_HEADER_LEN;
        for request in [open_block, LocalRequest::Watch] {
            send_with_fd(&a, &request.encode(), None).await.unwrap();
            assert_eq!(read_local_request(&b).await.unwrap(), request);
        }
        let oversized = frame(OPEN_BLOCK, vec![0; largest_body + 1]);
        send_with_fd(&a, &oversized, None).await.unwrap();
        assert!(matches!(
            read_local_request(&b).await,
            Err(ProtocolError::TooLarge { .. })
        ));
    }

    /// More descriptors than a reply may carry are cut by the kernel: the
    /// reader says so instead of taking the ones that fit.
    #[tokio::test]
    async fn a_flood_of_descriptors_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let files: Vec<std::fs::File> = (0..16).map(|_| tempfile::tempfile().unwrap()).collect();
        let fds: Vec<BorrowedFd<'_>> = files.iter().map(|f| f.as_fd()).collect();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(16))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
        let reply = LocalReply::Refused("x".into()).encode();
        let sent = rustix::net::sendmsg(
            a.as_fd(),
            &[IoSlice::new(&reply)],
            &mut control,
            SendFlags::NOSIGNAL,
        )
        .unwrap();
        assert_eq!(sent, reply.len());
        match read_local_reply(&b).await {
            Err(ProtocolError::Malformed(text)) => {
                assert!(text.contains("too many descriptors"), "{text}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_reply_larger_than_the_socket_buffer_arrives_whole() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        let crcs: Vec<u32> = (0..2_000_000).collect();
        let reply = LocalReply::Replica(ReplicaInfo {
            offset: 0,
            length: crcs.len() as u64 * 512,
            bytes_per_checksum: 512,
            crcs,
        });
        let encoded = reply.encode();
        let (sent, read) = tokio::join!(
            send_with_fd(&a, &encoded, Some(file.as_fd())),
            read_local_reply(&b)
        );
        sent.unwrap();
        let (back, fd) = read.unwrap();
        assert_eq!(back, reply);
        assert!(fd.is_some());

        send_with_fd(&a, &encoded[..LOCAL_HEADER_LEN + 100], Some(file.as_fd()))
            .await
            .unwrap();
        drop(a);
        assert!(matches!(
            read_local_reply(&b).await,
            Err(ProtocolError::Truncated("body"))
        ));
    }

    /// A peer that closes with bytes of ours unread resets the connection:
    /// the reader gets that error instead of waiting for more.
    #[tokio::test]
    async fn a_reset_connection_is_an_error_not_a_wait() {
        let (a, b) = UnixStream::pair().unwrap();
        send_with_fd(&b, &LocalRequest::Watch.encode(), None)
            .await
            .unwrap();
        drop(a);
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), read_local_reply(&b));
        match read.await.expect("the reader returns") {
            Err(ProtocolError::Io(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset)
            }
            other => panic!("expected a reset, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_descriptor_travels_with_its_reply() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, b"hello", 0).unwrap();
        let reply = LocalReply::Replica(ReplicaInfo {
            offset: 0,
            length: 5,
            bytes_per_checksum: 512,
            crcs: checksum::compute(b"hello", 512),
        });
        send_with_fd(&a, &reply.encode(), Some(file.as_fd()))
            .await
            .unwrap();
        let (back, fd) = read_local_reply(&b).await.unwrap();
        assert_eq!(back, reply);
        let received = std::fs::File::from(fd.expect("a descriptor"));
        let mut buf = [0u8; 5];
        std::os::unix::fs::FileExt::read_exact_at(&received, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");

        // A request announcing more than a key is refused before allocating.
        let mut oversized = LocalRequest::Watch.encode();
        oversized[8..12].copy_from_slice(&1_000_000u32.to_be_bytes());
        send_with_fd(&a, &oversized, None).await.unwrap();
        assert!(matches!(
            read_local_request(&b).await,
            Err(ProtocolError::TooLarge { .. })
        ));

        // A replica reply without its descriptor is refused.
        send_with_fd(&a, &reply.encode(), None).await.unwrap();
        assert!(read_local_reply(&b).await.is_err());
        drop(a);
        assert!(matches!(
            read_local_reply(&b).await,
            Err(ProtocolError::Closed)
        ));
    }
}
