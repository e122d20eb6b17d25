//! The balancer's plan: which block files move from datanodes whose use is
//! above the mean to those below it, as HDFS's balancer pairs them, until
//! every datanode's use is within the threshold of the mean.
//!
//! A datanode's use is the bytes the records list on it over its capacity
//! (not what its disk reports, which still counts copies waiting for their
//! deletion, so a move is counted once, when the group adopts the copy).
//! Datanodes are over-utilised (above the mean by more than the
//! threshold), above, below, or under-utilised; moves pair over with under,
//! then over with below, then above with under, each pair moving at most
//! what brings one of them to the mean. Every move keeps its group's
//! placement (checked by the caller's `fits`: the target holds nothing of
//! the group, no failure domain gets more than the rule allows, and the
//! group touches no fewer domains). The moves themselves are queued and run
//! as repairs that copy (see `crate::ops::repairs`).

use crate::store::repairs::GroupOwner;
use meta_api::{BalanceState, DatanodeUse, UnixMillis};
use parking_lot::Mutex;
use proto::{BlockId, DatanodeId, ReplicationConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// The balancer's settings, kept in the store (`tessera admin balance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BalancerSettings {
    /// Whether it runs.
    pub(crate) enabled: bool,
    /// Largest distance of a datanode's use from the mean, in percentage points.
    pub(crate) threshold_percent: u32,
    /// Block file bytes handed out a second in the whole cluster (0: no limit).
    pub(crate) bandwidth: u64,
}

/// Default threshold: 10 percentage points, as HDFS's and Ozone's balancers.
pub const DEFAULT_THRESHOLD_PERCENT: u32 = 10;
/// Default bandwidth: 64 MiB/s for the whole cluster (see docs/benchmarks.md
/// for what foreground reads lose to it).
pub const DEFAULT_BANDWIDTH: u64 = 64 * 1024 * 1024;
/// Moves planned at most per round (each round follows a redundancy scan).
pub(crate) const MAX_MOVES_PER_ROUND: usize = 512;
/// Bytes planned at most per round.
pub(crate) const MAX_BYTES_PER_ROUND: u64 = 16 * 1024 * 1024 * 1024;
/// Block files a scan keeps per datanode for the balancer to pick from.
pub(crate) const MOVABLE_PER_DATANODE: usize = 256;

impl Default for BalancerSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold_percent: DEFAULT_THRESHOLD_PERCENT,
            bandwidth: DEFAULT_BANDWIDTH,
        }
    }
}

/// A datanode the balancer may move block files off or onto: healthy and
/// in service, with a capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Share {
    pub(crate) id: DatanodeId,
    pub(crate) capacity: u64,
    /// Bytes the records list on it.
    pub(crate) listed: u64,
}

/// A block file of a whole, well placed group, which may move.
#[derive(Clone, Debug)]
pub(crate) struct MovableCell {
    pub(crate) block: BlockId,
    pub(crate) index: u8,
    pub(crate) length: u64,
    pub(crate) owner: GroupOwner,
    pub(crate) config: ReplicationConfig,
    /// Every datanode holding a block file of the group.
    pub(crate) holders: Vec<DatanodeId>,
}

/// One planned move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlannedMove {
    pub(crate) block: BlockId,
    pub(crate) index: u8,
    pub(crate) from: DatanodeId,
    pub(crate) to: DatanodeId,
    pub(crate) length: u64,
    pub(crate) owner: GroupOwner,
    pub(crate) config: ReplicationConfig,
}

/// A round's outcome.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) moves: Vec<PlannedMove>,
    pub(crate) state: BalanceState,
}

/// Where a datanode's use stands against the mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Over,
    Above,
    Below,
    Under,
}

/// Use as a fraction of capacity, times 2^32 (integers: members plan alike).
fn scaled_use(listed: u64, capacity: u64) -> u128 {
    (u128::from(listed) << 32) / u128::from(capacity.max(1))
}

/// Plans up to a round's moves among `nodes`, picking block files from
/// `movable` (per source datanode); `fits(cell, from, to)` says whether a
/// move keeps the group's placement.
pub(crate) fn plan(
    nodes: &[Share],
    movable: &BTreeMap<DatanodeId, Vec<MovableCell>>,
    threshold_percent: u32,
    fits: impl Fn(&MovableCell, &DatanodeId, &DatanodeId) -> bool,
) -> Plan {
    let mut nodes: Vec<Share> = nodes.iter().filter(|n| n.capacity > 0).cloned().collect();
    let total_listed: u128 = nodes.iter().map(|n| u128::from(n.listed)).sum();
    let total_capacity: u128 = nodes.iter().map(|n| u128::from(n.capacity)).sum();
    if nodes.len() < 2 || total_capacity == 0 {
        return Plan {
            moves: Vec::new(),
            state: BalanceState::Balanced,
        };
    }
    let mean = (total_listed << 32) / total_capacity;
    let threshold = (u128::from(threshold_percent.min(100)) << 32) / 100;
    let class = |n: &Share| {
        let u = scaled_use(n.listed, n.capacity);
        if u > mean + threshold {
            Class::Over
        } else if u > mean {
            Class::Above
        } else if u + threshold < mean {
            Class::Under
        } else {
            Class::Below
        }
    };
    let outside = |nodes: &[Share]| {
        nodes
            .iter()
            .any(|n| matches!(class(n), Class::Over | Class::Under))
    };
    if !outside(&nodes) {
        return Plan {
            moves: Vec::new(),
            state: BalanceState::Balanced,
        };
    }
    // Bytes that bring node `n` to the mean, above (positive) or below it.
    let to_mean = |n: &Share| -> i128 {
        let at_mean = (mean * u128::from(n.capacity)) >> 32;
        i128::try_from(u128::from(n.listed)).unwrap_or(i128::MAX)
            - i128::try_from(at_mean).unwrap_or(i128::MAX)
    };
    let mut moves: Vec<PlannedMove> = Vec::new();
    let mut planned_bytes = 0u64;
    let mut taken: HashSet<BlockId> = HashSet::new();
    for (sources, targets) in [
        (Class::Over, Class::Under),
        (Class::Over, Class::Below),
        (Class::Above, Class::Under),
    ] {
        // Most used sources first; each block file to the target furthest
        // below the mean that can take it, so that moves spread over the
        // targets (each takes a few at once) rather than fill one by one.
        let mut from: Vec<usize> = (0..nodes.len())
            .filter(|&i| class(&nodes[i]) == sources)
            .collect();
        from.sort_by_key(|&i| std::cmp::Reverse(scaled_use(nodes[i].listed, nodes[i].capacity)));
        for s in from {
            let Some(cells) = movable.get(&nodes[s].id) else {
                continue;
            };
            for cell in cells {
                if moves.len() >= MAX_MOVES_PER_ROUND || planned_bytes >= MAX_BYTES_PER_ROUND {
                    return Plan {
                        moves,
                        state: BalanceState::Moving,
                    };
                }
                if class(&nodes[s]) != sources {
                    break;
                }
                let length = i128::from(cell.length);
                if cell.length == 0 || length > to_mean(&nodes[s]) || taken.contains(&cell.block) {
                    continue;
                }
                let target = (0..nodes.len())
                    .filter(|&t| class(&nodes[t]) == targets && -to_mean(&nodes[t]) >= length)
                    .filter(|&t| fits(cell, &nodes[s].id, &nodes[t].id))
                    .min_by_key(|&t| (scaled_use(nodes[t].listed, nodes[t].capacity), t));
                let Some(t) = target else {
                    continue;
                };
                taken.insert(cell.block);
                nodes[s].listed -= cell.length;
                nodes[t].listed += cell.length;
                planned_bytes += cell.length;
                moves.push(PlannedMove {
                    block: cell.block,
                    index: cell.index,
                    from: nodes[s].id.clone(),
                    to: nodes[t].id.clone(),
                    length: cell.length,
                    owner: cell.owner.clone(),
                    config: cell.config,
                });
            }
        }
    }
    let state = if !moves.is_empty() {
        BalanceState::Moving
    } else if outside(&nodes) {
        BalanceState::Stuck
    } else {
        BalanceState::Balanced
    };
    Plan { moves, state }
}

/// What the balancer did since meta started, in memory (a new leader
/// starts counting again; its queued moves are in the store).
#[derive(Default)]
pub(crate) struct BalanceBook {
    progress: Mutex<Progress>,
}

#[derive(Default)]
struct Progress {
    /// None until the first round.
    state: Option<BalanceState>,
    moved: u64,
    moved_bytes: u64,
    failed: u64,
    last_round: UnixMillis,
    /// Each datanode's share, from the last scan.
    shares: Vec<DatanodeUse>,
    /// Bytes the balancer may still hand out (below 0: in debt), and when
    /// they were last topped up.
    tokens: i128,
    topped_up: UnixMillis,
}

/// What [`BalanceBook::progress`] answers.
pub(crate) struct BalanceProgress {
    pub(crate) state: BalanceState,
    pub(crate) moved: u64,
    pub(crate) moved_bytes: u64,
    pub(crate) failed: u64,
    pub(crate) last_round: UnixMillis,
    pub(crate) shares: Vec<DatanodeUse>,
}

impl BalanceBook {
    /// Records a round that found `shares` and ended in `state` (a round
    /// that planned nothing new because moves are still queued passes None).
    pub(crate) fn round(
        &self,
        shares: Vec<DatanodeUse>,
        state: Option<BalanceState>,
        now: UnixMillis,
    ) {
        let mut p = self.progress.lock();
        p.shares = shares;
        if let Some(state) = state {
            p.state = Some(state);
            if state == BalanceState::Moving {
                p.last_round = now;
            }
        }
    }

    /// The balancer was turned off (or on: waiting for its first round).
    pub(crate) fn set_state(&self, state: BalanceState) {
        self.progress.lock().state = Some(state);
    }

    /// Whether a move of `bytes` may be handed out now under `bandwidth`
    /// bytes a second (0: no limit); if so, its bytes are spent. Up to a
    /// second's worth accrues while nothing is handed out.
    pub(crate) fn spend(&self, bytes: u64, bandwidth: u64, now: UnixMillis) -> bool {
        if bandwidth == 0 {
            return true;
        }
        let mut p = self.progress.lock();
        let elapsed = i128::from(now.saturating_sub(p.topped_up).max(0));
        p.topped_up = now;
        let rate = i128::from(bandwidth);
        p.tokens = (p.tokens + rate * elapsed / 1000).min(rate);
        if p.tokens <= 0 {
            return false;
        }
        p.tokens -= i128::from(bytes);
        true
    }

    /// A move ended.
    pub(crate) fn finished(&self, bytes: u64, failed: bool) {
        let mut p = self.progress.lock();
        if failed {
            p.failed += 1;
        } else {
            p.moved += 1;
            p.moved_bytes += bytes;
        }
    }

    pub(crate) fn progress(&self) -> BalanceProgress {
        let p = self.progress.lock();
        BalanceProgress {
            state: p.state.unwrap_or(BalanceState::Waiting),
            moved: p.moved,
            moved_bytes: p.moved_bytes,
            failed: p.failed,
            last_round: p.last_round,
            shares: p.shares.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn dn(id: &str) -> DatanodeId {
        DatanodeId(id.into())
    }

    fn share(id: &str, listed: u64) -> Share {
        Share {
            id: dn(id),
            capacity: 10 * GIB,
            listed,
        }
    }

    /// `count` block files of `size` on `id`, of groups numbered from `first`.
    fn cells(id: &str, first: u64, count: u64, size: u64) -> Vec<MovableCell> {
        (first..first + count)
            .map(|b| MovableCell {
                block: BlockId(b),
                index: 0,
                length: size,
                owner: GroupOwner {
                    bucket: "b".into(),
                    key: format!("k{b}"),
                    part: None,
                    version: 0,
                },
                config: ReplicationConfig::RS_3_2,
                holders: vec![dn(id)],
            })
            .collect()
    }

    #[test]
    fn two_new_datanodes_take_from_five_full_ones_until_all_are_within_the_threshold() {
        let mut nodes: Vec<Share> = (0..5).map(|i| share(&format!("old{i}"), 4 * GIB)).collect();
        nodes.push(share("new0", 0));
        nodes.push(share("new1", 0));
        let movable: BTreeMap<DatanodeId, Vec<MovableCell>> = (0..5)
            .map(|i| {
                (
                    dn(&format!("old{i}")),
                    cells(&format!("old{i}"), i * 1000, 200, 64 * MIB),
                )
            })
            .collect();
        let plan = super::plan(&nodes, &movable, 10, |_, _, _| true);
        assert_eq!(plan.state, BalanceState::Moving);
        // Apply the plan: everybody within 10 points of the mean (28.6%).
        for m in &plan.moves {
            let from = nodes.iter().position(|n| n.id == m.from).unwrap();
            let to = nodes.iter().position(|n| n.id == m.to).unwrap();
            nodes[from].listed -= m.length;
            nodes[to].listed += m.length;
            assert!(m.to.0.starts_with("new") && m.from.0.starts_with("old"));
        }
        // Both new datanodes take moves from the first ones on.
        let first: HashSet<&str> = plan.moves[..4].iter().map(|m| m.to.0.as_str()).collect();
        assert_eq!(first.len(), 2, "{:?}", &plan.moves[..4]);
        let mean = 20.0 * GIB as f64 / (70.0 * GIB as f64);
        for n in &nodes {
            let u = n.listed as f64 / n.capacity as f64;
            assert!(
                (u - mean).abs() <= 0.10,
                "{} at {u:.3}, mean {mean:.3}",
                n.id
            );
        }
        let again = super::plan(&nodes, &movable, 10, |_, _, _| true);
        assert_eq!(again.state, BalanceState::Balanced);
        assert!(again.moves.is_empty());
    }

    #[test]
    fn the_bandwidth_lets_a_seconds_worth_through_and_accrues_no_more() {
        let book = BalanceBook::default();
        assert!(book.spend(u64::MAX, 0, 0), "no limit");
        // Topped up at the first call: a second's worth after a long pause.
        assert!(book.spend(60 * MIB, 64 * MIB, 100_000));
        assert!(book.spend(60 * MIB, 64 * MIB, 100_000), "4 MiB left");
        assert!(!book.spend(MIB, 64 * MIB, 100_000), "in debt by 56 MiB");
        assert!(
            !book.spend(MIB, 64 * MIB, 100_500),
            "32 MiB back: still in debt"
        );
        assert!(book.spend(MIB, 64 * MIB, 101_000));
        book.finished(10, false);
        book.finished(99, true);
        let p = book.progress();
        assert_eq!((p.moved, p.moved_bytes, p.failed), (1, 10, 1));
        assert_eq!(p.state, BalanceState::Waiting);
    }

    #[test]
    fn moves_that_break_placement_are_not_planned_and_the_balancer_says_it_is_stuck() {
        let nodes = vec![share("a", 8 * GIB), share("b", 0)];
        let movable: BTreeMap<DatanodeId, Vec<MovableCell>> =
            [(dn("a"), cells("a", 0, 10, 64 * MIB))].into();
        let plan = super::plan(&nodes, &movable, 10, |_, _, _| false);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.state, BalanceState::Stuck);
    }

    #[test]
    fn a_balanced_cluster_plans_nothing_and_no_group_moves_twice() {
        let nodes = vec![share("a", 5 * GIB), share("b", 4 * GIB + 512 * MIB)];
        let plan = super::plan(&nodes, &BTreeMap::new(), 10, |_, _, _| true);
        assert_eq!(plan.state, BalanceState::Balanced);
        // One group's block files on both sources: it moves once a round.
        let nodes = vec![share("a", 9 * GIB), share("b", 9 * GIB), share("c", 0)];
        let mut shared = cells("a", 0, 1, MIB);
        shared[0].holders.push(dn("b"));
        let mut on_b = shared.clone();
        on_b[0].index = 1;
        let movable: BTreeMap<DatanodeId, Vec<MovableCell>> =
            [(dn("a"), shared), (dn("b"), on_b)].into();
        let plan = super::plan(&nodes, &movable, 10, |_, _, _| true);
        assert_eq!(plan.moves.len(), 1);
    }
}
