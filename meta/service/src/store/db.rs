//! The meta database file: transactions over it, the write epoch that tells
//! a read whether anything changed, and the JSON encoding of records.

use meta_api::MetaError;
use redb::{Database, Key, ReadTransaction, ReadableTable, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Borrow;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a step inside the store failed: the database itself, a record that
/// does not decode, or a refusal met inside the transaction (which aborts it
/// and reaches the caller as it is).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StoreError {
    /// redb failed (I/O, a full disk, a corrupt page).
    #[error("{0}")]
    Database(String),
    /// A stored record or key does not decode.
    #[error("{0}")]
    Corrupt(String),
    /// A file beside the database (the credentials) could not be read or written.
    #[error("{0}")]
    Io(String),
    /// The operation refused the request.
    #[error(transparent)]
    Refused(#[from] MetaError),
}

impl From<StoreError> for MetaError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Database(text) | StoreError::Corrupt(text) | StoreError::Io(text) => {
                MetaError::Store(text)
            }
            StoreError::Refused(e) => e,
        }
    }
}

macro_rules! database_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Database(e.to_string())
            }
        }
    )*};
}

database_error_from!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// The meta database file and the transactions over it.
pub(crate) struct Store {
    db: Database,
    /// Write transactions finished so far: while it has not moved, nothing
    /// stored has changed, which lets a read reuse what it found last time
    /// without opening a transaction (see [`Store::write_epoch`]).
    writes: AtomicU64,
}

impl Store {
    /// Opens (or creates) the database file at `path`; `schema::open` then
    /// makes sure every table exists.
    pub(crate) fn open_database(path: &Path) -> Result<Self, StoreError> {
        let db = Database::builder()
            .set_cache_size(64 * 1024 * 1024)
            .create(path)?;
        Ok(Self {
            db,
            writes: AtomicU64::new(0),
        })
    }

    /// Runs `f` in a read transaction (a consistent snapshot).
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        let txn = self.db.begin_read().map_err(StoreError::from)?;
        Ok(f(&txn)?)
    }

    /// Runs `f` in one write transaction and commits (durably) when it succeeds;
    /// an error aborts every change `f` made.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        let txn = self.db.begin_write().map_err(StoreError::from)?;
        let committed = f(&txn).and_then(|out| Ok(txn.commit().map(|()| out)?));
        // Moved after the commit and before the writer hears of it: a read
        // that loads the new value sees the new data, and a read that loaded
        // the old one before opening its snapshot is never reused.
        self.writes.fetch_add(1, Ordering::Release);
        Ok(committed?)
    }

    /// Changes whenever a write transaction ends. Load it *before* a read
    /// transaction: what that read found is current for as long as the
    /// epoch still has the loaded value.
    pub(crate) fn write_epoch(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }
}

/// Serialises a record for storage.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Corrupt(format!("encoding a record: {e}")))
}

/// Parses a stored record; a corrupt one is a store error, never a default.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("corrupt record: {e}")))
}

/// Reads and parses the record under `key`.
pub(crate) fn get_json<'a, K: Key + 'static, T: DeserializeOwned>(
    table: &impl ReadableTable<K, &'static [u8]>,
    key: impl Borrow<K::SelfType<'a>>,
) -> Result<Option<T>, StoreError> {
    match table.get(key)? {
        Some(guard) => decode(guard.value()).map(Some),
        None => Ok(None),
    }
}

/// Every record of a table, in key order (for the small tables: users, keys, buckets).
pub(crate) fn all_json<K: Key + 'static, T: DeserializeOwned>(
    table: &impl ReadableTable<K, &'static [u8]>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    for entry in table.iter()? {
        let (_, value) = entry?;
        out.push(decode(value.value())?);
    }
    Ok(out)
}

/// The smallest byte string greater than every string starting with `prefix`,
/// or None when there is none (all bytes 0xFF).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
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
pub(crate) fn any_with_prefix<V: redb::Value + 'static>(
    table: &impl ReadableTable<&'static [u8], V>,
    prefix: &[u8],
) -> Result<bool, StoreError> {
    let mut range = match prefix_end(prefix) {
        Some(end) => table.range::<&[u8]>(prefix..end.as_slice())?,
        None => table.range::<&[u8]>(prefix..)?,
    };
    Ok(range.next().transpose()?.is_some())
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
}
