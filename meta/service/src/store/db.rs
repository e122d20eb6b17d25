//! The meta database file: transactions over it, the write epoch that tells
//! a read whether anything changed, the JSON encoding of records, and the
//! way back from a full disk.
//!
//! Writes commit in groups ([`super::group_commit`]): a write returns once
//! it is durable, its sync shared with the writes beside it.
//!
//! redb refuses every transaction after one failed with an I/O error (a
//! full disk, typically) until the database is opened again. So a write
//! that fails that way marks the store *failed*: the database is opened
//! anew at once, which keeps reads going, and writes are refused with
//! [`MetaError::OutOfSpace`] for a moment, then let through again one at a
//! time to find out whether space has come back. Nothing committed is lost:
//! redb's commit is atomic, and the failed one never happened.

pub(crate) use super::group_commit::take_horizon_of;
use super::group_commit::{Commits, GroupCommit, Mark};
use meta_api::MetaError;
use parking_lot::{Mutex, RwLock};
use redb::{Database, Durability, Key, ReadTransaction, ReadableTable, WriteTransaction};
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

/// Opens the database file; a test swaps in a disk that fails on demand.
type Opener = Box<dyn Fn(&Path) -> Result<Database, StoreError> + Send + Sync>;

/// The meta database file and the transactions over it.
pub(crate) struct Store {
    path: PathBuf,
    open: Opener,
    /// The open database; `None` only while it is being opened again.
    db: RwLock<Option<Arc<Database>>>,
    /// Why and since when writes fail, while they do.
    failure: Mutex<Option<Failure>>,
    /// Write transactions finished so far: while it has not moved, nothing
    /// stored has changed, which lets a read reuse what it found last time
    /// without opening a transaction (see [`Store::write_epoch`]).
    writes: AtomicU64,
    /// Commits waiting for their flush.
    commits: GroupCommit,
    /// The store of a meta group's member: writes happen only while a log
    /// entry is applied ([`applying`]), and need no sync of their own (the
    /// log is durable; see [`Store::write_replicated`]).
    replicated: bool,
}

thread_local! {
    /// While a group member applies a log entry on this thread: what to
    /// record as applied in each of its write transactions.
    static APPLYING: std::cell::RefCell<Option<AppliedMark>> = const { std::cell::RefCell::new(None) };
}

/// What a group member records as applied, in the same transaction as the
/// changes of the entry it names: the key and its value in [`APPLIED`].
pub(crate) type AppliedMark = (&'static str, Vec<u8>);

/// Where a group member keeps what it has applied (see `crate::group`).
pub(crate) const APPLIED: redb::TableDefinition<&str, &[u8]> =
    redb::TableDefinition::new("group_applied");

/// Runs `f` (the handler of one log entry) with every write it makes also
/// recording `mark`, so that the store never holds an entry's changes
/// without knowing the entry applied.
pub(crate) fn applying<T>(mark: AppliedMark, f: impl FnOnce() -> T) -> T {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            APPLYING.with(|cell| cell.borrow_mut().take());
        }
    }
    APPLYING.with(|cell| *cell.borrow_mut() = Some(mark));
    let _restore = Restore;
    f()
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
    #[cfg(test)]
    pub(crate) fn open_database(path: &Path) -> Result<Self, StoreError> {
        Self::open_committing(path, Commits::default())
    }

    /// [`Store::open_database`], with writes committed as `commits` says.
    pub(crate) fn open_committing(path: &Path, commits: Commits) -> Result<Self, StoreError> {
        Self::open_with(path, Box::new(open_file), commits)
    }

    /// The store of a meta group's member (see [`Store::write_replicated`]).
    pub(crate) fn open_replicated(path: &Path) -> Result<Self, StoreError> {
        let mut store = Self::open_with(path, Box::new(open_file), Commits::OneByOne)?;
        store.replicated = true;
        Ok(store)
    }

    fn open_with(path: &Path, open: Opener, commits: Commits) -> Result<Self, StoreError> {
        Ok(Self {
            path: path.to_path_buf(),
            db: RwLock::new(Some(Arc::new(open(path)?))),
            open,
            failure: Mutex::new(None),
            writes: AtomicU64::new(0),
            commits: GroupCommit::new(commits),
            replicated: false,
        })
    }

    /// Whether this is a group member's store.
    pub(crate) fn is_replicated(&self) -> bool {
        self.replicated
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

    /// Runs `f` in a read transaction (a consistent snapshot). It may see
    /// commits not yet flushed: an answer built from it waits for
    /// [`Store::settled`] before it leaves meta.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        let db = self.database()?;
        let txn = self
            .commits
            .snapshot(|| db.begin_read().map_err(StoreError::from))?;
        Ok(f(&txn)?)
    }

    /// Runs `f` in one write transaction and commits it when it succeeds,
    /// returning once the commit is durable; an error aborts every change
    /// `f` made (and returns once what `f` read is durable). While the disk
    /// is failing, writes are refused with `OutOfSpace`, except one now and
    /// then that tries again.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        if self.replicated {
            return self.write_replicated(f);
        }
        self.write_local(f)
    }

    /// A write of a group member's store, made while a log entry is
    /// applied: it records the entry as applied in the same transaction and
    /// commits without a sync, since the entry is durable in the log (the
    /// member syncs once per batch of entries, [`Store::sync_applied`]).
    /// Any other write would make this member's store differ from the
    /// others': it is refused.
    fn write_replicated<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        let Some((key, value)) = APPLYING.with(|cell| cell.borrow().clone()) else {
            return Err(MetaError::Store(
                "a group member's store is written only by its log".into(),
            ));
        };
        self.ended(self.database().and_then(|db| {
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::None);
            let out = f(&txn)?;
            txn.open_table(APPLIED)?.insert(key, value.as_slice())?;
            txn.commit()?;
            Ok(out)
        }))
    }

    /// The outcome of a group member's write transaction: counted as a
    /// write, and a disk failure marks the store failed.
    fn ended<T>(&self, committed: Result<T, StoreError>) -> Result<T, MetaError> {
        self.writes.fetch_add(1, Ordering::Release);
        match committed {
            Err(StoreError::Disk(reason)) => {
                self.failed(reason.clone());
                Err(MetaError::OutOfSpace(reason))
            }
            other => Ok(other?),
        }
    }

    /// Records `mark` as applied and makes every write so far durable: a
    /// group member's sync, once per batch of applied entries.
    pub(crate) fn sync_applied(&self, mark: AppliedMark) -> Result<(), MetaError> {
        let (key, value) = mark;
        self.ended(self.database().and_then(|db| {
            let txn = db.begin_write()?;
            txn.open_table(APPLIED)?.insert(key, value.as_slice())?;
            txn.commit()?;
            Ok(())
        }))
    }

    /// A write of this member alone, outside any log: the schema's tables
    /// on opening. Elsewhere [`Store::write`].
    pub(crate) fn write_local<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, MetaError> {
        if let Some(reason) = self.refusal() {
            return Err(MetaError::OutOfSpace(reason));
        }
        let mark = self.commits.mark();
        let db = self.database()?;
        let solo = self.commits.begin();
        let ran = db
            .begin_write()
            .map_err(StoreError::from)
            .and_then(|mut txn| {
                if !solo {
                    // Made durable by the flush this writer waits for.
                    txn.set_durability(Durability::None);
                }
                let out = f(&txn)?;
                Ok((txn, out))
            });
        let committed = self.commits.end(solo, || {
            ran.and_then(|(txn, out)| Ok(txn.commit().map(|()| out)?))
        });
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
            Ok((out, seq)) => {
                self.settle(mark, seq, seq)?;
                self.recovered();
                Ok(out)
            }
            Err(refused) => {
                self.settle(mark, 1, self.commits.latest())?;
                Err(refused.into())
            }
        }
    }

    /// Blocks until commits `lo..=hi` are durable, flushing them when no
    /// other writer is.
    fn settle(&self, mark: Mark, lo: u64, hi: u64) -> Result<(), MetaError> {
        self.commits
            .settle(mark, lo, hi, || self.flush())
            .map_err(MetaError::OutOfSpace)
    }

    /// Makes every commit so far durable: an empty transaction committed
    /// with a sync. Returns the last sequence number it covered.
    fn flush(&self) -> Result<u64, String> {
        let flushed = self.database().and_then(|db| {
            let txn = db.begin_write()?;
            // Every commit numbered so far ended before this transaction
            // began (redb has one writer at a time), so the sync covers it.
            let upto = self.commits.latest();
            txn.commit()?;
            Ok(upto)
        });
        // Whatever failed, opening the database again undoes the commits
        // not yet flushed, so that their writers' refusal is the truth: a
        // refused write must never turn up later.
        flushed.map_err(|e| {
            let reason = e.to_string();
            self.failed(reason.clone());
            reason
        })
    }

    /// Where a read or a write begins to depend on the store.
    pub(crate) fn mark(&self) -> Mark {
        self.commits.mark()
    }

    /// Waits until every commit up to `horizon` (what reads since `mark`
    /// could have seen: [`take_horizon_of`]) is durable; an error when a disk
    /// failure undid some of it.
    pub(crate) async fn settled(&self, mark: Mark, horizon: u64) -> Result<(), MetaError> {
        if self.replicated {
            // What a member applied is committed in the group's log.
            return Ok(());
        }
        self.commits
            .settled(mark, horizon)
            .await
            .map_err(MetaError::OutOfSpace)
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
        metrics::gauge!(crate::telemetry::STORE_FAILED.name).set(1.0);
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
            metrics::gauge!(crate::telemetry::STORE_FAILED.name).set(0.0);
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
            // The commits not yet flushed are undone by opening the file
            // again; what a read cached from them goes with them.
            self.commits.lost(
                &self
                    .failure()
                    .unwrap_or_else(|| "the metadata store was reopened".into()),
            );
            self.writes.fetch_add(1, Ordering::Release);
            close_when_unused(old);
        }
        *slot = Some(Arc::new((self.open)(&self.path)?));
        Ok(())
    }

    /// Replaces the database file with a copy of `source` (a snapshot of a
    /// group member's store from its leader) and opens it. Readers of the
    /// old file are waited for; nothing else may write meanwhile.
    pub(crate) fn replace_file(&self, source: &Path) -> Result<(), StoreError> {
        let mut slot = self.db.write();
        if let Some(old) = slot.take() {
            close_when_unused(old);
        }
        let io =
            |e: std::io::Error| StoreError::Io(format!("replacing {}: {e}", self.path.display()));
        let part = self.path.with_extension("incoming");
        std::fs::copy(source, &part).map_err(io)?;
        std::fs::File::open(&part)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        std::fs::rename(&part, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            proto::durable::sync_dir(dir).map_err(io)?;
        }
        self.writes.fetch_add(1, Ordering::Release);
        *slot = Some(Arc::new((self.open)(&self.path)?));
        Ok(())
    }

    /// Why writes fail now, if they do.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().as_ref().map(|f| f.reason.clone())
    }

    /// Changes whenever a write transaction ends. Load it *before* a read
    /// transaction: what that read found is current for as long as the
    /// epoch still has the loaded value. A value kept from an earlier read
    /// may hold any commit so far, so the answer waits for all of them
    /// ([`take_horizon_of`]).
    pub(crate) fn write_epoch(&self) -> u64 {
        let epoch = self.writes.load(Ordering::Acquire);
        self.commits.note_latest();
        epoch
    }
}

/// Closes the database once the readers still holding it are done (the
/// file can only be opened again after that).
fn close_when_unused(mut db: Arc<Database>) {
    loop {
        match Arc::try_unwrap(db) {
            Ok(db) => {
                drop(db);
                return;
            }
            Err(shared) => {
                db = shared;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
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
    use redb::backends::FileBackend;
    use redb::{StorageBackend, TableDefinition};
    use std::io;
    use std::sync::atomic::AtomicBool;

    const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("test");

    /// A disk that can fill up: while `full`, the file cannot grow, as on a
    /// real full disk (pages it already has can still be rewritten); while
    /// `broken`, every write and sync fails.
    #[derive(Debug)]
    struct FillableDisk {
        file: FileBackend,
        full: Arc<AtomicBool>,
        broken: Arc<AtomicBool>,
        writes: Arc<AtomicU64>,
    }

    fn no_space() -> io::Error {
        io::Error::new(io::ErrorKind::StorageFull, "No space left on device")
    }

    impl StorageBackend for FillableDisk {
        fn len(&self) -> io::Result<u64> {
            self.file.len()
        }
        fn read(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
            self.file.read(offset, len)
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            if self.full.load(Ordering::SeqCst) && len > self.file.len()? {
                return Err(no_space());
            }
            self.file.set_len(len)
        }
        fn sync_data(&self, eventual: bool) -> io::Result<()> {
            if self.broken.load(Ordering::SeqCst) {
                return Err(io::Error::other("EIO"));
            }
            self.file.sync_data(eventual)
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            if self.broken.load(Ordering::SeqCst) {
                return Err(io::Error::other("EIO"));
            }
            if self.full.load(Ordering::SeqCst) && offset + data.len() as u64 > self.file.len()? {
                return Err(no_space());
            }
            self.file.write(offset, data)
        }
    }

    /// A store on a [`FillableDisk`], with the disk's switch and write count.
    fn store_on_fillable_disk(path: &Path) -> (Store, Arc<AtomicBool>, Arc<AtomicU64>) {
        let (store, full, _, writes) = store_on_breakable_disk(path);
        (store, full, writes)
    }

    /// [`store_on_fillable_disk`], with the switch that breaks the disk.
    fn store_on_breakable_disk(
        path: &Path,
    ) -> (Store, Arc<AtomicBool>, Arc<AtomicBool>, Arc<AtomicU64>) {
        let full = Arc::new(AtomicBool::new(false));
        let broken = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let (disk_full, disk_broken, disk_writes) = (full.clone(), broken.clone(), writes.clone());
        let open: Opener = Box::new(move |path| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| StoreError::Io(e.to_string()))?;
            let disk = FillableDisk {
                file: FileBackend::new(file)?,
                full: disk_full.clone(),
                broken: disk_broken.clone(),
                writes: disk_writes.clone(),
            };
            Ok(Database::builder().create_with_backend(disk)?)
        });
        (
            Store::open_with(path, open, Commits::Grouped).unwrap(),
            full,
            broken,
            writes,
        )
    }

    fn put(store: &Store, key: &str, value: &[u8]) -> Result<(), MetaError> {
        store.write(|txn| {
            txn.open_table(TABLE)?.insert(key, value)?;
            Ok(())
        })
    }

    fn get(store: &Store, key: &str) -> Option<Vec<u8>> {
        store
            .read(|txn| {
                let table = txn.open_table(TABLE)?;
                Ok(table.get(key)?.map(|v| v.value().to_vec()))
            })
            .unwrap()
    }

    fn failed_gauge(handle: &metrics_exporter_prometheus::PrometheusHandle) -> String {
        handle
            .render()
            .lines()
            .find(|line| line.starts_with("tessera_meta_store_failed "))
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn a_full_disk_refuses_writes_keeps_reads_and_recovers_when_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (store, full, writes) = store_on_fillable_disk(&dir.path().join("m.redb"));
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            put(&store, "kept", b"before").unwrap();
            let epoch = store.write_epoch();

            full.store(true, Ordering::SeqCst);
            let big = vec![7u8; 8 << 20];
            match put(&store, "big", &big) {
                Err(MetaError::OutOfSpace(reason)) => {
                    assert!(reason.contains("No space left"), "{reason}")
                }
                other => panic!("a write to a full disk answered {other:?}"),
            }
            assert!(store.failure().is_some());
            assert_eq!(failed_gauge(&handle), "tessera_meta_store_failed 1");
            assert!(store.write_epoch() > epoch, "a failed write ends too");
            // Reopened at once: reads go on and see only what was committed.
            assert_eq!(get(&store, "kept").as_deref(), Some(&b"before"[..]));
            assert_eq!(get(&store, "big"), None);

            // Space is back, but for a moment writes are refused untried.
            full.store(false, Ordering::SeqCst);
            let tried = writes.load(Ordering::SeqCst);
            assert!(matches!(
                put(&store, "soon", b"x"),
                Err(MetaError::OutOfSpace(_))
            ));
            assert_eq!(
                writes.load(Ordering::SeqCst),
                tried,
                "the disk was not tried"
            );
            assert!(store.failure().is_some());

            std::thread::sleep(RETRY_AFTER_FAILURE + Duration::from_millis(50));
            put(&store, "after", &big).unwrap();
            assert_eq!(store.failure(), None);
            assert_eq!(failed_gauge(&handle), "tessera_meta_store_failed 0");
            assert_eq!(get(&store, "after").map(|v| v.len()), Some(big.len()));
            assert_eq!(get(&store, "kept").as_deref(), Some(&b"before"[..]));
        });
    }

    #[test]
    fn a_write_still_failing_after_the_pause_is_refused_again() {
        let dir = tempfile::tempdir().unwrap();
        let (store, full, _) = store_on_fillable_disk(&dir.path().join("m.redb"));
        full.store(true, Ordering::SeqCst);
        let big = vec![1u8; 8 << 20];
        assert!(matches!(
            put(&store, "a", &big),
            Err(MetaError::OutOfSpace(_))
        ));
        std::thread::sleep(RETRY_AFTER_FAILURE + Duration::from_millis(50));
        assert!(matches!(
            put(&store, "a", &big),
            Err(MetaError::OutOfSpace(_))
        ));
        assert!(store.failure().is_some());
        // A refusal inside the transaction is not a disk failure.
        full.store(false, Ordering::SeqCst);
        std::thread::sleep(RETRY_AFTER_FAILURE + Duration::from_millis(50));
        let refused = store.write(|_| -> Result<(), StoreError> {
            Err(MetaError::NoSuchBucket("b".into()).into())
        });
        assert_eq!(refused, Err(MetaError::NoSuchBucket("b".into())));
        put(&store, "a", b"small").unwrap();
        assert_eq!(store.failure(), None);
    }

    #[test]
    fn concurrent_writes_are_durable_when_they_return() {
        const WRITERS: usize = 8;
        const EACH: usize = 25;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.redb");
        let store = Arc::new(Store::open_committing(&path, Commits::Grouped).unwrap());
        let threads: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for n in 0..EACH {
                        put(&store, &format!("{writer}/{n}"), &[writer as u8; 100]).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(store.commits.latest(), (WRITERS * EACH) as u64);
        drop(store);
        let reopened = Store::open_committing(&path, Commits::Grouped).unwrap();
        for writer in 0..WRITERS {
            for n in 0..EACH {
                assert_eq!(
                    get(&reopened, &format!("{writer}/{n}")),
                    Some(vec![writer as u8; 100])
                );
            }
        }
    }

    /// A disk that keeps only what was synced when the power goes: writes
    /// land in `written`, a sync copies it to `synced`, and a store opened
    /// after the cut starts from `synced`.
    #[derive(Debug)]
    struct PowerCutDisk {
        written: Mutex<Vec<u8>>,
        synced: Arc<Mutex<Vec<u8>>>,
    }

    impl StorageBackend for PowerCutDisk {
        fn len(&self) -> io::Result<u64> {
            Ok(self.written.lock().len() as u64)
        }
        fn read(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
            let written = self.written.lock();
            let start = offset as usize;
            Ok(written[start..start + len].to_vec())
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.written.lock().resize(len as usize, 0);
            Ok(())
        }
        fn sync_data(&self, _eventual: bool) -> io::Result<()> {
            *self.synced.lock() = self.written.lock().clone();
            Ok(())
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            let mut written = self.written.lock();
            let start = offset as usize;
            if written.len() < start + data.len() {
                written.resize(start + data.len(), 0);
            }
            written[start..start + data.len()].copy_from_slice(data);
            Ok(())
        }
    }

    /// A store on a [`PowerCutDisk`] that starts from what `synced` holds.
    fn store_after_power_cut(synced: &Arc<Mutex<Vec<u8>>>, commits: Commits) -> Store {
        let synced = synced.clone();
        let open: Opener = Box::new(move |_| {
            let disk = PowerCutDisk {
                written: Mutex::new(synced.lock().clone()),
                synced: synced.clone(),
            };
            Ok(Database::builder().create_with_backend(disk)?)
        });
        Store::open_with(Path::new("power-cut"), open, commits).unwrap()
    }

    #[test]
    fn acknowledged_writes_survive_a_power_cut() {
        // With `never_alone`, a writer that stays in its transaction makes
        // every other one commit in a group, made durable by flushes only.
        for (commits, never_alone) in [
            (Commits::Grouped, false),
            (Commits::Grouped, true),
            (Commits::OneByOne, false),
        ] {
            let synced = Arc::new(Mutex::new(Vec::new()));
            let store = Arc::new(store_after_power_cut(&synced, commits));
            if never_alone {
                store.commits.begin();
            }
            let threads: Vec<_> = (0..8u8)
                .map(|writer| {
                    let store = store.clone();
                    std::thread::spawn(move || {
                        for n in 0..25 {
                            put(&store, &format!("{writer}/{n}"), &[writer; 100]).unwrap();
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            if never_alone {
                store.commits.end(false, || Err::<(), ()>(())).unwrap_err();
            }
            // The power goes: the store never closes, nothing unsynced stays.
            std::mem::forget(store);
            let after = store_after_power_cut(&synced, commits);
            for writer in 0..8u8 {
                for n in 0..25 {
                    assert_eq!(
                        get(&after, &format!("{writer}/{n}")),
                        Some(vec![writer; 100]),
                        "{commits:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_read_of_a_commit_undone_by_a_reopen_fails() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (store, _, broken, _) = store_on_breakable_disk(&dir.path().join("m.redb"));
        put(&store, "kept", b"durable").unwrap();
        // A commit made visible without a sync, as a writer in a group
        // makes it before its flush.
        let mark = store.mark();
        let db = store.database().unwrap();
        store.commits.begin();
        let (_, seq) = store
            .commits
            .end(false, || {
                let mut txn = db.begin_write()?;
                txn.set_durability(Durability::None);
                txn.open_table(TABLE)?
                    .insert("unsynced", b"gone".as_slice())?;
                txn.commit()?;
                Ok::<_, StoreError>(())
            })
            .unwrap();
        drop(db);
        let (seen, horizon) = take_horizon_of(|| get(&store, "unsynced"));
        assert_eq!(seen.as_deref(), Some(&b"gone"[..]));
        assert_eq!(horizon, seq);
        // The disk fails the flush: the store opens again without it.
        broken.store(true, Ordering::SeqCst);
        let flushed = store.settle(mark, seq, seq);
        assert!(
            matches!(flushed, Err(MetaError::OutOfSpace(_))),
            "{flushed:?}"
        );
        broken.store(false, Ordering::SeqCst);
        assert!(matches!(
            runtime.block_on(store.settled(mark, horizon)),
            Err(MetaError::OutOfSpace(_))
        ));
        assert_eq!(get(&store, "unsynced"), None);
        assert_eq!(get(&store, "kept").as_deref(), Some(&b"durable"[..]));
        // A read begun after the failure is not concerned by it.
        let (_, later) = take_horizon_of(|| get(&store, "kept"));
        assert_eq!(runtime.block_on(store.settled(store.mark(), later)), Ok(()));
    }

    #[test]
    fn writes_that_met_a_full_disk_together_all_fail_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, full, _) = store_on_fillable_disk(&dir.path().join("m.redb"));
        put(&store, "kept", b"before").unwrap();
        let store = Arc::new(store);
        full.store(true, Ordering::SeqCst);
        let threads: Vec<_> = (0..4)
            .map(|n| {
                let store = store.clone();
                std::thread::spawn(move || put(&store, &format!("big{n}"), &vec![n; 4 << 20]))
            })
            .collect();
        for thread in threads {
            assert!(matches!(
                thread.join().unwrap(),
                Err(MetaError::OutOfSpace(_))
            ));
        }
        for n in 0..4 {
            assert_eq!(get(&store, &format!("big{n}")), None);
        }
        assert_eq!(get(&store, "kept").as_deref(), Some(&b"before"[..]));
    }

    #[test]
    fn one_by_one_writes_are_durable_when_they_return() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.redb");
        let store = Store::open_committing(&path, Commits::OneByOne).unwrap();
        put(&store, "a", b"1").unwrap();
        let refused = store.write(|_| -> Result<(), StoreError> {
            Err(MetaError::NoSuchBucket("b".into()).into())
        });
        assert_eq!(refused, Err(MetaError::NoSuchBucket("b".into())));
        drop(store);
        let reopened = Store::open_committing(&path, Commits::OneByOne).unwrap();
        assert_eq!(get(&reopened, "a").as_deref(), Some(&b"1"[..]));
    }

    #[test]
    fn disk_errors_are_told_from_database_errors() {
        let io = || io::Error::other("EIO");
        assert!(matches!(
            StoreError::from(redb::StorageError::Io(io())),
            StoreError::Disk(_)
        ));
        assert!(matches!(
            StoreError::from(redb::StorageError::PreviousIo),
            StoreError::Disk(_)
        ));
        assert!(matches!(
            StoreError::from(redb::StorageError::Corrupted("page".into())),
            StoreError::Database(_)
        ));
        assert!(matches!(
            StoreError::from(redb::Error::Io(io())),
            StoreError::Disk(_)
        ));
        assert!(matches!(
            StoreError::from(redb::Error::PreviousIo),
            StoreError::Disk(_)
        ));
        assert!(matches!(
            StoreError::from(redb::Error::Corrupted("page".into())),
            StoreError::Database(_)
        ));
        assert!(matches!(
            StoreError::from(redb::CommitError::Storage(redb::StorageError::Io(io()))),
            StoreError::Disk(_)
        ));
        assert_eq!(
            MetaError::from(StoreError::Disk("full".into())),
            MetaError::Store("full".into())
        );
    }

    #[test]
    fn prefix_end_is_the_least_upper_bound() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b"b/"), Some(b"b0".to_vec()));
    }
}
