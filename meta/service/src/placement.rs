//! Block placement: fresh block ids from a persistent counter, and the choice
//! of distinct healthy datanodes with free space for each new block (group),
//! least loaded first, ties broken at random so that load spreads.

use crate::store::db::StoreError;
use crate::store::tables::{COUNTERS, NEXT_BLOCK};
use crate::store::Store;
use meta_api::MetaError;
use parking_lot::Mutex;
use proto::{BlockId, DatanodeId, ReplicationConfig};
use rand::Rng;
use redb::ReadableTable;

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
        })
    }

    /// A fresh block id.
    pub(crate) fn next(&self, store: &Store) -> Result<BlockId, MetaError> {
        if store.is_replicated() {
            // A group's members must hand out the same ids whenever they
            // loaded: the stored counter is the next id itself.
            return store.write(|txn| {
                let mut counters = txn.open_table(COUNTERS)?;
                let next = counters
                    .get(NEXT_BLOCK)?
                    .map_or(FIRST_BLOCK_ID, |g| g.value())
                    .max(FIRST_BLOCK_ID);
                let after = next
                    .checked_add(1)
                    .ok_or_else(|| StoreError::Corrupt("block ids exhausted".into()))?;
                counters.insert(NEXT_BLOCK, after)?;
                Ok(BlockId(next))
            });
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

/// A datanode that may take a new block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) id: DatanodeId,
    pub(crate) addr: String,
    /// Lower is preferred: blocks' worth of used space plus blocks allocated
    /// since its last heartbeat.
    pub(crate) load: u64,
}

/// Picks `width` distinct candidates, least loaded first, ties at random.
pub(crate) fn choose(
    candidates: Vec<Candidate>,
    width: usize,
    rng: &mut (impl Rng + ?Sized),
) -> Result<Vec<Candidate>, MetaError> {
    if candidates.len() < width {
        return Err(MetaError::NotEnoughDatanodes {
            needed: width,
            available: candidates.len(),
        });
    }
    let mut keyed: Vec<(u64, u64, Candidate)> = candidates
        .into_iter()
        .map(|c| (c.load, rng.gen(), c))
        .collect();
    keyed.sort_by_key(|(load, tie, _)| (*load, *tie));
    Ok(keyed.into_iter().take(width).map(|(_, _, c)| c).collect())
}

/// Refuses configs no block group can have.
pub(crate) fn validate_replication(config: &ReplicationConfig) -> Result<(), MetaError> {
    let ok = match config {
        ReplicationConfig::Ec(l) => l.data > 0 && l.cell_size > 0 && l.width() <= 255,
        ReplicationConfig::Replicated { replicas } => *replicas > 0,
    };
    if ok {
        Ok(())
    } else {
        Err(MetaError::InvalidRequest(format!(
            "unusable replication config {config}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn candidate(id: &str, load: u64) -> Candidate {
        Candidate {
            id: DatanodeId(id.into()),
            addr: format!("{id}:1"),
            load,
        }
    }

    #[test]
    fn prefers_least_loaded_and_spreads_ties() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let nodes = vec![
            candidate("a", 5),
            candidate("b", 0),
            candidate("c", 0),
            candidate("d", 9),
            candidate("e", 0),
        ];
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..50 {
            let chosen = choose(nodes.clone(), 3, &mut rng).unwrap();
            let mut ids: Vec<&str> = chosen.iter().map(|c| c.id.0.as_str()).collect();
            firsts.insert(ids[0].to_string());
            ids.sort();
            assert_eq!(ids, ["b", "c", "e"]);
        }
        assert!(
            firsts.len() > 1,
            "ties must not always resolve the same way"
        );
    }

    #[test]
    fn too_few_candidates() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let err = choose(vec![candidate("a", 0)], 2, &mut rng).unwrap_err();
        assert_eq!(
            err,
            MetaError::NotEnoughDatanodes {
                needed: 2,
                available: 1
            }
        );
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
