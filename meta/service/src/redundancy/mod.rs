//! Redundancy tracking: which block files of each group are readable, and
//! the scan that finds every group that lost some and queues it for repair.
//!
//! A block file is missing when its datanode is dead (past `dead_after`) or
//! unknown, or when it was reported corrupt. A stale datanode (a few missed
//! heartbeats) still counts: it is most often back before it is dead, and
//! repairing around every hiccup would move data for nothing. A group is
//! *healthy* with every block file readable, *degraded* when it lost some
//! but keeps a spare, *at risk* when one more loss makes it unreadable, and
//! *lost* when it cannot be read until a datanode comes back.
//!
//! A whole group may still be *misplaced*: a failure domain (zone, rack,
//! host) holds more of its block files than the layout can lose although
//! the cluster has the domains to do better (see `crate::placement::domains`).
//! One of its block files then moves, after every damaged group is served.
//!
//! The scan ([`scan`]) reads every object and part record in one read
//! transaction (as the orphan detector does): it runs when a datanode dies,
//! when a corrupt block file is reported, when the balancer needs a new
//! round and every few minutes, never on the write path. Commits queue the
//! groups they wrote short (see [`queue_short_groups`]) without waiting for it.

mod placed;
mod scan;

pub(crate) use placed::PlacementView;
pub(crate) use scan::{apply_scan, scan, ScanResult};

use crate::store::db::{decode, StoreError};
use crate::store::repairs::{CellMove, GroupOwner, QueuedFor, RepairEntry, RepairQueue};
use crate::store::tables::BAD_REPLICAS;
use crate::store::Store;
use meta_api::{AdminState, BlockGroup, DatanodeState, MetaError, ReplicaLocation, UnixMillis};
use proto::{BlockId, BlockKey, DatanodeId, ReplicationConfig};
use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What one group keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Health {
    /// Internal indexes with no readable block file (a replicated block:
    /// one 0 per missing replica).
    pub(crate) missing: Vec<u8>,
    /// Readable block files beyond the fewest that read the group.
    pub(crate) spare: i32,
}

/// The four states of a group, with their labels in metrics and status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GroupState {
    Healthy,
    Degraded,
    AtRisk,
    Lost,
}

impl Health {
    pub(crate) fn state(&self) -> GroupState {
        if self.missing.is_empty() {
            GroupState::Healthy
        } else if self.spare > 0 {
            GroupState::Degraded
        } else if self.spare == 0 {
            GroupState::AtRisk
        } else {
            GroupState::Lost
        }
    }
}

/// What one block file of a group is worth now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CellState {
    /// Readable, and staying where it is.
    Staying,
    /// Readable, but on a datanode being decommissioned: it must be copied.
    Leaving,
    /// Gone: its datanode is dead or unknown, or the file is corrupt.
    Unreadable,
}

/// Which block files can be read now, and which must move.
#[derive(Default)]
pub(crate) struct Liveness {
    /// Datanodes whose block files count: healthy or stale, or in
    /// maintenance (not repaired around even while down).
    pub(crate) up: HashSet<DatanodeId>,
    /// Datanodes being decommissioned (or done with it).
    pub(crate) leaving: HashSet<DatanodeId>,
    /// Block files reported corrupt, with their datanode.
    pub(crate) corrupt: HashSet<(BlockKey, DatanodeId)>,
}

impl Liveness {
    /// From the registry's datanodes (state and what an operator asked of
    /// each) and the corrupt block files reported.
    pub(crate) fn new(
        datanodes: impl IntoIterator<Item = (DatanodeId, DatanodeState, AdminState)>,
        corrupt: HashSet<(BlockKey, DatanodeId)>,
    ) -> Self {
        let mut liveness = Self {
            corrupt,
            ..Self::default()
        };
        for (id, state, admin) in datanodes {
            if matches!(
                admin,
                AdminState::Decommissioning | AdminState::Decommissioned
            ) {
                liveness.leaving.insert(id.clone());
            }
            if state != DatanodeState::Dead || admin == AdminState::Maintenance {
                liveness.up.insert(id);
            }
        }
        liveness
    }

    /// What the block file of `block` at `replica` is worth.
    pub(crate) fn cell(&self, block: BlockId, replica: &ReplicaLocation) -> CellState {
        let key = (
            BlockKey::new(block, replica.index),
            replica.datanode.clone(),
        );
        if !self.up.contains(&replica.datanode) || self.corrupt.contains(&key) {
            CellState::Unreadable
        } else if self.leaving.contains(&replica.datanode) {
            CellState::Leaving
        } else {
            CellState::Staying
        }
    }

    /// What the block file of `block` at `replica` is worth when `moving`
    /// (if any) is to leave its datanode: a readable block file that moves
    /// counts as leaving.
    pub(crate) fn cell_moving(
        &self,
        block: BlockId,
        replica: &ReplicaLocation,
        moving: Option<&CellMove>,
    ) -> CellState {
        match self.cell(block, replica) {
            CellState::Staying
                if moving
                    .is_some_and(|m| m.index == replica.index && m.from == replica.datanode) =>
            {
                CellState::Leaving
            }
            state => state,
        }
    }

    /// Whether the block file of `block` at `replica` can be read.
    pub(crate) fn readable(&self, block: BlockId, replica: &ReplicaLocation) -> bool {
        self.cell(block, replica) != CellState::Unreadable
    }
}

/// How much of `group` (protected by `config`) is readable, and which of
/// its block files must be made: those with no staying copy.
pub(crate) fn assess(
    group: &BlockGroup,
    config: &ReplicationConfig,
    cell: impl Fn(&ReplicaLocation) -> CellState,
) -> Health {
    let width = config.width();
    let present: usize;
    let missing: Vec<u8> = match config {
        ReplicationConfig::Ec(_) => {
            let mut readable = vec![false; width];
            let mut staying = vec![false; width];
            for replica in &group.replicas {
                let state = cell(replica);
                let i = replica.index as usize;
                if i < width {
                    readable[i] |= state != CellState::Unreadable;
                    staying[i] |= state == CellState::Staying;
                }
            }
            present = readable.iter().filter(|h| **h).count();
            (0..width)
                .filter(|i| !staying[*i])
                .map(|i| u8::try_from(i).unwrap_or(u8::MAX))
                .collect()
        }
        ReplicationConfig::Replicated { .. } => {
            let holders = |wanted: &dyn Fn(CellState) -> bool| {
                let distinct: HashSet<&DatanodeId> = group
                    .replicas
                    .iter()
                    .filter(|r| wanted(cell(r)))
                    .map(|r| &r.datanode)
                    .collect();
                distinct.len().min(width)
            };
            present = holders(&|s| s != CellState::Unreadable);
            vec![0; width - holders(&|s| s == CellState::Staying)]
        }
    };
    let spare = present as i64 - config.readable_from() as i64;
    Health {
        missing,
        spare: i32::try_from(spare).unwrap_or(i32::MIN),
    }
}

/// Queues, in the commit's transaction, every group of `groups` written
/// with fewer block files than its config's width (datanodes were down, or
/// failed during the write): repair starts without waiting for a scan.
pub(crate) fn queue_short_groups(
    txn: &WriteTransaction,
    groups: &[BlockGroup],
    config: &ReplicationConfig,
    owner: &GroupOwner,
    now: UnixMillis,
) -> Result<(), StoreError> {
    let mut queue: Option<RepairQueue> = None;
    for group in groups {
        let health = assess(group, config, |_| CellState::Staying);
        if health.missing.is_empty() {
            continue;
        }
        let queue = match &mut queue {
            Some(queue) => queue,
            None => queue.insert(RepairQueue::open(txn)?),
        };
        announce(group.block, &health);
        queue.put(RepairEntry {
            block: group.block,
            owner: owner.clone(),
            missing: health.missing,
            spare: health.spare,
            queued_at: now,
            reason: QueuedFor::Repair,
            moving: None,
        })?;
    }
    Ok(())
}

/// Logs a group that one more loss would make unreadable, or that is.
pub(crate) fn announce(block: BlockId, health: &Health) {
    match health.state() {
        GroupState::AtRisk => {
            tracing::warn!(%block, missing = ?health.missing, "block group at risk: no spare block file left")
        }
        GroupState::Lost => {
            tracing::error!(%block, missing = ?health.missing, "block group lost: too few of its block files are readable (on dead datanodes, missing or corrupt); its objects cannot be read unless a dead datanode returns")
        }
        GroupState::Healthy | GroupState::Degraded => {}
    }
}

/// Groups counted by state in the last scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupCounts {
    pub(crate) healthy: u64,
    pub(crate) degraded: u64,
    pub(crate) at_risk: u64,
    pub(crate) lost: u64,
    /// Whole groups a failure domain holds too much of (counted apart).
    #[serde(default)]
    pub(crate) misplaced: u64,
}

/// How `groups`, just written under `config`, stand: healthy, or short of
/// block files when datanodes were too few (those are queued for repair).
pub(crate) fn written_counts(groups: &[BlockGroup], config: &ReplicationConfig) -> GroupCounts {
    let mut counts = GroupCounts::default();
    for group in groups {
        counts.add(assess(group, config, |_| CellState::Staying).state());
    }
    counts
}

impl GroupCounts {
    /// Adds `other`'s counts to these.
    pub(crate) fn merge(&mut self, other: GroupCounts) {
        self.healthy += other.healthy;
        self.degraded += other.degraded;
        self.at_risk += other.at_risk;
        self.lost += other.lost;
        self.misplaced += other.misplaced;
    }

    fn add(&mut self, state: GroupState) {
        match state {
            GroupState::Healthy => self.healthy += 1,
            GroupState::Degraded => self.degraded += 1,
            GroupState::AtRisk => self.at_risk += 1,
            GroupState::Lost => self.lost += 1,
        }
    }

    /// Publishes the counts as `tessera_meta_block_groups{state}`.
    pub(crate) fn publish(&self) {
        for (label, count) in [
            ("healthy", self.healthy),
            ("degraded", self.degraded),
            ("at_risk", self.at_risk),
            ("lost", self.lost),
        ] {
            metrics::gauge!(crate::telemetry::BLOCK_GROUPS.name, "state" => label)
                .set(count as f64);
        }
        metrics::gauge!(crate::telemetry::MISPLACED_BLOCK_GROUPS.name).set(self.misplaced as f64);
    }
}

/// The corrupt block files reported, as `Liveness` wants them.
pub(crate) fn corrupt_block_files(
    store: &Store,
) -> Result<HashSet<(BlockKey, DatanodeId)>, MetaError> {
    store.read(|txn| {
        let reports = reported_files(&txn.open_table(BAD_REPLICAS)?)?;
        Ok(reports
            .into_iter()
            .map(|(_, r)| (r.block, r.datanode))
            .collect())
    })
}

/// What the redundancy code reads of a corrupt-file report.
#[derive(Deserialize)]
pub(crate) struct ReportedFile {
    pub(crate) block: BlockKey,
    pub(crate) datanode: DatanodeId,
}

/// Every corrupt-file report of the `bad_replicas` table, with its key.
pub(crate) fn reported_files(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Vec<(String, ReportedFile)>, StoreError> {
    let mut out = Vec::new();
    for entry in table.iter()? {
        let (key, value) = entry?;
        out.push((key.value().to_string(), decode(value.value())?));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Internal block `index` on `datanode`.
    pub(crate) fn replica(index: u8, datanode: &str) -> ReplicaLocation {
        ReplicaLocation {
            index,
            datanode: DatanodeId(datanode.into()),
            addr: format!("{datanode}:1"),
        }
    }

    fn group(replicas: Vec<ReplicaLocation>) -> BlockGroup {
        BlockGroup {
            block: BlockId(9),
            length: 100,
            replicas,
            token: None,
        }
    }

    fn liveness(up: &[&str], corrupt: &[(u8, &str)]) -> Liveness {
        Liveness::new(
            up.iter()
                .map(|id| {
                    (
                        DatanodeId(id.to_string()),
                        DatanodeState::Healthy,
                        AdminState::InService,
                    )
                })
                .chain([(
                    DatanodeId("gone".into()),
                    DatanodeState::Dead,
                    AdminState::InService,
                )]),
            corrupt
                .iter()
                .map(|(i, d)| (BlockKey::new(BlockId(9), *i), DatanodeId(d.to_string())))
                .collect(),
        )
    }

    #[test]
    fn ec_groups_miss_the_cells_of_dead_unknown_and_corrupt_block_files() {
        let rs = ReplicationConfig::RS_3_2;
        let g = group((0..5).map(|i| replica(i, &format!("d{i}"))).collect());
        let all = liveness(&["d0", "d1", "d2", "d3", "d4"], &[]);
        let whole = assess(&g, &rs, |r| all.cell(g.block, r));
        assert_eq!(
            whole,
            Health {
                missing: vec![],
                spare: 2
            }
        );
        assert_eq!(whole.state(), GroupState::Healthy);

        // d1 dead (absent from the up set), d3 corrupt.
        let some = liveness(&["d0", "d2", "d3", "d4"], &[(3, "d3")]);
        let health = assess(&g, &rs, |r| some.cell(g.block, r));
        assert_eq!(
            health,
            Health {
                missing: vec![1, 3],
                spare: 0
            }
        );
        assert_eq!(health.state(), GroupState::AtRisk);

        let one = liveness(&["d0", "d1", "d2", "d3"], &[]);
        assert_eq!(
            assess(&g, &rs, |r| one.cell(g.block, r)).state(),
            GroupState::Degraded
        );
        let few = liveness(&["d0", "d4"], &[]);
        let lost = assess(&g, &rs, |r| few.cell(g.block, r));
        assert_eq!(
            lost,
            Health {
                missing: vec![1, 2, 3],
                spare: -1
            }
        );
        assert_eq!(lost.state(), GroupState::Lost);

        // Written short: index 4 never placed.
        let short = group((0..4).map(|i| replica(i, &format!("d{i}"))).collect());
        assert_eq!(
            assess(&short, &rs, |_| CellState::Staying),
            Health {
                missing: vec![4],
                spare: 1
            }
        );
    }

    #[test]
    fn replicated_blocks_count_distinct_readable_holders() {
        let r3 = ReplicationConfig::REPLICATED_3;
        let g = group(vec![replica(0, "a"), replica(0, "b"), replica(0, "gone")]);
        let live = liveness(&["a", "b"], &[(0, "b")]);
        let health = assess(&g, &r3, |r| live.cell(g.block, r));
        assert_eq!(
            health,
            Health {
                missing: vec![0, 0],
                spare: 0
            }
        );
        assert_eq!(
            assess(&g, &r3, |_| CellState::Staying),
            Health {
                missing: vec![],
                spare: 2
            }
        );
    }
}
