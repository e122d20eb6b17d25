//! The block deletion queue: block files each datanode must delete, each with
//! a not-before time. Blocks of an overwritten or deleted object are handed
//! out only once a grace period has passed, so that a GET already streaming
//! the old object (it reads piece by piece) can finish.
//!
//! Two tables hold the queue: `DELETION_QUEUE` ordered by (datanode,
//! not-before, block key), so that a heartbeat reads only the due entries at
//! the head of its datanode's range, and `DELETION_INDEX` from (datanode,
//! block key) to the not-before time, so that an acknowledgement or a
//! re-queue finds its queue entry.

use super::db::prefix_end;
use super::db::StoreError;
use super::tables::push_length_prefixed;
use meta_api::{BlockGroup, UnixMillis};
use proto::{BlockId, BlockKey, DatanodeId};
use redb::{ReadTransaction, WriteTransaction};
use redb::{ReadableTable, ReadableTableMetadata, Table, TableDefinition, TableHandle};
use std::collections::HashSet;

/// `index_key(datanode, block key)` -> not-before (ms, clamped at 0): every queued deletion.
pub(crate) const DELETION_INDEX: TableDefinition<&[u8], u64> =
    TableDefinition::new("deletion_index");
/// `queue_key(datanode, not-before, block key)` -> (): the same deletions in the order they fall due.
pub(crate) const DELETION_QUEUE: TableDefinition<&[u8], ()> =
    TableDefinition::new("deletion_queue");
/// The queue of earlier versions, without not-before times; moved into the
/// new tables (due at once) when the store opens.
const LEGACY_DELETIONS: TableDefinition<&[u8], ()> = TableDefinition::new("deletions");

/// Length of a block key at the end of a queue or index key.
const BLOCK_KEY_LEN: usize = 9;

/// Key prefix shared by one datanode's entries in both tables.
fn datanode_prefix(datanode: &DatanodeId) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + datanode.0.len() + 8 + BLOCK_KEY_LEN);
    push_length_prefixed(&mut out, &datanode.0);
    out
}

fn push_block_key(out: &mut Vec<u8>, key: BlockKey) {
    out.extend_from_slice(&key.block.0.to_be_bytes());
    out.push(key.index);
}

/// `DELETION_INDEX` key of one block file on one datanode.
fn index_key(datanode: &DatanodeId, key: BlockKey) -> Vec<u8> {
    let mut out = datanode_prefix(datanode);
    push_block_key(&mut out, key);
    out
}

/// `DELETION_QUEUE` key of one block file on one datanode, due at `not_before`.
fn queue_key(datanode: &DatanodeId, not_before: u64, key: BlockKey) -> Vec<u8> {
    let mut out = datanode_prefix(datanode);
    out.extend_from_slice(&not_before.to_be_bytes());
    push_block_key(&mut out, key);
    out
}

/// The block key at the end of a queue or index key.
fn block_key_at_end(key: &[u8]) -> Result<BlockKey, StoreError> {
    let tail = key
        .len()
        .checked_sub(BLOCK_KEY_LEN)
        .map(|at| &key[at..])
        .ok_or_else(|| StoreError::Corrupt("corrupt deletion key".into()))?;
    let mut block = [0u8; 8];
    block.copy_from_slice(&tail[..8]);
    Ok(BlockKey::new(BlockId(u64::from_be_bytes(block)), tail[8]))
}

/// A time as stored in the queue (times before the epoch count as the epoch).
fn stored_time(at: UnixMillis) -> u64 {
    u64::try_from(at).unwrap_or(0)
}

/// The deletion queue inside one write transaction.
pub(crate) struct DeletionQueue<'txn> {
    index: Table<'txn, &'static [u8], u64>,
    queue: Table<'txn, &'static [u8], ()>,
}

impl<'txn> DeletionQueue<'txn> {
    /// Opens both tables in `txn`.
    pub(crate) fn open(txn: &'txn WriteTransaction) -> Result<Self, StoreError> {
        Ok(Self {
            index: txn.open_table(DELETION_INDEX)?,
            queue: txn.open_table(DELETION_QUEUE)?,
        })
    }

    /// Queues one block file on `datanode`, due at `not_before`. A block
    /// already queued keeps the later of its two times.
    fn insert(
        &mut self,
        datanode: &DatanodeId,
        key: BlockKey,
        not_before: u64,
    ) -> Result<(), StoreError> {
        let ikey = index_key(datanode, key);
        let old = self.index.get(ikey.as_slice())?.map(|g| g.value());
        match old {
            Some(old) if old >= not_before => return Ok(()),
            Some(old) => {
                self.queue
                    .remove(queue_key(datanode, old, key).as_slice())?;
            }
            None => {}
        }
        self.index.insert(ikey.as_slice(), not_before)?;
        self.queue
            .insert(queue_key(datanode, not_before, key).as_slice(), ())?;
        Ok(())
    }

    /// Queues every block file of `groups` on its datanode, due at
    /// `not_before`, except blocks of `keep` (a record that replaces another
    /// never loses blocks it shares). Returns how many were queued.
    pub(crate) fn queue_groups(
        &mut self,
        groups: &[BlockGroup],
        keep: &HashSet<BlockId>,
        not_before: UnixMillis,
    ) -> Result<u64, StoreError> {
        let not_before = stored_time(not_before);
        let mut queued = 0;
        for group in groups.iter().filter(|g| !keep.contains(&g.block)) {
            for (key, replica) in group.block_keys() {
                self.insert(&replica.datanode, key, not_before)?;
                queued += 1;
            }
        }
        if queued > 0 {
            metrics::counter!(crate::telemetry::BLOCKS_QUEUED_FOR_DELETION.name).increment(queued);
        }
        Ok(queued)
    }

    /// Queues one block file of `datanode` (an orphan: no record lists it),
    /// due at `not_before`, unless it is queued already. Returns whether it
    /// was newly queued.
    pub(crate) fn queue_block(
        &mut self,
        datanode: &DatanodeId,
        key: BlockKey,
        not_before: UnixMillis,
    ) -> Result<bool, StoreError> {
        if self
            .index
            .get(index_key(datanode, key).as_slice())?
            .is_some()
        {
            return Ok(false);
        }
        self.insert(datanode, key, stored_time(not_before))?;
        Ok(true)
    }

    /// Drops a deletion `datanode` reports done (whether due or not: the file is gone).
    pub(crate) fn acknowledge(
        &mut self,
        datanode: &DatanodeId,
        key: BlockKey,
    ) -> Result<(), StoreError> {
        let removed = self.index.remove(index_key(datanode, key).as_slice())?;
        if let Some(not_before) = removed.map(|g| g.value()) {
            self.queue
                .remove(queue_key(datanode, not_before, key).as_slice())?;
        }
        Ok(())
    }

    /// At most `limit` deletions of `datanode` due at `now`, earliest first.
    /// Reads only the due entries at the head of the datanode's range.
    pub(crate) fn due(
        &self,
        datanode: &DatanodeId,
        now: UnixMillis,
        limit: usize,
    ) -> Result<Vec<BlockKey>, StoreError> {
        let start = datanode_prefix(datanode);
        // Keys of entries due at `now` sort below the prefix followed by now + 1.
        let end = match stored_time(now).checked_add(1) {
            Some(after) => {
                let mut end = start.clone();
                end.extend_from_slice(&after.to_be_bytes());
                end
            }
            None => prefix_end(&start)
                .ok_or_else(|| StoreError::Corrupt("datanode id has no upper bound".into()))?,
        };
        let mut out = Vec::new();
        for entry in self
            .queue
            .range::<&[u8]>(start.as_slice()..end.as_slice())?
            .take(limit)
        {
            let (key, _) = entry?;
            out.push(block_key_at_end(key.value())?);
        }
        Ok(out)
    }
}

/// Number of queued deletions, due or not.
pub(crate) fn pending_count(txn: &ReadTransaction) -> Result<u64, StoreError> {
    Ok(txn.open_table(DELETION_INDEX)?.len()?)
}

/// Creates the queue's tables and moves the entries of the legacy table (no
/// not-before times) into them, due at once.
pub(crate) fn prepare_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut queue = DeletionQueue::open(txn)?;
    let legacy = txn
        .list_tables()?
        .any(|t| t.name() == LEGACY_DELETIONS.name());
    if !legacy {
        return Ok(());
    }
    let mut moved = 0u64;
    {
        let old = txn.open_table(LEGACY_DELETIONS)?;
        for entry in old.iter()? {
            let (key, _) = entry?;
            let key = key.value();
            let prefix_len = key
                .len()
                .checked_sub(BLOCK_KEY_LEN)
                .ok_or_else(|| StoreError::Corrupt("corrupt legacy deletion key".into()))?;
            // The legacy key is the datanode prefix then the block key, as here.
            let (prefix, _) = key.split_at(prefix_len);
            let datanode = datanode_of_prefix(prefix)?;
            queue.insert(&datanode, block_key_at_end(key)?, 0)?;
            moved += 1;
        }
    }
    txn.delete_table(LEGACY_DELETIONS)?;
    tracing::info!(
        moved,
        "deletion queue moved to the table with not-before times"
    );
    Ok(())
}

/// The datanode id of a `datanode_prefix`.
fn datanode_of_prefix(prefix: &[u8]) -> Result<DatanodeId, StoreError> {
    let corrupt = || StoreError::Corrupt("corrupt deletion key".into());
    let (len, id) = prefix.split_at_checked(2).ok_or_else(corrupt)?;
    if usize::from(u16::from_be_bytes([len[0], len[1]])) != id.len() {
        return Err(corrupt());
    }
    let id = std::str::from_utf8(id).map_err(|_| corrupt())?;
    Ok(DatanodeId(id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::ReplicaLocation;

    /// A store at `path` with the queue's tables prepared, as opening does.
    fn opened(path: &std::path::Path) -> super::super::Store {
        let store = super::super::Store::open_database(path).unwrap();
        store.write(prepare_tables).unwrap();
        store
    }

    fn dn(name: &str) -> DatanodeId {
        DatanodeId(name.into())
    }

    fn key(block: u64) -> BlockKey {
        BlockKey::new(BlockId(block), 0)
    }

    fn group(block: u64, datanode: &str) -> BlockGroup {
        BlockGroup {
            block: BlockId(block),
            length: 1,
            replicas: vec![ReplicaLocation {
                index: 0,
                datanode: dn(datanode),
                addr: format!("{datanode}:1"),
            }],
            token: None,
        }
    }

    #[test]
    fn keys_round_trip_and_group_by_datanode_then_time() {
        let (a, b) = (dn("dn"), dn("dn2"));
        let k = BlockKey::new(BlockId(0x0102_0304_0506_0708), 4);
        assert_eq!(block_key_at_end(&index_key(&a, k)), Ok(k));
        assert_eq!(block_key_at_end(&queue_key(&a, 7, k)), Ok(k));
        assert!(block_key_at_end(b"short").is_err());
        assert!(!queue_key(&a, 7, k).starts_with(&datanode_prefix(&b)));
        // Time sorts before the block key: an early deletion of a high block
        // comes before a late one of a low block.
        assert!(queue_key(&a, 1, key(9)) < queue_key(&a, 2, key(1)));
        assert_eq!(datanode_of_prefix(&datanode_prefix(&b)), Ok(b));
        assert!(datanode_of_prefix(b"\x00\x05ab").is_err());
    }

    #[test]
    fn only_due_entries_go_out_and_requeue_keeps_the_later_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened(&dir.path().join("m.redb"));
        let none = HashSet::new();
        store
            .write(|txn| {
                let mut q = DeletionQueue::open(txn)?;
                q.queue_groups(&[group(5, "a"), group(6, "b")], &none, 100)?;
                q.queue_groups(&[group(1, "a")], &none, 200)?;
                assert_eq!(q.due(&dn("a"), 99, 10)?, Vec::<BlockKey>::new());
                assert_eq!(q.due(&dn("a"), 100, 10)?, vec![key(5)]);
                assert_eq!(q.due(&dn("a"), 200, 10)?, vec![key(5), key(1)]);
                assert_eq!(q.due(&dn("a"), 200, 1)?, vec![key(5)]);
                // Queued again later: the later time wins, an earlier one changes nothing.
                q.queue_groups(&[group(5, "a")], &none, 300)?;
                q.queue_groups(&[group(5, "a")], &none, 50)?;
                assert_eq!(q.due(&dn("a"), 299, 10)?, vec![key(1)]);
                assert_eq!(q.due(&dn("a"), 300, 10)?, vec![key(1), key(5)]);
                q.acknowledge(&dn("a"), key(1))?;
                q.acknowledge(&dn("a"), key(42))?;
                assert_eq!(q.due(&dn("a"), i64::MAX, 10)?, vec![key(5)]);
                assert_eq!(q.due(&dn("b"), 100, 10)?, vec![key(6)]);
                Ok(())
            })
            .unwrap();
        assert_eq!(store.read(pending_count), Ok(2));
    }

    #[test]
    fn queued_block_files_are_counted_except_those_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened(&dir.path().join("m.redb"));
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let keep = HashSet::from([BlockId(6)]);
        let counts = metrics::with_local_recorder(&recorder, || {
            store.write(|txn| {
                let mut q = DeletionQueue::open(txn)?;
                let three =
                    q.queue_groups(&[group(5, "a"), group(6, "b"), group(7, "b")], &keep, 1)?;
                let none = q.queue_groups(&[group(6, "a")], &keep, 1)?;
                Ok((three, none))
            })
        });
        assert_eq!(counts, Ok((2, 0)));
        let metrics = handle.render();
        assert!(
            metrics.contains("tessera_meta_blocks_queued_for_deletion_total 2"),
            "{metrics}"
        );
    }

    #[test]
    fn legacy_queue_is_moved_and_due_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.redb");
        {
            let db = redb::Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut old = txn.open_table(LEGACY_DELETIONS).unwrap();
                for (datanode, block) in [("a", 3), ("a", 4), ("bb", 3)] {
                    old.insert(index_key(&dn(datanode), key(block)).as_slice(), ())
                        .unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let store = opened(&path);
        assert_eq!(store.read(pending_count), Ok(3));
        store
            .write(|txn| {
                assert!(!txn.list_tables()?.any(|t| t.name() == "deletions"));
                let q = DeletionQueue::open(txn)?;
                assert_eq!(q.due(&dn("a"), 0, 10)?, vec![key(3), key(4)]);
                assert_eq!(q.due(&dn("bb"), 0, 10)?, vec![key(3)]);
                Ok(())
            })
            .unwrap();
    }
}
