//! Where the block files of a group stand among failure domains, as the
//! registry places their datanodes: the check that a whole group keeps the
//! placement rule, the block file to move when it does not, and whether a
//! move keeps it.

use crate::placement::domains::{self, Placed};
use crate::placement::tolerance;
use crate::registry::RegisteredNode;
use crate::store::repairs::CellMove;
use meta_api::{AdminState, BlockGroup, DatanodeState, Location, ReplicaLocation};
use proto::{DatanodeId, ReplicationConfig};
use std::collections::HashMap;

/// The datanodes as placement sees them at one moment.
#[derive(Default)]
pub(crate) struct PlacementView {
    /// Where each registered datanode stands.
    locations: HashMap<DatanodeId, Location>,
    /// Reported bytes in use, to move block files off the fullest first.
    used: HashMap<DatanodeId, u64>,
    /// Datanodes that may take a block file: healthy, in service, with room.
    usable: Vec<DatanodeId>,
}

impl PlacementView {
    /// From the registry's datanodes; `block_size` is the room a datanode
    /// needs to take a block file.
    pub(crate) fn new(nodes: &[RegisteredNode], block_size: u64) -> Self {
        let mut view = Self::default();
        for node in nodes {
            let r = &node.record;
            view.locations.insert(r.id.clone(), r.location.clone());
            view.used.insert(r.id.clone(), r.used);
            if r.state == DatanodeState::Healthy
                && r.admin == AdminState::InService
                && r.free() >= block_size
            {
                view.usable.push(r.id.clone());
            }
        }
        view
    }

    /// Where the datanode of `replica` stands: its registered location, or
    /// for a datanode no longer registered, the host of its address.
    pub(crate) fn location(&self, replica: &ReplicaLocation) -> Location {
        self.locations
            .get(&replica.datanode)
            .cloned()
            .unwrap_or_else(|| Location::of_addr(&replica.addr))
    }

    /// Whether datanode `id` may take a block file.
    pub(crate) fn is_usable(&self, id: &DatanodeId) -> bool {
        self.usable.contains(id)
    }

    fn usable_placed(&self) -> Vec<Placed<'_>> {
        self.usable
            .iter()
            .filter_map(|id| {
                let location = self.locations.get(id)?;
                Some(Placed { id, location })
            })
            .collect()
    }

    /// The move that brings whole `group` back within the placement rule
    /// of `config`, if a failure domain holds too much of it: a block file
    /// of that domain, on its fullest datanode.
    pub(crate) fn misplacement(
        &self,
        group: &BlockGroup,
        config: &ReplicationConfig,
    ) -> Option<CellMove> {
        let located: Vec<Located> = group
            .replicas
            .iter()
            .map(|r| (r.datanode.clone(), self.location(r)))
            .collect();
        let holders = placed(&located);
        let overfull = domains::overfull(&holders, &self.usable_placed(), tolerance(config))?;
        let fullest = overfull.holders.iter().copied().max_by_key(|&i| {
            let r = &group.replicas[i];
            (
                self.used.get(&r.datanode).copied().unwrap_or(0),
                &r.datanode,
            )
        })?;
        let replica = &group.replicas[fullest];
        tracing::debug!(block = %group.block, domain = %overfull.domain, cells = overfull.cells, "misplaced block group");
        Some(CellMove {
            index: replica.index,
            from: replica.datanode.clone(),
            to: None,
        })
    }

    /// Whether the balancer's move `planned` of whole `group` still holds:
    /// its block file is where the plan found it, and its target may take
    /// it with the group's placement kept.
    pub(crate) fn balance_move_holds(
        &self,
        group: &BlockGroup,
        config: &ReplicationConfig,
        planned: &CellMove,
    ) -> bool {
        let Some(to) = &planned.to else {
            return false;
        };
        let in_place = group
            .replicas
            .iter()
            .any(|r| r.index == planned.index && r.datanode == planned.from);
        let holders: Vec<DatanodeId> = group.replicas.iter().map(|r| r.datanode.clone()).collect();
        in_place && self.is_usable(to) && self.move_fits(&holders, config, &planned.from, to)
    }

    /// Whether moving the block file of misplaced `group` on `from` to `to`
    /// mends it: no failure domain is overfull afterwards, or the one that
    /// was holds fewer of its block files.
    pub(crate) fn move_mends(
        &self,
        holders: &[DatanodeId],
        config: &ReplicationConfig,
        from: &DatanodeId,
        to: &DatanodeId,
    ) -> bool {
        let Some((before, after)) = self.before_and_after(holders, from, to) else {
            return false;
        };
        let usable = self.usable_placed();
        let tolerance = tolerance(config);
        match (
            domains::overfull(&placed(&before), &usable, tolerance),
            domains::overfull(&placed(&after), &usable, tolerance),
        ) {
            (_, None) => true,
            (Some(was), Some(is)) => is.domain == was.domain && is.cells < was.cells,
            (None, Some(_)) => false,
        }
    }

    /// Where `holders` stand, and where they would with `to` in place of
    /// `from`; None when that is no move (`to` holds a block file of the
    /// group, `from` none, or `to` is not registered).
    fn before_and_after(
        &self,
        holders: &[DatanodeId],
        from: &DatanodeId,
        to: &DatanodeId,
    ) -> Option<(Vec<Located>, Vec<Located>)> {
        if holders.contains(to) || !holders.contains(from) {
            return None;
        }
        let to_location = self.locations.get(to)?;
        let before: Vec<Located> = holders
            .iter()
            .map(|h| {
                let location = self.locations.get(h).cloned().unwrap_or_default();
                (h.clone(), location)
            })
            .collect();
        let after = before
            .iter()
            .filter(|(h, _)| h != from)
            .cloned()
            .chain([(to.clone(), to_location.clone())])
            .collect();
        Some((before, after))
    }

    /// Whether moving the block file of whole `group` on `from` to `to`
    /// keeps the placement rule of `config`: `to` holds nothing of the
    /// group, no failure domain becomes overfull, and the group touches no
    /// fewer domains at any level.
    pub(crate) fn move_fits(
        &self,
        holders: &[DatanodeId],
        config: &ReplicationConfig,
        from: &DatanodeId,
        to: &DatanodeId,
    ) -> bool {
        let Some((before, after)) = self.before_and_after(holders, from, to) else {
            return false;
        };
        let (before, after) = (placed(&before), placed(&after));
        let usable = self.usable_placed();
        domains::overfull(&after, &usable, tolerance(config)).is_none()
            && domains::keeps_spread(
                &domains::domain_counts(&before),
                &domains::domain_counts(&after),
            )
    }
}

/// A datanode and where it stands.
type Located = (DatanodeId, Location);

fn placed(located: &[Located]) -> Vec<Placed<'_>> {
    located
        .iter()
        .map(|(id, location)| Placed { id, location })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redundancy::tests::replica;
    use meta_api::DatanodeRecord;
    use proto::BlockId;

    fn node(id: &str, location: &str, used: u64) -> RegisteredNode {
        RegisteredNode {
            record: DatanodeRecord {
                id: DatanodeId(id.into()),
                addr: format!("{id}:1"),
                local_socket: None,
                capacity: 1 << 40,
                used,
                garbage: 0,
                blocks: 0,
                last_heartbeat: 0,
                state: DatanodeState::Healthy,
                scrub: Default::default(),
                admin: AdminState::InService,
                location: Location::parse(location).unwrap(),
                disks: Vec::new(),
            },
            pending: 0,
            heard: 0,
        }
    }

    /// d0..d2 on h1, d3..d5 on h2, d6 and d7 on h3.
    fn view() -> PlacementView {
        let hosts = ["/h1", "/h1", "/h1", "/h2", "/h2", "/h2", "/h3", "/h3"];
        let nodes: Vec<RegisteredNode> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| node(&format!("d{i}"), h, i as u64 * 10))
            .collect();
        PlacementView::new(&nodes, 1)
    }

    fn group(on: &[usize]) -> BlockGroup {
        BlockGroup {
            block: BlockId(1),
            length: 10,
            replicas: on
                .iter()
                .enumerate()
                .map(|(i, d)| replica(i as u8, &format!("d{d}")))
                .collect(),
            token: None,
        }
    }

    fn ids(on: &[usize]) -> Vec<DatanodeId> {
        on.iter().map(|d| DatanodeId(format!("d{d}"))).collect()
    }

    #[test]
    fn the_fullest_datanode_of_an_overfull_host_gives_up_a_block_file() {
        let view = view();
        let rs = ReplicationConfig::RS_3_2;
        let moving = view.misplacement(&group(&[0, 1, 2, 3, 6]), &rs).unwrap();
        assert_eq!((moving.index, moving.from.0.as_str()), (2, "d2"));
        assert!(view.misplacement(&group(&[0, 1, 3, 4, 6]), &rs).is_none());
    }

    #[test]
    fn a_move_may_not_overfill_a_host_nor_join_two_domains() {
        let view = view();
        let rs = ReplicationConfig::RS_3_2;
        let holders = ids(&[0, 1, 3, 4, 6]);
        let d = |i: usize| DatanodeId(format!("d{i}"));
        // d0 -> d7: h1 1, h2 2, h3 2: fits.
        assert!(view.move_fits(&holders, &rs, &d(0), &d(7)));
        // d6 -> d2: h1 would hold 3.
        assert!(!view.move_fits(&holders, &rs, &d(6), &d(2)));
        // d0 -> d1: d1 holds one already.
        assert!(!view.move_fits(&holders, &rs, &d(0), &d(1)));
        // Replication 3 on three hosts; d6 -> d5 joins h3's copy into h2.
        let r3 = ReplicationConfig::REPLICATED_3;
        assert!(!view.move_fits(&ids(&[0, 3, 6]), &r3, &d(6), &d(5)));
        assert!(view.move_fits(&ids(&[0, 3, 6]), &r3, &d(6), &d(7)));
    }
}
