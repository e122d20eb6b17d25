//! The redundancy scan: every object and part record read in one read
//! transaction, each group assessed (damaged, misplaced or whole), the
//! bytes the records list on each datanode counted, and a few block files
//! per datanode kept for the balancer to choose from; then the queue
//! brought in line with what it found.

use super::{assess, reported_files, GroupCounts, Health, Liveness, PlacementView};
use crate::balance::MovableCell;
use crate::store::db::decode;
use crate::store::repairs::{self, GroupOwner, QueuedFor, RepairEntry, RepairQueue};
use crate::store::tables::{BAD_REPLICAS, OBJECTS, PARTS, UPLOADS, VERSIONS};
use crate::store::Store;
use meta_api::{BlockGroup, MetaError, UnixMillis};
use proto::{BlockId, BlockKey, DatanodeId, ReplicationConfig};
use rand::Rng;
use redb::ReadableTable;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The groups of an object record, with what a scan needs of it.
#[derive(Deserialize)]
struct ObjectGroups {
    bucket: String,
    key: String,
    replication: ReplicationConfig,
    groups: Vec<BlockGroup>,
    #[serde(default)]
    version: VersionSeq,
}

/// The sequence number of an object's version.
#[derive(Default, Deserialize)]
struct VersionSeq {
    #[serde(default)]
    seq: u64,
}

/// The groups of a part record.
#[derive(Deserialize)]
struct PartGroups {
    upload_id: String,
    number: u32,
    groups: Vec<BlockGroup>,
}

/// What a part's upload tells a scan.
#[derive(Clone, Deserialize)]
struct UploadTarget {
    bucket: String,
    key: String,
    replication: ReplicationConfig,
}

/// What one scan found.
pub(crate) struct ScanResult {
    pub(crate) counts: GroupCounts,
    /// Every group that lost block files.
    pub(crate) damaged: Vec<RepairEntry>,
    /// Every whole group a failure domain holds too much of, with the move
    /// that mends it.
    pub(crate) misplaced: Vec<RepairEntry>,
    /// The reported corrupt block files some record still lists.
    pub(crate) listed_corrupt: HashSet<(BlockKey, DatanodeId)>,
    /// Block files the records list on each leaving datanode.
    pub(crate) leaving_files: HashMap<DatanodeId, u64>,
    /// The groups queued when the scan read the records.
    pub(crate) queued: HashMap<BlockId, RepairEntry>,
    /// The queued moves whose group the scan found whole, with the moving
    /// block file still where the move takes it from (and, for the
    /// balancer's, its target still fit to take it).
    pub(crate) moves_in_place: HashSet<BlockId>,
    /// The corrupt-file reports the scan went by.
    pub(crate) reported: HashSet<(BlockKey, DatanodeId)>,
    /// Bytes of the block files the records list on each datanode.
    pub(crate) listed: BTreeMap<DatanodeId, u64>,
    /// Block files of whole, well placed groups, a few per datanode.
    pub(crate) movable: BTreeMap<DatanodeId, Vec<MovableCell>>,
}

/// Reads every object and part record in one read transaction and assesses
/// each group against `liveness` and the placement rule as `view` places
/// the datanodes; keeps up to `movable_per_datanode` movable block files
/// of each datanode.
pub(crate) fn scan(
    store: &Store,
    liveness: &Liveness,
    view: &PlacementView,
    movable_per_datanode: usize,
    now: UnixMillis,
) -> Result<ScanResult, MetaError> {
    store.read(|txn| {
        let mut seen: HashMap<DatanodeId, u64> = HashMap::new();
        let mut result = ScanResult {
            counts: GroupCounts::default(),
            damaged: Vec::new(),
            misplaced: Vec::new(),
            listed_corrupt: HashSet::new(),
            leaving_files: HashMap::new(),
            queued: repairs::head(txn, usize::MAX)?
                .into_iter()
                .map(|e| (e.block, e))
                .collect(),
            moves_in_place: HashSet::new(),
            reported: liveness.corrupt.clone(),
            listed: BTreeMap::new(),
            movable: BTreeMap::new(),
        };
        let mut note =
            |group: &BlockGroup, config: &ReplicationConfig, owner: &dyn Fn() -> GroupOwner| {
                for (key, replica) in group.block_keys() {
                    if liveness.leaving.contains(&replica.datanode) {
                        *result
                            .leaving_files
                            .entry(replica.datanode.clone())
                            .or_default() += 1;
                    }
                    let file = (key, replica.datanode.clone());
                    if liveness.corrupt.contains(&file) {
                        result.listed_corrupt.insert(file);
                    }
                    *result.listed.entry(replica.datanode.clone()).or_default() +=
                        config.block_file_len(group.length, usize::from(replica.index));
                }
                let health = assess(group, config, |r| liveness.cell(group.block, r));
                result.counts.add(health.state());
                if !health.missing.is_empty() {
                    result.damaged.push(RepairEntry {
                        block: group.block,
                        owner: owner(),
                        missing: health.missing,
                        spare: health.spare,
                        queued_at: now,
                        reason: QueuedFor::Repair,
                        moving: None,
                    });
                    return;
                }
                if let Some(queued) = result.queued.get(&group.block) {
                    let holds = match (&queued.moving, queued.reason) {
                        (Some(planned), QueuedFor::Balance) => {
                            view.balance_move_holds(group, config, planned)
                        }
                        (Some(moving), _) => group
                            .replicas
                            .iter()
                            .any(|r| r.index == moving.index && r.datanode == moving.from),
                        (None, _) => false,
                    };
                    if holds {
                        result.moves_in_place.insert(group.block);
                    }
                }
                if let Some(moving) = view.misplacement(group, config) {
                    result.counts.misplaced += 1;
                    result.misplaced.push(RepairEntry::moving(
                        group.block,
                        owner(),
                        QueuedFor::Misplaced,
                        health.spare,
                        moving,
                        now,
                    ));
                    return;
                }
                keep_movable(
                    &mut result.movable,
                    &mut seen,
                    group,
                    config,
                    owner,
                    movable_per_datanode,
                );
            };
        let (objects, versions) = (txn.open_table(OBJECTS)?, txn.open_table(VERSIONS)?);
        for entry in objects.iter()?.chain(versions.iter()?) {
            let (_, value) = entry?;
            let record: ObjectGroups = decode(value.value())?;
            for group in &record.groups {
                note(group, &record.replication, &|| GroupOwner {
                    bucket: record.bucket.clone(),
                    key: record.key.clone(),
                    part: None,
                    version: record.version.seq,
                });
            }
        }
        let uploads = txn.open_table(UPLOADS)?;
        let mut targets: HashMap<String, Option<UploadTarget>> = HashMap::new();
        for entry in txn.open_table(PARTS)?.iter()? {
            let (_, value) = entry?;
            let part: PartGroups = decode(value.value())?;
            if !targets.contains_key(&part.upload_id) {
                let target = match uploads.get(part.upload_id.as_str())? {
                    Some(upload) => Some(decode::<UploadTarget>(upload.value())?),
                    None => None,
                };
                targets.insert(part.upload_id.clone(), target);
            }
            // A part whose upload is gone is being aborted or completed.
            let Some(Some(target)) = targets.get(&part.upload_id) else {
                continue;
            };
            for group in &part.groups {
                note(group, &target.replication, &|| GroupOwner {
                    bucket: target.bucket.clone(),
                    key: target.key.clone(),
                    part: Some((part.upload_id.clone(), part.number)),
                    version: 0,
                });
            }
        }
        Ok(result)
    })
}

/// Keeps each block file of whole, well placed `group` among its
/// datanode's movable ones: a uniform sample of `limit` a datanode of all
/// the scan finds (`seen` counts them), so that every round draws other
/// block files. The draws are the seeded generator's: group members keep
/// the same.
fn keep_movable(
    movable: &mut BTreeMap<DatanodeId, Vec<MovableCell>>,
    seen: &mut HashMap<DatanodeId, u64>,
    group: &BlockGroup,
    config: &ReplicationConfig,
    owner: &dyn Fn() -> GroupOwner,
    limit: usize,
) {
    if limit == 0 {
        return;
    }
    for replica in &group.replicas {
        let count = seen.entry(replica.datanode.clone()).or_default();
        *count += 1;
        let cells = movable.entry(replica.datanode.clone()).or_default();
        let slot = if cells.len() < limit {
            cells.len()
        } else {
            match crate::entropy::with_rng(|rng| rng.gen_range(0..*count)) {
                drawn if drawn < limit as u64 => drawn as usize,
                _ => continue,
            }
        };
        let cell = MovableCell {
            block: group.block,
            index: replica.index,
            length: config.block_file_len(group.length, usize::from(replica.index)),
            owner: owner(),
            config: *config,
            holders: group.replicas.iter().map(|r| r.datanode.clone()).collect(),
        };
        if slot == cells.len() {
            cells.push(cell);
        } else {
            cells[slot] = cell;
        }
    }
}

/// Brings the queue in line with a scan. Every damaged group is queued (in
/// place of a move); a misplaced one is queued unless a move of it still in
/// place is queued already (its copy may be under way). Entries the scan
/// saw queued are dropped when their group was found whole and in place
/// (a repair or a misplaced move no longer needed) or not found at all
/// (deleted), except the balancer's moves still in place; a group queued
/// after the scan read the records stays. Corrupt-file reports the scan
/// went by that no record lists any more (the file was replaced, or its
/// object deleted) are dropped too; newer ones stay.
pub(crate) fn apply_scan(store: &Store, result: &ScanResult) -> Result<(), MetaError> {
    store.write(|txn| {
        let mut reports = txn.open_table(BAD_REPLICAS)?;
        for (key, report) in reported_files(&reports)? {
            let file = (report.block, report.datanode);
            if result.reported.contains(&file) && !result.listed_corrupt.contains(&file) {
                reports.remove(key.as_str())?;
            }
        }
        let mut queue = RepairQueue::open(txn)?;
        let damaged: HashSet<BlockId> = result.damaged.iter().map(|e| e.block).collect();
        let misplaced: HashSet<BlockId> = result.misplaced.iter().map(|e| e.block).collect();
        for (block, entry) in &result.queued {
            let in_place = result.moves_in_place.contains(block);
            let keep = match entry.reason {
                QueuedFor::Repair => damaged.contains(block),
                QueuedFor::Misplaced => damaged.contains(block) || misplaced.contains(block),
                QueuedFor::Balance => damaged.contains(block) || in_place,
            };
            if !keep {
                queue.remove(*block)?;
            }
        }
        for entry in &result.damaged {
            let was_queued = queue.put(entry.clone())?;
            if !was_queued {
                super::announce(
                    entry.block,
                    &Health {
                        missing: entry.missing.clone(),
                        spare: entry.spare,
                    },
                );
            }
        }
        for entry in &result.misplaced {
            let queued_move = result
                .queued
                .get(&entry.block)
                .is_some_and(|e| e.reason != QueuedFor::Repair);
            if !(queued_move && result.moves_in_place.contains(&entry.block)) {
                queue.put(entry.clone())?;
            }
        }
        Ok(())
    })
}
