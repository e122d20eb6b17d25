//! Failure domains: the tree the datanodes' locations make (zone, rack,
//! host..., then the datanode), the spread of a group's block files over
//! it, top down, and the check that a group's block files stand as that
//! rule wants.
//!
//! The rule has two parts. First, no domain holds more of a group's block
//! files than the layout can lose (`tolerance`: the parity cells, or one
//! replica less than the count), at every level where the cluster has the
//! domains for it; where it has not (two zones for rs-3-2), that level is
//! left free, the widest first, so that a host is still protected when a
//! zone cannot be. Levels are counted from the datanode up (a location's
//! last name is its host, the one before its rack...), so that datanodes
//! labelled `/zone/rack/host` and others standing on `/host` alone share
//! the host level. Second, within that, the block files spread as evenly
//! as the tree allows (HDFS's rack-fault-tolerant rule applied at every
//! level): at each node the cells beneath it are shared among its children
//! by water-filling, up to what each child can hold under the first part,
//! a remainder going to the least loaded children (ties at random). The
//! block files a group already keeps count where they stand.
//!
//! A group is *misplaced* when some domain of a level the rule caps holds
//! more than `tolerance` of its block files: the cluster has the domains
//! to do better. Where it has not, nothing is gained by moving, and
//! nothing is flagged.

use meta_api::Location;
use proto::DatanodeId;
use rand::Rng;
use std::collections::BTreeMap;

/// One datanode in the tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed<'a> {
    pub(crate) id: &'a DatanodeId,
    pub(crate) location: &'a Location,
}

/// A child of a node of the tree: a domain (one level of a location) or a
/// datanode. Kept apart so that a datanode id never merges with a domain name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Branch<'a> {
    Domain(&'a str),
    Datanode(&'a str),
}

/// A datanode and its path down the tree.
#[derive(Clone, Debug)]
struct Leaf<'a> {
    path: Vec<Branch<'a>>,
    /// Keeps a block file of the group (fixed), or may take one.
    held: bool,
    /// Position among the candidates (spread) or holders (check).
    index: usize,
    load: u64,
}

fn leaf<'a>(placed: Placed<'a>, held: bool, index: usize, load: u64) -> Leaf<'a> {
    let mut path: Vec<Branch<'a>> = placed.location.levels().map(Branch::Domain).collect();
    path.push(Branch::Datanode(placed.id.0.as_str()));
    Leaf {
        path,
        held,
        index,
        load,
    }
}

/// A node of the tree: the root (level 0), a domain (its level counted
/// from 1 at the widest), or a datanode (`leaf`).
struct Node<'a> {
    /// Its path from the root, as `/zone/rack`.
    name: String,
    level: usize,
    /// Its level counted from the datanodes up: 0 for a datanode, 1 for a
    /// host (the last name of a location), 2 for a rack...; where the
    /// datanodes beneath stand at different depths, the nearest.
    rank: usize,
    /// Children in a fixed order (group members must choose alike).
    children: Vec<Node<'a>>,
    /// The datanode, for a leaf.
    leaf: Option<Leaf<'a>>,
    /// Block files of the group beneath it.
    held: usize,
}

impl<'a> Node<'a> {
    /// The tree of `leaves`, each path taken from `depth` on.
    fn build(name: String, level: usize, leaves: Vec<Leaf<'a>>) -> Self {
        let held = leaves.iter().filter(|l| l.held).count();
        let rank = leaves
            .iter()
            .map(|l| l.path.len().saturating_sub(level))
            .min()
            .unwrap_or(0);
        if let [only] = leaves.as_slice() {
            if only.path.len() == level {
                return Self {
                    name,
                    level,
                    rank,
                    children: Vec::new(),
                    leaf: leaves.into_iter().next(),
                    held,
                };
            }
        }
        let mut by_branch: BTreeMap<Branch<'a>, Vec<Leaf<'a>>> = BTreeMap::new();
        // A path that ended here is a datanode listed twice: it counts once.
        for leaf in leaves.into_iter().filter(|l| l.path.len() > level) {
            by_branch.entry(leaf.path[level]).or_default().push(leaf);
        }
        let children = by_branch
            .into_iter()
            .map(|(branch, leaves)| {
                let child = match branch {
                    Branch::Domain(d) => format!("{name}/{d}"),
                    Branch::Datanode(id) => format!("{name}/datanode:{id}"),
                };
                Self::build(child, level + 1, leaves)
            })
            .collect();
        Self {
            name,
            level,
            rank,
            children,
            leaf: None,
            held,
        }
    }

    fn root(leaves: Vec<Leaf<'a>>) -> Self {
        Self::build(String::new(), 0, leaves)
    }

    /// The widest domain rank beneath (a host is 1).
    fn widest_rank(&self) -> usize {
        self.children
            .iter()
            .map(|c| match c.leaf {
                Some(_) => 0,
                None => c.rank.max(c.widest_rank()),
            })
            .max()
            .unwrap_or(0)
    }

    /// Block files this node can hold under `caps`, wherever the group's
    /// stand now.
    fn capacity(&self, caps: &Caps) -> usize {
        if self.leaf.is_some() {
            return 1;
        }
        let sum: usize = self.children.iter().map(|c| c.capacity(caps)).sum();
        if caps.caps(self) {
            sum.min(caps.tolerance)
        } else {
            sum
        }
    }

    /// The mean load of the candidates beneath, scaled to compare without
    /// floating point; the largest for a node with none.
    fn mean_load(&self) -> u128 {
        let (mut total, mut count) = (0u128, 0u128);
        self.visit(&mut |leaf| {
            if !leaf.held {
                total += u128::from(leaf.load);
                count += 1;
            }
        });
        (total << 32).checked_div(count).unwrap_or(u128::MAX)
    }

    fn visit(&self, f: &mut impl FnMut(&Leaf<'a>)) {
        match &self.leaf {
            Some(leaf) => f(leaf),
            None => self.children.iter().for_each(|c| c.visit(f)),
        }
    }
}

/// The ranks at which a domain may hold at most `tolerance` block files.
struct Caps {
    tolerance: usize,
    /// `capped[rank]`; datanodes (rank 0) and the root are never capped.
    capped: Vec<bool>,
}

impl Caps {
    fn caps(&self, node: &Node<'_>) -> bool {
        node.level > 0
            && node.leaf.is_none()
            && self.capped.get(node.rank).copied().unwrap_or(false)
    }

    /// Every rank of `root` the cluster has the domains to cap for `cells`
    /// block files: all of them, less the widest ones as long as `cells`
    /// would not fit.
    fn for_tree(root: &Node<'_>, tolerance: usize, cells: usize) -> Self {
        let widest = root.widest_rank();
        let mut caps = Self {
            tolerance,
            capped: (0..=widest).map(|rank| rank > 0).collect(),
        };
        for rank in (1..=widest).rev() {
            if root.capacity(&caps) >= cells {
                break;
            }
            caps.capped[rank] = false;
        }
        caps
    }
}

/// The smallest level `t` at which `Σ clamp(t, floor, cap) >= k`: the most
/// cells an even share of `k` gives a child (children cannot hold more than
/// `cap`, nor fewer than `floor`). `k` must not exceed `Σ cap`.
fn water_level(k: usize, shares: &[(usize, usize)]) -> usize {
    let filled = |t: usize| -> usize { shares.iter().map(|&(f, c)| t.clamp(f, c.max(f))).sum() };
    let top = shares.iter().map(|&(_, c)| c).max().unwrap_or(0);
    (0..=top).find(|&t| filled(t) >= k).unwrap_or(top)
}

/// Picks `width` of `candidates` (datanodes that may take a block file of
/// the group, with their loads) by the rule, counting the group's `held`
/// block files where they stand; `tolerance` is what the group's layout
/// can lose. Answers positions in `candidates`; None when fewer than
/// `width` exist.
pub(crate) fn spread(
    held: &[Placed<'_>],
    candidates: &[(Placed<'_>, u64)],
    width: usize,
    tolerance: usize,
    rng: &mut (impl Rng + ?Sized),
) -> Option<Vec<usize>> {
    if candidates.len() < width {
        return None;
    }
    let mut leaves: Vec<Leaf<'_>> = held.iter().map(|p| leaf(*p, true, 0, 0)).collect();
    leaves.extend(
        candidates
            .iter()
            .enumerate()
            .map(|(i, (p, load))| leaf(*p, false, i, *load)),
    );
    let root = Node::root(leaves);
    let cells = held.len() + width;
    let caps = Caps::for_tree(&root, tolerance, cells);
    let mut chosen = Vec::with_capacity(width);
    share(&root, cells, &caps, rng, &mut chosen);
    Some(chosen)
}

/// Shares `k` block files among the children of `node`, then within each.
fn share(
    node: &Node<'_>,
    k: usize,
    caps: &Caps,
    rng: &mut (impl Rng + ?Sized),
    chosen: &mut Vec<usize>,
) {
    if k == 0 {
        return;
    }
    if let Some(leaf) = &node.leaf {
        if !leaf.held {
            chosen.push(leaf.index);
        }
        return;
    }
    let shares: Vec<(usize, usize)> = node
        .children
        .iter()
        .map(|c| (c.held, c.capacity(caps)))
        .collect();
    let t = water_level(k, &shares);
    let mut counts: Vec<usize> = shares
        .iter()
        .map(|&(f, c)| t.saturating_sub(1).clamp(f, c.max(f)))
        .collect();
    let given: usize = counts.iter().sum();
    if given < k {
        // The remainder goes one each to children that can take one more
        // at level t, the least loaded first, ties at random.
        let mut open: Vec<(u128, u64, usize)> = (0..shares.len())
            .filter(|&i| t.clamp(shares[i].0, shares[i].1.max(shares[i].0)) > counts[i])
            .map(|i| (node.children[i].mean_load(), rng.gen(), i))
            .collect();
        open.sort_unstable();
        for (_, _, i) in open.into_iter().take(k - given) {
            counts[i] += 1;
        }
    }
    for (child, count) in node.children.iter().zip(counts) {
        share(child, count, caps, rng, chosen);
    }
}

/// A domain holding more of a group's block files than the rule allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Overfull {
    /// The domain's path from the top, as `/zone/rack`.
    pub(crate) domain: String,
    /// The group's block files there.
    pub(crate) cells: usize,
    /// Positions in `holders` of the datanodes in that domain.
    pub(crate) holders: Vec<usize>,
}

/// Whether the block files on `holders` break the rule: a domain of a level
/// the rule caps (the cluster having the domains for it, counting `holders`
/// and the datanodes that may take a block file, `usable`) holds more than
/// `tolerance` of them. Answers the widest such domain.
pub(crate) fn overfull(
    holders: &[Placed<'_>],
    usable: &[Placed<'_>],
    tolerance: usize,
) -> Option<Overfull> {
    let mut leaves: Vec<Leaf<'_>> = holders
        .iter()
        .enumerate()
        .map(|(i, p)| leaf(*p, true, i, 0))
        .collect();
    leaves.extend(
        usable
            .iter()
            .filter(|u| !holders.iter().any(|h| h.id == u.id))
            .map(|p| leaf(*p, false, 0, 0)),
    );
    let root = Node::root(leaves);
    let caps = Caps::for_tree(&root, tolerance, holders.len());
    let mut found: Option<(usize, Overfull)> = None;
    check(&root, &caps, &mut found);
    found.map(|(_, overfull)| overfull)
}

/// Notes in `found` the widest overfull domain at or beneath `node`.
fn check(node: &Node<'_>, caps: &Caps, found: &mut Option<(usize, Overfull)>) {
    if node.leaf.is_some()
        || found
            .as_ref()
            .is_some_and(|(level, _)| *level <= node.level)
    {
        return;
    }
    if caps.caps(node) && node.held > caps.tolerance {
        let mut holders = Vec::new();
        node.visit(&mut |leaf| {
            if leaf.held {
                holders.push(leaf.index);
            }
        });
        let overfull = Overfull {
            domain: node.name.clone(),
            cells: node.held,
            holders,
        };
        *found = Some((node.level, overfull));
        return;
    }
    for child in &node.children {
        check(child, caps, found);
    }
}

/// How many distinct domains the block files on `holders` touch at each
/// rank (the host 1, the rack 2...; a datanode whose location is shorter
/// counts its widest domain there): a move must never lower any of them.
pub(crate) fn domain_counts(holders: &[Placed<'_>]) -> Vec<usize> {
    let paths: Vec<Vec<Branch<'_>>> = holders.iter().map(|p| leaf(*p, true, 0, 0).path).collect();
    let widest = paths.iter().map(|p| p.len() - 1).max().unwrap_or(0);
    (1..=widest)
        .map(|rank| {
            let mut seen: Vec<&[Branch<'_>]> = paths
                .iter()
                .map(|p| &p[..p.len().saturating_sub(rank).max(1)])
                .collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        })
        .collect()
}

/// Whether `after` touches at least as many domains as `before` at every rank.
pub(crate) fn keeps_spread(before: &[usize], after: &[usize]) -> bool {
    before
        .iter()
        .zip(after.iter().chain(std::iter::repeat(&0)))
        .all(|(b, a)| a >= b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    struct Dn {
        id: DatanodeId,
        location: Location,
    }

    fn nodes(spec: &[(&str, usize)]) -> Vec<Dn> {
        let mut out = Vec::new();
        for (location, count) in spec {
            for i in 0..*count {
                out.push(Dn {
                    id: DatanodeId(format!("{}-{i}", location.replace('/', "."))),
                    location: Location::parse(location).unwrap(),
                });
            }
        }
        out
    }

    fn placed(node: &Dn) -> Placed<'_> {
        Placed {
            id: &node.id,
            location: &node.location,
        }
    }

    /// Cells per value of `level` (0: the widest) among `chosen`.
    fn per_domain(chosen: &[&Dn], level: usize) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for node in chosen {
            let name = node.location.levels().nth(level).unwrap().to_string();
            *out.entry(name).or_default() += 1;
        }
        out
    }

    fn choose<'a>(
        all: &'a [Dn],
        held: &[&'a Dn],
        width: usize,
        tolerance: usize,
        seed: u64,
    ) -> Vec<&'a Dn> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let held_placed: Vec<Placed<'_>> = held.iter().map(|n| placed(n)).collect();
        let free: Vec<&Dn> = all
            .iter()
            .filter(|n| !held.iter().any(|h| h.id == n.id))
            .collect();
        let candidates: Vec<(Placed<'_>, u64)> = free.iter().map(|n| (placed(n), 0)).collect();
        let picked = spread(&held_placed, &candidates, width, tolerance, &mut rng).unwrap();
        assert_eq!(picked.len(), width);
        picked.into_iter().map(|i| free[i]).collect()
    }

    #[test]
    fn eight_datanodes_on_three_hosts_never_give_a_host_three_cells_of_five() {
        let all = nodes(&[("/z/r/h1", 3), ("/z/r/h2", 3), ("/z/r/h3", 2)]);
        for seed in 0..200 {
            let chosen = choose(&all, &[], 5, 2, seed);
            let hosts = per_domain(&chosen, 2);
            assert_eq!(hosts.len(), 3, "{hosts:?}");
            assert!(hosts.values().all(|&n| n <= 2), "{hosts:?}");
            let mut ids: Vec<&str> = chosen.iter().map(|n| n.id.0.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), 5, "distinct datanodes");
            // Three replicas: one per host.
            let hosts = per_domain(&choose(&all, &[], 3, 2, seed), 2);
            assert_eq!(hosts.values().copied().collect::<Vec<_>>(), [1, 1, 1]);
        }
    }

    #[test]
    fn racks_are_evened_out_before_hosts() {
        // rs-6-3 over three racks of unequal size: three cells a rack.
        let all = nodes(&[
            ("/z/r1/a", 2),
            ("/z/r1/b", 2),
            ("/z/r2/c", 4),
            ("/z/r3/d", 1),
            ("/z/r3/e", 1),
            ("/z/r3/f", 1),
        ]);
        for seed in 0..100 {
            let chosen = choose(&all, &[], 9, 3, seed);
            let racks = per_domain(&chosen, 1);
            assert_eq!(racks.values().copied().collect::<Vec<_>>(), [3, 3, 3]);
            let hosts = per_domain(&chosen, 2);
            // Within r1, three cells over two hosts: 2 and 1.
            assert!(hosts["a"] + hosts["b"] == 3 && hosts["a"].max(hosts["b"]) == 2);
        }
    }

    #[test]
    fn a_host_is_protected_where_zones_cannot_be() {
        // Two zones cannot keep rs-3-2's five cells at two a zone; the
        // four hosts can keep them at two a host, the lone host of z2 too.
        let all = nodes(&[("/z1/a", 2), ("/z1/b", 2), ("/z1/c", 2), ("/z2/d", 3)]);
        for seed in 0..200 {
            let chosen = choose(&all, &[], 5, 2, seed);
            let hosts = per_domain(&chosen, 1);
            assert!(hosts.values().all(|&n| n <= 2), "{hosts:?}");
            let zones = per_domain(&chosen, 0);
            assert_eq!(zones.values().copied().max(), Some(3), "{zones:?}");
        }
        let usable: Vec<Placed<'_>> = all.iter().map(placed).collect();
        let group = |picks: &[usize]| -> Vec<Placed<'_>> {
            picks.iter().map(|&i| placed(&all[i])).collect()
        };
        let bad = overfull(&group(&[0, 2, 6, 7, 8]), &usable, 2).unwrap();
        assert_eq!((bad.domain.as_str(), bad.cells), ("/z2/d", 3));
        assert_eq!(overfull(&group(&[0, 2, 4, 6, 7]), &usable, 2), None);
    }

    #[test]
    fn a_host_without_a_zone_or_rack_is_still_a_host() {
        // A rollout: three hosts labelled, one (H) not yet: it stands on
        // its own, a host beside z1's, and takes two cells at most.
        let all = nodes(&[("/z1/r1/a", 2), ("/z1/r1/b", 2), ("/z1/r1/c", 2), ("/H", 4)]);
        for seed in 0..100 {
            let hosts: BTreeMap<String, usize> =
                choose(&all, &[], 5, 2, seed)
                    .iter()
                    .fold(BTreeMap::new(), |mut hosts, n| {
                        let host = n.location.levels().last().unwrap().to_string();
                        *hosts.entry(host).or_default() += 1;
                        hosts
                    });
            assert!(hosts.values().all(|&n| n <= 2), "{hosts:?}");
        }
        let usable: Vec<Placed<'_>> = all.iter().map(placed).collect();
        let three_on_h: Vec<Placed<'_>> =
            [0, 2, 6, 7, 8].iter().map(|&i| placed(&all[i])).collect();
        let bad = overfull(&three_on_h, &usable, 2).unwrap();
        assert_eq!((bad.domain.as_str(), bad.cells), ("/H", 3));
        // Moving a's cell (the only one under a rack) to c keeps the spread.
        let before: Vec<Placed<'_>> = [0, 6].iter().map(|&i| placed(&all[i])).collect();
        let after: Vec<Placed<'_>> = [4, 6].iter().map(|&i| placed(&all[i])).collect();
        assert!(keeps_spread(
            &domain_counts(&before),
            &domain_counts(&after)
        ));
        // Moving it to H joins it with H's: not.
        let joined: Vec<Placed<'_>> = [7, 6].iter().map(|&i| placed(&all[i])).collect();
        assert!(!keeps_spread(
            &domain_counts(&before),
            &domain_counts(&joined)
        ));
    }

    #[test]
    fn held_cells_count_where_they_stand() {
        let all = nodes(&[("/h1", 3), ("/h2", 3), ("/h3", 2)]);
        // Four cells kept, two of them on h1: the fifth goes to h3.
        let held = [&all[0], &all[1], &all[3], &all[4]];
        for seed in 0..50 {
            let chosen = choose(&all, &held, 1, 2, seed);
            assert_eq!(chosen[0].location.as_str(), "/h3");
        }
    }

    #[test]
    fn one_host_picks_the_least_loaded_datanodes_as_before() {
        let all = nodes(&[("/127.0.0.1", 5)]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let loads = [5, 0, 0, 9, 0];
        let candidates: Vec<(Placed<'_>, u64)> =
            all.iter().zip(loads).map(|(n, l)| (placed(n), l)).collect();
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..50 {
            let mut picked = spread(&[], &candidates, 3, 2, &mut rng).unwrap();
            firsts.insert(picked[0]);
            picked.sort_unstable();
            assert_eq!(picked, [1, 2, 4]);
        }
        assert!(spread(&[], &candidates, 6, 2, &mut rng).is_none());
    }

    #[test]
    fn the_remainder_goes_to_the_less_loaded_domain() {
        let all = nodes(&[("/h1", 2), ("/h2", 2)]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let loads = [9, 9, 1, 1];
        let candidates: Vec<(Placed<'_>, u64)> =
            all.iter().zip(loads).map(|(n, l)| (placed(n), l)).collect();
        for _ in 0..20 {
            let mut picked = spread(&[], &candidates, 3, 2, &mut rng).unwrap();
            picked.sort_unstable();
            assert_eq!(picked.len(), 3);
            assert!(picked.contains(&2) && picked.contains(&3));
        }
    }

    #[test]
    fn a_group_is_misplaced_only_where_an_even_spread_would_do_better() {
        let all = nodes(&[("/h1", 3), ("/h2", 3), ("/h3", 2)]);
        let usable: Vec<Placed<'_>> = all.iter().map(placed).collect();
        let group = |picks: &[usize]| -> Vec<Placed<'_>> {
            picks.iter().map(|&i| placed(&all[i])).collect()
        };
        // Three of five on h1: misplaced, h1 named.
        let bad = overfull(&group(&[0, 1, 2, 3, 6]), &usable, 2).unwrap();
        assert_eq!(bad.domain, "/h1");
        assert_eq!((bad.cells, bad.holders.clone()), (3, vec![0, 1, 2]));
        // Two, two and one: fine.
        assert_eq!(overfull(&group(&[0, 1, 3, 4, 6]), &usable, 2), None);
        // With h3 gone from the usable set and holding nothing, an even
        // spread over h1 and h2 still puts three on one: nothing gained.
        let two_hosts: Vec<Placed<'_>> = all[..6].iter().map(placed).collect();
        assert_eq!(overfull(&group(&[0, 1, 2, 3, 4]), &two_hosts, 2), None);
        // One host only (tessera server): never misplaced.
        let one = nodes(&[("/127.0.0.1", 5)]);
        let one_usable: Vec<Placed<'_>> = one.iter().map(placed).collect();
        assert_eq!(overfull(&one_usable, &one_usable, 2), None);
    }

    #[test]
    fn racks_are_checked_as_well_as_hosts() {
        let all = nodes(&[("/r1/a", 3), ("/r1/b", 3), ("/r2/c", 3), ("/r3/d", 3)]);
        let usable: Vec<Placed<'_>> = all.iter().map(placed).collect();
        // rs-6-3: five cells in r1 (hosts a and b: 3 and 2), two and two.
        let holders: Vec<Placed<'_>> = [0, 1, 2, 3, 4, 6, 7, 9, 10]
            .iter()
            .map(|&i| placed(&all[i]))
            .collect();
        let bad = overfull(&holders, &usable, 3).unwrap();
        assert_eq!((bad.domain.as_str(), bad.cells), ("/r1", 5));
        // Three a rack, but one host with three (tolerance 3: fine).
        let holders: Vec<Placed<'_>> = [0, 1, 2, 6, 7, 8, 9, 10, 11]
            .iter()
            .map(|&i| placed(&all[i]))
            .collect();
        assert_eq!(overfull(&holders, &usable, 3), None);
        // Two block files on host a, where one is all it may hold.
        let holders: Vec<Placed<'_>> = [0, 1, 6].iter().map(|&i| placed(&all[i])).collect();
        let bad = overfull(&holders, &usable, 1).unwrap();
        assert_eq!(bad.domain, "/r1");
    }

    #[test]
    fn spread_counts_fall_when_a_move_joins_two_domains() {
        let all = nodes(&[("/h1", 2), ("/h2", 2), ("/h3", 2)]);
        let before: Vec<Placed<'_>> = [0, 2, 4].iter().map(|&i| placed(&all[i])).collect();
        let same: Vec<Placed<'_>> = [1, 2, 4].iter().map(|&i| placed(&all[i])).collect();
        let joined: Vec<Placed<'_>> = [0, 1, 4].iter().map(|&i| placed(&all[i])).collect();
        let b = domain_counts(&before);
        assert_eq!(b, [3]);
        assert!(keeps_spread(&b, &domain_counts(&same)));
        assert!(!keeps_spread(&b, &domain_counts(&joined)));
    }
}
