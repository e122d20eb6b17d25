//! Orphan blocks: block files on datanodes that no object, part or upload
//! references, left by a writer that died between writing its blocks and
//! committing them. Datanodes report the committed block files they hold
//! (in pieces); meta compares each piece against a snapshot of every block
//! the `objects` and `parts` tables reference and queues the unknown ones for
//! deletion through the deletion queue (they go out in heartbeat replies).
//!
//! A write in flight is protected by time: only blocks allocated longer ago
//! than the orphan grace period, and whose files are at least that old, are
//! candidates. Allocation times come from an [`AllocationClock`] fed by every
//! allocation; a write must commit within the grace period of allocating its
//! block. The reference snapshot is taken at a time `S` and judges only blocks
//! allocated before `S - grace`, so every such block whose write succeeded was
//! committed before the snapshot and is in it. A block id at or above the
//! stored allocation counter (never handed out by this meta) is never deleted.
//! In a group the clock is fed by the log's reservations of id ranges,
//! and rebuilt from their record on load, so every member dates ids alike.

use crate::store::db::StoreError;
use crate::store::tables::{COUNTERS, NEXT_BLOCK, OBJECTS, PARTS, VERSIONS};
use crate::store::Store;
use meta_api::{BlockGroup, MetaError, ReportedBlock, UnixMillis};
use parking_lot::Mutex;
use proto::{BlockId, BlockKey, DatanodeId};
use redb::ReadableTable;
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Longest a reference snapshot is reused before it is taken again.
const MAX_SNAPSHOT_AGE: Duration = Duration::from_secs(300);

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// When block ids were handed out: samples of (time, bound) where every id
/// below `bound` was allocated at or before `time`. One sample per second
/// at most, and only as far back as the grace period needs.
pub(crate) struct AllocationClock {
    grace: Duration,
    samples: Mutex<VecDeque<(UnixMillis, u64)>>,
}

impl AllocationClock {
    /// A clock that knows every id below `first_unused` (the stored counter
    /// at start) was allocated at or before `now`.
    pub(crate) fn start(grace: Duration, now: UnixMillis, first_unused: u64) -> Self {
        let mut samples = VecDeque::new();
        if first_unused > 0 {
            samples.push_back((now, first_unused));
        }
        Self {
            grace,
            samples: Mutex::new(samples),
        }
    }

    /// A clock that knows only `dated`: (time, bound) pairs, oldest first,
    /// each saying every id below `bound` was allocated at or before `time`.
    pub(crate) fn dated(grace: Duration, dated: &[(UnixMillis, u64)]) -> Self {
        let clock = Self::start(grace, 0, 0);
        for &(time, bound) in dated {
            clock.note_below(bound, time);
        }
        clock
    }

    /// Records that `block` was handed out by `now`.
    pub(crate) fn note(&self, block: BlockId, now: UnixMillis) {
        self.note_below(block.0.saturating_add(1), now);
    }

    /// Records that every id below `bound` was handed out by `now`.
    pub(crate) fn note_below(&self, bound: u64, now: UnixMillis) {
        let mut samples = self.samples.lock();
        let (last_time, last_bound) = samples.back().copied().unwrap_or((now, 0));
        let time = now.max(last_time);
        let bound = bound.max(last_bound);
        if time / 1000 == last_time / 1000 && !samples.is_empty() {
            if let Some(back) = samples.back_mut() {
                *back = (time, bound);
            }
        } else {
            samples.push_back((time, bound));
        }
        let cutoff = time.saturating_sub(millis(self.grace));
        // Keep the newest sample at or before the cutoff: horizons need it.
        while samples.len() >= 2 && samples[1].0 <= cutoff {
            samples.pop_front();
        }
    }

    /// Every id below the answer was allocated at or before `at - grace`.
    pub(crate) fn horizon(&self, at: UnixMillis) -> u64 {
        let cutoff = at.saturating_sub(millis(self.grace));
        self.samples
            .lock()
            .iter()
            .take_while(|(time, _)| *time <= cutoff)
            .last()
            .map_or(0, |(_, bound)| *bound)
    }
}

/// Every block file the records reference, per datanode, at one instant.
pub(crate) struct ReferenceSnapshot {
    /// When it was taken.
    taken: UnixMillis,
    /// Only ids below this are judged (allocated before `taken - grace`).
    horizon: u64,
    /// Referenced block files of each datanode, sorted.
    refs: HashMap<DatanodeId, Vec<BlockKey>>,
}

impl ReferenceSnapshot {
    /// Whether `key` on `datanode` is an orphan: old enough and unreferenced.
    pub(crate) fn is_orphan(
        &self,
        datanode: &DatanodeId,
        block: &ReportedBlock,
        grace: Duration,
    ) -> bool {
        if block.key.block.0 >= self.horizon || u128::from(block.age_ms) < grace.as_millis() {
            return false;
        }
        self.refs
            .get(datanode)
            .is_none_or(|keys| keys.binary_search(&block.key).is_err())
    }
}

/// Only the block groups of an object or part record.
#[derive(Deserialize)]
struct Groups {
    groups: Vec<BlockGroup>,
}

/// The orphan detector's state inside meta.
pub(crate) struct OrphanDetector {
    pub(crate) clock: AllocationClock,
    grace: Duration,
    snapshot: Mutex<Option<Arc<ReferenceSnapshot>>>,
}

impl OrphanDetector {
    /// A detector whose clock starts at `now` with the stored allocation
    /// counter; a group member's, from the reservations its store records
    /// (ids of the newest range may still be handed out, so `now` vouches
    /// for none of them).
    pub(crate) fn open(store: &Store, grace: Duration, now: UnixMillis) -> Result<Self, MetaError> {
        let reserved = if store.is_replicated() {
            crate::placement::reservations(store)?
        } else {
            Vec::new()
        };
        let clock = if reserved.is_empty() {
            AllocationClock::start(grace, now, stored_counter(store)?)
        } else {
            AllocationClock::dated(grace, &reserved)
        };
        Ok(Self {
            clock,
            grace,
            snapshot: Mutex::new(None),
        })
    }
}

impl OrphanDetector {
    /// The reference snapshot, taken again when older than half the grace
    /// period (at most `MAX_SNAPSHOT_AGE`).
    pub(crate) fn snapshot(
        &self,
        store: &Store,
        now: UnixMillis,
    ) -> Result<Arc<ReferenceSnapshot>, MetaError> {
        let grace = self.grace;
        let max_age = millis((grace / 2).min(MAX_SNAPSHOT_AGE));
        // Held while a snapshot is taken, so concurrent reports share one scan.
        let mut cached = self.snapshot.lock();
        if let Some(snapshot) = cached.as_ref() {
            let age = now.saturating_sub(snapshot.taken);
            if (0..=max_age).contains(&age) {
                return Ok(snapshot.clone());
            }
        }
        // The horizon is read before the transaction starts: every block
        // below it was allocated before `now - grace`, so its write, had it
        // succeeded, committed before `now` and is in the snapshot.
        let horizon = self.clock.horizon(now);
        let snapshot = Arc::new(take_snapshot(store, now, horizon)?);
        *cached = Some(snapshot.clone());
        Ok(snapshot)
    }
}

/// The stored allocation counter: every id ever handed out is below it.
fn stored_counter(store: &Store) -> Result<u64, MetaError> {
    store.read(|txn| {
        let counters = txn.open_table(COUNTERS)?;
        let value = counters.get(NEXT_BLOCK)?.map(|g| g.value());
        Ok(value.unwrap_or(0))
    })
}

/// Reads every referenced block file in one read transaction.
fn take_snapshot(
    store: &Store,
    taken: UnixMillis,
    horizon: u64,
) -> Result<ReferenceSnapshot, MetaError> {
    let (refs, counter) = store.read(|txn| {
        let mut refs: HashMap<DatanodeId, Vec<BlockKey>> = HashMap::new();
        for table in [OBJECTS, VERSIONS, PARTS] {
            for entry in txn.open_table(table)?.iter()? {
                let (_, value) = entry?;
                let record: Groups = serde_json::from_slice(value.value())
                    .map_err(|e| StoreError::Corrupt(format!("corrupt record: {e}")))?;
                for group in &record.groups {
                    for (key, replica) in group.block_keys() {
                        refs.entry(replica.datanode.clone()).or_default().push(key);
                    }
                }
            }
        }
        let counter = txn
            .open_table(COUNTERS)?
            .get(NEXT_BLOCK)?
            .map_or(0, |g| g.value());
        Ok((refs, counter))
    })?;
    let mut refs = refs;
    for keys in refs.values_mut() {
        keys.sort_unstable();
        keys.dedup();
    }
    Ok(ReferenceSnapshot {
        taken,
        // Ids at or above the stored counter were never handed out here.
        horizon: horizon.min(counter),
        refs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(60);
    const SECOND: UnixMillis = 1000;
    const T0: UnixMillis = 1_700_000_000_000;

    #[test]
    fn the_clock_vouches_only_for_ids_allocated_before_the_grace() {
        let clock = AllocationClock::start(GRACE, T0, 0);
        assert_eq!(clock.horizon(T0 + 3_600 * SECOND), 0);
        clock.note(BlockId(5), T0);
        clock.note(BlockId(9), T0 + 500);
        clock.note(BlockId(20), T0 + 30 * SECOND);
        let g = GRACE.as_millis() as i64;
        assert_eq!(clock.horizon(T0 + g - 1), 0);
        assert_eq!(clock.horizon(T0 + g + 500), 10);
        assert_eq!(clock.horizon(T0 + g + 30 * SECOND), 21);
        // Many later allocations keep the memory small.
        for i in 0..1000 {
            clock.note(BlockId(100 + i), T0 + 40 * SECOND + (i as i64) * SECOND);
        }
        assert!(
            clock.samples.lock().len() <= 62,
            "{}",
            clock.samples.lock().len()
        );
        assert!(clock.horizon(T0 + 1040 * SECOND + g) >= 1099);
        // After a restart every id below the stored counter counts as allocated
        // at the restart.
        let reopened = AllocationClock::start(GRACE, T0, 4096);
        assert_eq!(reopened.horizon(T0 + g - 1), 0);
        assert_eq!(reopened.horizon(T0 + g), 4096);
    }

    #[test]
    fn a_clock_rebuilt_from_reservations_dates_ids_as_the_live_one() {
        let g = GRACE.as_millis() as i64;
        let reservations = [(T0, 1), (T0 + 5 * SECOND, 1025), (T0 + 90 * SECOND, 2049)];
        let live = AllocationClock::start(GRACE, T0, 0);
        for (time, start) in reservations {
            live.note_below(start, time);
        }
        let rebuilt = AllocationClock::dated(GRACE, &reservations);
        for at in [
            T0 + g,
            T0 + g + 5 * SECOND,
            T0 + g + 89 * SECOND,
            T0 + g + 90 * SECOND,
        ] {
            assert_eq!(live.horizon(at), rebuilt.horizon(at), "at {at}");
        }
        // Ids of the newest range are never vouched for, however late.
        assert_eq!(rebuilt.horizon(T0 + 100 * g), 2049);
        assert_eq!(rebuilt.horizon(T0 + g + 5 * SECOND), 1025);
    }
}
