//! Repair: the periodic check that scans for damaged groups and hands the
//! most endangered ones to datanodes, and the answer of a datanode that ran
//! a repair, which points the group at the new block files in the same
//! transaction that checks the group still needs them.

use crate::placement::{choose, Candidate};
use crate::redundancy::{
    self, apply_scan, assess, corrupt_block_files, reported_files, scan, CellState, Health,
    Liveness,
};
use crate::registry::RegisteredNode;
use crate::state::MetaState;
use crate::store::db::{decode, encode, get_json, StoreError};
use crate::store::deletions::DeletionQueue;
use crate::store::repairs::{self, GroupOwner, RepairEntry, RepairQueue};
use crate::store::tables::{object_key, part_key, BAD_REPLICAS, OBJECTS, PARTS, UPLOADS, VERSIONS};
use crate::store::versions::{self, version_key};
use meta_api::{
    AdminState, BlockGroup, DatanodeState, FinishRepair, Handle, MetaError, ObjectRecord,
    PartRecord, RedundancyStatus, RepairCommand, RepairSource, ReplicaLocation, UnixMillis,
    UploadRecord,
};
use proto::token::Modes;
use proto::{BlockId, BlockKey, DatanodeId, ReplicationConfig};
use redb::{ReadableTable, WriteTransaction};
use std::collections::{BTreeSet, HashSet};

/// Queue entries looked at per check.
const QUEUE_WINDOW: usize = 256;

/// Where a group's record is: its table and key.
enum RecordAt {
    Object(Vec<u8>),
    Version(Vec<u8>),
    Part(Vec<u8>),
}

/// The record holding `block`, as `owner` says, falling back from a part
/// to the object its upload became, wherever that object now is among its
/// key's versions.
fn locate(
    txn: &impl GroupTables,
    owner: &GroupOwner,
    block: BlockId,
) -> Result<Option<(RecordAt, BlockGroup, ReplicationConfig)>, StoreError> {
    if let Some((upload_id, number)) = &owner.part {
        let key = part_key(upload_id, *number);
        if let Some(part) = txn.part(&key)? {
            if let Some(group) = part.groups.iter().find(|g| g.block == block) {
                if let Some(upload) = txn.upload(upload_id)? {
                    return Ok(Some((
                        RecordAt::Part(key),
                        group.clone(),
                        upload.replication,
                    )));
                }
            }
        }
    }
    // The latest version, or an older one by its sequence number.
    let latest = object_key(&owner.bucket, owner.key.as_bytes());
    let older = version_key(&owner.bucket, owner.key.as_bytes(), owner.version);
    for (at, object) in [
        (RecordAt::Object(latest.clone()), txn.object(&latest)?),
        (RecordAt::Version(older.clone()), txn.version(&older)?),
    ] {
        let found = object.and_then(|object| {
            let group = object.groups.iter().find(|g| g.block == block)?.clone();
            Some((group, object.replication))
        });
        if let Some((group, replication)) = found {
            return Ok(Some((at, group, replication)));
        }
    }
    // A group queued for a part names no version: the object its upload
    // became may have been superseded since.
    for (at, object) in txn.older_versions(&owner.bucket, &owner.key)? {
        if let Some(group) = object.groups.iter().find(|g| g.block == block) {
            return Ok(Some((
                RecordAt::Version(at),
                group.clone(),
                object.replication,
            )));
        }
    }
    Ok(None)
}

/// The reads `locate` needs, from a read or a write transaction.
trait GroupTables {
    fn part(&self, key: &[u8]) -> Result<Option<PartRecord>, StoreError>;
    fn upload(&self, id: &str) -> Result<Option<UploadRecord>, StoreError>;
    fn object(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError>;
    fn version(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError>;
    fn older_versions(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Vec<(Vec<u8>, ObjectRecord)>, StoreError>;
}

macro_rules! group_tables {
    ($t:ty) => {
        impl GroupTables for $t {
            fn part(&self, key: &[u8]) -> Result<Option<PartRecord>, StoreError> {
                get_json(&self.open_table(PARTS)?, key)
            }
            fn upload(&self, id: &str) -> Result<Option<UploadRecord>, StoreError> {
                get_json(&self.open_table(UPLOADS)?, id)
            }
            fn object(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError> {
                get_json(&self.open_table(OBJECTS)?, key)
            }
            fn version(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError> {
                get_json(&self.open_table(VERSIONS)?, key)
            }
            fn older_versions(
                &self,
                bucket: &str,
                key: &str,
            ) -> Result<Vec<(Vec<u8>, ObjectRecord)>, StoreError> {
                versions::older_versions(&self.open_table(VERSIONS)?, bucket, key)
            }
        }
    };
}
group_tables!(redb::ReadTransaction);
group_tables!(WriteTransaction);

impl MetaState {
    /// What `tessera admin status` shows of redundancy, with `queued` groups.
    pub(crate) fn redundancy_status(&self, queued: u64) -> RedundancyStatus {
        let progress = self.repairs.progress();
        RedundancyStatus {
            healthy: progress.counts.healthy,
            degraded: progress.counts.degraded,
            at_risk: progress.counts.at_risk,
            lost: progress.counts.lost,
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

    /// One round of redundancy upkeep: a scan when one is due, then as many
    /// queued groups handed to datanodes as the limits allow. Blocking.
    pub(crate) fn check_redundancy(&self, now: UnixMillis) -> Result<(), MetaError> {
        let nodes = self
            .registry
            .snapshot(now, self.config.stale_after, self.config.dead_after);
        let dead: BTreeSet<DatanodeId> = nodes
            .iter()
            .filter(|n| n.record.state == DatanodeState::Dead)
            .map(|n| n.record.id.clone())
            .collect();
        let liveness = self.liveness(&nodes)?;
        let queued = self.store.read(repairs::queued)?;
        if self.repairs.scan_due(&dead, queued, now) {
            let result = scan(&self.store, &liveness, now)?;
            apply_scan(&self.store, &result)?;
            result.counts.publish();
            tracing::debug!(counts = ?result.counts, damaged = result.damaged.len(), "redundancy scan");
            self.repairs.scanned(dead, result.counts, now);
            // After `scanned`, which would forget the scan it may ask for.
            self.finish_decommissions(&nodes, &result.leaving_files, now)?;
        }
        self.schedule_repairs(&nodes, &liveness, now)
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

    /// Hands the queue's head to datanodes, most endangered first.
    fn schedule_repairs(
        &self,
        nodes: &[RegisteredNode],
        liveness: &Liveness,
        now: UnixMillis,
    ) -> Result<(), MetaError> {
        self.repairs.expire(now, &liveness.up);
        let (head, queued) = self
            .store
            .read(|txn| Ok((repairs::head(txn, QUEUE_WINDOW)?, repairs::queued(txn)?)))?;
        metrics::gauge!("tessera_meta_repair_queue").set(queued as f64);
        let settings = &self.repairs.settings;
        for entry in head {
            if self.repairs.running() >= settings.max_repairs {
                break;
            }
            if entry.spare < 0 || !self.repairs.may_start(entry.block, now) {
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
            let health = assess(&group, &config, |r| liveness.cell(group.block, r));
            if health.missing.is_empty() || health.spare < 0 {
                continue;
            }
            if let Some(command) = self.repair_command(nodes, liveness, group, config, &health, now)
            {
                tracing::info!(
                    block = %command.group.block,
                    missing = ?health.missing,
                    coordinator = %command.targets[0].datanode,
                    "repair handed out"
                );
                metrics::counter!("tessera_meta_repairs_started_total").increment(1);
                self.repairs.assign(command, now);
            }
        }
        Ok(())
    }

    /// The command that rebuilds `health.missing` of `group` on datanodes
    /// holding none of its block files, or None when no datanode can take
    /// one now.
    fn repair_command(
        &self,
        nodes: &[RegisteredNode],
        liveness: &Liveness,
        group: BlockGroup,
        config: ReplicationConfig,
        health: &Health,
        now: UnixMillis,
    ) -> Option<RepairCommand> {
        let block_size = self.config.block_size;
        let limit = self.repairs.settings.max_repairs_per_datanode;
        let load = self.repairs.load();
        let eligible = |n: &RegisteredNode| {
            n.record.state == DatanodeState::Healthy
                && n.record.admin == AdminState::InService
                && load.get(&n.record.id).copied().unwrap_or(0) < limit
                && n.record.capacity.saturating_sub(n.record.used) >= block_size
        };
        let readable_holders: HashSet<&DatanodeId> = group
            .replicas
            .iter()
            .filter(|r| liveness.readable(group.block, r))
            .map(|r| &r.datanode)
            .collect();
        // Block files on a leaving datanode are copied from it, one
        // datanode's at a time; anything else is rebuilt.
        let copy_failed = self.repairs.copy_failed(group.block);
        let leaving = group
            .replicas
            .iter()
            .filter(|_| !copy_failed)
            .find(|r| {
                health.missing.contains(&r.index)
                    && liveness.cell(group.block, r) == CellState::Leaving
            })
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
        let candidates: Vec<Candidate> = nodes
            .iter()
            .filter(|n| eligible(n) && !holders.contains(&n.record.id))
            .map(|n| Candidate {
                load: n.record.used / block_size + placed(n),
                id: n.record.id.clone(),
                addr: n.record.addr.clone(),
            })
            .collect();
        let width = rest.len().min(candidates.len());
        let chosen = crate::entropy::with_rng(|rng| choose(candidates, width, rng)).ok()?;
        targets.extend(rest.iter().zip(chosen).map(|(index, c)| ReplicaLocation {
            index: *index,
            datanode: c.id,
            addr: c.addr,
        }));
        if targets.is_empty() {
            return None;
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
            metrics::counter!("tessera_meta_repairs_total", "result" => "failed").increment(1);
        }
        let nodes = self
            .registry
            .snapshot(now, self.config.stale_after, self.config.dead_after);
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
            let found = match &entry {
                Some(entry) => locate(txn, &entry.owner, block)?,
                None => None,
            };
            let mut deletions = DeletionQueue::open(txn)?;
            let Some((at, group, config)) = found.filter(|_| error.is_none()) else {
                // Failed, or the group (or its queue entry) is gone: what was
                // made is left to the orphan detector, which deletes only
                // block files no record lists; deleting here could hit a
                // file a duplicate repair had already put in place.
                return Ok(None);
            };
            // Only datanodes in service take block files (one may have been
            // decommissioned while the repair ran).
            let (made, refused): (Vec<ReplicaLocation>, Vec<ReplicaLocation>) =
                made.iter().cloned().partition(|r| {
                    nodes.iter().any(|n| {
                        n.record.id == r.datanode && n.record.admin == AdminState::InService
                    })
                });
            let (group, dropped, mut unused) = adopt(group, &config, &made, &liveness);
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
            let health = assess(&group, &config, |r| liveness.cell(block, r));
            if health.missing.is_empty() {
                queue.remove(block)?;
            } else if let Some(entry) = entry {
                queue.put(RepairEntry {
                    missing: health.missing.clone(),
                    spare: health.spare,
                    ..entry
                })?;
            }
            Ok(Some(health))
        })?;
        if let Some(health) = outcome {
            metrics::counter!("tessera_meta_repairs_total", "result" => "done").increment(1);
            metrics::counter!("tessera_meta_repaired_bytes_total").increment(bytes);
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
    liveness: &Liveness,
) -> (BlockGroup, Vec<ReplicaLocation>, Vec<ReplicaLocation>) {
    let block = group.block;
    let mut dropped = Vec::new();
    let mut unused = Vec::new();
    for new in made {
        // The unreadable replica it replaces: of its index for EC, any for a
        // replicated block; its own datanode's first (a corrupt copy
        // replaced in place).
        let replaceable = |r: &ReplicaLocation| {
            liveness.cell(block, r) != CellState::Staying
                && match config {
                    ReplicationConfig::Ec(_) => r.index == new.index,
                    ReplicationConfig::Replicated { .. } => true,
                }
        };
        let position = group
            .replicas
            .iter()
            .position(|r| replaceable(r) && r.datanode == new.datanode)
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
                .any(|r| r.index == new.index && liveness.cell(block, r) == CellState::Staying),
            ReplicationConfig::Replicated { .. } => {
                let staying = group
                    .replicas
                    .iter()
                    .filter(|r| liveness.cell(block, r) == CellState::Staying)
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

/// Writes `group` into the object record at `key` of `table` with `swap`.
fn swap_in_object(
    txn: &WriteTransaction,
    table: redb::TableDefinition<&'static [u8], &'static [u8]>,
    key: &[u8],
    group: &BlockGroup,
    swap: fn(&mut [BlockGroup], &BlockGroup),
) -> Result<(), StoreError> {
    let mut objects = txn.open_table(table)?;
    let mut record: ObjectRecord = match objects.get(key)? {
        Some(value) => decode(value.value())?,
        None => return Ok(()),
    };
    swap(&mut record.groups, group);
    objects.insert(key, encode(&record)?.as_slice())?;
    Ok(())
}

/// Writes `group` back into the record at `at`, in place of the group with
/// its block id.
fn replace_group(
    txn: &WriteTransaction,
    at: &RecordAt,
    group: &BlockGroup,
) -> Result<(), StoreError> {
    fn swap(groups: &mut [BlockGroup], group: &BlockGroup) {
        if let Some(slot) = groups.iter_mut().find(|g| g.block == group.block) {
            *slot = group.clone();
        }
    }
    match at {
        RecordAt::Object(key) => swap_in_object(txn, OBJECTS, key, group, swap)?,
        RecordAt::Version(key) => swap_in_object(txn, VERSIONS, key, group, swap)?,
        RecordAt::Part(key) => {
            let mut parts = txn.open_table(PARTS)?;
            let mut record: PartRecord = match parts.get(key.as_slice())? {
                Some(value) => decode(value.value())?,
                None => return Ok(()),
            };
            swap(&mut record.groups, group);
            parts.insert(key.as_slice(), encode(&record)?.as_slice())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redundancy::tests::replica;
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
    fn a_group_is_found_in_any_version_of_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let group = BlockGroup {
            block: BlockId(7),
            length: 1,
            replicas: vec![replica(0, "d0")],
            token: None,
        };
        let mut record = ObjectRecord::new(
            "b",
            "k",
            "",
            ReplicationConfig::REPLICATED_1,
            vec![group.clone()],
        );
        record.version.seq = 9;
        let at = version_key("b", b"k", 9);
        store
            .write(|txn| {
                let mut versions = txn.open_table(VERSIONS)?;
                versions.insert(at.as_slice(), encode(&record)?.as_slice())?;
                Ok(())
            })
            .unwrap();
        // Queued for a part of the upload that became this version, which
        // is no longer the latest: the entry names no sequence number.
        let owner = GroupOwner {
            bucket: "b".into(),
            key: "k".into(),
            part: Some(("u".into(), 1)),
            version: 0,
        };
        let found = store.read(|txn| locate(txn, &owner, BlockId(7))).unwrap();
        assert!(
            matches!(&found, Some((RecordAt::Version(stored), g, _)) if *stored == at && *g == group)
        );
        let missing = store.read(|txn| locate(txn, &owner, BlockId(8))).unwrap();
        assert!(missing.is_none());
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
        let (group, dropped, unused) = adopt(group, &ReplicationConfig::RS_3_2, &made, &live);
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
        let (group, dropped, unused) = adopt(group, &ReplicationConfig::RS_3_2, &made, &live);
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
        let (group, dropped, unused) =
            adopt(group, &ReplicationConfig::RS_3_2, &[replica(3, "x")], &live);
        assert_eq!((dropped, unused), (vec![replica(3, "d3")], vec![]));
        assert!(group.replicas.contains(&replica(3, "x")));
        let health = assess(&group, &ReplicationConfig::RS_3_2, |r| {
            live.cell(group.block, r)
        });
        assert!(health.missing.is_empty());
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
        let (group, dropped, unused) = adopt(group, &ReplicationConfig::REPLICATED_3, &made, &live);
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
