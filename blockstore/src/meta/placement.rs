//! Block placement: fresh block ids from a persistent counter, and the choice
//! of distinct healthy datanodes with free space for each new block (group),
//! least loaded first, ties broken at random so that load spreads.

use super::api::MetaError;
use super::service::Inner;
use super::store::{Store, COUNTERS, NEXT_BLOCK};
use super::types::{BlockGroup, DatanodeState, ReplicaLocation, UnixMillis};
use crate::ids::{BlockId, DatanodeId};
use crate::layout::ReplicationConfig;
use parking_lot::Mutex;
use rand::Rng;

/// Block ids reserved per counter write: ids are handed out from memory and
/// the stored counter always stays past every id handed out, so a restart
/// skips at most this many ids and never reuses one.
const RESERVED_IDS: u64 = 1024;

/// The first id ever handed out (0 is left unused so it never looks valid by accident).
const FIRST_BLOCK_ID: u64 = 1;

/// Hands out block ids that are never reused.
pub(super) struct BlockIds {
    /// (next id to hand out, first id not yet reserved in the store)
    range: Mutex<(u64, u64)>,
}

impl BlockIds {
    /// Starts after every id reserved before.
    pub(super) fn load(store: &Store) -> Result<Self, MetaError> {
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
    pub(super) fn next(&self, store: &Store) -> Result<BlockId, MetaError> {
        let mut range = self.range.lock();
        let (next, limit) = *range;
        if next >= limit {
            let new_limit = next
                .checked_add(RESERVED_IDS)
                .ok_or_else(|| MetaError::Store("block ids exhausted".into()))?;
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
pub(super) struct Candidate {
    pub(super) id: DatanodeId,
    pub(super) addr: String,
    /// Lower is preferred: blocks' worth of used space plus blocks allocated
    /// since its last heartbeat.
    pub(super) load: u64,
}

/// Picks `width` distinct candidates, least loaded first, ties at random.
pub(super) fn choose(
    candidates: Vec<Candidate>,
    width: usize,
    rng: &mut impl Rng,
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
pub(super) fn validate_replication(config: &ReplicationConfig) -> Result<(), MetaError> {
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

impl Inner {
    /// A fresh block (group) on `config.width()` distinct healthy datanodes with
    /// free space, none of `exclude`.
    pub(super) fn allocate_block(
        &self,
        config: ReplicationConfig,
        exclude: &[DatanodeId],
        now: UnixMillis,
    ) -> Result<BlockGroup, MetaError> {
        validate_replication(&config)?;
        let block_size = self.config.block_size;
        let candidates: Vec<Candidate> = self
            .registry
            .snapshot(now, self.config.stale_after, self.config.dead_after)
            .into_iter()
            .filter(|n| n.record.state == DatanodeState::Healthy)
            .filter(|n| !exclude.contains(&n.record.id))
            // Capacity is what the datanode may still fill plus what it
            // uses; 0 (nothing measured) means full, never unlimited.
            .filter(|n| n.record.capacity.saturating_sub(n.record.used) >= block_size)
            .map(|n| Candidate {
                load: n.record.used / block_size + n.pending,
                id: n.record.id,
                addr: n.record.addr,
            })
            .collect();
        let chosen = choose(candidates, config.width(), &mut rand::thread_rng())?;
        let block = self.block_ids.next(&self.store)?;
        self.registry.note_allocated(chosen.iter().map(|c| &c.id));
        let replicas = chosen
            .into_iter()
            .enumerate()
            .map(|(i, c)| ReplicaLocation {
                index: match config {
                    // `validate_replication` keeps EC widths within u8.
                    ReplicationConfig::Ec(_) => u8::try_from(i).unwrap_or(u8::MAX),
                    ReplicationConfig::Replicated { .. } => 0,
                },
                datanode: c.id,
                addr: c.addr,
            })
            .collect();
        metrics::counter!("tessera_meta_blocks_allocated_total").increment(1);
        Ok(BlockGroup {
            block,
            length: 0,
            replicas,
        })
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
            let store = Store::open(&path).unwrap();
            let ids = BlockIds::load(&store).unwrap();
            for _ in 0..(RESERVED_IDS + 3) {
                assert!(seen.insert(ids.next(&store).unwrap()));
            }
        }
    }
}
