//! The redb store under meta: table definitions, the byte encodings of their
//! keys (chosen so that range scans follow the orders meta needs), JSON values,
//! and the block deletion queue every namespace change feeds.

use super::api::MetaError;
use super::types::BlockGroup;
use crate::ids::{BlockId, BlockKey, DatanodeId};
use redb::{
    Database, Key, ReadTransaction, ReadableTable, Table, TableDefinition, WriteTransaction,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::path::Path;

/// Bucket name -> `BucketRecord`.
pub(super) const BUCKETS: TableDefinition<&str, &[u8]> = TableDefinition::new("buckets");
/// `object_key(bucket, key)` -> `ObjectRecord`; one bucket's keys are contiguous
/// and in UTF-8 byte order.
pub(super) const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("objects");
/// Upload id -> `UploadRecord`.
pub(super) const UPLOADS: TableDefinition<&str, &[u8]> = TableDefinition::new("uploads");
/// `upload_index_key(bucket, upload_id)` -> (): the uploads of one bucket.
pub(super) const UPLOAD_INDEX: TableDefinition<&[u8], ()> = TableDefinition::new("upload_index");
/// `part_key(upload_id, number)` -> `PartRecord`, parts of one upload in number order.
pub(super) const PARTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("parts");
/// User name -> `UserRecord`.
pub(super) const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("users");
/// Access key -> `AccessKeyRecord`.
pub(super) const ACCESS_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("access_keys");
/// Datanode id -> `DatanodeRecord`.
pub(super) const DATANODES: TableDefinition<&str, &[u8]> = TableDefinition::new("datanodes");
/// `deletion_key(datanode, block key)` -> (): block files a datanode must delete.
pub(super) const DELETIONS: TableDefinition<&[u8], ()> = TableDefinition::new("deletions");
/// Named counters (the next free block id).
pub(super) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// Counter holding the first block id not yet handed out.
pub(super) const NEXT_BLOCK: &str = "next_block";

/// Separator between bucket and key in `OBJECTS`; bucket names never contain it.
const BUCKET_SEPARATOR: u8 = b'/';

impl From<redb::Error> for MetaError {
    fn from(e: redb::Error) -> Self {
        MetaError::Store(e.to_string())
    }
}

macro_rules! store_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for MetaError {
            fn from(e: $t) -> Self {
                MetaError::Store(e.to_string())
            }
        }
    )*};
}

store_error_from!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// The meta database file and the transactions over it.
pub(super) struct Store {
    db: Database,
}

impl Store {
    /// Opens (or creates) `path` and makes sure every table exists, so that
    /// read transactions never meet a missing table.
    pub(super) fn open(path: &Path) -> Result<Self, MetaError> {
        let db = Database::builder()
            .set_cache_size(64 * 1024 * 1024)
            .create(path)?;
        let txn = db.begin_write()?;
        txn.open_table(BUCKETS)?;
        txn.open_table(OBJECTS)?;
        txn.open_table(UPLOADS)?;
        txn.open_table(UPLOAD_INDEX)?;
        txn.open_table(PARTS)?;
        txn.open_table(USERS)?;
        txn.open_table(ACCESS_KEYS)?;
        txn.open_table(DATANODES)?;
        txn.open_table(DELETIONS)?;
        txn.open_table(COUNTERS)?;
        txn.commit()?;
        Ok(Self { db })
    }

    /// Runs `f` in a read transaction (a consistent snapshot).
    pub(super) fn read<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        let txn = self.db.begin_read()?;
        f(&txn)
    }

    /// Runs `f` in one write transaction and commits (durably) when it succeeds;
    /// an error aborts every change `f` made.
    pub(super) fn write<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        let txn = self.db.begin_write()?;
        let out = f(&txn)?;
        txn.commit()?;
        Ok(out)
    }
}

/// Serialises a record for storage.
pub(super) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, MetaError> {
    serde_json::to_vec(value).map_err(|e| MetaError::Store(format!("encoding a record: {e}")))
}

/// Parses a stored record; a corrupt one is a store error, never a default.
pub(super) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, MetaError> {
    serde_json::from_slice(bytes).map_err(|e| MetaError::Store(format!("corrupt record: {e}")))
}

/// Reads and parses the record under `key`.
pub(super) fn get_json<'a, K: Key + 'static, T: DeserializeOwned>(
    table: &impl ReadableTable<K, &'static [u8]>,
    key: impl Borrow<K::SelfType<'a>>,
) -> Result<Option<T>, MetaError> {
    match table.get(key)? {
        Some(guard) => decode(guard.value()).map(Some),
        None => Ok(None),
    }
}

/// Every record of a table, in key order (for the small tables: users, keys, buckets).
pub(super) fn all_json<K: Key + 'static, T: DeserializeOwned>(
    table: &impl ReadableTable<K, &'static [u8]>,
) -> Result<Vec<T>, MetaError> {
    let mut out = Vec::new();
    for entry in table.iter()? {
        let (_, value) = entry?;
        out.push(decode(value.value())?);
    }
    Ok(out)
}

/// `OBJECTS` key of (bucket, key).
pub(super) fn object_key(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bucket.len() + 1 + key.len());
    out.extend_from_slice(bucket.as_bytes());
    out.push(BUCKET_SEPARATOR);
    out.extend_from_slice(key);
    out
}

/// Length of the bucket part of an `OBJECTS` or `UPLOAD_INDEX` key.
pub(super) fn bucket_prefix_len(bucket: &str) -> usize {
    bucket.len() + 1
}

/// `UPLOAD_INDEX` key of (bucket, upload id).
pub(super) fn upload_index_key(bucket: &str, upload_id: &str) -> Vec<u8> {
    object_key(bucket, upload_id.as_bytes())
}

/// The smallest byte string greater than every string starting with `prefix`,
/// or None when there is none (all bytes 0xFF).
pub(super) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < u8::MAX {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

/// Whether any key of `table` starts with `prefix`.
pub(super) fn any_with_prefix<V: redb::Value + 'static>(
    table: &impl ReadableTable<&'static [u8], V>,
    prefix: &[u8],
) -> Result<bool, MetaError> {
    let mut range = match prefix_end(prefix) {
        Some(end) => table.range::<&[u8]>(prefix..end.as_slice())?,
        None => table.range::<&[u8]>(prefix..)?,
    };
    Ok(range.next().transpose()?.is_some())
}

/// Appends `id` with a big-endian u16 length, so that no id is a prefix of
/// another's encoding.
fn push_length_prefixed(out: &mut Vec<u8>, id: &str) {
    // Ids longer than u16::MAX are refused at the boundary; truncating the
    // length here would only merge keys of such (impossible) ids.
    let len = u16::try_from(id.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(id.as_bytes());
}

/// `PARTS` key prefix of one upload.
pub(super) fn parts_prefix(upload_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + upload_id.len() + 4);
    push_length_prefixed(&mut out, upload_id);
    out
}

/// `PARTS` key of part `number` of `upload_id`.
pub(super) fn part_key(upload_id: &str, number: u32) -> Vec<u8> {
    let mut out = parts_prefix(upload_id);
    out.extend_from_slice(&number.to_be_bytes());
    out
}

/// `DELETIONS` key prefix of one datanode.
pub(super) fn deletions_prefix(datanode: &DatanodeId) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + datanode.0.len() + 9);
    push_length_prefixed(&mut out, &datanode.0);
    out
}

/// `DELETIONS` key of one block file on one datanode.
pub(super) fn deletion_key(datanode: &DatanodeId, key: BlockKey) -> Vec<u8> {
    let mut out = deletions_prefix(datanode);
    out.extend_from_slice(&key.block.0.to_be_bytes());
    out.push(key.index);
    out
}

/// The block key at the end of a `DELETIONS` key.
pub(super) fn block_key_of_deletion(key: &[u8]) -> Result<BlockKey, MetaError> {
    let tail = key
        .len()
        .checked_sub(9)
        .map(|at| &key[at..])
        .ok_or_else(|| MetaError::Store("corrupt deletion key".into()))?;
    let mut block = [0u8; 8];
    block.copy_from_slice(&tail[..8]);
    Ok(BlockKey::new(BlockId(u64::from_be_bytes(block)), tail[8]))
}

/// Queues every block file of `groups` for deletion on its datanode, except
/// blocks of `keep` (a record that replaces another never loses blocks it shares).
pub(super) fn queue_deletions(
    deletions: &mut Table<&[u8], ()>,
    groups: &[BlockGroup],
    keep: &HashSet<BlockId>,
) -> Result<u64, MetaError> {
    let mut queued = 0;
    for group in groups.iter().filter(|g| !keep.contains(&g.block)) {
        for (key, replica) in group.block_keys() {
            deletions.insert(deletion_key(&replica.datanode, key).as_slice(), ())?;
            queued += 1;
        }
    }
    if queued > 0 {
        metrics::counter!("tessera_meta_blocks_queued_for_deletion_total").increment(queued);
    }
    Ok(queued)
}

/// The block ids of `groups`, for `queue_deletions`' `keep`.
pub(super) fn block_ids(groups: &[BlockGroup]) -> HashSet<BlockId> {
    groups.iter().map(|g| g.block).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_least_upper_bound() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b"b/"), Some(b"b0".to_vec()));
    }

    #[test]
    fn deletion_keys_round_trip_and_group_by_datanode() {
        let a = DatanodeId("dn".into());
        let b = DatanodeId("dn2".into());
        let key = BlockKey::new(BlockId(0x0102_0304_0506_0708), 4);
        let encoded = deletion_key(&a, key);
        assert!(encoded.starts_with(&deletions_prefix(&a)));
        assert!(!encoded.starts_with(&deletions_prefix(&b)));
        assert_eq!(block_key_of_deletion(&encoded), Ok(key));
        assert!(block_key_of_deletion(b"short").is_err());
    }

    #[test]
    fn part_keys_sort_by_number() {
        assert!(part_key("u", 2) < part_key("u", 10));
        assert!(part_key("u", 255) < part_key("u", 256));
        assert!(!part_key("uu", 1).starts_with(&parts_prefix("u")));
    }
}
