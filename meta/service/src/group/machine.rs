//! The group's state machine: a member's own meta store, to which every
//! committed entry is applied by the handlers a lone meta runs.
//!
//! The store records the last entry applied (and the membership as of it)
//! in the same transaction as each entry's changes, and is synced every
//! few milliseconds and before each snapshot, so after a crash it holds
//! exactly the entries up to the one it names; Raft applies the rest again
//! from the log, which keeps every entry a snapshot does not cover.
//!
//! A snapshot is a copy of the store file, taken between two batches after
//! a sync; a member too far behind the log receives one in chunks, and it
//! replaces its store file, after which the in-memory parts of its state
//! (the datanode registry, token keys, KMS keys) are loaded again from it.

// openraft's storage traits return its `StorageError` (over 200 bytes), and
// redb's errors are as large: boxing them here would only move the size.
#![allow(clippy::result_large_err)]

use super::{Action, Applied, Command, TypeConfig};
use crate::ops::repairs::Scan;
use crate::state::MetaState;
use crate::store::db::{applying, get_json, AppliedMark, APPLIED};
use crate::store::DATABASE_FILE;
use meta_api::{AnyResponse, MetaError, UnixMillis};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Result<T> = std::result::Result<T, StorageError<u64>>;

/// Folder of snapshots in the data folder.
const SNAPSHOTS: &str = "raft-snapshots";
/// Where a snapshot being received is written.
const INCOMING: &str = "incoming.redb";
/// The key of [`AppliedRecord`] in the store's `APPLIED` table.
const APPLIED_KEY: &str = "applied";

fn failed(subject: ErrorSubject<u64>, verb: ErrorVerb, e: impl ToString) -> StorageError<u64> {
    StorageIOError::new(subject, verb, AnyError::error(e.to_string())).into()
}

fn state_machine_failed(verb: ErrorVerb, e: impl ToString) -> StorageError<u64> {
    failed(ErrorSubject::StateMachine, verb, e)
}

/// The member's current state, replaced whole when a snapshot is installed.
pub(crate) struct StateSlot {
    state: RwLock<Arc<MetaState>>,
    /// Held while entries are applied or the store file is copied or replaced.
    apply: Mutex<()>,
    /// When the store was last synced by the apply.
    synced: Mutex<std::time::Instant>,
    /// What the store holds applied, whole entries only (the store's own
    /// record may name an entry's requests while they are applied).
    applied: Mutex<AppliedRecord>,
    /// Why the store no longer matches `applied`: an apply that did not
    /// finish, or a sync that failed (the store reopened after a disk error
    /// has lost its unsynced commits). Every later apply, sync and snapshot
    /// is refused, which stops this member's Raft; a restart applies again
    /// from the log what the store lacks.
    damaged: Mutex<Option<String>>,
}

/// How often applying entries syncs the store. redb frees the pages its
/// unsynced commits replaced only at a synced commit: synced once a second,
/// a burst of 1 KiB PUTs (about 5,500 a second, each request its own
/// transaction) grew the store file to 540 MB in 5 s and held writes up to
/// 290 ms; every 10 ms the file stays near a lone meta's size and the
/// 1 KiB p99 with it (docs/benchmarks.md).
const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

impl StateSlot {
    /// A slot holding `state`.
    pub(crate) fn new(state: Arc<MetaState>) -> StateSlot {
        StateSlot {
            state: RwLock::new(state),
            apply: Mutex::new(()),
            synced: Mutex::new(std::time::Instant::now()),
            applied: Mutex::new(AppliedRecord::default()),
            damaged: Mutex::new(None),
        }
    }

    /// Fails when the store no longer matches what it records as applied.
    fn intact(&self) -> Result<()> {
        match &*self.damaged.lock() {
            Some(why) => Err(state_machine_failed(ErrorVerb::Write, why)),
            None => Ok(()),
        }
    }

    /// Marks the store as not matching its record while an apply runs.
    fn damage_quietly(&self, why: &str) {
        *self.damaged.lock() = Some(why.to_string());
    }

    /// Records why the store no longer matches its record.
    fn damage(&self, why: impl ToString) {
        let why = why.to_string();
        tracing::error!(%why, "meta store out of step with its log: this member stops applying");
        self.damaged.lock().get_or_insert(why);
    }

    /// The state now.
    pub(crate) fn current(&self) -> Arc<MetaState> {
        self.state.read().clone()
    }
}

/// The last entry a store applied and the membership as of it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct AppliedRecord {
    log_id: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    /// The entry after `log_id` when only its first requests are applied
    /// (a crash stopped its apply part-way), and how many: applying it
    /// again skips those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partly: Option<(LogId<u64>, usize)>,
}

impl AppliedRecord {
    fn mark(&self) -> Result<AppliedMark> {
        let bytes =
            serde_json::to_vec(self).map_err(|e| state_machine_failed(ErrorVerb::Write, e))?;
        Ok((APPLIED_KEY, bytes))
    }

    /// What `state`'s store last applied.
    fn load(state: &MetaState) -> Result<AppliedRecord> {
        let record: Option<AppliedRecord> = state
            .store
            .read(|txn| get_json(&txn.open_table(APPLIED)?, APPLIED_KEY))
            .map_err(|e| state_machine_failed(ErrorVerb::Read, e))?;
        Ok(record.unwrap_or_default())
    }
}

/// The answer of a request a member applied before a restart, applied
/// again as part of its entry: nobody waits for it.
fn applied_before() -> std::result::Result<AnyResponse, MetaError> {
    Err(MetaError::Transport(
        "applied before this member restarted".into(),
    ))
}

/// Applies the command of the entry at `log_id` to `state`, after the
/// entries `applied` names: each of its writes also records what it
/// completes. Clients' requests are applied one by one, each recorded as
/// far as it goes, so a crash between two of them leaves the store
/// knowing which are in.
fn apply_command(
    state: &MetaState,
    applied: &AppliedRecord,
    log_id: LogId<u64>,
    command: Command,
) -> Result<Applied> {
    let (now, seed) = (command.now, command.seed);
    let requests = match command.action {
        Action::Requests(requests) => requests,
        action => {
            let whole = AppliedRecord {
                log_id: Some(log_id),
                partly: None,
                ..applied.clone()
            };
            let term = log_id.leader_id.term;
            let answer = applying(whole.mark()?, || {
                crate::entropy::seeded(seed, || run(state, now, term, action))
            });
            return checked(answer);
        }
    };
    let skip = match applied.partly {
        Some((id, done)) if id == log_id => done,
        _ => 0,
    };
    let mut answers = Vec::with_capacity(requests.len());
    for (i, request) in requests.into_iter().enumerate() {
        if i < skip {
            answers.push(applied_before());
            continue;
        }
        let upto = AppliedRecord {
            partly: Some((log_id, i + 1)),
            ..applied.clone()
        };
        let answer = applying(upto.mark()?, || {
            crate::entropy::seeded(crate::entropy::nth(seed, i), || {
                request.dispatch(state, now)
            })
        });
        if let Err(e) = &answer {
            if is_store_failure(e) {
                return Err(state_machine_failed(ErrorVerb::Write, e));
            }
        }
        answers.push(answer);
    }
    Ok(Applied::Answers(answers))
}

/// Runs one of the leader's own commands, proposed in `term`.
fn run(state: &MetaState, now: UnixMillis, term: u64, action: Action) -> Applied {
    match action {
        Action::Requests(_) => unreachable!("requests are applied one by one"),
        Action::Startup => Applied::Done(state.startup_writes(now).map(drop)),
        Action::Redundancy => Applied::Done(state.check_redundancy(now, Scan::No)),
        Action::RedundancyScan => Applied::Done(state.check_redundancy(now, Scan::Yes)),
        Action::Lifecycle => Applied::Pause(
            state
                .lifecycle_step(now, false)
                .map(|pause| u64::try_from(pause.as_millis()).unwrap_or(u64::MAX)),
        ),
        Action::ReserveBlockIds => Applied::Reserved(state.reserve_block_ids(term, now)),
    }
}

/// `answer`, unless it is the store failing: a member whose store failed
/// an entry others applied must stop, not go on unequal.
fn checked(answer: Applied) -> Result<Applied> {
    if let Some(e) = store_failed(&answer) {
        return Err(state_machine_failed(ErrorVerb::Write, e));
    }
    Ok(answer)
}

/// [`apply_command`] as the entry at `log_id` (tests of members' equality).
#[cfg(test)]
pub(super) fn apply_one(
    state: &MetaState,
    log_id: LogId<u64>,
    command: Command,
) -> Result<Applied> {
    apply_command(state, &AppliedRecord::default(), log_id, command)
}

/// [`apply_command`] after what the store records as applied (tests of a
/// restart part-way through an entry).
#[cfg(test)]
pub(super) fn apply_from_store(
    state: &MetaState,
    log_id: LogId<u64>,
    command: Command,
) -> Result<Applied> {
    apply_command(state, &AppliedRecord::load(state)?, log_id, command)
}

/// Whether a command's outcome is the store failing rather than a refusal.
fn store_failed(applied: &Applied) -> Option<&MetaError> {
    let error = match applied {
        Applied::Pause(Err(e)) | Applied::Done(Err(e)) | Applied::Reserved(Err(e)) => e,
        _ => return None,
    };
    is_store_failure(error).then_some(error)
}

/// Whether an error is the store failing rather than a refusal: a member
/// whose store failed an entry others applied must stop, not go on unequal.
fn is_store_failure(error: &MetaError) -> bool {
    matches!(error, MetaError::Store(_) | MetaError::OutOfSpace(_))
}

/// Syncs the store with the record of what it holds applied. The log
/// holds every entry until a snapshot covers it, and a snapshot syncs the
/// store first: so the store is synced only now and then, which bounds
/// what a restart applies again and the space redb holds for unsynced
/// commits. It runs after the entries' answers are out, beside the next
/// log sync rather than before the answers. Nothing is synced once the
/// store is damaged (its record would name entries it lacks or lack some
/// it holds), and a sync that fails damages it.
fn sync_store(slot: &StateSlot) {
    let _applying = slot.apply.lock();
    if slot.intact().is_err() {
        return;
    }
    // What is applied now, which later entries may have moved past the
    // ones whose apply found the sync due.
    let synced = slot.applied.lock().mark().and_then(|mark| {
        slot.current()
            .store
            .sync_applied(mark)
            .map_err(|e| state_machine_failed(ErrorVerb::Write, e))
    });
    if let Err(e) = synced {
        slot.damage(format!("syncing the store: {e}"));
    }
}

/// The state machine of one member.
pub(crate) struct Machine {
    slot: Arc<StateSlot>,
    snapshots: PathBuf,
    applied: AppliedRecord,
}

impl Machine {
    /// The state machine over the store in `slot`, snapshots in `dir`.
    pub(crate) fn open(
        slot: Arc<StateSlot>,
        dir: &Path,
    ) -> std::result::Result<Machine, MetaError> {
        let snapshots = dir.join(SNAPSHOTS);
        proto::durable::create_private_dir(&snapshots)
            .map_err(|e| MetaError::Store(format!("creating {}: {e}", snapshots.display())))?;
        let applied =
            AppliedRecord::load(&slot.current()).map_err(|e| MetaError::Store(e.to_string()))?;
        *slot.applied.lock() = applied.clone();
        Ok(Machine {
            slot,
            snapshots,
            applied,
        })
    }

    fn builder(&self) -> Builder {
        Builder {
            slot: self.slot.clone(),
            snapshots: self.snapshots.clone(),
        }
    }
}

/// The newest snapshot in `dir`: its description and its file.
fn newest_snapshot(dir: &Path) -> std::io::Result<Option<(SnapshotMeta<u64, BasicNode>, PathBuf)>> {
    let mut newest: Option<(SnapshotMeta<u64, BasicNode>, PathBuf)> = None;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        let Ok(meta) = serde_json::from_slice::<SnapshotMeta<u64, BasicNode>>(&text) else {
            continue;
        };
        let file = path.with_extension("redb");
        if !file.exists() {
            continue;
        }
        if newest
            .as_ref()
            .is_none_or(|(m, _)| m.last_log_id < meta.last_log_id)
        {
            newest = Some((meta, file));
        }
    }
    Ok(newest)
}

/// Keeps `file` (with its description `meta`) as the newest snapshot in
/// `dir` and removes the older ones.
fn keep_snapshot(
    dir: &Path,
    meta: &SnapshotMeta<u64, BasicNode>,
    file: &Path,
) -> std::io::Result<()> {
    let name = format!("snapshot-{}", meta.snapshot_id);
    let target = dir.join(&name).with_extension("redb");
    std::fs::rename(file, &target)?;
    let described = dir.join(&name).with_extension("json");
    write_durably(&described, &serde_json::to_vec(meta)?)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if stem.starts_with("snapshot-") && stem != name {
            std::fs::remove_file(&path)?;
        }
    }
    proto::durable::sync_dir(dir)
}

/// Writes `bytes` to `path` whole or not at all, synced.
pub(super) fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let part = path.with_extension("part");
    let mut file = std::fs::File::create(&part)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&part, path)
}

async fn open_snapshot(path: &Path) -> Result<Box<tokio::fs::File>> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
    Ok(Box::new(file))
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotBuilder = Builder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>)> {
        Ok((self.applied.log_id, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let slot = self.slot.clone();
        let mut applied = self.applied.clone();
        let ran = tokio::task::spawn_blocking(move || {
            let _applying = slot.apply.lock();
            slot.intact()?;
            // Cleared once every entry is applied: an apply that fails or
            // panics part-way leaves the store ahead of `slot.applied`.
            slot.damage_quietly("an apply did not finish");
            let state = slot.current();
            let mut answers = Vec::with_capacity(entries.len());
            for entry in entries {
                let answer = match entry.payload {
                    EntryPayload::Blank => Applied::Nothing,
                    EntryPayload::Membership(membership) => {
                        applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                        Applied::Nothing
                    }
                    EntryPayload::Normal(command) => {
                        apply_command(&state, &applied, entry.log_id, command)?
                    }
                };
                applied.log_id = Some(entry.log_id);
                applied.partly = None;
                answers.push(answer);
            }
            *slot.applied.lock() = applied.clone();
            *slot.damaged.lock() = None;
            let sync_due = {
                let mut synced = slot.synced.lock();
                let due = synced.elapsed() >= SYNC_INTERVAL;
                if due {
                    *synced = std::time::Instant::now();
                }
                due
            };
            Ok::<_, StorageError<u64>>((answers, applied, sync_due))
        })
        .await
        .map_err(|e| state_machine_failed(ErrorVerb::Write, e))?;
        let (answers, applied, sync_due) = ran?;
        self.applied = applied;
        if sync_due {
            // Weak: a sync still queued does not keep a stopped member's
            // store open.
            let slot = Arc::downgrade(&self.slot);
            tokio::task::spawn_blocking(move || {
                if let Some(slot) = slot.upgrade() {
                    sync_store(&slot);
                }
            });
        }
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Builder {
        self.builder()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>> {
        let path = self.snapshots.join(INCOMING);
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .await
            .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<()> {
        snapshot
            .sync_all()
            .await
            .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        drop(snapshot);
        let slot = self.slot.clone();
        let dir = self.snapshots.clone();
        let meta = meta.clone();
        let installed = tokio::task::spawn_blocking(move || {
            let _applying = slot.apply.lock();
            keep_snapshot(&dir, &meta, &dir.join(INCOMING))?;
            let (_, file) = newest_snapshot(&dir)?
                .ok_or_else(|| std::io::Error::other("the snapshot just kept is gone"))?;
            let state = slot.current();
            state
                .store
                .replace_file(&file)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let reloaded = MetaState::load(state.config.clone(), state.store.clone())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            *slot.state.write() = Arc::new(reloaded);
            let applied = AppliedRecord::load(&slot.current())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            *slot.applied.lock() = applied.clone();
            // The store is the snapshot now, and its record is what it holds.
            *slot.damaged.lock() = None;
            // Nor is it a lone meta's any more: a member that lost its log
            // but kept its store was marked as one, and the mark would make
            // each restart wait to lead and add peers. Not worth failing the
            // installed snapshot for.
            if let Err(e) = super::unmark_adopted_store(&state.config.data_dir) {
                tracing::warn!(error = %e, "could not remove the mark of a lone meta's store");
            }
            tracing::info!(snapshot = %meta.snapshot_id, "meta store replaced by a snapshot from the leader");
            Ok::<_, std::io::Error>(applied)
        })
        .await
        .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?
        .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        self.applied = installed;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>> {
        let newest = newest_snapshot(&self.snapshots)
            .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        match newest {
            Some((meta, file)) => Ok(Some(Snapshot {
                meta,
                snapshot: open_snapshot(&file).await?,
            })),
            None => Ok(None),
        }
    }
}

/// Takes snapshots: copies of the store file between two batches.
pub(crate) struct Builder {
    slot: Arc<StateSlot>,
    snapshots: PathBuf,
}

impl RaftSnapshotBuilder<TypeConfig> for Builder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>> {
        let slot = self.slot.clone();
        let dir = self.snapshots.clone();
        let built = tokio::task::spawn_blocking(move || {
            let _applying = slot.apply.lock();
            slot.intact()?;
            let state = slot.current();
            let applied = slot.applied.lock().clone();
            // Everything applied is durable in the file before it is copied,
            // with the record of whole entries the snapshot describes.
            state
                .store
                .sync_applied(applied.mark()?)
                .map_err(|e| state_machine_failed(ErrorVerb::Write, e))?;
            let snapshot_id = match applied.log_id {
                Some(id) => format!("{}-{}", id.leader_id, id.index),
                None => "empty".to_string(),
            };
            let meta = SnapshotMeta {
                last_log_id: applied.log_id,
                last_membership: applied.membership.clone(),
                snapshot_id,
            };
            let copy = dir.join("building.redb");
            let copied = (|| {
                std::fs::copy(state.config.data_dir.join(DATABASE_FILE), &copy)?;
                std::fs::File::open(&copy)?.sync_all()?;
                keep_snapshot(&dir, &meta, &copy)?;
                newest_snapshot(&dir)
            })()
            .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
            let (_, file) = copied.ok_or_else(|| {
                failed(
                    ErrorSubject::Snapshot(None),
                    ErrorVerb::Write,
                    "the snapshot just taken is gone",
                )
            })?;
            tracing::info!(snapshot = %meta.snapshot_id, "meta snapshot taken");
            Ok::<_, StorageError<u64>>((meta, file))
        })
        .await
        .map_err(|e| failed(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        let (meta, file) = built?;
        Ok(Snapshot {
            meta,
            snapshot: open_snapshot(&file).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MetaConfig;

    fn reservation(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Command {
                now: 1_780_000_000_000,
                seed: crate::entropy::new_seed(),
                action: Action::ReserveBlockIds,
            }),
        }
    }

    /// The start of the newest range of block ids reserved.
    fn counter(slot: &StateSlot) -> u64 {
        crate::placement::reservations(&slot.current().store)
            .unwrap()
            .last()
            .map_or(0, |(_, start)| *start)
    }

    #[tokio::test]
    async fn a_store_out_of_step_with_its_log_is_neither_applied_to_synced_nor_copied() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open_replicated(&dir.path().join(DATABASE_FILE)).unwrap();
        let state = MetaState::load(MetaConfig::new(dir.path()), Arc::new(store)).unwrap();
        let slot = Arc::new(StateSlot::new(Arc::new(state)));
        let mut machine = Machine::open(slot.clone(), dir.path()).unwrap();
        let answers = machine.apply(vec![reservation(1)]).await.unwrap();
        assert!(
            matches!(answers[..], [Applied::Reserved(Ok(_))]),
            "{answers:?}"
        );
        sync_store(&slot);
        let synced = AppliedRecord::load(&slot.current()).unwrap();
        assert_eq!(synced.log_id.map(|id| id.index), Some(1));
        let reserved = counter(&slot);

        slot.damage("a sync failed");
        assert!(machine.apply(vec![reservation(2)]).await.is_err());
        assert_eq!(counter(&slot), reserved, "applied to a damaged store");
        sync_store(&slot);
        assert_eq!(
            AppliedRecord::load(&slot.current()).unwrap().log_id,
            synced.log_id
        );
        assert!(machine.builder().build_snapshot().await.is_err());
    }
}
