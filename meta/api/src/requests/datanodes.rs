//! Requests of datanodes and of writers placing blocks: liveness, block
//! reports, placement of new block groups and the return of unused ones.

use crate::records::{BlockGroup, DatanodeReport, ReplicaLocation, ReportedBlock};
use proto::token::{BlockToken, TokenKey};
use proto::{BlockId, BlockKey, DatanodeId, ReplicationConfig};
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
    /// Block files this datanode must make for groups that lost them.
    #[serde(default)]
    pub repairs: Vec<RepairCommand>,
}

/// Work meta hands a datanode with a heartbeat answer, as Ozone's
/// ReplicationManager does: make the missing block files of one group and
/// write each to the datanode meta chose for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairCommand {
    /// The group as it stands: its readable replicas with their current
    /// addresses, and a read token for them.
    pub group: BlockGroup,
    /// How the group is protected.
    pub config: ReplicationConfig,
    /// Each block file to make (its internal index) and the datanode that
    /// is to hold it; never one already holding a block file of the group.
    pub targets: Vec<ReplicaLocation>,
    /// Write token for the targets' block files.
    pub write_token: Option<BlockToken>,
    /// Where the bytes come from.
    pub source: RepairSource,
}

/// How a repair makes its block files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RepairSource {
    /// From the group's readable replicas: EC cells rebuilt with the codec
    /// from any `data` others, a replicated block read from any replica.
    Rebuild,
    /// Copied byte for byte from this datanode, which still holds the same
    /// block files (a datanode being decommissioned).
    Copy(DatanodeId),
}

/// A datanode ran a [`RepairCommand`]: the block files it committed on their
/// targets, or why it could not. Meta then points the group at them (or,
/// when the object was overwritten or deleted meanwhile, queues them for
/// deletion).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FinishRepair {
    /// The datanode that ran the repair.
    pub datanode: DatanodeId,
    /// The group repaired.
    pub block: BlockId,
    /// Block files committed, each on its target.
    pub made: Vec<ReplicaLocation>,
    /// Bytes read and written to make them.
    pub bytes: u64,
    /// Why the repair failed, when it did (`made` then lists what was
    /// committed anyway, for deletion).
    pub error: Option<String>,
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
/// `exclude`, under a fresh block id; when fewer are healthy but enough to
/// keep one spare cell (`config.min_width()`), a group with the cells they can
/// hold, whose missing cells meta repairs once it is committed.
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

/// `tessera admin datanode decommission|maintenance`: sets what an operator
/// asks of a datanode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetDatanodeAdminState {
    /// The datanode.
    pub datanode: DatanodeId,
    /// `Decommissioning` starts moving its block files away (it becomes
    /// `Decommissioned` by itself once none is needed there),
    /// `Maintenance` keeps it from being repaired around, `InService` ends either.
    pub state: crate::records::AdminState,
}

/// `tessera admin balance start|stop`: turns the balancer on or off, and
/// sets its threshold and bandwidth when given (kept until changed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetBalancer {
    /// Whether it runs.
    pub enabled: bool,
    /// Largest distance of a datanode's use from the mean, in percentage
    /// points (1 to 100).
    pub threshold_percent: Option<u32>,
    /// Block file bytes handed out a second in the whole cluster (0: no limit).
    pub bandwidth: Option<u64>,
}
