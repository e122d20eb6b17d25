//! Repair: the periodic check that scans for damaged groups and hands the
//! most endangered ones to datanodes, and the answer of a datanode that ran
//! a repair, which points the group at the new block files in the same
//! transaction that checks the group still needs them.

use super::group_records::{locate, replace_group};
use crate::balance::BalancerSettings;
use crate::placement::domains::Placed;
use crate::placement::{choose, Candidate};
use crate::redundancy::{
    self, apply_scan, assess, corrupt_block_files, reported_files, scan, CellState, Health,
    Liveness, PlacementView,
};
use crate::registry::RegisteredNode;
use crate::state::MetaState;
use crate::store::db::StoreError;
use crate::store::deletions::DeletionQueue;
use crate::store::repairs::{self, QueuedFor, RepairEntry, RepairQueue};
use crate::store::tables::BAD_REPLICAS;
use meta_api::{
    AdminState, BlockGroup, DatanodeState, FinishRepair, Handle, Location, MetaError,
    RedundancyStatus, RepairCommand, RepairSource, ReplicaLocation, UnixMillis,
};
use proto::token::Modes;
use proto::{BlockId, BlockKey, DatanodeId, ReplicationConfig};
use redb::WriteTransaction;
use std::collections::{BTreeSet, HashSet};

/// Queue entries looked at per check.
const QUEUE_WINDOW: usize = 256;
/// The balancer's moves looked at per check, however many entries come first.
const BALANCE_WINDOW: usize = 64;

/// Whether a round of redundancy upkeep scans the records first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// When this meta's own book says one is due (a lone meta).
    IfDue,
    /// Yes: a group's leader found one due, and every member scans at the
    /// same entry, so that their repair queues stay equal.
    Yes,
    /// No.
    No,
}

/// The cluster as one redundancy check sees it.
#[derive(Clone, Copy)]
struct ClusterView<'a> {
    nodes: &'a [RegisteredNode],
    /// Which block files are readable.
    liveness: &'a Liveness,
    /// Where the datanodes stand.
    placement: &'a PlacementView,
}

impl MetaState {
    /// What `tessera admin status` shows of redundancy, with `queued` groups.
    pub(crate) fn redundancy_status(&self, queued: u64) -> RedundancyStatus {
        let progress = self.repairs.progress();
        RedundancyStatus {
            healthy: progress.counts.healthy,
            degraded: progress.counts.degraded,
            at_risk: progress.counts.at_risk,
            lost: progress.counts.lost,
            misplaced: progress.counts.misplaced,
            queued,
            running: progress.running,
            repaired_bytes: progress.repaired_bytes,
            last_scan: progress.last_scan,
        }
    }

    /// Which block files are readable now.
    fn liveness(&self, nodes: &[RegisteredNode]) -> Result<Liveness, MetaError> {
        Ok(Liveness::new(
            nodes
                .iter()
                .map(|n| (n.record.id.clone(), n.record.state, n.record.admin)),
            corrupt_block_files(&self.store)?,
        ))
    }

    /// Whether this meta's book finds a scan due at `now`: the dead
    /// datanodes changed, a corrupt block file was reported, repairs or the
    /// balancer's moves are done, or the interval passed.
    pub(crate) fn scan_due(&self, now: UnixMillis) -> Result<bool, MetaError> {
        let nodes = self.registry.snapshot();
        let (queued, balancing) = self
            .store
            .read(|txn| Ok((repairs::queued(txn)?, repairs::queued_balance(txn)?)))?;
        Ok(self
            .repairs
            .scan_due(&dead_datanodes(&nodes), queued, balancing, now))
    }

    /// One round of redundancy upkeep: a scan when `when` says so, then as
    /// many queued groups handed to datanodes as the limits allow. Blocking.
    pub(crate) fn check_redundancy(&self, now: UnixMillis, when: Scan) -> Result<(), MetaError> {
        let scanning = match when {
            Scan::IfDue => self.scan_due(now)?,
            Scan::Yes => true,
            Scan::No => false,
        };
        let nodes = self.registry.snapshot();
        let dead = dead_datanodes(&nodes);
        let liveness = self.liveness(&nodes)?;
        let view = PlacementView::new(&nodes, self.config.block_size);
        let balancer = self.balancer_settings()?;
        if scanning {
            let movable = Self::movable_per_datanode(&balancer);
            let result = scan(&self.store, &liveness, &view, movable, now)?;
            apply_scan(&self.store, &result)?;
            result.counts.publish();
            tracing::debug!(counts = ?result.counts, damaged = result.damaged.len(), misplaced = result.misplaced.len(), "redundancy scan");
            self.repairs.scanned(dead, result.counts, now);
            // After `scanned`, which would forget the scan it may ask for.
            self.finish_decommissions(&nodes, &result.leaving_files, now)?;
            self.balance_round(&nodes, &view, &result, &balancer, now)?;
        }
        let cluster = ClusterView {
            nodes: &nodes,
            liveness: &liveness,
            placement: &view,
        };
        self.schedule_repairs(&cluster, &balancer, now)
    }

    /// Marks decommissioned every decommissioning datanode no record has
    /// listed a block file on for an orphan grace period (a write placed on
    /// it before the decommission began commits within that), with no
    /// repair under way that involves it; `leaving_files` is the scan's.
    fn finish_decommissions(
        &self,
        nodes: &[RegisteredNode],
        leaving_files: &std::collections::HashMap<DatanodeId, u64>,
        now: UnixMillis,
    ) -> Result<(), MetaError> {
        let grace = i64::try_from(self.config.orphan_grace.as_millis()).unwrap_or(i64::MAX);
        let load = self.repairs.load();
        for node in nodes {
            let id = &node.record.id;
            if node.record.admin != AdminState::Decommissioning || leaving_files.contains_key(id) {
                self.repairs.not_emptied(id);
                continue;
            }
            if load.contains_key(id) {
                continue;
            }
            let since = self.repairs.emptied_since(id, now);
            if now.saturating_sub(since) < grace {
                self.repairs.scan_by(since.saturating_add(grace));
                continue;
            }
            self.repairs.not_emptied(id);
            self.handle(
                meta_api::SetDatanodeAdminState {
                    datanode: id.clone(),
                    state: AdminState::Decommissioned,
                },
                0,
            )?;
            tracing::info!(datanode = %id, "datanode decommissioned: no block file of it is needed, it can be stopped");
        }
        Ok(())
    }

    /// Hands the queue's head to datanodes, most endangered first: repairs,
    /// then moves of misplaced groups, then the balancer's moves, which are
    /// handed out no faster than its bandwidth.
    fn schedule_repairs(
        &self,
        cluster: &ClusterView<'_>,
        balancer: &BalancerSettings,
        now: UnixMillis,
    ) -> Result<(), MetaError> {
        let liveness = cluster.liveness;
        self.repairs.expire(now, &liveness.up);
        let (mut head, balance, queued) = self.store.read(|txn| {
            Ok((
                repairs::head(txn, QUEUE_WINDOW)?,
                repairs::balance_head(txn, BALANCE_WINDOW)?,
                repairs::queued(txn)?,
            ))
        })?;
        let seen: HashSet<BlockId> = head.iter().map(|e| e.block).collect();
        head.extend(balance.into_iter().filter(|e| !seen.contains(&e.block)));
        metrics::gauge!(crate::telemetry::REPAIR_QUEUE.name).set(queued as f64);
        let settings = &self.repairs.settings;
        for entry in head {
            if self.repairs.running() >= settings.max_repairs {
                break;
            }
            if entry.spare < 0 || !self.repairs.may_start(entry.block, now) {
                continue;
            }
            if entry.reason == QueuedFor::Balance && !balancer.enabled {
                continue;
            }
            let found = self
                .store
                .read(|txn| locate(txn, &entry.owner, entry.block))?;
            let Some((_, mut group, config)) = found else {
                // Deleted or overwritten: nothing left to repair.
                self.store.write(|txn| {
                    RepairQueue::open(txn)?.remove(entry.block)?;
                    Ok(())
                })?;
                continue;
            };
            self.registry
                .refresh_addrs(std::slice::from_mut(&mut group));
            let moving = entry.moving.as_ref();
            let cell = |r: &ReplicaLocation| liveness.cell_moving(group.block, r, moving);
            let health = assess(&group, &config, cell);
            if health.missing.is_empty() || health.spare < 0 {
                continue;
            }
            if let Some(planned) = moving.filter(|_| entry.reason == QueuedFor::Balance) {
                if !cluster
                    .placement
                    .balance_move_holds(&group, &config, planned)
                {
                    // The cluster changed since the plan: the next scan
                    // drops it (every member alike), and a round plans anew.
                    continue;
                }
            }
            let Some(command) = self.repair_command(cluster, &entry, group, config, &health, now)
            else {
                continue;
            };
            if entry.reason == QueuedFor::Balance {
                let bytes = command
                    .targets
                    .iter()
                    .map(|t| config.block_file_len(command.group.length, usize::from(t.index)))
                    .sum();
                if !self.balance.spend(bytes, balancer.bandwidth, now) {
                    // Nothing of the balancer's until its bandwidth allows.
                    break;
                }
            }
            tracing::info!(
                block = %command.group.block,
                missing = ?health.missing,
                reason = ?entry.reason,
                coordinator = %command.targets[0].datanode,
                "repair handed out"
            );
            metrics::counter!(crate::telemetry::REPAIRS_STARTED.name).increment(1);
            self.repairs
                .assign(command, entry.reason == QueuedFor::Balance, now);
        }
        Ok(())
    }

    /// The command that makes `health.missing` of `group` (queued as
    /// `entry` says) on datanodes holding none of its block files, spread
    /// over the failure domains, or None when no datanode can take one now
    /// (or, for a move, none where the move keeps the placement rule).
    fn repair_command(
        &self,
        cluster: &ClusterView<'_>,
        entry: &RepairEntry,
        group: BlockGroup,
        config: ReplicationConfig,
        health: &Health,
        now: UnixMillis,
    ) -> Option<RepairCommand> {
        let ClusterView {
            nodes,
            liveness,
            placement: view,
        } = *cluster;
        let moving = entry.moving.as_ref();
        let cell = |r: &ReplicaLocation| liveness.cell_moving(group.block, r, moving);
        let block_size = self.config.block_size;
        let limit = self.repairs.settings.max_repairs_per_datanode;
        let load = self.repairs.load();
        let eligible = |n: &RegisteredNode| {
            n.record.state == DatanodeState::Healthy
                && n.record.admin == AdminState::InService
                && load.get(&n.record.id).copied().unwrap_or(0) < limit
                && n.record.free() >= block_size
        };
        let readable_holders: HashSet<&DatanodeId> = group
            .replicas
            .iter()
            .filter(|r| cell(r) != CellState::Unreadable)
            .map(|r| &r.datanode)
            .collect();
        // Block files on a leaving datanode (or moving off one) are copied
        // from it, one datanode's at a time; anything else is rebuilt.
        let copy_failed = self.repairs.copy_failed(group.block);
        let leaving = group
            .replicas
            .iter()
            .filter(|_| !copy_failed)
            .find(|r| health.missing.contains(&r.index) && cell(r) == CellState::Leaving)
            .map(|r| r.datanode.clone());
        let (source, wanted): (RepairSource, Vec<u8>) = match &leaving {
            Some(from) => (
                RepairSource::Copy(from.clone()),
                group
                    .replicas
                    .iter()
                    .filter(|r| r.datanode == *from && health.missing.contains(&r.index))
                    .map(|r| r.index)
                    .take(1)
                    .collect(),
            ),
            None => (RepairSource::Rebuild, health.missing.clone()),
        };
        // A datanode whose copy of an index is corrupt, and that holds no
        // readable block file of the group, may take that index back.
        let mut targets: Vec<ReplicaLocation> = Vec::new();
        let mut rest = Vec::new();
        for &index in &wanted {
            let back = group.replicas.iter().find(|r| {
                r.index == index
                    && !readable_holders.contains(&r.datanode)
                    && !targets.iter().any(|t| t.datanode == r.datanode)
                    && entry.moving.is_none()
                    && nodes
                        .iter()
                        .any(|n| n.record.id == r.datanode && eligible(n))
            });
            match back {
                Some(r) => targets.push(ReplicaLocation {
                    index,
                    datanode: r.datanode.clone(),
                    addr: r.addr.clone(),
                }),
                None => rest.push(index),
            }
        }
        let holders: HashSet<&DatanodeId> = group.replicas.iter().map(|r| &r.datanode).collect();
        // A group's members apply this alike; blocks placed since the
        // last heartbeat are counted by the leader alone (allocations are
        // not entries), so they weigh only in a lone meta's choice.
        let placed = |n: &RegisteredNode| {
            if self.store.is_replicated() {
                0
            } else {
                n.pending
            }
        };
        // The balancer's move goes where it was planned, or nowhere.
        let planned_to = moving.and_then(|m| m.to.as_ref());
        let candidates: Vec<Candidate> = nodes
            .iter()
            .filter(|n| eligible(n) && !holders.contains(&n.record.id))
            .filter(|n| planned_to.is_none_or(|to| *to == n.record.id))
            .map(|n| Candidate {
                load: n.record.used / block_size + placed(n),
                id: n.record.id.clone(),
                addr: n.record.addr.clone(),
                location: n.record.location.clone(),
            })
            .collect();
        // What stays counts where it stands; the new block files spread around it.
        let staying: Vec<(DatanodeId, Location)> = group
            .replicas
            .iter()
            .filter(|r| cell(r) == CellState::Staying)
            .map(|r| (r.datanode.clone(), view.location(r)))
            .chain(
                targets
                    .iter()
                    .map(|t| (t.datanode.clone(), view.location(t))),
            )
            .collect();
        let held: Vec<Placed<'_>> = staying
            .iter()
            .map(|(id, location)| Placed { id, location })
            .collect();
        let width = rest.len().min(candidates.len());
        let chosen =
            crate::entropy::with_rng(|rng| choose(&held, candidates, width, &config, rng)).ok()?;
        targets.extend(rest.iter().zip(chosen).map(|(index, c)| ReplicaLocation {
            index: *index,
            datanode: c.id,
            addr: c.addr,
        }));
        if targets.is_empty() {
            return None;
        }
        if let Some(moving) = moving {
            let holders: Vec<DatanodeId> =
                group.replicas.iter().map(|r| r.datanode.clone()).collect();
            let keeps = |to: &DatanodeId| match entry.reason {
                QueuedFor::Misplaced => view.move_mends(&holders, &config, &moving.from, to),
                QueuedFor::Balance | QueuedFor::Repair => {
                    view.move_fits(&holders, &config, &moving.from, to)
                }
            };
            if !targets.iter().all(|t| keeps(&t.datanode)) {
                return None;
            }
        }
        let mut readable = group;
        let (kept, unreadable): (Vec<ReplicaLocation>, Vec<ReplicaLocation>) = readable
            .replicas
            .drain(..)
            .partition(|r| liveness.readable(readable.block, r));
        readable.replicas = kept;
        self.tokens.sign(&mut readable, Modes::READ, now);
        let mut written = BlockGroup {
            block: readable.block,
            length: readable.length,
            replicas: targets.clone(),
            token: None,
        };
        // A target taking back its own index may still hold the damaged
        // file there (a client's report quarantines nothing): the write
        // token then lets the repair delete it first.
        let in_place = targets.iter().any(|t| {
            readable
                .replicas
                .iter()
                .chain(&unreadable)
                .any(|r| r.datanode == t.datanode && r.index == t.index)
        });
        let modes = if in_place {
            Modes::WRITE.with(Modes::DELETE)
        } else {
            Modes::WRITE
        };
        self.tokens.sign(&mut written, modes, now);
        Some(RepairCommand {
            group: readable,
            config,
            targets,
            write_token: written.token,
            source,
        })
    }
}

/// The datanodes `nodes` calls dead.
fn dead_datanodes(nodes: &[RegisteredNode]) -> BTreeSet<DatanodeId> {
    nodes
        .iter()
        .filter(|n| n.record.state == DatanodeState::Dead)
        .map(|n| n.record.id.clone())
        .collect()
}

impl Handle<FinishRepair> for MetaState {
    /// Points the group at the block files a repair made, where it still
    /// misses them; everything else it made is queued for deletion.
    fn handle(&self, request: FinishRepair, now: UnixMillis) -> Result<(), MetaError> {
        let FinishRepair {
            datanode,
            block,
            made,
            bytes,
            error,
        } = request;
        self.repairs
            .finished(block, &datanode, error.is_some(), bytes, now);
        if let Some(error) = &error {
            tracing::warn!(%block, %datanode, %error, "repair failed; it will be tried again");
            metrics::counter!(crate::telemetry::REPAIRS.name, "result" => "failed").increment(1);
        }
        let nodes = self.registry.snapshot();
        let addrs: std::collections::HashMap<&DatanodeId, &str> = nodes
            .iter()
            .map(|n| (&n.record.id, n.record.addr.as_str()))
            .collect();
        let made: Vec<ReplicaLocation> = made
            .into_iter()
            .map(|mut r| {
                if let Some(addr) = addrs.get(&r.datanode) {
                    r.addr = addr.to_string();
                }
                r
            })
            .collect();
        let outcome = self.store.write(|txn| {
            let liveness = Liveness::new(
                nodes
                    .iter()
                    .map(|n| (n.record.id.clone(), n.record.state, n.record.admin)),
                corrupt_in(txn, block)?,
            );
            let mut queue = RepairQueue::open(txn)?;
            let entry = queue.get(block)?;
            let reason = entry.as_ref().map(|e| e.reason);
            let found = match &entry {
                Some(entry) => locate(txn, &entry.owner, block)?,
                None => None,
            };
            let mut deletions = DeletionQueue::open(txn)?;
            let Some((at, group, config)) = found.filter(|_| error.is_none()) else {
                // Failed, or the group (or its queue entry) is gone: what was
                // made is left to the orphan detector, which deletes only
                // block files no record lists; deleting here could hit a
                // file a duplicate repair had already put in place. A
                // failed move of the balancer's is planned again later.
                if error.is_some() && reason == Some(QueuedFor::Balance) {
                    queue.remove(block)?;
                }
                return Ok((None, reason));
            };
            let moving = entry.as_ref().and_then(|e| e.moving.clone());
            let cell = |r: &ReplicaLocation| liveness.cell_moving(block, r, moving.as_ref());
            // Only datanodes in service take block files (one may have been
            // decommissioned while the repair ran).
            let (made, refused): (Vec<ReplicaLocation>, Vec<ReplicaLocation>) =
                made.iter().cloned().partition(|r| {
                    nodes.iter().any(|n| {
                        n.record.id == r.datanode && n.record.admin == AdminState::InService
                    })
                });
            let (group, dropped, mut unused) = adopt(group, &config, &made, cell);
            unused.extend(refused);
            // Never a file the group lists: a corrupt copy replaced in
            // place is the new file itself.
            let listed = |r: &ReplicaLocation| {
                group
                    .replicas
                    .iter()
                    .any(|g| g.datanode == r.datanode && g.index == r.index)
            };
            for r in dropped.iter().chain(&unused).filter(|r| !listed(r)) {
                deletions.queue_block(&r.datanode, BlockKey::new(block, r.index), now)?;
            }
            // A deletion still pending at an adopted file's key (of an older
            // file there) must not remove the new one.
            for r in made.iter().filter(|r| listed(r)) {
                deletions.acknowledge(&r.datanode, BlockKey::new(block, r.index))?;
            }
            let mut bad = txn.open_table(BAD_REPLICAS)?;
            for r in &dropped {
                bad.remove(
                    crate::ops::bad_replicas::report_key(
                        BlockKey::new(block, r.index),
                        &r.datanode,
                    )
                    .as_str(),
                )?;
            }
            replace_group(txn, &at, &group)?;
            let health = assess(&group, &config, cell);
            if health.missing.is_empty() || moving.is_some() {
                // A move is done once, whatever it made; a scan finds the
                // group again if it still needs one.
                queue.remove(block)?;
            } else if let Some(entry) = entry {
                queue.put(RepairEntry {
                    missing: health.missing.clone(),
                    spare: health.spare,
                    ..entry
                })?;
            }
            Ok((Some(health), reason))
        })?;
        if outcome.1 == Some(QueuedFor::Balance) {
            self.balance.finished(bytes, error.is_some());
            let result = if error.is_some() { "failed" } else { "done" };
            metrics::counter!(crate::telemetry::BALANCE_MOVES.name, "result" => result)
                .increment(1);
            if error.is_none() {
                metrics::counter!(crate::telemetry::BALANCE_MOVED_BYTES.name).increment(bytes);
            }
        }
        if let (Some(health), Some(reason @ (QueuedFor::Misplaced | QueuedFor::Balance))) = &outcome
        {
            let reason = match reason {
                QueuedFor::Misplaced => "misplaced",
                _ => "balance",
            };
            if health.missing.is_empty() {
                metrics::counter!(crate::telemetry::BLOCK_FILES_MOVED.name, "reason" => reason)
                    .increment(1);
            }
        }
        if let (Some(health), _) = outcome {
            metrics::counter!(crate::telemetry::REPAIRS.name, "result" => "done").increment(1);
            metrics::counter!(crate::telemetry::REPAIRED_BYTES.name).increment(bytes);
            if health.missing.is_empty() {
                tracing::info!(%block, "block group whole again");
            } else {
                redundancy::announce(block, &health);
            }
        }
        Ok(())
    }
}

/// The corrupt block files of `block` reported.
fn corrupt_in(
    txn: &WriteTransaction,
    block: BlockId,
) -> Result<HashSet<(BlockKey, DatanodeId)>, StoreError> {
    let reports = reported_files(&txn.open_table(BAD_REPLICAS)?)?;
    Ok(reports
        .into_iter()
        .filter(|(_, r)| r.block.block == block)
        .map(|(_, r)| (r.block, r.datanode))
        .collect())
}

/// `group` with the block files of `made` it still misses in place of its
/// unreadable ones; answers the group, the unreadable replicas it dropped,
/// and the made block files it did not need.
fn adopt(
    mut group: BlockGroup,
    config: &ReplicationConfig,
    made: &[ReplicaLocation],
    cell: impl Fn(&ReplicaLocation) -> CellState,
) -> (BlockGroup, Vec<ReplicaLocation>, Vec<ReplicaLocation>) {
    let mut dropped = Vec::new();
    let mut unused = Vec::new();
    for new in made {
        // The unreadable replica it replaces: of its index for EC, any for a
        // replicated block; its own datanode's first (a corrupt copy
        // replaced in place).
        let replaceable = |r: &ReplicaLocation| {
            cell(r) != CellState::Staying
                && match config {
                    ReplicationConfig::Ec(_) => r.index == new.index,
                    ReplicationConfig::Replicated { .. } => true,
                }
        };
        // An unreadable replica goes before a readable one that was to
        // move: the group keeps the more it can read.
        let position = group
            .replicas
            .iter()
            .position(|r| replaceable(r) && r.datanode == new.datanode)
            .or_else(|| {
                group
                    .replicas
                    .iter()
                    .position(|r| replaceable(r) && cell(r) == CellState::Unreadable)
            })
            .or_else(|| group.replicas.iter().position(replaceable));
        let holds_any = group
            .replicas
            .iter()
            .enumerate()
            .any(|(i, r)| r.datanode == new.datanode && Some(i) != position);
        let needed = match config {
            ReplicationConfig::Ec(_) => !group
                .replicas
                .iter()
                .any(|r| r.index == new.index && cell(r) == CellState::Staying),
            ReplicationConfig::Replicated { .. } => {
                let staying = group
                    .replicas
                    .iter()
                    .filter(|r| cell(r) == CellState::Staying)
                    .count();
                staying < config.width()
            }
        };
        if !needed || holds_any {
            unused.push(new.clone());
            continue;
        }
        if let Some(position) = position {
            dropped.push(group.replicas.remove(position));
        }
        group.replicas.push(new.clone());
    }
    group.replicas.sort_by_key(|r| r.index);
    (group, dropped, unused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redundancy::tests::replica;
    use crate::store::repairs::CellMove;
    use meta_api::DatanodeState;

    fn liveness(up: &[&str]) -> Liveness {
        Liveness::new(
            up.iter().map(|d| {
                (
                    DatanodeId(d.to_string()),
                    DatanodeState::Healthy,
                    AdminState::InService,
                )
            }),
            HashSet::new(),
        )
    }

    #[test]
    fn a_repair_replaces_only_what_is_still_missing() {
        let group = BlockGroup {
            block: BlockId(3),
            length: 10,
            replicas: (0..5).map(|i| replica(i, &format!("d{i}"))).collect(),
            token: None,
        };
        // d1 died; then d3 came back... d1's cell rebuilt on x, and a late
        // duplicate of index 3 on y, which is readable: unused.
        let live = liveness(&["d0", "d2", "d3", "d4", "x", "y", "z"]);
        let made = [replica(1, "x"), replica(3, "y"), replica(1, "z")];
        let (group, dropped, unused) =
            adopt(group.clone(), &ReplicationConfig::RS_3_2, &made, |r| {
                live.cell(group.block, r)
            });
        assert_eq!(dropped, vec![replica(1, "d1")]);
        assert_eq!(unused, vec![replica(3, "y"), replica(1, "z")]);
        let holders: Vec<(u8, &str)> = group
            .replicas
            .iter()
            .map(|r| (r.index, r.datanode.0.as_str()))
            .collect();
        assert_eq!(
            holders,
            vec![(0, "d0"), (1, "x"), (2, "d2"), (3, "d3"), (4, "d4")]
        );
    }

    #[test]
    fn a_corrupt_copy_is_replaced_in_place_on_its_own_datanode() {
        let group = BlockGroup {
            block: BlockId(5),
            length: 10,
            replicas: (0..5).map(|i| replica(i, &format!("d{i}"))).collect(),
            token: None,
        };
        let mut live = liveness(&["d0", "d1", "d2", "d3", "d4"]);
        live.corrupt
            .insert((BlockKey::new(BlockId(5), 2), DatanodeId("d2".into())));
        let made = [replica(2, "d2")];
        let (group, dropped, unused) =
            adopt(group.clone(), &ReplicationConfig::RS_3_2, &made, |r| {
                live.cell(group.block, r)
            });
        assert_eq!((dropped, unused), (vec![replica(2, "d2")], vec![]));
        assert_eq!(group.replicas.len(), 5);
        assert!(group.replicas.contains(&replica(2, "d2")));
    }

    #[test]
    fn a_copy_off_a_leaving_datanode_replaces_its_block_file() {
        let group = BlockGroup {
            block: BlockId(6),
            length: 10,
            replicas: (0..5).map(|i| replica(i, &format!("d{i}"))).collect(),
            token: None,
        };
        let mut live = liveness(&["d0", "d1", "d2", "d3", "d4", "x"]);
        live.leaving.insert(DatanodeId("d3".into()));
        let health = assess(&group, &ReplicationConfig::RS_3_2, |r| {
            live.cell(group.block, r)
        });
        assert_eq!((health.missing.clone(), health.spare), (vec![3], 2));
        let (group, dropped, unused) = adopt(
            group.clone(),
            &ReplicationConfig::RS_3_2,
            &[replica(3, "x")],
            |r| live.cell(group.block, r),
        );
        assert_eq!((dropped, unused), (vec![replica(3, "d3")], vec![]));
        assert!(group.replicas.contains(&replica(3, "x")));
        let health = assess(&group, &ReplicationConfig::RS_3_2, |r| {
            live.cell(group.block, r)
        });
        assert!(health.missing.is_empty());
    }

    #[test]
    fn a_replicated_move_drops_a_dead_copy_before_the_moving_one() {
        let group = BlockGroup {
            block: BlockId(8),
            length: 10,
            replicas: vec![replica(0, "moving"), replica(0, "b"), replica(0, "dead")],
            token: None,
        };
        let live = liveness(&["moving", "b", "x"]);
        let moving = CellMove {
            index: 0,
            from: DatanodeId("moving".into()),
            to: Some(DatanodeId("x".into())),
        };
        let cell = |r: &ReplicaLocation| live.cell_moving(group.block, r, Some(&moving));
        let (adopted, dropped, unused) = adopt(
            group.clone(),
            &ReplicationConfig::REPLICATED_3,
            &[replica(0, "x")],
            cell,
        );
        assert_eq!((dropped, unused), (vec![replica(0, "dead")], vec![]));
        let holders: Vec<&str> = adopted
            .replicas
            .iter()
            .map(|r| r.datanode.0.as_str())
            .collect();
        assert_eq!(holders, vec!["moving", "b", "x"]);
    }

    #[test]
    fn a_replicated_repair_adds_a_holder_that_holds_none_yet() {
        let group = BlockGroup {
            block: BlockId(4),
            length: 10,
            replicas: vec![replica(0, "a"), replica(0, "dead")],
            token: None,
        };
        let live = liveness(&["a", "b", "c"]);
        let made = [
            replica(0, "a"),
            replica(0, "b"),
            replica(0, "c"),
            replica(0, "c"),
        ];
        let (group, dropped, unused) = adopt(
            group.clone(),
            &ReplicationConfig::REPLICATED_3,
            &made,
            |r| live.cell(group.block, r),
        );
        assert_eq!(dropped, vec![replica(0, "dead")]);
        assert_eq!(unused, vec![replica(0, "a"), replica(0, "c")]);
        let holders: Vec<&str> = group
            .replicas
            .iter()
            .map(|r| r.datanode.0.as_str())
            .collect();
        assert_eq!(holders, vec!["a", "b", "c"]);
    }
}
