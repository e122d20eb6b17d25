//! Client streams over datanodes and meta: the key writer (EC and replicated),
//! the key reader (positioned reads, degraded reads), and the datanode
//! connection pool.

pub mod datanode;
pub mod error;
pub mod reader;
pub mod writer;

pub use datanode::DatanodePool;
pub use error::ClientError;
pub use reader::KeyReader;
pub use writer::{KeyWriter, WrittenKey};

use crate::layout::{ReplicationConfig, DEFAULT_BLOCK_SIZE};
use crate::meta::{MetaClient, ObjectRecord};
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
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            block_size: DEFAULT_BLOCK_SIZE,
            bytes_per_checksum: 16 * 1024,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(30),
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
}

impl StoreClient {
    /// A client over `meta` with its own connection pool.
    pub fn new(meta: MetaClient, config: ClientConfig) -> Self {
        let pool = Arc::new(DatanodePool::new(config.clone()));
        Self { meta, pool, config }
    }

    /// The meta handle this client allocates blocks through.
    pub fn meta(&self) -> &MetaClient {
        &self.meta
    }

    /// The shared datanode connection pool.
    pub fn pool(&self) -> &Arc<DatanodePool> {
        &self.pool
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

    /// A reader over a committed object's blocks.
    pub fn reader(&self, record: &ObjectRecord) -> KeyReader {
        KeyReader::new(self.clone(), record)
    }
}
