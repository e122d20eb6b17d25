//! The meta database file: transactions over it, the write epoch that tells
//! a read whether anything changed, the JSON encoding of records, and the
//! way back from a full disk.
//!
//! redb refuses every transaction after one failed with an I/O error (a
//! full disk, typically) until the database is opened again. So a write
//! that fails that way marks the store *failed*: the database is opened
//! anew at once, which keeps reads going, and writes are refused with
//! [`MetaError::OutOfSpace`] for a moment, then let through again one at a
//! time to find out whether space has come back. Nothing committed is lost:
//! redb's commit is atomic, and the failed one never happened.

use meta_api::MetaError;
use parking_lot::{Mutex, RwLock};
use redb::{Database, Key, ReadTransaction, ReadableTable, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Borrow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long writes are refused after one failed for lack of space, before
/// the next is let through to try.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// Why a step inside the store failed: the database itself, a record that
/// does not decode, or a refusal met inside the transaction (which aborts it
/// and reaches the caller as it is).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StoreError {
    /// redb failed (a corrupt page, a bug).
    #[error("{0}")]
    Database(String),
    /// The disk failed a read or write (a full disk, most often): the store
    /// must be opened again before it takes another transaction.
    #[error("{0}")]
    Disk(String),
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
            StoreError::Database(text)
            | StoreError::Disk(text)
            | StoreError::Corrupt(text)
            | StoreError::Io(text) => MetaError::Store(text),
            StoreError::Refused(e) => e,
        }
    }
}

/// A disk failure, as redb reports it, poisons the database.
fn disk_failure(e: &redb::StorageError) -> bool {
    matches!(
        e,
        redb::StorageError::Io(_) | redb::StorageError::PreviousIo
    )
}

impl From<redb::StorageError> for StoreError {
    fn from(e: redb::StorageError) -> Self {
        if disk_failure(&e) {
            StoreError::Disk(e.to_string())
        } else {
            StoreError::Database(e.to_string())
        }
    }
}

macro_rules! database_error_from {
    ($($t:ident),*) => {$(
        impl From<redb::$t> for StoreError {
            fn from(e: redb::$t) -> Self {
                match e {
                    redb::$t::Storage(storage) => storage.into(),
                    other => StoreError::Database(other.to_string()),
                }
            }
        }
    )*};
}

database_error_from!(DatabaseError, TransactionError, TableError, CommitError);

impl From<redb::Error> for StoreError {
    fn from(e: redb::Error) -> Self {
        match e {
            redb::Error::Io(_) | redb::Error::PreviousIo => StoreError::Disk(e.to_string()),
            other => StoreError::Database(other.to_string()),
        }
    }
}

/// The meta database file and the transactions over it.
pub(crate) struct Store {
    path: PathBuf,
    /// The open database; `None` only while it is being opened again.
    db: RwLock<Option<Arc<Database>>>,
    /// Why and since when writes fail, while they do.
    failure: Mutex<Option<Failure>>,
    /// Write transactions finished so far: while it has not moved, nothing
    /// stored has changed, which lets a read reuse what it found last time
    /// without opening a transaction (see [`Store::write_epoch`]).
    writes: AtomicU64,
}

/// The last disk failure of a write.
struct Failure {
    reason: String,
    at: Instant,
}

fn open_file(path: &Path) -> Result<Database, StoreError> {
    Ok(Database::builder()
        .set_cache_size(64 * 1024 * 1024)
        .create(path)?)
}

impl Store {
    /// Opens (or creates) the database file at `path`; `schema::open` then
    /// makes sure every table exists.
    pub(crate) fn open_database(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            path: path.to_path_buf(),
            db: RwLock::new(Some(Arc::new(open_file(path)?))),
            failure: Mutex::new(None),
            writes: AtomicU64::new(0),
        })
    }

    /// The database; opened again first if an earlier attempt failed.
    fn database(&self) -> Result<Arc<Database>, StoreError> {
        if let Some(db) = self.db.read().clone() {
            return Ok(db);
        }
        self.reopen()?;
        self.db
            .read()
            .clone()
            .ok_or_else(|| StoreError::Disk("the metadata store is being reopened".into()))
    }

    /// Runs `f` in a read transaction (a consistent snapshot).
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        let db = self.database()?;
        let txn = db.begin_read().map_err(StoreError::from)?;
        Ok(f(&txn)?)
    }

    /// Runs `f` in one write transaction and commits (durably) when it succeeds;
    /// an error aborts every change `f` made. While the disk is failing,
    /// writes are refused with `OutOfSpace`, except one now and then that
    /// tries again.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        if let Some(reason) = self.refusal() {
            return Err(MetaError::OutOfSpace(reason));
        }
        let db = self.database()?;
        let committed = db
            .begin_write()
            .map_err(StoreError::from)
            .and_then(|txn| f(&txn).and_then(|out| Ok(txn.commit().map(|()| out)?)));
        drop(db);
        // Moved after the commit and before the writer hears of it: a read
        // that loads the new value sees the new data, and a read that loaded
        // the old one before opening its snapshot is never reused.
        self.writes.fetch_add(1, Ordering::Release);
        match committed {
            // Nothing of this write was applied, and the next ones are
            // refused alike while the failure lasts: all answer the same.
            Err(StoreError::Disk(reason)) => {
                self.failed(reason.clone());
                Err(MetaError::OutOfSpace(reason))
            }
            Ok(out) => {
                self.recovered();
                Ok(out)
            }
            Err(other) => Err(other.into()),
        }
    }

    /// The reason to refuse a write now, while a failure is recent.
    fn refusal(&self) -> Option<String> {
        let failure = self.failure.lock();
        let failure = failure.as_ref()?;
        (failure.at.elapsed() < RETRY_AFTER_FAILURE).then(|| failure.reason.clone())
    }

    /// Records a disk failure and opens the database again, so that reads
    /// go on and the next write can try.
    fn failed(&self, reason: String) {
        tracing::error!(error = %reason, "metadata store write failed; writes refused until it succeeds again");
        metrics::gauge!("tessera_meta_store_failed").set(1.0);
        *self.failure.lock() = Some(Failure {
            reason,
            at: Instant::now(),
        });
        if let Err(e) = self.reopen() {
            tracing::warn!(error = %e, "could not reopen the metadata store yet");
        }
    }

    fn recovered(&self) {
        if self.failure.lock().take().is_some() {
            metrics::gauge!("tessera_meta_store_failed").set(0.0);
            tracing::info!("metadata store writes succeed again");
        }
    }

    /// Replaces the poisoned database with a newly opened one. The file can
    /// only be opened once the old handle is gone, so readers still holding
    /// it are waited for under the write lock.
    fn reopen(&self) -> Result<(), StoreError> {
        let mut slot = self.db.write();
        if slot.is_some() && self.failure.lock().is_none() {
            return Ok(());
        }
        if let Some(old) = slot.take() {
            let mut old = old;
            loop {
                match Arc::try_unwrap(old) {
                    Ok(db) => {
                        drop(db);
                        break;
                    }
                    Err(shared) => {
                        old = shared;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        *slot = Some(Arc::new(open_file(&self.path)?));
        Ok(())
    }

    /// Why writes fail now, if they do.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().as_ref().map(|f| f.reason.clone())
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
