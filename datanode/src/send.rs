//! Sending a read reply: the frame and reply headers (CRCs included) first,
//! then the range's bytes straight from the block file.
//!
//! The data goes out one of two ways ([`SendMode`]): by sendfile(2) from the
//! page cache to a TCP socket ([`sendfile`]), or by positioned reads into a
//! buffer that is then written ([`copy_region`]). Copy mode serves every
//! writer that is not a TCP socket, and every read that verifies its CRCs
//! first ([`ReadSettings::verify_on_read`]): sendfile never lets the datanode
//! see the bytes. After each reply the kernel is asked to read the next
//! window of the block ahead ([`ReadSettings::readahead_bytes`]), when the
//! block's reads look sequential ([`open_blocks::Readahead`]).
//!
//! Small replies whose pages are cached skip both: a non-blocking read
//! (preadv2 with RWF_NOWAIT) on the executor copies them behind their
//! headers and one write sends the lot. A 64 KiB copy costs less than the
//! two thread switches of a sendfile call on the blocking pool.

pub(crate) mod open_blocks;
mod sendfile;

use crate::error::StoreError;
use crate::peer::Peer;
use crate::telemetry;
use open_blocks::{OpenBlock, OpenRange};
use proto::checksum::{self, ChecksumError};
use proto::page_cache::{self, read_cached, INLINE_READ_MAX};
use proto::wire::{self, ProtocolError, ReadData, Reply};
use proto::BlockKey;
use std::fmt;
use std::fs::File;
use std::io::ErrorKind;
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest piece read from disk and written to the socket at a time in copy mode.
const PIECE: usize = 1024 * 1024;
/// Whether a failed sendfile fallback was logged already (once is enough).
static SENDFILE_UNSUPPORTED_LOGGED: AtomicBool = AtomicBool::new(false);
/// Default [`ReadSettings::readahead_bytes`].
pub const DEFAULT_READAHEAD_BYTES: u64 = 4 * 1024 * 1024;

/// How a read reply's data travels from the block file to the socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendMode {
    /// sendfile(2): the kernel moves the bytes from the page cache to the
    /// socket; the datanode neither copies nor touches them. Replies up to
    /// 256 KiB whose pages are cached are copied behind their headers on
    /// the executor instead (cheaper than a trip to the blocking pool); they
    /// count under this mode too.
    #[default]
    Sendfile,
    /// Positioned reads into a buffer, then socket writes: two copies, but
    /// it works for any writer and lets the datanode look at the bytes.
    Copy,
}

impl SendMode {
    /// The mode's name, as in settings and in the `mode` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sendfile => "sendfile",
            Self::Copy => "copy",
        }
    }
}

impl fmt::Display for SendMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A send mode name that is neither `sendfile` nor `copy`.
#[derive(Debug, thiserror::Error)]
#[error("unknown send mode {0:?}, expected sendfile or copy")]
pub struct UnknownSendMode(String);

impl FromStr for SendMode {
    type Err = UnknownSendMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sendfile" => Ok(Self::Sendfile),
            "copy" => Ok(Self::Copy),
            _ => Err(UnknownSendMode(s.to_string())),
        }
    }
}

/// How the datanode serves reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSettings {
    /// How data reaches TCP sockets; other writers always get [`SendMode::Copy`].
    pub send_mode: SendMode,
    /// Check the range's CRCs against the bytes read from disk before the
    /// reply starts, answering a checksum error instead of corrupt data.
    /// Forces copy mode and holds the whole range in memory.
    pub verify_on_read: bool,
    /// Bytes after each read's range that the kernel is asked to read ahead
    /// (posix_fadvise WILLNEED), so the next sequential read finds them in
    /// the page cache; 0 turns it off.
    pub readahead_bytes: u64,
}

impl Default for ReadSettings {
    fn default() -> Self {
        Self {
            send_mode: SendMode::Sendfile,
            verify_on_read: false,
            readahead_bytes: DEFAULT_READAHEAD_BYTES,
        }
    }
}

impl ReadSettings {
    /// The mode a TCP socket's replies actually use.
    fn socket_mode(&self) -> SendMode {
        if self.verify_on_read {
            SendMode::Copy
        } else {
            self.send_mode
        }
    }
}

/// Why a read reply could not be sent completely.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// Nothing was sent yet: the request is answered with this error and the
    /// connection stays open.
    #[error(transparent)]
    Refused(StoreError),
    /// Once its headers are out, a reply cannot be replaced by an error
    /// reply: this and the following variants close the connection.
    #[error("encoding the reply: {0}")]
    Encode(#[from] ProtocolError),
    #[error("reading the block file: {0}")]
    Disk(std::io::Error),
    #[error("the block file ended at offset {at}, before the {end} bytes its reply announced")]
    ShortFile { at: u64, end: u64 },
    #[error("sendfile to the client: {0}")]
    Sendfile(std::io::Error),
    /// sendfile refused the block file; the bytes before `at` went out.
    #[error("sendfile cannot read the block file: {source}")]
    SendfileUnsupported { at: u64, source: std::io::Error },
    #[error("writing to the client: {0}")]
    Socket(std::io::Error),
}

/// Sends `range` of block `key` as the reply to request `request_id` to a
/// block client: by sendfile on a plain TCP socket unless `settings` ask for
/// copies, by copy through TLS.
pub(crate) async fn send_range_to_peer<P: Peer>(
    peer: &mut P,
    request_id: u64,
    key: BlockKey,
    range: OpenRange,
    settings: &ReadSettings,
) -> Result<(), SendError> {
    match peer.plain_socket() {
        Some(socket) if settings.socket_mode() == SendMode::Sendfile => {
            send_range_to_socket(socket, request_id, range, settings).await
        }
        _ => send_range(peer, request_id, key, range, settings).await,
    }
}

/// Sends `range` of block `key` as the reply to request `request_id` on a
/// TCP socket by sendfile.
async fn send_range_to_socket(
    stream: &mut TcpStream,
    request_id: u64,
    range: OpenRange,
    settings: &ReadSettings,
) -> Result<(), SendError> {
    let OpenRange { header, block } = range;
    let (offset, length) = (header.offset, header.length);
    let head = wire::encode_reply_head(request_id, &Reply::ReadData(header))?;
    let file = block.file.clone();
    // File offsets from here on: the block starts at `base` in its file.
    let (offset, base) = (block.base + offset, block.base);
    let end = offset + length;
    let mut at = offset;
    if length <= INLINE_READ_MAX && page_cache::nowait_supported() {
        // Headers and whatever the page cache holds, in one write.
        let mut reply = head;
        let from = reply.len();
        reply.resize(from + length as usize, 0);
        let got = read_cached(&file, &mut reply[from..], offset);
        reply.truncate(from + got);
        stream.write_all(&reply).await.map_err(SendError::Socket)?;
        at += got as u64;
        if at == end {
            finish(SendMode::Sendfile, &block, offset - base, length, settings);
            return Ok(());
        }
    } else {
        // TCP_NODELAY is set on every accepted socket: the headers leave now
        // rather than waiting for the data or a delayed ACK.
        stream.write_all(&head).await.map_err(SendError::Socket)?;
    }
    let mode = match sendfile::send_region(stream, file.clone(), at, end - at).await {
        Ok(()) => SendMode::Sendfile,
        Err(SendError::SendfileUnsupported { at, source }) => {
            if !SENDFILE_UNSUPPORTED_LOGGED.swap(true, Ordering::Relaxed) {
                tracing::warn!(error = %source, "sendfile does not work on the block files; sending by copy");
            }
            copy_region(stream, file.clone(), at, end - at).await?;
            SendMode::Copy
        }
        Err(e) => return Err(e),
    };
    finish(mode, &block, offset - base, length, settings);
    Ok(())
}

/// Sends `range` of block `key` as the reply to request `request_id` on any
/// writer, copying the data through a buffer.
pub(crate) async fn send_range<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    key: BlockKey,
    range: OpenRange,
    settings: &ReadSettings,
) -> Result<(), SendError> {
    let OpenRange { header, block } = range;
    let (offset, length) = (header.offset, header.length);
    let file = block.file.clone();
    if settings.verify_on_read {
        let data = read_verified(key, file, block.base, &header).await?;
        let head = wire::encode_reply_head(request_id, &Reply::ReadData(header))?;
        wire::write_frame(w, &head, &data)
            .await
            .map_err(SendError::Socket)?;
    } else {
        let head = wire::encode_reply_head(request_id, &Reply::ReadData(header))?;
        w.write_all(&head).await.map_err(SendError::Socket)?;
        copy_region(w, file, block.base + offset, length).await?;
        w.flush().await.map_err(SendError::Socket)?;
    }
    finish(SendMode::Copy, &block, offset, length, settings);
    Ok(())
}

/// Counts a reply of `[offset, offset + length)` of the block that went out
/// completely and, if the block's reads look sequential, reads ahead past it.
fn finish(mode: SendMode, block: &OpenBlock, offset: u64, length: u64, settings: &ReadSettings) {
    telemetry::bytes_read(length);
    telemetry::bytes_sent(mode.as_str(), length);
    let advice = block.readahead.after_read(
        offset,
        offset + length,
        settings.readahead_bytes,
        block.meta.length,
    );
    if let Some((from, len)) = advice {
        read_ahead(block.file.clone(), block.base + from, len);
    }
}

/// Asks the kernel to start reading `len` bytes of `file` from `from` into
/// the page cache, without waiting: a sequential reader's next request then
/// finds them there, and a sendfile call does not wait on the disk.
fn read_ahead(file: Arc<File>, from: u64, len: u64) {
    let Some(len) = NonZeroU64::new(len) else {
        return;
    };
    // fadvise may block while it queues the reads: not on the executor.
    tokio::task::spawn_blocking(move || {
        if let Err(e) = rustix::fs::fadvise(&*file, from, Some(len), rustix::fs::Advice::WillNeed) {
            tracing::debug!(from, len, error = %e, "readahead advice failed");
        }
    });
}

/// Reads all of `header`'s range (the block starting at `base` in `file`)
/// and checks it against its CRCs, before anything is sent: a mismatch
/// becomes a checksum error reply.
async fn read_verified(
    key: BlockKey,
    file: Arc<File>,
    base: u64,
    header: &ReadData,
) -> Result<Vec<u8>, SendError> {
    let (offset, length) = (header.offset, header.length);
    let data = tokio::task::spawn_blocking(move || {
        let mut data = vec![0u8; length as usize];
        file.read_exact_at(&mut data, base + offset).map(|()| data)
    })
    .await
    .map_err(|e| SendError::Disk(std::io::Error::other(e.to_string())))?
    .map_err(|e| {
        let what = if e.kind() == ErrorKind::UnexpectedEof {
            "block file shorter than its sidecar"
        } else {
            "read"
        };
        SendError::Refused(StoreError::io(format!("{what} of block {key}"), e))
    })?;
    match checksum::verify(&data, offset, header.bytes_per_checksum, &header.crcs) {
        Ok(()) => Ok(data),
        Err(ChecksumError::Mismatch { offset, .. }) => {
            tracing::error!(block = %key, offset, "block data on disk does not match its checksum");
            telemetry::corrupt_read();
            Err(SendError::Refused(StoreError::ChecksumMismatch {
                key,
                offset,
            }))
        }
        Err(e) => Err(SendError::Refused(StoreError::Invalid(format!(
            "block {key}: cannot verify the range at {offset}: {e}"
        )))),
    }
}

/// Writes `len` bytes of `file` from `offset` to `w`.
async fn copy_region<W: AsyncWrite + Unpin>(
    w: &mut W,
    file: Arc<File>,
    offset: u64,
    len: u64,
) -> Result<(), SendError> {
    let mut buf = vec![0u8; PIECE.min(len as usize)];
    let mut done = 0u64;
    while done < len {
        let n = PIECE.min((len - done) as usize);
        let file = file.clone();
        let at = offset + done;
        let (filled, result) = tokio::task::spawn_blocking(move || {
            let result = file.read_exact_at(&mut buf[..n], at);
            (buf, result)
        })
        .await
        .map_err(|e| SendError::Disk(std::io::Error::other(e.to_string())))?;
        buf = filled;
        result.map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => SendError::ShortFile {
                at,
                end: offset + len,
            },
            _ => SendError::Disk(e),
        })?;
        w.write_all(&buf[..n]).await.map_err(SendError::Socket)?;
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_modes_parse_from_their_names() {
        for mode in [SendMode::Sendfile, SendMode::Copy] {
            assert_eq!(mode.as_str().parse::<SendMode>().unwrap(), mode);
        }
        assert_eq!(" Copy ".parse::<SendMode>().unwrap(), SendMode::Copy);
        assert!("splice".parse::<SendMode>().is_err());
    }

    /// A range announcing `claimed` bytes of a file holding only `stored`.
    fn range_past_the_file(stored: usize, claimed: u64) -> OpenRange {
        use std::io::Write;
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![5u8; stored]).unwrap();
        let crcs = vec![0; checksum::chunk_count(claimed, 1024) as usize];
        let block = OpenBlock {
            meta: crate::store::BlockMeta {
                length: claimed,
                bytes_per_checksum: 1024,
            },
            file: Arc::new(file),
            base: 0,
            crcs: crcs.clone(),
            readahead: Default::default(),
        };
        OpenRange {
            header: ReadData {
                offset: 0,
                length: claimed,
                bytes_per_checksum: 1024,
                crcs,
            },
            block: Arc::new(block),
        }
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_reply_fails_the_copy_after_the_headers() {
        let mut sink = Vec::new();
        let range = range_past_the_file(3000, 5000);
        let settings = ReadSettings {
            send_mode: SendMode::Copy,
            ..ReadSettings::default()
        };
        let key = BlockKey::new(proto::BlockId(1), 0);
        match send_range(&mut sink, 1, key, range, &settings).await {
            Err(SendError::ShortFile { at, end }) => assert_eq!((at, end), (0, 5000)),
            other => panic!("expected a short file error, got {other:?}"),
        }
        assert!(!sink.is_empty(), "the headers went out first");
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_reply_is_refused_before_sending_when_verifying() {
        let mut sink = Vec::new();
        let range = range_past_the_file(3000, 5000);
        let settings = ReadSettings {
            verify_on_read: true,
            ..ReadSettings::default()
        };
        let key = BlockKey::new(proto::BlockId(1), 0);
        match send_range(&mut sink, 1, key, range, &settings).await {
            Err(SendError::Refused(e)) => assert!(e.is_local_failure(), "{e}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(sink.is_empty(), "nothing was sent");
    }

    #[test]
    fn verify_on_read_forces_copies_on_sockets() {
        let settings = ReadSettings {
            verify_on_read: true,
            ..ReadSettings::default()
        };
        assert_eq!(settings.socket_mode(), SendMode::Copy);
        assert_eq!(ReadSettings::default().socket_mode(), SendMode::Sendfile);
    }
}
