//! Identifiers shared by meta, datanodes and clients.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A block group (EC) or replicated block, allocated by meta and never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockId(pub u64);

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// One block file on one datanode: internal block `index` of a block group
/// (0..d for data, d..d+p for parity) or a replica (always index 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockKey {
    /// The block group (or replicated block) this belongs to.
    pub block: BlockId,
    /// Internal block index within the group; 0 for replicas.
    pub index: u8,
}

impl BlockKey {
    /// Key of internal block `index` of `block`.
    pub fn new(block: BlockId, index: u8) -> Self {
        Self { block, index }
    }
}

impl fmt::Display for BlockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.block, self.index)
    }
}

/// A datanode's persistent identity, generated once and kept in its data folder,
/// so that a datanode that comes back on another address is still the same node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DatanodeId(pub String);

impl fmt::Display for DatanodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Identity of one committed version of an object: an overwrite or a delete
/// followed by a put gives a new one, so caches keyed by it never serve stale data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectId(pub uuid::Uuid);

impl ObjectId {
    /// A fresh random identity.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4())
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.simple())
    }
}
