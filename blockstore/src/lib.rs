//! Tessera's storage core, shared by every role: the datanode wire protocol,
//! block and chunk types, CRC32C chunk checksums, the Reed-Solomon codec and
//! stripe layout, the client streams, and the metadata service.
//!
//! Nothing here knows HTTP: the gateway sits on top, the datanode beside.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checksum;
pub mod client;
pub mod codec;
pub mod ids;
pub mod layout;
pub mod meta;
pub mod page_cache;
pub mod protocol;

pub use ids::{BlockId, BlockKey, DatanodeId, ObjectId};
pub use layout::{EcLayout, ReplicationConfig};
