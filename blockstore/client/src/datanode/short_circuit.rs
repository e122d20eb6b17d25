//! Short-circuit local reads: when a datanode runs on this host, read its
//! block files directly instead of through its TCP server.
//!
//! Per datanode address, once: ask it over TCP where its Unix socket is and
//! which host it runs on (`Request::LocalInfo`); if the host token is ours,
//! open a watch connection on the socket and check that the datanode behind
//! it has the identity the TCP answer gave. From then on a block is opened
//! once over the socket (its data file passed with SCM_RIGHTS, its CRCs in
//! the reply) and kept in the [`ReplicaCache`]; each read is a `pread` on the
//! blocking pool, verified against the CRCs exactly as on the TCP path.
//!
//! Revocation: the datanode pushes the keys of blocks it deletes on the
//! watch connection, and the client drops their descriptors; if the watch
//! connection ends, every descriptor of that datanode goes. Between a
//! delete and its notice, a read could still see the unlinked file, so every
//! read also checks the file's link count after reading: a deleted replica is
//! never served.
//!
//! Every failure (no socket, other host, refused block, checksum mismatch,
//! revoked replica) makes the caller fall back to TCP; a datanode whose
//! socket cannot be used is not asked again for [`RETRY_AFTER`].

use super::read_buffers;
use super::replica_cache::ReplicaCache;
use super::DatanodePool;
use crate::{ClientConfig, ClientError};
use bytes::Bytes;
use parking_lot::Mutex;
use proto::checksum::{self, ChecksumError};
use proto::ids::BlockKey;
use proto::page_cache;
use proto::recycled::BufferRecycler;
use proto::token::BlockToken;
use proto::wire::local::{self, LocalReply, LocalRequest};
use proto::wire::ProtocolError;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;
use tokio::task::AbortHandle;

/// Open replicas kept at most (each holds one descriptor), as HDFS's
/// `dfs.client.read.shortcircuit.streams.cache.size`.
pub const REPLICA_CACHE_CAPACITY: usize = 256;
/// A replica unused this long is closed (HDFS: `streams.cache.expiry.ms`).
pub const REPLICA_IDLE_EXPIRY: Duration = Duration::from_secs(5 * 60);
/// How long a datanode whose socket could not be used is read over TCP
/// before short-circuit is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Idle socket connections kept per datanode for opening blocks.
const MAX_IDLE_CONNECTIONS: usize = 4;

/// Why a short-circuit read did not happen; the read then goes over TCP.
#[derive(Debug, thiserror::Error)]
pub enum ShortCircuitError {
    /// This host's identity cannot be read (no /proc).
    #[error("this host has no identity to compare")]
    NoHostToken,
    /// The datanode runs on another host (or in another container).
    #[error("the datanode runs on another host")]
    OtherHost,
    /// The socket leads to a datanode other than the one asked over TCP.
    #[error("the socket belongs to datanode {found}, not {expected}")]
    WrongDatanode {
        /// Identity from the TCP answer.
        expected: String,
        /// Identity the socket gave.
        found: String,
    },
    /// Asking over TCP failed or was refused.
    #[error("discovery: {0}")]
    Discovery(#[from] ClientError),
    /// The socket exchange failed or was malformed.
    #[error("socket: {0}")]
    Protocol(#[from] ProtocolError),
    /// The datanode refused to open the block.
    #[error("refused: {0}")]
    Refused(String),
    /// Unexpected message on the socket.
    #[error("unexpected reply {0}")]
    Unexpected(&'static str),
    /// A socket exchange took longer than the client's deadline.
    #[error("timed out")]
    Timeout,
    /// Reading the block file failed.
    #[error("reading the block file: {0}")]
    Io(#[from] std::io::Error),
    /// The block file was deleted (its link count is zero).
    #[error("the block was deleted")]
    Revoked,
    /// The range is not inside the block.
    #[error("range outside the block")]
    OutOfRange,
    /// Data failed its CRC32C check.
    #[error("{0}")]
    Checksum(#[from] ChecksumError),
}

/// A block opened through the socket: the file holding it (its data file,
/// or its volume from `offset`) and all its CRCs (committed blocks are
/// immutable, so they are loaded once).
#[derive(Debug)]
pub struct LocalReplica {
    file: File,
    offset: u64,
    length: u64,
    bytes_per_checksum: u32,
    crcs: Vec<u32>,
}

/// Counters of one client's short-circuit reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShortCircuitStats {
    /// Reads served from a local block file.
    pub reads: u64,
    /// Reads that tried the local path, failed, and went over TCP.
    pub fallbacks: u64,
    /// Replicas (open descriptors) cached now.
    pub cached_replicas: usize,
}

/// A local datanode whose socket is in use.
struct LocalDatanode {
    socket_path: PathBuf,
    idle: Mutex<Vec<UnixStream>>,
    watch: AbortHandle,
}

impl Drop for LocalDatanode {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

type OpeningReplica = tokio::sync::OnceCell<Arc<LocalReplica>>;

enum Peer {
    Discovering,
    Unavailable { retry_at: Instant },
    Ready(Arc<LocalDatanode>),
}

struct Inner {
    own_host: Option<String>,
    connect_timeout: Duration,
    io_timeout: Duration,
    cache: ReplicaCache<Arc<LocalReplica>>,
    /// Opens in flight, so that concurrent first reads of a block share one
    /// (as HDFS's ShortCircuitCache coalesces replica creation).
    opening: Mutex<HashMap<(String, BlockKey), Arc<OpeningReplica>>>,
    peers: Mutex<HashMap<String, Peer>>,
    reads: AtomicU64,
    fallbacks: AtomicU64,
    /// Buffers of reads served from cached pages, reused once dropped.
    read_buffers: BufferRecycler,
}

/// The short-circuit read path of one [`DatanodePool`].
pub struct ShortCircuit {
    inner: Arc<Inner>,
}

/// Marks a discovery abandoned midway (its future dropped) as failed, so
/// that the address does not stay "discovering" for ever.
struct DiscoveryGuard<'a> {
    inner: &'a Inner,
    addr: &'a str,
    done: bool,
}

impl Drop for DiscoveryGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.inner.mark_unavailable(self.addr);
        }
    }
}

impl ShortCircuit {
    /// A short-circuit path with the deadlines of `config`.
    pub fn new(config: &ClientConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                own_host: local::host_token(),
                connect_timeout: config.connect_timeout,
                io_timeout: config.io_timeout,
                cache: ReplicaCache::new(REPLICA_CACHE_CAPACITY, REPLICA_IDLE_EXPIRY),
                opening: Mutex::new(HashMap::new()),
                peers: Mutex::new(HashMap::new()),
                reads: AtomicU64::new(0),
                fallbacks: AtomicU64::new(0),
                read_buffers: BufferRecycler::new(read_buffers::MAX_IDLE),
            }),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ShortCircuitStats {
        ShortCircuitStats {
            reads: self.inner.reads.load(Ordering::Relaxed),
            fallbacks: self.inner.fallbacks.load(Ordering::Relaxed),
            cached_replicas: self.inner.cache.len(),
        }
    }

    /// Reads `len` bytes at `offset` of block `key` from the local file of
    /// the datanode at `addr`, verified. `None`: read it over TCP instead
    /// (the datanode is not local, or the local read failed and was counted).
    pub(crate) async fn read(
        &self,
        pool: &DatanodePool,
        addr: &str,
        key: BlockKey,
        token: &BlockToken,
        offset: u64,
        len: u64,
    ) -> Option<Bytes> {
        let inner = &self.inner;
        let datanode = inner.datanode(pool, addr).await?;
        match inner
            .read_local(&datanode, addr, key, token, offset, len)
            .await
        {
            Ok(data) => {
                inner.reads.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(crate::telemetry::SHORT_CIRCUIT_READS.name).increment(1);
                Some(data)
            }
            Err(e) => {
                inner.fallbacks.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(crate::telemetry::SHORT_CIRCUIT_FALLBACKS.name).increment(1);
                if matches!(e, ShortCircuitError::Checksum(_)) {
                    tracing::warn!(addr, block = %key, error = %e, "local block file failed its checksum; reading over TCP");
                } else {
                    tracing::debug!(addr, block = %key, error = %e, "short-circuit read failed; reading over TCP");
                }
                None
            }
        }
    }
}

impl Inner {
    fn mark_unavailable(&self, addr: &str) {
        self.peers.lock().insert(
            addr.to_string(),
            Peer::Unavailable {
                retry_at: Instant::now() + RETRY_AFTER,
            },
        );
    }

    /// The usable local datanode at `addr`, discovering it on first use.
    async fn datanode(
        self: &Arc<Self>,
        pool: &DatanodePool,
        addr: &str,
    ) -> Option<Arc<LocalDatanode>> {
        {
            let mut peers = self.peers.lock();
            match peers.get(addr) {
                Some(Peer::Ready(datanode)) => return Some(datanode.clone()),
                Some(Peer::Discovering) => return None,
                Some(Peer::Unavailable { retry_at }) if Instant::now() < *retry_at => return None,
                _ => {}
            }
            peers.insert(addr.to_string(), Peer::Discovering);
        }
        let mut guard = DiscoveryGuard {
            inner: self,
            addr,
            done: false,
        };
        let discovered = self.discover(pool, addr).await;
        guard.done = true;
        match discovered {
            Ok(datanode) => {
                tracing::info!(addr, socket = %datanode.socket_path.display(), "short-circuit reads enabled for a local datanode");
                self.peers
                    .lock()
                    .insert(addr.to_string(), Peer::Ready(datanode.clone()));
                Some(datanode)
            }
            Err(e) => {
                tracing::debug!(addr, error = %e, "no short-circuit reads from this datanode");
                self.mark_unavailable(addr);
                None
            }
        }
    }

    async fn discover(
        self: &Arc<Self>,
        pool: &DatanodePool,
        addr: &str,
    ) -> Result<Arc<LocalDatanode>, ShortCircuitError> {
        let own_host = self
            .own_host
            .as_deref()
            .ok_or(ShortCircuitError::NoHostToken)?;
        let info = pool.local_info(addr).await?;
        if info.host_token != own_host {
            return Err(ShortCircuitError::OtherHost);
        }
        let socket_path = PathBuf::from(&info.socket_path);
        let watch = self.connect(&socket_path).await?;
        let request = LocalRequest::Watch.encode();
        let ack = self
            .deadline(async {
                local::send_with_fd(&watch, &request, None).await?;
                Ok(local::read_local_reply(&watch).await?.0)
            })
            .await?;
        match ack {
            LocalReply::Watching { datanode_id } if datanode_id == info.datanode_id => {}
            LocalReply::Watching { datanode_id } => {
                return Err(ShortCircuitError::WrongDatanode {
                    expected: info.datanode_id,
                    found: datanode_id,
                })
            }
            LocalReply::Refused(message) => return Err(ShortCircuitError::Refused(message)),
            _ => return Err(ShortCircuitError::Unexpected("to a watch")),
        }
        let task = tokio::spawn(watch_revocations(
            Arc::downgrade(self),
            addr.to_string(),
            watch,
        ));
        Ok(Arc::new(LocalDatanode {
            socket_path,
            idle: Mutex::new(Vec::new()),
            watch: task.abort_handle(),
        }))
    }

    async fn connect(&self, path: &PathBuf) -> Result<UnixStream, ShortCircuitError> {
        tokio::time::timeout(self.connect_timeout, UnixStream::connect(path))
            .await
            .map_err(|_| ShortCircuitError::Timeout)?
            .map_err(ShortCircuitError::Io)
    }

    async fn deadline<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, ShortCircuitError>>,
    ) -> Result<T, ShortCircuitError> {
        tokio::time::timeout(self.io_timeout, f)
            .await
            .map_err(|_| ShortCircuitError::Timeout)?
    }

    async fn read_local(
        &self,
        datanode: &LocalDatanode,
        addr: &str,
        key: BlockKey,
        token: &BlockToken,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ShortCircuitError> {
        let replica = self.replica(datanode, addr, key, token).await?;
        let read = match read_verified_cached(&self.read_buffers, &replica, offset, len) {
            Some(read) => {
                // Done without awaiting anything: count it against the
                // task's budget, or a task reading cached data in a loop
                // would never yield its worker to the others.
                tokio::task::consume_budget().await;
                read
            }
            None => tokio::task::spawn_blocking(move || read_verified(&replica, offset, len))
                .await
                .map_err(|e| std::io::Error::other(format!("local read task failed: {e}")))?,
        };
        if read.is_err() {
            // Deleted, corrupt or unreadable: never serve this descriptor again.
            self.cache.remove(addr, key);
        }
        read
    }

    /// The cached replica of `key` on `addr`, opened with `token` (once,
    /// however many reads ask at the same time) when absent.
    async fn replica(
        &self,
        datanode: &LocalDatanode,
        addr: &str,
        key: BlockKey,
        token: &BlockToken,
    ) -> Result<Arc<LocalReplica>, ShortCircuitError> {
        if let Some(replica) = self.cache.get(addr, key) {
            return Ok(replica);
        }
        let id = (addr.to_string(), key);
        let cell = self.opening.lock().entry(id.clone()).or_default().clone();
        let opened = cell
            .get_or_try_init(|| async {
                let replica = Arc::new(self.open(datanode, key, token).await?);
                self.cache.insert(addr, key, replica.clone());
                Ok::<_, ShortCircuitError>(replica)
            })
            .await
            .cloned();
        let mut opening = self.opening.lock();
        if opening.get(&id).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            opening.remove(&id);
        }
        opened
    }

    /// Opens block `key` through the datanode's socket.
    async fn open(
        &self,
        datanode: &LocalDatanode,
        key: BlockKey,
        token: &BlockToken,
    ) -> Result<LocalReplica, ShortCircuitError> {
        let pooled = datanode.idle.lock().pop();
        let stream = match pooled {
            Some(stream) => stream,
            None => self.connect(&datanode.socket_path).await?,
        };
        let request = LocalRequest::OpenBlock(key, *token).encode();
        let (reply, fd) = self
            .deadline(async {
                local::send_with_fd(&stream, &request, None).await?;
                Ok(local::read_local_reply(&stream).await?)
            })
            .await?;
        let mut idle = datanode.idle.lock();
        if idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push(stream);
        }
        drop(idle);
        match (reply, fd) {
            (LocalReply::Replica(info), Some(fd)) => {
                let file = File::from(fd);
                let file_len = file.metadata()?.len();
                let end = info.offset.checked_add(info.length);
                if end.is_none_or(|end| end > file_len) {
                    return Err(ShortCircuitError::Unexpected("file length"));
                }
                Ok(LocalReplica {
                    file,
                    offset: info.offset,
                    length: info.length,
                    bytes_per_checksum: info.bytes_per_checksum,
                    crcs: info.crcs,
                })
            }
            (LocalReply::Refused(message), _) => Err(ShortCircuitError::Refused(message)),
            _ => Err(ShortCircuitError::Unexpected("to an open")),
        }
    }
}

/// The chunk-aligned span of the file covering `[offset, offset + len)`.
fn covering_span(
    replica: &LocalReplica,
    offset: u64,
    len: u64,
) -> Result<(u64, u64), ShortCircuitError> {
    match offset.checked_add(len) {
        Some(end) if end <= replica.length => {}
        _ => return Err(ShortCircuitError::OutOfRange),
    }
    Ok(checksum::aligned_span(
        offset,
        len,
        replica.length,
        replica.bytes_per_checksum,
    ))
}

/// Reads the chunk-aligned span covering `[offset, offset + len)`, checks
/// that the file is still linked (not deleted) after the read, verifies the
/// span's CRCs and returns the exact range. Blocking.
fn read_verified(
    replica: &LocalReplica,
    offset: u64,
    len: u64,
) -> Result<Bytes, ShortCircuitError> {
    let (start, end) = covering_span(replica, offset, len)?;
    let mut buf = vec![0u8; (end - start) as usize];
    replica
        .file
        .read_exact_at(&mut buf, replica.offset + start)?;
    verified(replica, Bytes::from(buf), start, offset, len)
}

/// [`read_verified`] for a small span wholly in the page cache, without
/// blocking: None when some of it would have to come from the disk.
fn read_verified_cached(
    buffers: &BufferRecycler,
    replica: &LocalReplica,
    offset: u64,
    len: u64,
) -> Option<Result<Bytes, ShortCircuitError>> {
    let (start, end) = match covering_span(replica, offset, len) {
        Ok(span) => span,
        Err(e) => return Some(Err(e)),
    };
    if end - start > page_cache::INLINE_READ_MAX || !page_cache::nowait_supported() {
        return None;
    }
    let span = (end - start) as usize;
    let mut buf = read_buffers::take(buffers, span);
    if page_cache::read_cached(&replica.file, buf.window_mut(), replica.offset + start) < span {
        return None;
    }
    Some(verified(replica, buf.into_bytes(), start, offset, len))
}

/// The requested range of `data` (the span read from `start`), once the file
/// is known to be still linked and the span's CRCs match.
fn verified(
    replica: &LocalReplica,
    data: Bytes,
    start: u64,
    offset: u64,
    len: u64,
) -> Result<Bytes, ShortCircuitError> {
    // Unlinked since it was opened: the block was deleted (or replaced).
    // fstat(2): std's metadata() is a statx, twice the work for one field.
    if rustix::fs::fstat(&replica.file)
        .map_err(std::io::Error::from)?
        .st_nlink
        == 0
    {
        return Err(ShortCircuitError::Revoked);
    }
    let bpc = replica.bytes_per_checksum;
    let first = (start / u64::from(bpc)) as usize;
    let count = checksum::chunk_count(data.len() as u64, bpc) as usize;
    let crcs = replica
        .crcs
        .get(first..first + count)
        .ok_or(ShortCircuitError::OutOfRange)?;
    checksum::verify(&data, start, bpc, crcs)?;
    Ok(data.slice((offset - start) as usize..(offset + len - start) as usize))
}

/// Drops the replicas the datanode revokes; when the connection ends, drops
/// all of that datanode's replicas and forgets it (the next read rediscovers).
async fn watch_revocations(inner: Weak<Inner>, addr: String, watch: UnixStream) {
    loop {
        let reply = local::read_local_reply(&watch).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match reply {
            Ok((LocalReply::Revoked(keys), _)) => {
                for key in keys {
                    inner.cache.remove(&addr, key);
                }
            }
            other => {
                if let Err(e) = other {
                    tracing::debug!(addr, error = %e, "short-circuit watch ended");
                }
                inner.cache.remove_datanode(&addr);
                let removed = {
                    let mut peers = inner.peers.lock();
                    match peers.get(&addr) {
                        Some(Peer::Ready(_)) => peers.remove(&addr),
                        _ => None,
                    }
                };
                // Dropped last: this aborts this very task, which ends here anyway.
                drop(removed);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tempfile::NamedTempFile;

    /// Bytes of other blocks before the replica in its file, as in a volume.
    const BEFORE: usize = 777;

    /// A replica over a named (linked) file holding `data` after other
    /// bytes, CRCs of `good`.
    fn replica(good: &[u8], data: &[u8], bpc: u32) -> (LocalReplica, NamedTempFile) {
        let mut named = NamedTempFile::new().unwrap();
        named.write_all(&[0xee; BEFORE]).unwrap();
        named.write_all(data).unwrap();
        named.write_all(&[0xdd; 100]).unwrap();
        let replica = LocalReplica {
            file: named.reopen().unwrap(),
            offset: BEFORE as u64,
            length: data.len() as u64,
            bytes_per_checksum: bpc,
            crcs: checksum::compute(good, bpc),
        };
        (replica, named)
    }

    #[test]
    fn reads_any_range_and_refuses_outside_the_block() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (r, _file) = replica(&data, &data, 1024);
        for (offset, len) in [
            (0, 5000),
            (1, 1),
            (1023, 2),
            (4999, 1),
            (2048, 0),
            (3000, 2000),
        ] {
            let got = read_verified(&r, offset, len).unwrap();
            assert_eq!(&got[..], &data[offset as usize..(offset + len) as usize]);
        }
        assert!(matches!(
            read_verified(&r, 4000, 1001),
            Err(ShortCircuitError::OutOfRange)
        ));
        assert!(matches!(
            read_verified(&r, u64::MAX, 2),
            Err(ShortCircuitError::OutOfRange)
        ));
    }

    #[test]
    fn a_flipped_byte_fails_its_checksum() {
        let good = vec![5u8; 3000];
        let mut bad = good.clone();
        bad[2500] ^= 1;
        let (r, _file) = replica(&good, &bad, 1024);
        assert!(matches!(
            read_verified(&r, 2400, 10),
            Err(ShortCircuitError::Checksum(ChecksumError::Mismatch {
                offset: 2048,
                ..
            }))
        ));
        // Chunks before the bad one still verify.
        assert!(read_verified(&r, 0, 2048).is_ok());
    }

    #[test]
    fn an_unlinked_file_is_never_served() {
        let data = vec![9u8; 2000];
        let (r, file) = replica(&data, &data, 512);
        assert!(read_verified(&r, 0, 10).is_ok());
        file.close().unwrap();
        assert!(matches!(
            read_verified(&r, 0, 10),
            Err(ShortCircuitError::Revoked)
        ));
    }
}
