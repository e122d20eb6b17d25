//! The redb store under meta: table definitions, the byte encodings of their
//! keys (chosen so that range scans follow the orders meta needs) and JSON
//! values. The block deletion queue has its own module (`deletions`).

use super::api::MetaError;
use super::deletions;
use super::types::BlockGroup;
use crate::ids::BlockId;
use redb::{Database, Key, ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket name -> `BucketRecord`.
pub(super) const BUCKETS: TableDefinition<&str, &[u8]> = TableDefinition::new("buckets");
/// `object_key(bucket, key)` -> `ObjectRecord`; one bucket's keys are contiguous
/// and in UTF-8 byte order.
pub(super) const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("objects");
/// Upload id -> `UploadRecord`.
pub(super) const UPLOADS: TableDefinition<&str, &[u8]> = TableDefinition::new("uploads");
/// `part_key(upload_id, number)` -> `PartRecord`, parts of one upload in number order.
pub(super) const PARTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("parts");
/// User name -> `UserRecord`.
pub(super) const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("users");
/// Access key -> `AccessKeyRecord`.
pub(super) const ACCESS_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("access_keys");
/// Datanode id -> `DatanodeRecord`.
pub(super) const DATANODES: TableDefinition<&str, &[u8]> = TableDefinition::new("datanodes");
/// `bad_replica_key(block, datanode)` -> `BadReplicaReport`: block files a
/// client found corrupt, awaiting repair.
pub(super) const BAD_REPLICAS: TableDefinition<&str, &[u8]> = TableDefinition::new("bad_replicas");
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
    /// Write transactions finished so far: while it has not moved, nothing
    /// stored has changed, which lets a read reuse what it found last time
    /// without opening a transaction (see [`Store::write_epoch`]).
    writes: AtomicU64,
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
        super::upload_listing::prepare_tables(&txn)?;
        txn.open_table(PARTS)?;
        txn.open_table(USERS)?;
        txn.open_table(ACCESS_KEYS)?;
        txn.open_table(DATANODES)?;
        txn.open_table(COUNTERS)?;
        txn.open_table(BAD_REPLICAS)?;
        deletions::prepare_tables(&txn)?;
        txn.commit()?;
        Ok(Self {
            db,
            writes: AtomicU64::new(0),
        })
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
        let committed = f(&txn).and_then(|out| Ok(txn.commit().map(|()| out)?));
        // Moved after the commit and before the writer hears of it: a read
        // that loads the new value sees the new data, and a read that loaded
        // the old one before opening its snapshot is never reused.
        self.writes.fetch_add(1, Ordering::Release);
        committed
    }

    /// Changes whenever a write transaction ends. Load it *before* a read
    /// transaction: what that read found is current for as long as the
    /// epoch still has the loaded value.
    pub(super) fn write_epoch(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
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

/// Length of the bucket part of an `OBJECTS` or `UPLOAD_ORDER` key.
pub(super) fn bucket_prefix_len(bucket: &str) -> usize {
    bucket.len() + 1
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
pub(super) fn push_length_prefixed(out: &mut Vec<u8>, id: &str) {
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

/// The block ids of `groups`, for `DeletionQueue::queue_groups`' `keep`.
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
    fn part_keys_sort_by_number() {
        assert!(part_key("u", 2) < part_key("u", 10));
        assert!(part_key("u", 255) < part_key("u", 256));
        assert!(!part_key("uu", 1).starts_with(&parts_prefix("u")));
    }
}
