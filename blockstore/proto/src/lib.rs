//! Types every part of Tessera shares, and the datanode wire protocol: block,
//! object and datanode ids, replication layouts, CRC32C chunk checksums, the
//! frames of the block protocol over TCP and of short-circuit reads over a
//! Unix socket, reads of cached pages that never block, folders created
//! durably, and how metrics are named and described.
//!
//! Nothing here does I/O of its own beyond encoding and decoding frames on a
//! stream the caller owns; the client, the datanode and meta build on it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checksum;
pub mod durable;
pub mod ids;
pub mod layout;
pub mod page_cache;
pub mod recycled;
pub mod telemetry;
pub mod token;
pub mod wire;

pub use ids::{BlockId, BlockKey, DatanodeId, ObjectId};
pub use layout::{EcLayout, ReplicationConfig, DEFAULT_BLOCK_SIZE};
