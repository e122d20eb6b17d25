//! Client streams over datanodes and meta: the key writer (EC and replicated),
//! the key reader (positioned reads, degraded reads), and the datanode
//! connection pool.

pub mod buffer_pool;
pub mod datanode;
pub mod error;
mod failover;
pub mod pacer;
mod positioned;
pub mod reader;
pub mod repair;
pub mod sequential;
mod stripe;
mod stripe_free_list;
pub mod suspects;
pub mod telemetry;
pub mod writer;

pub use buffer_pool::{BufferPool, PoolStats};
pub use datanode::DatanodePool;
pub use error::ClientError;
pub use pacer::Pacer;
pub use reader::KeyReader;
pub use sequential::SequentialReader;
pub use suspects::SuspectDatanodes;
pub use writer::{KeyWriter, WrittenKey};

use codec::CodecTable;
use meta_api::{MetaClient, ObjectRecord};
use proto::layout::{ReplicationConfig, DEFAULT_BLOCK_SIZE};
use std::sync::Arc;
use std::time::Duration;

/// Settings of the client streams.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Size of one block file (of one internal block for EC).
    pub block_size: u64,
    /// Bytes covered by one CRC32C on writes.
    pub bytes_per_checksum: u32,
    /// Deadline for connecting to a datanode.
    pub connect_timeout: Duration,
    /// Deadline for one request to a datanode; past it the datanode counts as failed.
    pub io_timeout: Duration,
    /// Bytes a [`SequentialReader`] keeps in flight ahead of its consumer.
    pub read_window: u64,
    /// Bytes a [`SequentialReader`] keeps in flight while positioned reads
    /// share its `KeyReader` (at least one piece): the stream yields the
    /// datanodes and cores to them rather than queue a full window ahead.
    pub contended_read_window: u64,
    /// Percent of the time (1 to 100) a [`SequentialReader`] spends reading
    /// while positioned reads share its `KeyReader`; it pauses between
    /// pieces for the rest, so that they keep most of the cores. 100 turns
    /// the pacing off.
    pub contended_read_share: u32,
    /// Deadline for one segment of a read: past it an EC cell is rebuilt from
    /// the other cells and a replicated read moves to the next replica.
    pub read_deadline: Duration,
    /// How long a datanode that failed or stalled is skipped by reads.
    pub suspect_ttl: Duration,
    /// Read blocks of datanodes on this host straight from their files
    /// (passed over the datanode's Unix socket), falling back to TCP on any
    /// failure; see [`datanode::short_circuit`].
    pub short_circuit: bool,
    /// Bound on the write buffers of all streams of a client; a writer waits
    /// for room rather than exceed it.
    pub buffer_pool_bytes: u64,
    /// Full stripes an EC writer queues ahead of its flush task; each stream
    /// holds at most this many stripe buffer sets plus two.
    pub stripe_queue: usize,
    /// Mutual TLS with the cluster CA on every datanode connection; `None`
    /// speaks clear text.
    pub tls: Option<Arc<tls::ClusterTls>>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            block_size: DEFAULT_BLOCK_SIZE,
            bytes_per_checksum: 16 * 1024,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(30),
            read_window: 32 * 1024 * 1024,
            contended_read_window: 0,
            contended_read_share: 5,
            read_deadline: Duration::from_secs(3),
            suspect_ttl: suspects::DEFAULT_SUSPECT_TTL,
            short_circuit: false,
            buffer_pool_bytes: buffer_pool::DEFAULT_BUFFER_POOL_BYTES,
            stripe_queue: buffer_pool::DEFAULT_STRIPE_QUEUE,
            tls: None,
        }
    }
}

/// Entry point for reading and writing keys: holds the meta handle and the
/// datanode connection pool shared by every stream of a process.
#[derive(Clone)]
pub struct StoreClient {
    meta: MetaClient,
    pool: Arc<DatanodePool>,
    config: ClientConfig,
    suspects: Arc<SuspectDatanodes>,
    buffer_pool: Arc<BufferPool>,
    /// Reed-Solomon codecs, built once per (data, parity).
    codecs: Arc<CodecTable>,
    /// Positioned reads per object, which its sequential streams yield to.
    positioned: Arc<positioned::PositionedActivities>,
}

impl StoreClient {
    /// A client over `meta` with its own connection pool.
    pub fn new(meta: MetaClient, config: ClientConfig) -> Self {
        let pool = Arc::new(DatanodePool::new(config.clone()));
        let suspects = Arc::new(SuspectDatanodes::new(config.suspect_ttl));
        let buffer_pool = Arc::new(BufferPool::new(config.buffer_pool_bytes));
        Self {
            meta,
            pool,
            config,
            suspects,
            buffer_pool,
            codecs: Default::default(),
            positioned: Default::default(),
        }
    }

    /// Positioned reads of each object this client reads.
    pub(crate) fn positioned_activities(&self) -> &positioned::PositionedActivities {
        &self.positioned
    }

    /// The meta handle this client allocates blocks through.
    pub fn meta(&self) -> &MetaClient {
        &self.meta
    }

    /// The shared datanode connection pool.
    pub fn pool(&self) -> &Arc<DatanodePool> {
        &self.pool
    }

    /// Datanodes that failed or stalled recently, skipped by every reader of this client.
    pub fn suspects(&self) -> &Arc<SuspectDatanodes> {
        &self.suspects
    }

    /// The write buffer pool shared by every writer stream of this client.
    pub fn buffer_pool(&self) -> &Arc<BufferPool> {
        &self.buffer_pool
    }

    /// The codecs this client's streams share.
    pub fn codecs(&self) -> &CodecTable {
        &self.codecs
    }

    /// The client settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// A writer for a new key with `replication`; nothing is visible until the
    /// caller commits the returned blocks in meta.
    pub fn writer(&self, replication: ReplicationConfig) -> KeyWriter {
        KeyWriter::new(self.clone(), replication)
    }

    /// A writer like [`writer`](Self::writer)'s that keeps a key of at
    /// most `inline_limit` bytes in memory instead ([`WrittenKey::inline`]),
    /// for the caller to store in the object's record: a small object then
    /// costs no datanode round trip and no block file.
    pub fn small_object_writer(
        &self,
        replication: ReplicationConfig,
        inline_limit: usize,
    ) -> KeyWriter {
        self.writer(replication).inline_up_to(inline_limit)
    }

    /// The layout of a new object of `size` bytes (as stored: sealed, when
    /// encrypted): an EC cell fitted to it when a stripe of `replication` is
    /// wider than the object ([`ReplicationConfig::fitted_to`]). A writer of
    /// it still takes a longer body whole, in more stripes.
    pub fn fitted(&self, replication: ReplicationConfig, size: u64) -> ReplicationConfig {
        replication.fitted_to(size, self.config.bytes_per_checksum)
    }

    /// A reader over a committed object's blocks.
    pub fn reader(&self, record: &ObjectRecord) -> KeyReader {
        KeyReader::new(self.clone(), record)
    }
}
