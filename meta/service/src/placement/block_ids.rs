//! Fresh block ids from a persistent counter.
//!
//! A lone meta reserves ids in its store ahead of handing them out. A
//! group's leader does the same through the log: an entry reserves the
//! next range of ids for the leader's term ([`reserve`]), and the leader
//! hands them out from memory without an entry each ([`BlockIds::take_granted`]),
//! so a PUT costs the log one entry (its commit), not two.

use crate::store::db::StoreError;
use crate::store::tables::{BLOCK_ID_RESERVATIONS, COUNTERS, NEXT_BLOCK};
use crate::store::Store;
use meta_api::{MetaError, UnixMillis};
use parking_lot::Mutex;
use proto::BlockId;
use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Block ids reserved per counter write: ids are handed out from memory and
/// the stored counter always stays past every id handed out, so a restart
/// skips at most this many ids and never reuses one.
const RESERVED_IDS: u64 = 1024;

/// The first id ever handed out (0 is left unused so it never looks valid by accident).
const FIRST_BLOCK_ID: u64 = 1;

/// Hands out block ids that are never reused.
pub(crate) struct BlockIds {
    /// (next id to hand out, first id not yet reserved in the store)
    range: Mutex<(u64, u64)>,
    /// A group leader's ids: what is left of the range the log reserved
    /// for it in its term, `start` the next to hand out.
    granted: Mutex<Option<ReservedIds>>,
}

/// Ids `start..end` reserved through a group's log for its leader in `term`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReservedIds {
    pub(crate) term: u64,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

/// Reserves the next [`RESERVED_IDS`] ids of a group member's store for
/// the leader of `term`, as of `now`, and records when: applied alike by
/// every member. The range is handed out only by that leader and only in
/// that term, and a leader reserves again only once its range is used up
/// (or in a new term, after the last leader's lease ended): so every id
/// below the new range's start was handed out by `now`, which is what the
/// orphan detector's clock learns from it. Reservations older than the
/// orphan `grace` date nothing still judged, except the newest of them.
pub(crate) fn reserve(
    store: &Store,
    term: u64,
    now: UnixMillis,
    grace: Duration,
) -> Result<ReservedIds, MetaError> {
    let cutoff = now.saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
    store.write(|txn| {
        let (start, end) = advance_counter(txn, RESERVED_IDS)?;
        let mut reservations = txn.open_table(BLOCK_ID_RESERVATIONS)?;
        let mut expired = Vec::new();
        for row in reservations.iter()? {
            let (first, time) = row?;
            if time.value() > cutoff {
                break;
            }
            expired.push(first.value());
        }
        expired.pop();
        for first in expired {
            reservations.remove(first)?;
        }
        // A new term may have dated this bound already, earlier.
        if reservations.get(start)?.is_none() {
            reservations.insert(start, now)?;
        }
        Ok(ReservedIds { term, start, end })
    })
}

/// Dates every id of a group's store reserved so far as handed out by
/// `now`, a new leader's term beginning (applied alike by every member):
/// the ranges of earlier terms are handed out no more, so the orphan
/// detector may judge the ids of the last one too, which would otherwise
/// wait for the next reservation. Answers the first id not reserved.
pub(crate) fn close_reserved_ranges(
    store: &Store,
    now: UnixMillis,
) -> Result<Option<u64>, MetaError> {
    store.write(|txn| {
        let Some(end) = txn
            .open_table(COUNTERS)?
            .get(NEXT_BLOCK)?
            .map(|g| g.value())
        else {
            return Ok(None);
        };
        let mut reservations = txn.open_table(BLOCK_ID_RESERVATIONS)?;
        if reservations.get(end)?.is_none() {
            reservations.insert(end, now)?;
        }
        Ok(Some(end))
    })
}

/// Moves the stored counter `by` ids on: the ids `start..end` it passed.
fn advance_counter(txn: &WriteTransaction, by: u64) -> Result<(u64, u64), StoreError> {
    let mut counters = txn.open_table(COUNTERS)?;
    let start = counters
        .get(NEXT_BLOCK)?
        .map_or(FIRST_BLOCK_ID, |g| g.value())
        .max(FIRST_BLOCK_ID);
    let end = start
        .checked_add(by)
        .ok_or_else(|| StoreError::Corrupt("block ids exhausted".into()))?;
    counters.insert(NEXT_BLOCK, end)?;
    Ok((start, end))
}

/// Every reservation recorded, as (time, start), oldest first.
pub(crate) fn reservations(store: &Store) -> Result<Vec<(UnixMillis, u64)>, MetaError> {
    store.read(|txn| {
        let mut out = Vec::new();
        for row in txn.open_table(BLOCK_ID_RESERVATIONS)?.iter()? {
            let (start, time) = row?;
            out.push((time.value(), start.value()));
        }
        Ok(out)
    })
}

impl BlockIds {
    /// Starts after every id reserved before.
    pub(crate) fn load(store: &Store) -> Result<Self, MetaError> {
        let stored = store.read(|txn| {
            let counters = txn.open_table(COUNTERS)?;
            let value = counters.get(NEXT_BLOCK)?.map(|g| g.value());
            Ok(value)
        })?;
        let start = stored.unwrap_or(FIRST_BLOCK_ID).max(FIRST_BLOCK_ID);
        Ok(Self {
            range: Mutex::new((start, start)),
            granted: Mutex::new(None),
        })
    }

    /// Makes `ids` the ones [`BlockIds::take_granted`] hands out in their
    /// term, unless a range of a later term is held already.
    pub(crate) fn grant(&self, ids: ReservedIds) {
        let mut granted = self.granted.lock();
        if granted.is_none_or(|held| held.term <= ids.term) {
            *granted = Some(ids);
        }
    }

    /// The next id of the range granted in `term`, or None when it is used
    /// up or was granted in another term: the leader then reserves again.
    pub(crate) fn take_granted(&self, term: u64) -> Option<BlockId> {
        let mut granted = self.granted.lock();
        let ids = granted.as_mut().filter(|ids| ids.term == term)?;
        if ids.start >= ids.end {
            return None;
        }
        ids.start += 1;
        Some(BlockId(ids.start - 1))
    }

    /// A fresh block id.
    pub(crate) fn next(&self, store: &Store) -> Result<BlockId, MetaError> {
        if store.is_replicated() {
            // An allocation applied as an entry of its own (a log written
            // before leaders reserved ranges): every member must hand out
            // the same id whenever it loaded, so the stored counter is the
            // next id itself.
            return store.write(|txn| Ok(BlockId(advance_counter(txn, 1)?.0)));
        }
        let mut range = self.range.lock();
        let (next, limit) = *range;
        if next >= limit {
            let new_limit = next
                .checked_add(RESERVED_IDS)
                .ok_or_else(|| StoreError::Corrupt("block ids exhausted".into()))?;
            store.write(|txn| {
                txn.open_table(COUNTERS)?.insert(NEXT_BLOCK, new_limit)?;
                Ok(())
            })?;
            range.1 = new_limit;
        }
        range.0 = next + 1;
        Ok(BlockId(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_hands_out_only_its_terms_range_and_reservations_never_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open_replicated(&dir.path().join("m.redb")).unwrap();
        let grace = Duration::from_secs(60);
        let ids = BlockIds::load(&store).unwrap();
        assert_eq!(ids.take_granted(1), None, "nothing granted yet");
        let first = reserve_as_entry(&store, 1, 1_000, grace).unwrap();
        ids.grant(first);
        assert_eq!(ids.take_granted(2), None, "a range serves only its term");
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = ids.take_granted(1) {
            assert!((first.start..first.end).contains(&id.0));
            assert!(seen.insert(id));
        }
        assert_eq!(seen.len() as u64, RESERVED_IDS);
        let second = reserve_as_entry(&store, 2, 2_000, grace).unwrap();
        assert_eq!(second.start, first.end);
        // A range of an earlier term does not replace a later one.
        ids.grant(second);
        ids.grant(first);
        assert_eq!(ids.take_granted(2), Some(BlockId(second.start)));
        // A new term dates the last range, whose ids nobody hands out now.
        let closed = crate::store::db::applying(("test", b"{}".to_vec()), || {
            close_reserved_ranges(&store, 2_500)
        })
        .unwrap();
        assert_eq!(closed, Some(second.end));
        assert_eq!(
            reservations(&store).unwrap(),
            vec![
                (1_000, first.start),
                (2_000, second.start),
                (2_500, second.end)
            ]
        );
        // Old reservations are dropped, all but the newest past the grace.
        let late = 1_000 + 10 * 60_000;
        reserve_as_entry(&store, 3, late, grace).unwrap();
        assert_eq!(reservations(&store).unwrap(), vec![(2_500, second.end)]);
    }

    /// [`reserve`] as a group member applies it: as an entry.
    fn reserve_as_entry(
        store: &Store,
        term: u64,
        now: UnixMillis,
        grace: Duration,
    ) -> Result<ReservedIds, MetaError> {
        crate::store::db::applying(("test", b"{}".to_vec()), || {
            reserve(store, term, now, grace)
        })
    }

    #[test]
    fn block_ids_are_never_reused_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.redb");
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 {
            let store = crate::store::open(&path).unwrap();
            let ids = BlockIds::load(&store).unwrap();
            for _ in 0..(RESERVED_IDS + 3) {
                assert!(seen.insert(ids.next(&store).unwrap()));
            }
        }
    }
}
