//! The repair queue: block groups that lost block files, kept across
//! restarts, one entry per group, ordered so that the most endangered come
//! first: groups with no spare block file left, then those with one, and so
//! on; among equals, those that lost more. Then the groups whose block files
//! move while the group stays whole: misplaced ones (a failure domain
//! holds more of them than the placement rule allows), then the balancer's.
//! Groups too damaged to read (lost) go last: nothing can rebuild them
//! until a datanode comes back.
//!
//! Two tables hold it: `REPAIR_QUEUE` from (rank, block id) to the entry,
//! read in key order, and `REPAIR_INDEX` from the block id to its rank key,
//! so that a group queued again (or repaired) finds its entry.

use super::db::{decode, encode, StoreError};
use meta_api::UnixMillis;
use proto::{BlockId, DatanodeId};
use redb::WriteTransaction;
use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, Table, TableDefinition};
use serde::{Deserialize, Serialize};

/// `rank_key(spare, missing, block)` -> `RepairEntry`.
pub(crate) const REPAIR_QUEUE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("repair_queue");
/// Block id -> its `REPAIR_QUEUE` key.
pub(crate) const REPAIR_INDEX: TableDefinition<u64, &[u8]> = TableDefinition::new("repair_index");

/// The record that holds a group: an object, or a part of an upload (which
/// becomes the object at `bucket`/`key` when the upload completes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupOwner {
    pub(crate) bucket: String,
    pub(crate) key: String,
    /// Upload id and part number, while the group belongs to a part.
    pub(crate) part: Option<(String, u32)>,
    /// The sequence number of the object's version (`VersionStamp::seq`),
    /// to find it once it is no longer the latest.
    #[serde(default)]
    pub(crate) version: u64,
}

/// Why a group is queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum QueuedFor {
    /// It lost block files: they are made again.
    #[default]
    Repair,
    /// Readable, but a failure domain holds more of its block files than
    /// the placement rule allows: one of them moves.
    Misplaced,
    /// The balancer moves one of its block files to a datanode with room.
    Balance,
}

/// A block file that moves to another datanode while its group stays
/// whole: copied, verified, adopted by the group, then deleted where it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CellMove {
    /// Its internal index.
    pub(crate) index: u8,
    /// The datanode it leaves.
    pub(crate) from: DatanodeId,
    /// The datanode the balancer chose for it; None: wherever placement
    /// puts it.
    pub(crate) to: Option<DatanodeId>,
}

/// One group waiting for repair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RepairEntry {
    pub(crate) block: BlockId,
    pub(crate) owner: GroupOwner,
    /// Internal indexes with no readable block file (for a replicated
    /// block, one 0 per missing replica).
    pub(crate) missing: Vec<u8>,
    /// Readable block files beyond the fewest that read the group; below 0
    /// the group cannot be read.
    pub(crate) spare: i32,
    /// When the group was first queued.
    pub(crate) queued_at: UnixMillis,
    /// Why it is queued.
    #[serde(default)]
    pub(crate) reason: QueuedFor,
    /// The block file that moves (misplaced or balanced groups).
    #[serde(default)]
    pub(crate) moving: Option<CellMove>,
}

impl RepairEntry {
    /// A move of the block file at `index` off `from` (to `to`, when given)
    /// of the group `block` held by `owner`.
    pub(crate) fn moving(
        block: BlockId,
        owner: GroupOwner,
        reason: QueuedFor,
        spare: i32,
        cell: CellMove,
        now: UnixMillis,
    ) -> Self {
        Self {
            block,
            owner,
            missing: Vec::new(),
            spare,
            queued_at: now,
            reason,
            moving: Some(cell),
        }
    }
}

/// First byte of the rank of entries that move block files (after every
/// damaged group that can be repaired, before the lost ones).
const MOVES_RANK: u8 = u8::MAX - 1;

/// The queue order: damaged groups by spare block files ascending, then
/// block files missing descending; then misplaced groups, then the
/// balancer's moves; lost groups last; then block id.
fn rank_key(entry: &RepairEntry) -> [u8; 10] {
    let (first, second) = match entry.reason {
        QueuedFor::Misplaced => (MOVES_RANK, 0),
        QueuedFor::Balance => (MOVES_RANK, 1),
        QueuedFor::Repair if entry.spare < 0 => (u8::MAX, 0),
        QueuedFor::Repair => {
            let spare = u8::try_from(entry.spare)
                .unwrap_or(MOVES_RANK - 1)
                .min(MOVES_RANK - 1);
            let missing = u8::try_from(entry.missing.len()).unwrap_or(u8::MAX);
            (spare, u8::MAX - missing)
        }
    };
    let mut key = [0u8; 10];
    key[0] = first;
    key[1] = second;
    key[2..].copy_from_slice(&entry.block.0.to_be_bytes());
    key
}

/// The repair queue inside one write transaction.
pub(crate) struct RepairQueue<'txn> {
    queue: Table<'txn, &'static [u8], &'static [u8]>,
    index: Table<'txn, u64, &'static [u8]>,
}

impl<'txn> RepairQueue<'txn> {
    pub(crate) fn open(txn: &'txn WriteTransaction) -> Result<Self, StoreError> {
        Ok(Self {
            queue: txn.open_table(REPAIR_QUEUE)?,
            index: txn.open_table(REPAIR_INDEX)?,
        })
    }

    /// Queues `entry`, replacing the group's earlier entry (whose queue time
    /// it keeps). Answers whether the group was already queued.
    pub(crate) fn put(&mut self, mut entry: RepairEntry) -> Result<bool, StoreError> {
        let earlier = self.remove(entry.block)?;
        if let Some(earlier) = &earlier {
            entry.queued_at = entry.queued_at.min(earlier.queued_at);
        }
        let key = rank_key(&entry);
        self.queue
            .insert(key.as_slice(), encode(&entry)?.as_slice())?;
        self.index.insert(entry.block.0, key.as_slice())?;
        Ok(earlier.is_some())
    }

    /// The group's entry, if queued.
    pub(crate) fn get(&self, block: BlockId) -> Result<Option<RepairEntry>, StoreError> {
        let Some(key) = self.index.get(block.0)? else {
            return Ok(None);
        };
        let key = key.value().to_vec();
        match self.queue.get(key.as_slice())? {
            Some(value) => decode(value.value()).map(Some),
            None => Err(StoreError::Corrupt(format!(
                "repair index names a missing entry for block {block}"
            ))),
        }
    }

    /// Takes the group off the queue; answers its entry, if it was queued.
    pub(crate) fn remove(&mut self, block: BlockId) -> Result<Option<RepairEntry>, StoreError> {
        let Some(key) = self.index.remove(block.0)? else {
            return Ok(None);
        };
        let key = key.value().to_vec();
        let entry = self.queue.remove(key.as_slice())?;
        entry.map(|value| decode(value.value())).transpose()
    }
}

fn entries(
    queue: &impl ReadableTable<&'static [u8], &'static [u8]>,
    limit: usize,
) -> Result<Vec<RepairEntry>, StoreError> {
    let mut out = Vec::new();
    for entry in queue.iter()?.take(limit) {
        let (_, value) = entry?;
        out.push(decode(value.value())?);
    }
    Ok(out)
}

/// The first `limit` entries, most endangered first.
pub(crate) fn head(txn: &ReadTransaction, limit: usize) -> Result<Vec<RepairEntry>, StoreError> {
    entries(&txn.open_table(REPAIR_QUEUE)?, limit)
}

/// Groups queued.
pub(crate) fn queued(txn: &ReadTransaction) -> Result<u64, StoreError> {
    Ok(txn.open_table(REPAIR_QUEUE)?.len()?)
}

/// Where the balancer's moves are in the queue's order.
const BALANCE_RANKS: std::ops::Range<[u8; 2]> = [MOVES_RANK, 1]..[MOVES_RANK, 2];

/// The balancer's moves queued.
pub(crate) fn queued_balance(txn: &ReadTransaction) -> Result<u64, StoreError> {
    let queue = txn.open_table(REPAIR_QUEUE)?;
    let mut count = 0;
    for entry in queue.range(BALANCE_RANKS.start.as_slice()..BALANCE_RANKS.end.as_slice())? {
        entry?;
        count += 1;
    }
    Ok(count)
}

/// The first `limit` of the balancer's moves, whatever is queued before
/// them (a repair that cannot run yet must not hold the balancer up).
pub(crate) fn balance_head(
    txn: &ReadTransaction,
    limit: usize,
) -> Result<Vec<RepairEntry>, StoreError> {
    let queue = txn.open_table(REPAIR_QUEUE)?;
    let mut out = Vec::new();
    for entry in queue
        .range(BALANCE_RANKS.start.as_slice()..BALANCE_RANKS.end.as_slice())?
        .take(limit)
    {
        out.push(decode(entry?.1.value())?);
    }
    Ok(out)
}

impl RepairQueue<'_> {
    /// Drops every move of the balancer's (it was stopped); answers how many.
    pub(crate) fn drop_balance(&mut self) -> Result<u64, StoreError> {
        let mut blocks = Vec::new();
        for entry in self
            .queue
            .range(BALANCE_RANKS.start.as_slice()..BALANCE_RANKS.end.as_slice())?
        {
            let entry: RepairEntry = decode(entry?.1.value())?;
            blocks.push(entry.block);
        }
        for block in &blocks {
            self.remove(*block)?;
        }
        Ok(blocks.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn entry(block: u64, spare: i32, missing: usize, queued_at: UnixMillis) -> RepairEntry {
        RepairEntry {
            block: BlockId(block),
            owner: GroupOwner {
                bucket: "b".into(),
                key: format!("k{block}"),
                part: None,
                version: 0,
            },
            missing: vec![0; missing],
            spare,
            queued_at,
            reason: QueuedFor::Repair,
            moving: None,
        }
    }

    fn moving(block: u64, reason: QueuedFor) -> RepairEntry {
        let cell = CellMove {
            index: 0,
            from: DatanodeId("a".into()),
            to: None,
        };
        RepairEntry::moving(
            BlockId(block),
            entry(block, 2, 0, 0).owner,
            reason,
            2,
            cell,
            0,
        )
    }

    fn opened(dir: &tempfile::TempDir) -> Store {
        Store::open_database(&dir.path().join("m.redb")).unwrap()
    }

    #[test]
    fn the_most_endangered_groups_come_first_and_lost_ones_last() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened(&dir);
        store
            .write(|txn| {
                let mut q = RepairQueue::open(txn)?;
                q.put(entry(1, 1, 1, 10))?;
                q.put(entry(2, -1, 3, 10))?;
                q.put(entry(3, 0, 2, 10))?;
                q.put(entry(4, 1, 2, 10))?;
                q.put(entry(5, 0, 1, 10))?;
                q.put(entry(6, 300, 1, 10))?;
                q.put(moving(7, QueuedFor::Balance))?;
                q.put(moving(8, QueuedFor::Misplaced))?;
                q.put(moving(9, QueuedFor::Balance))?;
                Ok(())
            })
            .unwrap();
        let order: Vec<u64> = store
            .read(|txn| head(txn, 10))
            .unwrap()
            .iter()
            .map(|e| e.block.0)
            .collect();
        assert_eq!(order, vec![3, 5, 4, 1, 6, 8, 7, 9, 2]);
        assert_eq!(store.read(|txn| head(txn, 2)).unwrap().len(), 2);
        assert_eq!(store.read(queued), Ok(9));
        assert_eq!(store.read(queued_balance), Ok(2));
        let balance: Vec<u64> = store
            .read(|txn| balance_head(txn, 10))
            .unwrap()
            .iter()
            .map(|e| e.block.0)
            .collect();
        assert_eq!(balance, vec![7, 9]);
        let dropped = store
            .write(|txn| RepairQueue::open(txn)?.drop_balance())
            .unwrap();
        assert_eq!(dropped, 2);
        assert_eq!(store.read(queued), Ok(7));
    }

    #[test]
    fn a_group_is_queued_once_and_keeps_its_first_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened(&dir);
        let again = store
            .write(|txn| {
                let mut q = RepairQueue::open(txn)?;
                let first = q.put(entry(7, 1, 1, 100))?;
                let second = q.put(entry(7, 0, 2, 200))?;
                Ok((first, second, q.get(BlockId(7))?))
            })
            .unwrap();
        assert!(!again.0);
        assert!(again.1);
        assert_eq!(again.2, Some(entry(7, 0, 2, 100)));
        assert_eq!(store.read(queued), Ok(1));
        let removed = store
            .write(|txn| {
                let mut q = RepairQueue::open(txn)?;
                Ok((q.remove(BlockId(7))?, q.remove(BlockId(7))?))
            })
            .unwrap();
        assert_eq!(removed, (Some(entry(7, 0, 2, 100)), None));
        assert_eq!(store.read(queued), Ok(0));
    }
}
