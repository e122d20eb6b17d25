//! The group's Raft log: entries, the vote and the commit point in a redb
//! file of their own beside the store (`raft-log.redb`), each append synced
//! before Raft hears it is durable. Entries appended together share one
//! transaction and one sync, which is the group's commit batching.

// openraft's storage traits return its `StorageError` (over 200 bytes), and
// redb's errors are as large: boxing them here would only move the size.
#![allow(clippy::result_large_err)]

use super::TypeConfig;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    AnyError, Entry, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError,
    StorageIOError, Vote,
};
use redb::{Database, Durability, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

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

/// The group's log; cheap to clone (readers share the file).
#[derive(Clone)]
pub(crate) struct LogStore {
    db: Arc<Database>,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`.
    pub(crate) fn open(dir: &Path) -> std::result::Result<LogStore, redb::Error> {
        let db = Database::create(dir.join(LOG_FILE))?;
        let txn = db.begin_write()?;
        txn.open_table(ENTRIES)?;
        txn.open_table(POINTS)?;
        txn.commit()?;
        Ok(LogStore { db: Arc::new(db) })
    }

    /// Runs `f` on the blocking pool with the database (redb blocks on syncs).
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

    async fn save_point(&self, name: &'static str, value: &impl Serialize) -> Result<()> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| failed(ErrorSubject::Store, ErrorVerb::Write, e))?;
        self.blocking(
            move |db| {
                let txn = db.begin_write()?;
                txn.open_table(POINTS)?.insert(name, bytes.as_slice())?;
                txn.commit()?;
                Ok(())
            },
            ErrorSubject::Store,
            ErrorVerb::Write,
        )
        .await
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
        let encoded = self
            .blocking(
                move |db| {
                    let txn = db.begin_read()?;
                    let table = txn.open_table(ENTRIES)?;
                    let mut out = Vec::new();
                    let rows = match end {
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
        encoded
            .iter()
            .map(|bytes| {
                serde_json::from_slice(bytes)
                    .map_err(|e| failed(ErrorSubject::Logs, ErrorVerb::Read, e))
            })
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>> {
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
            last_log_id: last.map(|e| e.log_id).or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<()> {
        self.save_point(VOTE, vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>> {
        self.read_point(VOTE).await
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<()> {
        self.save_point(COMMITTED, &committed).await
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
        for entry in entries {
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| failed(ErrorSubject::Logs, ErrorVerb::Write, e))?;
            rows.push((entry.log_id.index, bytes));
        }
        let written = self
            .blocking(
                move |db| {
                    let mut txn = db.begin_write()?;
                    txn.set_durability(Durability::Immediate);
                    {
                        let mut table = txn.open_table(ENTRIES)?;
                        for (index, bytes) in &rows {
                            table.insert(*index, bytes.as_slice())?;
                        }
                    }
                    txn.commit()?;
                    Ok(())
                },
                ErrorSubject::Logs,
                ErrorVerb::Write,
            )
            .await;
        callback.log_io_completed(
            written
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        written
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<()> {
        self.remove(log_id.index.., ErrorSubject::Logs).await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<()> {
        self.save_point(PURGED, &log_id).await?;
        self.remove(..=log_id.index, ErrorSubject::Logs).await
    }
}

impl LogStore {
    /// Deletes the entries of `range`, durably.
    async fn remove(
        &self,
        range: impl RangeBounds<u64> + Send + 'static,
        subject: ErrorSubject<u64>,
    ) -> Result<()> {
        let (start, end) = bounds(&range);
        self.blocking(
            move |db| {
                let txn = db.begin_write()?;
                {
                    let mut table = txn.open_table(ENTRIES)?;
                    match end {
                        Some(end) => table.retain_in(start..end, |_, _| false)?,
                        None => table.retain_in(start.., |_, _| false)?,
                    }
                }
                txn.commit()?;
                Ok(())
            },
            subject,
            ErrorVerb::Delete,
        )
        .await
    }
}
