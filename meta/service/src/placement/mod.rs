//! Block placement: fresh block ids ([`block_ids`]), and the choice of the
//! datanodes that take the block files of a group: distinct healthy
//! datanodes with free space, spread over the failure domains their
//! locations make ([`domains`]), the least loaded first within a domain,
//! ties broken at random so that load spreads. New groups, short writes,
//! repairs, decommissions and moves all choose through [`choose`].

mod block_ids;
pub(crate) mod domains;

pub(crate) use block_ids::{close_reserved_ranges, reservations, reserve, BlockIds, ReservedIds};

use domains::Placed;
use meta_api::{Location, MetaError};
use proto::{DatanodeId, ReplicationConfig};
use rand::seq::SliceRandom;
use rand::Rng;

/// A datanode that may take a new block file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) id: DatanodeId,
    pub(crate) addr: String,
    pub(crate) location: Location,
    /// Lower is preferred: blocks' worth of used space plus blocks allocated
    /// since its last heartbeat.
    pub(crate) load: u64,
}

/// Picks `width` distinct candidates for block files of a group protected
/// by `config`, spread over the failure domains by the rule of
/// [`domains`], counting the block files the group keeps on `held` where
/// they stand; the order is shuffled, so that a group's first (data) cells
/// do not always fall in the same domain.
pub(crate) fn choose(
    held: &[Placed<'_>],
    candidates: Vec<Candidate>,
    width: usize,
    config: &ReplicationConfig,
    rng: &mut (impl Rng + ?Sized),
) -> Result<Vec<Candidate>, MetaError> {
    let placed: Vec<(Placed<'_>, u64)> = candidates
        .iter()
        .map(|c| {
            let at = Placed {
                id: &c.id,
                location: &c.location,
            };
            (at, c.load)
        })
        .collect();
    let Some(mut picked) = domains::spread(held, &placed, width, tolerance(config), rng) else {
        return Err(MetaError::NotEnoughDatanodes {
            needed: width,
            available: candidates.len(),
        });
    };
    picked.shuffle(rng);
    let mut slots: Vec<Option<Candidate>> = candidates.into_iter().map(Some).collect();
    Ok(picked.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// How many block files of a group protected by `config` may be lost with
/// the group still readable: the parity cells, or all replicas but one.
pub(crate) fn tolerance(config: &ReplicationConfig) -> usize {
    config.width().saturating_sub(config.readable_from())
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

    const RS: ReplicationConfig = ReplicationConfig::RS_3_2;

    fn candidate(id: &str, host: &str, load: u64) -> Candidate {
        Candidate {
            id: DatanodeId(id.into()),
            addr: format!("{host}:1"),
            location: Location::of_addr(&format!("{host}:1")),
            load,
        }
    }

    #[test]
    fn on_one_host_prefers_least_loaded_and_spreads_ties() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let nodes = vec![
            candidate("a", "h", 5),
            candidate("b", "h", 0),
            candidate("c", "h", 0),
            candidate("d", "h", 9),
            candidate("e", "h", 0),
        ];
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..50 {
            let chosen = choose(&[], nodes.clone(), 3, &RS, &mut rng).unwrap();
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
        let err = choose(&[], vec![candidate("a", "h", 0)], 2, &RS, &mut rng).unwrap_err();
        assert_eq!(
            err,
            MetaError::NotEnoughDatanodes {
                needed: 2,
                available: 1
            }
        );
    }

    #[test]
    fn group_members_choose_alike_from_the_same_seed() {
        let nodes: Vec<Candidate> = (0..9)
            .map(|i| candidate(&format!("d{i}"), &format!("h{}", i % 3), i))
            .collect();
        let pick = |seed| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            choose(&[], nodes.clone(), 5, &RS, &mut rng).unwrap()
        };
        assert_eq!(pick(11), pick(11));
    }

    #[test]
    fn tolerance_is_what_the_layout_can_lose() {
        assert_eq!(tolerance(&ReplicationConfig::RS_3_2), 2);
        assert_eq!(tolerance(&ReplicationConfig::REPLICATED_3), 2);
        assert_eq!(tolerance(&ReplicationConfig::REPLICATED_1), 0);
    }
}
