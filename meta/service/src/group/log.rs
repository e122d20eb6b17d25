//! The group's Raft log: entries, the vote and the commit point in a redb
//! file of their own beside the store (`raft-log.redb`).
//!
//! One writer thread makes every change, in the order Raft asked for them:
//! it takes everything queued since its last sync into one transaction and
//! one sync, which is the group's commit batching. An append returns at
//! once, its entries readable from memory until they are on disk, and Raft
//! hears they are durable when the sync that covered them ends (openraft's
//! `LogFlushed`); so Raft goes on proposing and replicating while the disk
//! syncs, and entries proposed meanwhile share the next sync.

// openraft's storage traits return its `StorageError` (over 200 bytes), and
// redb's errors are as large: boxing them here would only move the size.
#![allow(clippy::result_large_err)]

use super::TypeConfig;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    AnyError, Entry, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError,
    StorageIOError, Vote,
};
use parking_lot::Mutex;
use redb::{Database, Durability, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Name of the log's file in the data folder.
pub(crate) const LOG_FILE: &str = "raft-log.redb";

/// Index -> entry (JSON).
const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("entries");
/// The vote, the commit point and the last purged entry (JSON).
const POINTS: TableDefinition<&str, &[u8]> = TableDefinition::new("points");

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "purged";

type Result<T> = std::result::Result<T, StorageError<u64>>;

/// A storage error of the log, in Raft's terms.
fn failed(subject: ErrorSubject<u64>, verb: ErrorVerb, e: impl ToString) -> StorageError<u64> {
    StorageIOError::new(subject, verb, AnyError::error(e.to_string())).into()
}

/// How far the log's writes have got, as [`LogStore::progress`] shows it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Progress {
    /// Appends so far.
    pub(crate) appends: u64,
    /// Whether every entry appended is on disk.
    pub(crate) idle: bool,
}

/// Entries appended and not yet on disk, by index, and the [`Progress`]
/// they make; both changed under the lock.
#[derive(Clone)]
struct Unwritten {
    entries: Arc<Mutex<BTreeMap<u64, Entry<TypeConfig>>>>,
    progress: Arc<tokio::sync::watch::Sender<Progress>>,
}

impl Unwritten {
    fn lock(&self) -> parking_lot::MutexGuard<'_, BTreeMap<u64, Entry<TypeConfig>>> {
        self.entries.lock()
    }

    /// Tells [`LogStore::progress`]'s watchers what `entries` (this map,
    /// still locked) now holds, and of one more append if `appended`.
    fn publish(&self, entries: &BTreeMap<u64, Entry<TypeConfig>>, appended: bool) {
        self.progress.send_modify(|progress| {
            progress.appends += u64::from(appended);
            progress.idle = entries.is_empty();
        });
    }
}

/// Who waits for a change to be on disk.
enum Waiter {
    /// Raft, told through its callback.
    Raft(LogFlushed<TypeConfig>),
    /// A caller awaiting the outcome.
    Caller(tokio::sync::oneshot::Sender<std::result::Result<(), String>>),
    /// Nobody: the change rides with the next sync.
    Nobody,
}

impl Waiter {
    fn tell(self, outcome: &std::result::Result<(), String>) {
        match self {
            Waiter::Raft(callback) => {
                callback.log_io_completed(outcome.clone().map_err(std::io::Error::other))
            }
            Waiter::Caller(sender) => drop(sender.send(outcome.clone())),
            Waiter::Nobody => {}
        }
    }
}

/// One change for the writer thread.
enum Change {
    /// Entries (index, id, JSON) to store.
    Append(Vec<(LogId<u64>, Vec<u8>)>),
    /// A point (vote, commit point, last purged) to store.
    Point(&'static str, Vec<u8>),
    /// Entries from the first index up to the second (or the end) to delete.
    Remove(u64, Option<u64>),
}

/// Applies `changes` in order in one transaction and syncs it.
fn write_batch(db: &Database, changes: &[&Change]) -> std::result::Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate);
    {
        let mut entries = txn.open_table(ENTRIES)?;
        let mut points = txn.open_table(POINTS)?;
        for change in changes {
            match change {
                Change::Append(rows) => {
                    for (id, bytes) in rows {
                        entries.insert(id.index, bytes.as_slice())?;
                    }
                }
                Change::Point(name, bytes) => {
                    points.insert(*name, bytes.as_slice())?;
                }
                Change::Remove(start, Some(end)) => {
                    entries.retain_in(*start..*end, |_, _| false)?
                }
                Change::Remove(start, None) => entries.retain_in(*start.., |_, _| false)?,
            }
        }
    }
    txn.commit()?;
    Ok(())
}

/// How long a change nobody waits for (the commit point) may stay queued
/// for a sync some other change needs.
const RIDE_LIMIT: Duration = Duration::from_secs(1);

/// The writer thread: waits for a change, takes every other one queued
/// behind it, writes them all with one sync, then tells their waiters.
/// Changes nobody waits for are held for the next sync someone needs (or
/// [`RIDE_LIMIT`]). It never waits for more: openraft 0.9 sends the next
/// append only once the last one is synced.
fn write_changes(db: Arc<Database>, unwritten: Unwritten, queue: mpsc::Receiver<(Change, Waiter)>) {
    let mut batch: Vec<(Change, Waiter)> = Vec::new();
    loop {
        let next = if batch.is_empty() {
            queue
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            queue.recv_timeout(RIDE_LIMIT)
        };
        let held_long = match next {
            Ok(change) => {
                batch.push(change);
                false
            }
            Err(mpsc::RecvTimeoutError::Timeout) => true,
            // Whatever is held is only the commit point: dropped with the log.
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let waited_for = batch.iter().any(|(_, w)| !matches!(w, Waiter::Nobody));
        if !waited_for && !held_long {
            continue;
        }
        batch.extend(queue.try_iter());
        let taken = std::mem::take(&mut batch);
        let changes: Vec<&Change> = taken.iter().map(|(change, _)| change).collect();
        let appended: usize = changes
            .iter()
            .map(|c| match c {
                Change::Append(rows) => rows.len(),
                _ => 0,
            })
            .sum();
        let outcome = write_batch(&db, &changes).map_err(|e| e.to_string());
        metrics::counter!(crate::telemetry::LOG_SYNCS.name).increment(1);
        metrics::counter!(crate::telemetry::LOG_ENTRIES.name).increment(appended as u64);
        if outcome.is_ok() {
            let mut entries = unwritten.lock();
            for change in &changes {
                if let Change::Append(rows) = change {
                    for (id, _) in rows {
                        // Unless a later append replaced it after a truncation.
                        if entries.get(&id.index).is_some_and(|e| e.log_id == *id) {
                            entries.remove(&id.index);
                        }
                    }
                }
            }
            unwritten.publish(&entries, false);
        }
        for (_, waiter) in taken {
            waiter.tell(&outcome);
        }
    }
}

/// Ends the writer thread once the last handle on the log is gone.
struct Writer {
    queue: Mutex<Option<mpsc::Sender<(Change, Waiter)>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.lock().take();
        if let Some(thread) = self.thread.lock().take() {
            // The thread ends after the batch it is writing: the file is
            // closed when this returns, so the log can be opened again.
            drop(thread.join());
        }
    }
}

/// The group's log; cheap to clone (readers share the file).
#[derive(Clone)]
pub(crate) struct LogStore {
    db: Arc<Database>,
    unwritten: Unwritten,
    writer: Arc<Writer>,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`.
    pub(crate) fn open(dir: &Path) -> std::result::Result<LogStore, redb::Error> {
        let db = Arc::new(Database::create(dir.join(LOG_FILE))?);
        let txn = db.begin_write()?;
        txn.open_table(ENTRIES)?;
        txn.open_table(POINTS)?;
        txn.commit()?;
        let unwritten = Unwritten {
            entries: Arc::default(),
            progress: Arc::new(tokio::sync::watch::Sender::new(Progress {
                appends: 0,
                idle: true,
            })),
        };
        let (queue, changes) = mpsc::channel();
        let thread = std::thread::Builder::new().name("raft-log".into()).spawn({
            let (db, unwritten) = (db.clone(), unwritten.clone());
            move || write_changes(db, unwritten, changes)
        })?;
        Ok(LogStore {
            db,
            unwritten,
            writer: Arc::new(Writer {
                queue: Mutex::new(Some(queue)),
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// The log's [`Progress`], watched: the leader forms its next entry of
    /// clients' writes once the last one is on disk (`batch_writes`).
    pub(crate) fn progress(&self) -> tokio::sync::watch::Receiver<Progress> {
        self.unwritten.progress.subscribe()
    }

    /// Queues `change` for the writer thread.
    fn queue(&self, change: Change, waiter: Waiter) -> Result<()> {
        let queue = self.writer.queue.lock();
        let sent = queue.as_ref().map(|q| q.send((change, waiter)));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(failed(
                ErrorSubject::Logs,
                ErrorVerb::Write,
                "the log's writer has stopped",
            )),
        }
    }

    /// Queues `change` and waits until it is on disk.
    async fn write(
        &self,
        change: Change,
        subject: ErrorSubject<u64>,
        verb: ErrorVerb,
    ) -> Result<()> {
        let (done, written) = tokio::sync::oneshot::channel();
        self.queue(change, Waiter::Caller(done))?;
        match written.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(failed(subject, verb, e)),
            Err(e) => Err(failed(subject, verb, e)),
        }
    }

    /// Runs `f` on the blocking pool with the database (redb reads may
    /// wait for the disk).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> std::result::Result<T, redb::Error> + Send + 'static,
        subject: ErrorSubject<u64>,
        verb: ErrorVerb,
    ) -> Result<T> {
        let db = self.db.clone();
        let ran = tokio::task::spawn_blocking(move || f(&db)).await;
        match ran {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(failed(subject, verb, e)),
            Err(e) => Err(failed(subject, verb, e)),
        }
    }

    async fn read_point<T: DeserializeOwned + Send + 'static>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>> {
        let subject = ErrorSubject::Store;
        let bytes = self
            .blocking(
                move |db| {
                    let txn = db.begin_read()?;
                    let table = txn.open_table(POINTS)?;
                    let value = table.get(name)?.map(|v| v.value().to_vec());
                    Ok(value)
                },
                subject.clone(),
                ErrorVerb::Read,
            )
            .await?;
        bytes
            .map(|b| serde_json::from_slice(&b).map_err(|e| failed(subject, ErrorVerb::Read, e)))
            .transpose()
    }

    fn encoded_point(value: &impl Serialize) -> Result<Vec<u8>> {
        serde_json::to_vec(value).map_err(|e| failed(ErrorSubject::Store, ErrorVerb::Write, e))
    }
}

/// The first index of `range`, and the first after it.
fn bounds(range: &impl RangeBounds<u64>) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&i) => i.checked_add(1),
        Bound::Excluded(&i) => Some(i),
        Bound::Unbounded => None,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>> {
        let (start, end) = bounds(&range);
        if end.is_some_and(|end| end <= start) {
            return Ok(Vec::new());
        }
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        // Taken before the file is read: an entry the writer stores in
        // between is then found in one or the other, never in neither.
        let unwritten: Vec<Entry<TypeConfig>> = self
            .unwritten
            .lock()
            .range((Bound::Included(start), upper))
            .map(|(_, entry)| entry.clone())
            .collect();
        let stored_end = unwritten
            .first()
            .map_or(end, |first| Some(first.log_id.index));
        let encoded = self
            .blocking(
                move |db| {
                    let txn = db.begin_read()?;
                    let table = txn.open_table(ENTRIES)?;
                    let mut out = Vec::new();
                    let rows = match stored_end {
                        Some(end) if end <= start => return Ok(out),
                        Some(end) => table.range(start..end)?,
                        None => table.range(start..)?,
                    };
                    for row in rows {
                        out.push(row?.1.value().to_vec());
                    }
                    Ok(out)
                },
                ErrorSubject::Logs,
                ErrorVerb::Read,
            )
            .await?;
        let mut entries = encoded
            .iter()
            .map(|bytes| {
                serde_json::from_slice(bytes)
                    .map_err(|e| failed(ErrorSubject::Logs, ErrorVerb::Read, e))
            })
            .collect::<Result<Vec<Entry<TypeConfig>>>>()?;
        entries.extend(unwritten);
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>> {
        let unwritten = self.unwritten.lock().values().next_back().map(|e| e.log_id);
        let last = self
            .blocking(
                |db| {
                    let txn = db.begin_read()?;
                    let table = txn.open_table(ENTRIES)?;
                    let last = table.last()?.map(|(_, v)| v.value().to_vec());
                    Ok(last)
                },
                ErrorSubject::Logs,
                ErrorVerb::Read,
            )
            .await?;
        let last: Option<Entry<TypeConfig>> = last
            .map(|b| {
                serde_json::from_slice(&b)
                    .map_err(|e| failed(ErrorSubject::Logs, ErrorVerb::Read, e))
            })
            .transpose()?;
        let last_purged_log_id: Option<LogId<u64>> = self.read_point(PURGED).await?;
        Ok(LogState {
            last_purged_log_id,
            last_log_id: unwritten.or(last.map(|e| e.log_id)).or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<()> {
        let bytes = Self::encoded_point(vote)?;
        self.write(
            Change::Point(VOTE, bytes),
            ErrorSubject::Vote,
            ErrorVerb::Write,
        )
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>> {
        self.read_point(VOTE).await
    }

    /// Rides with the next sync rather than waiting for one of its own: on
    /// a restart the member applies up to the point it finds, and learns
    /// the rest from the leader.
    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<()> {
        let bytes = Self::encoded_point(&committed)?;
        self.queue(Change::Point(COMMITTED, bytes), Waiter::Nobody)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>> {
        Ok(self
            .read_point::<Option<LogId<u64>>>(COMMITTED)
            .await?
            .flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut rows = Vec::new();
        let mut unwritten = self.unwritten.lock();
        for entry in entries {
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| failed(ErrorSubject::Logs, ErrorVerb::Write, e))?;
            rows.push((entry.log_id, bytes));
            unwritten.insert(entry.log_id.index, entry);
        }
        self.unwritten.publish(&unwritten, true);
        // Queued under the lock, so the writer stores appends in the order
        // their entries became readable.
        self.queue(Change::Append(rows), Waiter::Raft(callback))
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<()> {
        {
            let mut unwritten = self.unwritten.lock();
            unwritten.split_off(&log_id.index);
            self.unwritten.publish(&unwritten, false);
        }
        self.write(
            Change::Remove(log_id.index, None),
            ErrorSubject::Logs,
            ErrorVerb::Delete,
        )
        .await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<()> {
        let bytes = Self::encoded_point(&log_id)?;
        {
            let mut unwritten = self.unwritten.lock();
            let kept = unwritten.split_off(&(log_id.index + 1));
            *unwritten = kept;
            self.unwritten.publish(&unwritten, false);
        }
        self.queue(Change::Point(PURGED, bytes), Waiter::Nobody)?;
        self.write(
            Change::Remove(0, Some(log_id.index + 1)),
            ErrorSubject::Logs,
            ErrorVerb::Delete,
        )
        .await
    }
}
