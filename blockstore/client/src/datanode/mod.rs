//! Pooled connections to datanodes and the block requests over them.
//!
//! Each datanode address keeps a few idle connections (TCP, or mutual TLS
//! over it when the cluster has a CA). A request takes
//! one out (the pool's lock is held only for the pop and the push, never
//! across I/O), does one request/reply exchange and puts it back. A
//! connection that saw any error is dropped instead.

pub mod read_buffers;
pub mod replica_cache;
pub mod short_circuit;

use crate::{ClientConfig, ClientError};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use proto::checksum::{self, ChecksumError};
use proto::ids::BlockKey;
use proto::token::BlockToken;
use proto::wire::{
    self, ErrorCode, ErrorReply, LocalInfo, ProtocolError, ReadData, Reply, Request, WriteChunks,
};
use short_circuit::{ShortCircuit, ShortCircuitStats};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use tls::link::{DialError, Link};

/// Idle connections kept per datanode; more are closed when returned.
const MAX_IDLE_PER_DATANODE: usize = 16;
/// Largest range asked for in one read request, so that the widened reply
/// stays well under the frame payload limit.
const MAX_READ_PIECE: u64 = 32 * 1024 * 1024;
/// Largest read buffer reserved up front (a default block); longer reads,
/// which do not happen with default settings, grow it.
const MAX_PREALLOCATED_READ: u64 = 256 * 1024 * 1024;
/// Largest write payload sent in one request (rounded down to whole chunks).
const MAX_WRITE_PIECE: usize = 32 * 1024 * 1024;
/// Below this size checksums are computed on the executor thread; above it
/// they go to the blocking pool (CRC32C runs at several GB/s with SSE 4.2).
const INLINE_CHECKSUM_LIMIT: usize = 4 * 1024 * 1024;

/// Connections to datanodes, reused across streams; shared by a whole process.
pub struct DatanodePool {
    config: ClientConfig,
    idle: Mutex<HashMap<String, Vec<Link>>>,
    next_request_id: AtomicU64,
    /// Local reads of same-host datanodes, when `config.short_circuit`.
    short_circuit: Option<ShortCircuit>,
}

/// How one exchange failed, before it becomes a [`ClientError`].
enum Failure {
    /// A reused connection turned out to be closed before any reply byte
    /// arrived: the datanode never saw the request, so it is safe to resend.
    Stale(std::io::Error),
    Io(std::io::Error),
    Protocol(String),
}

impl Failure {
    fn from_protocol(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Io(e) => Self::Io(e),
            other => Self::Protocol(other.to_string()),
        }
    }

    fn into_client_error(self, addr: &str) -> ClientError {
        match self {
            Self::Stale(e) | Self::Io(e) => ClientError::Io {
                addr: addr.to_string(),
                message: e.to_string(),
            },
            Self::Protocol(message) => ClientError::Protocol {
                addr: addr.to_string(),
                message,
            },
        }
    }
}

fn is_closed_connection(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::BrokenPipe
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::NotConnected
            | ErrorKind::UnexpectedEof
    )
}

fn protocol_error(addr: &str, message: impl Into<String>) -> ClientError {
    ClientError::Protocol {
        addr: addr.to_string(),
        message: message.into(),
    }
}

/// The client-side meaning of a datanode's refusal.
fn remote_error(addr: &str, key: BlockKey, e: ErrorReply) -> ClientError {
    match (e.code, e.offset) {
        (ErrorCode::ChecksumMismatch, Some(offset)) => ClientError::Checksum { block: key, offset },
        (ErrorCode::NotFound, _) => ClientError::Missing {
            addr: addr.to_string(),
            block: key,
        },
        _ => ClientError::Remote {
            addr: addr.to_string(),
            message: format!("{}: {}", e.code, e.message),
        },
    }
}

fn checksum_error(addr: &str, key: BlockKey, e: ChecksumError) -> ClientError {
    match e {
        ChecksumError::Mismatch { offset, .. } => ClientError::Checksum { block: key, offset },
        other => protocol_error(addr, other.to_string()),
    }
}

impl DatanodePool {
    /// An empty pool.
    pub fn new(config: ClientConfig) -> Self {
        Self {
            short_circuit: config.short_circuit.then(|| ShortCircuit::new(&config)),
            config,
            idle: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(1),
        }
    }

    /// The settings this pool was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Idle connections currently pooled for `addr`.
    pub fn idle_connections(&self, addr: &str) -> usize {
        self.idle.lock().get(addr).map_or(0, Vec::len)
    }

    /// Appends `data` at `offset` of the (uncommitted) block file `key` on the
    /// datanode at `addr`, with CRC32C checksums computed here per
    /// `bytes_per_checksum` chunk. `offset` must be chunk-aligned.
    pub async fn write_chunks(
        &self,
        addr: &str,
        key: BlockKey,
        token: Option<&BlockToken>,
        offset: u64,
        data: Bytes,
    ) -> Result<(), ClientError> {
        let bpc = self.config.bytes_per_checksum;
        checksum::validate_bytes_per_checksum(bpc)
            .map_err(|e| protocol_error(addr, e.to_string()))?;
        let crcs = compute_checksums(addr, data.clone(), bpc).await?;
        self.write_chunks_with_checksums(addr, key, token, offset, bpc, crcs, data)
            .await
    }

    /// Like [`write_chunks`](Self::write_chunks) with checksums the caller
    /// already has (one CRC32C per `bytes_per_checksum` chunk of `data`); the
    /// datanode verifies them on arrival.
    #[allow(clippy::too_many_arguments)]
    pub async fn write_chunks_with_checksums(
        &self,
        addr: &str,
        key: BlockKey,
        token: Option<&BlockToken>,
        offset: u64,
        bytes_per_checksum: u32,
        crcs: Vec<u32>,
        data: Bytes,
    ) -> Result<(), ClientError> {
        checksum::validate_bytes_per_checksum(bytes_per_checksum)
            .map_err(|e| protocol_error(addr, e.to_string()))?;
        let bpc = bytes_per_checksum as usize;
        if !offset.is_multiple_of(u64::from(bytes_per_checksum)) {
            return Err(protocol_error(
                addr,
                format!("write offset {offset} is not a multiple of {bytes_per_checksum}"),
            ));
        }
        if crcs.len() as u64 != checksum::chunk_count(data.len() as u64, bytes_per_checksum) {
            return Err(protocol_error(
                addr,
                format!("{} checksums for {} bytes", crcs.len(), data.len()),
            ));
        }
        let piece = (MAX_WRITE_PIECE / bpc).max(1) * bpc;
        let mut pos = 0;
        loop {
            let end = (pos + piece).min(data.len());
            let request = Request::WriteChunks(WriteChunks {
                key,
                offset: offset + pos as u64,
                bytes_per_checksum,
                crcs: crcs[pos / bpc..end.div_ceil(bpc)].to_vec(),
            });
            let reply = self
                .call(addr, &request, token, &data[pos..end], None)
                .await?;
            expect_ok(addr, key, reply)?;
            pos = end;
            if pos >= data.len() {
                return Ok(());
            }
        }
    }

    /// Makes block `key` durable (fsync) at `length` bytes and visible to reads.
    pub async fn commit_block(
        &self,
        addr: &str,
        key: BlockKey,
        token: Option<&BlockToken>,
        length: u64,
    ) -> Result<(), ClientError> {
        let reply = self
            .call(
                addr,
                &Request::CommitBlock { key, length },
                token,
                &[],
                None,
            )
            .await?;
        expect_ok(addr, key, reply)
    }

    /// Reads `len` bytes at `offset` of block `key`, verifying every checksum.
    ///
    /// The datanode sends a chunk-aligned superset of the range; it lands in
    /// one buffer (no second copy), all its chunks are verified in one call,
    /// and the exact range is returned as a slice of that buffer.
    pub async fn read_block(
        &self,
        addr: &str,
        key: BlockKey,
        token: Option<&BlockToken>,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ClientError> {
        if let (Some(short_circuit), Some(token)) = (&self.short_circuit, token) {
            if let Some(data) = short_circuit
                .read(self, addr, key, token, offset, len)
                .await
            {
                return Ok(data);
            }
        }
        let end = offset
            .checked_add(len)
            .ok_or_else(|| protocol_error(addr, "read range overflows"))?;
        // One allocation for the whole widened range (a chunk of slack each
        // side), bounded so that an absurd length cannot reserve absurd memory.
        let slack = 2 * u64::from(self.config.bytes_per_checksum);
        let capacity = len.min(MAX_PREALLOCATED_READ) + slack;
        let mut buf = BytesMut::with_capacity(capacity as usize);
        let mut crcs = Vec::new();
        // Aligned block offset of buf[0], and the block's chunk size, once known.
        let mut base_and_bpc: Option<(u64, u32)> = None;
        let mut next = offset;
        loop {
            let piece_end = end.min(next.saturating_add(MAX_READ_PIECE));
            let request = Request::ReadBlock {
                key,
                offset: next,
                length: piece_end - next,
            };
            let sink = ReadSink {
                buf: &mut buf,
                want: next,
                want_end: piece_end,
                base_and_bpc,
            };
            // `call` has checked the reply against the piece (see `ReadSink`).
            let reply = match self.call(addr, &request, token, &[], Some(sink)).await? {
                Reply::ReadData(data) => data,
                other => return Err(unexpected_reply(addr, key, other)),
            };
            base_and_bpc.get_or_insert((reply.offset, reply.bytes_per_checksum));
            crcs.extend_from_slice(&reply.crcs);
            next = reply.offset + reply.length;
            if next >= end {
                break;
            }
        }
        let (base, bpc) = base_and_bpc.expect("at least one reply was read");
        let data = verify_checksums(addr, buf.freeze(), base, bpc, crcs)
            .await?
            .map_err(|e| checksum_error(addr, key, e))?;
        Ok(data.slice((offset - base) as usize..(end - base) as usize))
    }

    /// Short-circuit read counters; `None` when short-circuit is off.
    pub fn short_circuit_stats(&self) -> Option<ShortCircuitStats> {
        self.short_circuit.as_ref().map(ShortCircuit::stats)
    }

    /// Asks the datanode at `addr` where its short-circuit socket is.
    pub(crate) async fn local_info(&self, addr: &str) -> Result<LocalInfo, ClientError> {
        let request = Request::LocalInfo;
        match self.call(addr, &request, None, &[], None).await? {
            Reply::LocalInfo(info) => Ok(info),
            other => Err(unexpected_reply(addr, request.key(), other)),
        }
    }

    /// Deletes block `key`; no error when absent. A write token deletes
    /// it while uncommitted, a delete token at any time.
    pub async fn delete_block(
        &self,
        addr: &str,
        key: BlockKey,
        token: Option<&BlockToken>,
    ) -> Result<(), ClientError> {
        let reply = self
            .call(addr, &Request::DeleteBlock { key }, token, &[], None)
            .await?;
        expect_ok(addr, key, reply)
    }

    /// One request/reply exchange with the datanode at `addr`, within the
    /// I/O deadline. A read reply is checked against `sink`'s piece and its
    /// data appended to `sink`'s buffer. A pooled connection found closed is
    /// replaced by a fresh one, once.
    async fn call(
        &self,
        addr: &str,
        request: &Request,
        token: Option<&BlockToken>,
        payload: &[u8],
        mut sink: Option<ReadSink<'_>>,
    ) -> Result<Reply, ClientError> {
        let mut pooled = self.take_idle(addr);
        loop {
            let reused = pooled.is_some();
            let mut stream = match pooled.take() {
                Some(stream) => stream,
                None => self.connect(addr).await?,
            };
            let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
            let exchange = exchange(
                &mut stream,
                request_id,
                request,
                token,
                payload,
                sink.as_mut(),
            );
            let outcome = tokio::time::timeout(self.config.io_timeout, exchange).await;
            match outcome {
                Err(_elapsed) => {
                    return Err(ClientError::Timeout {
                        addr: addr.to_string(),
                    })
                }
                Ok(Ok(Reply::Error(e))) => return Err(remote_error(addr, request.key(), e)),
                Ok(Ok(reply)) => {
                    self.put_idle(addr, stream);
                    return Ok(reply);
                }
                Ok(Err(Failure::Stale(e))) if reused => {
                    // The datanode closed it (restart, shutdown): the other
                    // idle connections to it are most likely closed too.
                    tracing::debug!(addr, error = %e, "pooled datanode connection was closed; reconnecting");
                    self.idle.lock().remove(addr);
                }
                Ok(Err(failure)) => return Err(failure.into_client_error(addr)),
            }
        }
    }

    fn take_idle(&self, addr: &str) -> Option<Link> {
        self.idle.lock().get_mut(addr).and_then(Vec::pop)
    }

    fn put_idle(&self, addr: &str, stream: Link) {
        let mut idle = self.idle.lock();
        let conns = idle.entry(addr.to_string()).or_default();
        if conns.len() < MAX_IDLE_PER_DATANODE {
            conns.push(stream);
        }
    }

    async fn connect(&self, addr: &str) -> Result<Link, ClientError> {
        let tls = self.config.tls.as_deref();
        Link::dial(addr, tls, self.config.connect_timeout)
            .await
            .map_err(|e| match e {
                DialError::TimedOut => ClientError::Timeout {
                    addr: addr.to_string(),
                },
                e => ClientError::Io {
                    addr: addr.to_string(),
                    message: e.to_string(),
                },
            })
    }
}

/// Where the data of a read reply goes, and the piece of the block it must cover.
struct ReadSink<'a> {
    /// The read buffer the data is appended to.
    buf: &'a mut BytesMut,
    /// Start of the piece asked for.
    want: u64,
    /// End of the piece asked for.
    want_end: u64,
    /// Aligned start and chunk size of the pieces read before, if any.
    base_and_bpc: Option<(u64, u32)>,
}

/// Sends `request` and reads its reply; a read reply is checked against
/// `sink` before any of its data is read, then its data goes to `sink`.
async fn exchange(
    stream: &mut Link,
    request_id: u64,
    request: &Request,
    token: Option<&BlockToken>,
    payload: &[u8],
    sink: Option<&mut ReadSink<'_>>,
) -> Result<Reply, Failure> {
    let head = wire::encode_request_head(request_id, request, token, payload.len())
        .map_err(|e| Failure::Protocol(e.to_string()))?;
    if let Err(e) = wire::write_frame(stream, &head, payload).await {
        return Err(if is_closed_connection(&e) {
            Failure::Stale(e)
        } else {
            Failure::Io(e)
        });
    }
    let incoming = match wire::read_reply(stream).await {
        Ok(incoming) => incoming,
        Err(ProtocolError::Closed) => {
            return Err(Failure::Stale(ErrorKind::UnexpectedEof.into()));
        }
        Err(ProtocolError::Io(e)) if is_closed_connection(&e) => return Err(Failure::Stale(e)),
        Err(e) => return Err(Failure::from_protocol(e)),
    };
    if let (0, Reply::Error(e)) = (incoming.request_id, &incoming.message) {
        // Request id 0: the datanode could not decode our frame at all.
        return Err(Failure::Protocol(format!(
            "datanode refused the frame: {}",
            e.message
        )));
    }
    if incoming.request_id != request_id {
        return Err(Failure::Protocol(format!(
            "reply to request {} while waiting for {request_id}",
            incoming.request_id
        )));
    }
    match (&incoming.message, sink) {
        (Reply::ReadData(reply), Some(sink)) => {
            check_read_reply(reply, sink.want, sink.want_end, sink.base_and_bpc)
                .map_err(Failure::Protocol)?;
            // Checked: the reply is at most a chunk longer than the piece
            // asked for, so its length can be reserved at once and the data
            // lands in one buffer (the whole read's, reserved by read_block).
            let len = incoming.payload_len;
            sink.buf.reserve(len as usize);
            wire::read_payload_into(stream, len, sink.buf)
                .await
                .map_err(Failure::from_protocol)?;
        }
        _ if incoming.payload_len > 0 => {
            return Err(Failure::Protocol("unexpected data in reply".into()));
        }
        _ => {}
    }
    Ok(incoming.message)
}

fn expect_ok(addr: &str, key: BlockKey, reply: Reply) -> Result<(), ClientError> {
    match reply {
        Reply::Ok => Ok(()),
        other => Err(unexpected_reply(addr, key, other)),
    }
}

fn unexpected_reply(addr: &str, key: BlockKey, reply: Reply) -> ClientError {
    match reply {
        Reply::Error(e) => remote_error(addr, key, e),
        other => protocol_error(addr, format!("unexpected {:?} reply", other.kind())),
    }
}

/// Checks that a read reply covers the piece `[want, want_end)` asked for,
/// widened by less than a chunk at each end (so its length is bounded by the
/// request), and continues the previous pieces (same chunk size, contiguous).
fn check_read_reply(
    reply: &ReadData,
    want: u64,
    want_end: u64,
    base_and_bpc: Option<(u64, u32)>,
) -> Result<(), String> {
    let reply_end = reply
        .offset
        .checked_add(reply.length)
        .ok_or("read reply range overflows")?;
    let bpc = u64::from(reply.bytes_per_checksum);
    let covers = reply.offset <= want
        && want - reply.offset < bpc
        && reply_end >= want_end
        && reply_end - want_end < bpc;
    let continues = match base_and_bpc {
        None => true,
        Some((_, bpc)) => bpc == reply.bytes_per_checksum && reply.offset == want,
    };
    if !covers || !continues {
        return Err(format!(
            "read reply [{}, {reply_end}) does not match the range [{want}, {want_end}) asked for",
            reply.offset
        ));
    }
    Ok(())
}

/// Runs checksum work `f` on the blocking pool; a task that panicked or was
/// cancelled is an error of the request to `addr`, not a panic of the caller.
async fn on_blocking_pool<T: Send + 'static>(
    addr: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ClientError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ClientError::Io {
            addr: addr.to_string(),
            message: format!("local checksum task failed: {e}"),
        })
}

async fn compute_checksums(
    addr: &str,
    data: Bytes,
    bytes_per_checksum: u32,
) -> Result<Vec<u32>, ClientError> {
    if data.len() <= INLINE_CHECKSUM_LIMIT {
        return Ok(checksum::compute(&data, bytes_per_checksum));
    }
    on_blocking_pool(addr, move || checksum::compute(&data, bytes_per_checksum)).await
}

/// Verifies `data` (see [`checksum::verify`]); the outer error is a failed
/// task, the inner one a bad checksum.
async fn verify_checksums(
    addr: &str,
    data: Bytes,
    start: u64,
    bytes_per_checksum: u32,
    crcs: Vec<u32>,
) -> Result<Result<Bytes, ChecksumError>, ClientError> {
    let inline = data.len() <= INLINE_CHECKSUM_LIMIT;
    let verify = move || checksum::verify(&data, start, bytes_per_checksum, &crcs).map(|()| data);
    if inline {
        return Ok(verify());
    }
    on_blocking_pool(addr, verify).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_checksum_task_is_an_error_not_a_panic() {
        let err = on_blocking_pool("dn:1", || -> u32 { panic!("checksum code bug") })
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ClientError::Io { addr, message } if addr == "dn:1" && message.contains("checksum task")),
            "{err:?}"
        );
        assert_eq!(on_blocking_pool("dn:1", || 7).await.unwrap(), 7);
    }

    fn reply(offset: u64, length: u64) -> ReadData {
        ReadData {
            offset,
            length,
            bytes_per_checksum: 512,
            crcs: Vec::new(),
        }
    }

    #[test]
    fn a_read_reply_may_widen_the_piece_by_less_than_a_chunk_each_side() {
        assert_eq!(check_read_reply(&reply(0, 1024), 100, 1000, None), Ok(()));
        assert_eq!(check_read_reply(&reply(512, 300), 600, 812, None), Ok(()));
        // Starts too early, ends too early, or runs on far past the piece.
        assert!(check_read_reply(&reply(0, 1024), 600, 1000, None).is_err());
        assert!(check_read_reply(&reply(0, 512), 100, 1000, None).is_err());
        assert!(check_read_reply(&reply(0, 1536), 100, 1000, None).is_err());
        assert!(check_read_reply(&reply(0, 64 << 20), 0, 100, None).is_err());
        // A continuation starts exactly where asked, with the same chunk size.
        assert_eq!(
            check_read_reply(&reply(1024, 512), 1024, 1536, Some((0, 512))),
            Ok(())
        );
        assert!(check_read_reply(&reply(1024, 512), 1024, 1536, Some((0, 1024))).is_err());
        assert!(check_read_reply(&reply(u64::MAX, 2), u64::MAX, u64::MAX, None).is_err());
    }
}
