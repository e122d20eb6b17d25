//! Requests of datanodes and of writers placing blocks: liveness, block
//! reports, placement of new block groups and the return of unused ones.

use crate::records::{BlockGroup, DatanodeReport, ReportedBlock};
use proto::token::TokenKey;
use proto::{BlockKey, DatanodeId, ReplicationConfig};
use serde::{Deserialize, Serialize};

/// A datanode starts or heartbeats: registers it, refreshes its capacity, and
/// answers with block files it must delete and the block token keys.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Heartbeat {
    /// What the datanode reports.
    pub report: DatanodeReport,
}

/// Meta's answer to a heartbeat.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Block files the datanode must delete.
    pub deletions: Vec<BlockKey>,
    /// Every block token key still valid, newest last: the datanode checks
    /// tokens with these and no others.
    pub token_keys: Vec<TokenKey>,
}

/// Part of a datanode's block report: committed block files it holds and
/// their ages. Meta queues for deletion the ones nothing references that were
/// allocated longer ago than the orphan grace period, and answers how many.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BlockReport {
    /// The reporting datanode.
    pub datanode: DatanodeId,
    /// One piece of its block list (at most [`crate::MAX_REPORTED_BLOCKS`]).
    pub blocks: Vec<ReportedBlock>,
}

/// A client read bad data (a checksum mismatch) from one block file: meta
/// records it so the replica can be repaired or dropped.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReportBadReplica {
    /// The block file that failed its checksum.
    pub block: BlockKey,
    /// The datanode that served it.
    pub datanode: DatanodeId,
    /// What the client saw (error text, address).
    pub reason: String,
}

/// Picks `config.width()` distinct healthy datanodes with free space, none of
/// `exclude`, under a fresh block id.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AllocateBlock {
    /// How the block group is protected, which sets how many datanodes it needs.
    pub config: ReplicationConfig,
    /// Datanodes not to use (e.g. ones that just failed).
    pub exclude: Vec<DatanodeId>,
}

/// Block files written for a PUT that did not commit: delete them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiscardBlocks {
    /// The groups to delete.
    pub groups: Vec<BlockGroup>,
}
