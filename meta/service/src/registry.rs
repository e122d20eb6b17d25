//! The datanode registry: heartbeats register and refresh datanodes, and each
//! datanode's state (healthy, stale, dead) follows from the time since this
//! member last heard of it, on its monotonic clock (as HDFS's namenode
//! does): a jump of the wall clock declares no datanode dead. Only a
//! member that loads the registry (a start, a snapshot installed) reads the
//! stored wall-clock stamps, bounded.

use crate::clock::Clock;
use meta_api::{AdminState, BlockGroup, DatanodeRecord, DatanodeState, Location, UnixMillis};
use parking_lot::{Mutex, RwLock};
use proto::DatanodeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Every state, with its label in metrics.
const STATES: [(DatanodeState, &str); 3] = [
    (DatanodeState::Healthy, "healthy"),
    (DatanodeState::Stale, "stale"),
    (DatanodeState::Dead, "dead"),
];

/// When a datanode counts as stale, then dead, and the clock that tells.
#[derive(Clone, Debug)]
pub(crate) struct Liveness {
    pub(crate) clock: Clock,
    pub(crate) stale_after: Duration,
    pub(crate) dead_after: Duration,
}

impl Liveness {
    /// State of a datanode last heard from at `heard` (monotonic), now.
    fn state(&self, heard: UnixMillis) -> DatanodeState {
        state_at(
            heard,
            self.clock.monotonic(),
            self.stale_after,
            self.dead_after,
        )
    }
}

/// State of a datanode last heard from at `heard`, at time `now`.
fn state_at(
    heard: UnixMillis,
    now: UnixMillis,
    stale_after: Duration,
    dead_after: Duration,
) -> DatanodeState {
    let silent = now.saturating_sub(heard).max(0) as u128;
    if silent >= dead_after.as_millis() {
        DatanodeState::Dead
    } else if silent >= stale_after.as_millis() {
        DatanodeState::Stale
    } else {
        DatanodeState::Healthy
    }
}

/// One registered datanode as placement sees it.
#[derive(Clone, Debug)]
pub(crate) struct RegisteredNode {
    pub(crate) record: DatanodeRecord,
    /// Blocks allocated on it since its last heartbeat (its `used` does not show them yet).
    pub(crate) pending: u64,
    /// When this member last heard of it, on the monotonic clock.
    pub(crate) heard: UnixMillis,
}

/// In-memory mirror of the `DATANODES` table, so that address lookups and
/// placement never touch the disk.
pub(crate) struct Registry {
    liveness: Liveness,
    nodes: RwLock<HashMap<DatanodeId, RegisteredNode>>,
    /// The address and location each datanode's gauges were last published
    /// under, so that the series of old ones are zeroed when a datanode moves.
    published: Mutex<HashMap<DatanodeId, (String, Location)>>,
    /// Bumped whenever a datanode registers or changes address: records
    /// refreshed with older addresses are stale.
    addresses: AtomicU64,
}

impl Registry {
    /// Loads every stored datanode record; one stored before datanodes had
    /// locations stands on its host until its next heartbeat says otherwise.
    /// How long ago each was heard of comes from its stored wall-clock stamp,
    /// the only trace a restart keeps, bounded to `[0, dead_after]`: a clock
    /// off at load time can make a datanode look dead until its next
    /// heartbeat, or give it at most `dead_after` before it is found dead.
    pub(crate) fn load(records: Vec<DatanodeRecord>, liveness: Liveness) -> Self {
        let (wall, monotonic) = (liveness.clock.now(), liveness.clock.monotonic());
        let longest = i64::try_from(liveness.dead_after.as_millis()).unwrap_or(i64::MAX);
        let heard_at = |record: &DatanodeRecord| {
            monotonic - wall.saturating_sub(record.last_heartbeat).clamp(0, longest)
        };
        let nodes = records
            .into_iter()
            .map(|mut record| {
                if record.location == Location::default() {
                    record.location = Location::of_addr(&record.addr);
                }
                let node = RegisteredNode {
                    heard: heard_at(&record),
                    record,
                    pending: 0,
                };
                (node.record.id.clone(), node)
            })
            .collect();
        Self {
            liveness,
            nodes: RwLock::new(nodes),
            published: Mutex::default(),
            addresses: AtomicU64::new(0),
        }
    }

    /// The generation of the datanode addresses: it changes whenever
    /// [`Registry::refresh_addrs`] could give a different answer.
    pub(crate) fn address_generation(&self) -> u64 {
        self.addresses.load(Ordering::Acquire)
    }

    /// Records a heartbeat, heard now. Heartbeats are not ordered by their
    /// wall-clock stamps: a leader whose clock ran ahead would leave stamps
    /// that hold off every later heartbeat until real time caught up (two
    /// heartbeats of one datanode racing here leave the older one's figures
    /// until its next heartbeat, seconds later).
    /// The admin state known here is kept: the heartbeat read it from the
    /// store before its commit, and an operator's change committed since
    /// (which [`Registry::set_admin`] brought here) must not be undone.
    pub(crate) fn upsert(&self, mut record: DatanodeRecord) {
        let heard = self.liveness.clock.monotonic();
        let mut nodes = self.nodes.write();
        match nodes.get_mut(&record.id) {
            Some(node) => {
                if node.record.addr != record.addr {
                    self.addresses.fetch_add(1, Ordering::AcqRel);
                }
                record.admin = node.record.admin;
                node.record = record;
                node.pending = 0;
                node.heard = heard;
            }
            None => {
                let node = RegisteredNode {
                    record,
                    pending: 0,
                    heard,
                };
                nodes.insert(node.record.id.clone(), node);
                self.addresses.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// Every datanode with its state now, sorted by id.
    pub(crate) fn snapshot(&self) -> Vec<RegisteredNode> {
        let mut out: Vec<RegisteredNode> = self
            .nodes
            .read()
            .values()
            .cloned()
            .map(|mut node| {
                node.record.state = self.liveness.state(node.heard);
                node
            })
            .collect();
        out.sort_by(|a, b| a.record.id.cmp(&b.record.id));
        out
    }

    /// Records what an operator asked of datanode `id`; answers whether it is known.
    pub(crate) fn set_admin(&self, id: &DatanodeId, admin: AdminState) -> bool {
        match self.nodes.write().get_mut(id) {
            Some(node) => {
                node.record.admin = admin;
                true
            }
            None => false,
        }
    }

    /// Whether `id` ever registered (block reports come only from known datanodes).
    pub(crate) fn contains(&self, id: &DatanodeId) -> bool {
        self.nodes.read().contains_key(id)
    }

    /// Counts a fresh allocation against each of `ids` until their next heartbeat.
    pub(crate) fn note_allocated<'a>(&self, ids: impl Iterator<Item = &'a DatanodeId>) {
        let mut nodes = self.nodes.write();
        for id in ids {
            if let Some(node) = nodes.get_mut(id) {
                node.pending += 1;
            }
        }
    }

    /// Sets each replica's address to the datanode's current one.
    pub(crate) fn refresh_addrs(&self, groups: &mut [BlockGroup]) {
        let nodes = self.nodes.read();
        for replica in groups.iter_mut().flat_map(|g| g.replicas.iter_mut()) {
            if let Some(node) = nodes.get(&replica.datanode) {
                if node.record.addr != replica.addr {
                    replica.addr.clone_from(&node.record.addr);
                }
            }
        }
    }

    /// Publishes the number of datanodes in each state, and each datanode's
    /// capacity, usage and state labelled with its id and address.
    pub(crate) fn publish_gauges(&self) {
        let mut counts = [0u32; STATES.len()];
        let nodes = self.nodes.read();
        let mut published = self.published.lock();
        for node in nodes.values() {
            let record = &node.record;
            let state = self.liveness.state(node.heard);
            for (count, (s, _)) in counts.iter_mut().zip(STATES) {
                *count += u32::from(s == state);
            }
            let now_at = (record.addr.clone(), record.location.clone());
            let old = published.insert(record.id.clone(), now_at.clone());
            if let Some(old) = old.filter(|old| *old != now_at) {
                publish_datanode_gauges(&record.id, &old, None);
            }
            publish_datanode_gauges(&record.id, &now_at, Some((record, state)));
        }
        for (count, (_, label)) in counts.into_iter().zip(STATES) {
            metrics::gauge!(crate::telemetry::DATANODES.name, "state" => label).set(count);
        }
    }
}

/// Sets the gauges of datanode `id` at `(addr, location)` from its record
/// and state, or to 0 when `current` is None (a place it no longer has).
fn publish_datanode_gauges(
    id: &DatanodeId,
    (addr, location): &(String, Location),
    current: Option<(&DatanodeRecord, DatanodeState)>,
) {
    let labels = [
        ("id", id.0.clone()),
        ("addr", addr.clone()),
        ("location", location.to_string()),
    ];
    // Its blocks and used bytes are the datanode's own gauges
    // (`tessera_datanode_store_*`), live where they change.
    let capacity = current.map_or(0, |(r, _)| r.capacity);
    metrics::gauge!(crate::telemetry::DATANODE_CAPACITY_BYTES.name, &labels).set(capacity as f64);
    for (state, label) in STATES {
        let on = current.is_some_and(|(_, s)| s == state);
        let mut with_state = labels.to_vec();
        with_state.push(("state", label.to_string()));
        metrics::gauge!(crate::telemetry::DATANODE_STATE.name, with_state.as_slice()).set(if on {
            1.0
        } else {
            0.0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, addr: &str, last_heartbeat: UnixMillis) -> DatanodeRecord {
        DatanodeRecord {
            id: DatanodeId(id.into()),
            addr: addr.into(),
            local_socket: None,
            capacity: 1000,
            used: 300,
            garbage: 0,
            blocks: 7,
            last_heartbeat,
            state: DatanodeState::Healthy,
            scrub: Default::default(),
            admin: AdminState::InService,
            location: Location::of_addr(addr),
            disks: Vec::new(),
        }
    }

    /// A registry on a manual clock at `at`, loaded with `records`.
    fn registry_at(at: UnixMillis, records: Vec<DatanodeRecord>) -> (Registry, Clock) {
        let clock = Clock::manual(at);
        let liveness = Liveness {
            clock: clock.clone(),
            stale_after: Duration::from_secs(10),
            dead_after: Duration::from_secs(60),
        };
        (Registry::load(records, liveness), clock)
    }

    #[test]
    fn a_heartbeat_read_before_an_admin_change_does_not_undo_it() {
        let (registry, _) = registry_at(10, vec![record("a", "h:1", 10)]);
        let id = DatanodeId("a".into());
        // The operator's change commits (and reaches the registry) between
        // the heartbeat's read of the record and its upsert.
        assert!(registry.set_admin(&id, AdminState::Maintenance));
        registry.upsert(record("a", "h:1", 20));
        let nodes = registry.snapshot();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].record.admin, AdminState::Maintenance);
        assert_eq!(nodes[0].record.last_heartbeat, 20);
    }

    /// The value of the series `name{labels}` in Prometheus text `text`.
    fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .find(|l| {
                labels
                    .iter()
                    .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn gauges_per_datanode_carry_id_address_and_state() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let (registry, clock) = registry_at(80_000, vec![record("b", "b:1", 80_000)]);
        clock.set(100_000);
        metrics::with_local_recorder(&recorder, || {
            registry.upsert(record("a", "a:1", 100_000));
            registry.publish_gauges();
            // "a" moves: its old address's series drop to 0.
            clock.set(101_000);
            registry.upsert(record("a", "a:2", 101_000));
            registry.publish_gauges();
        });
        let text = handle.render();
        let a2 = [("id", "a"), ("addr", "a:2")];
        assert_eq!(
            value(&text, "tessera_datanode_capacity_bytes", &a2),
            Some(1000.0)
        );
        assert_eq!(value(&text, "tessera_datanode_used_bytes", &a2), None);
        let state = |id, addr, state| {
            let labels = [("id", id), ("addr", addr), ("state", state)];
            value(&text, "tessera_datanode_state", &labels)
        };
        assert_eq!(state("a", "a:2", "healthy"), Some(1.0));
        assert_eq!(state("a", "a:2", "stale"), Some(0.0));
        assert_eq!(state("a", "a:2", "dead"), Some(0.0));
        assert_eq!(state("b", "b:1", "healthy"), Some(0.0));
        assert_eq!(state("b", "b:1", "stale"), Some(1.0));
        assert_eq!(state("a", "a:1", "healthy"), Some(0.0));
        let a1 = [("id", "a"), ("addr", "a:1")];
        assert_eq!(
            value(&text, "tessera_datanode_capacity_bytes", &a1),
            Some(0.0)
        );
        let states = |s| value(&text, "tessera_meta_datanodes", &[("state", s)]);
        assert_eq!((states("healthy"), states("stale")), (Some(1.0), Some(1.0)));
    }

    #[test]
    fn state_follows_silence() {
        let stale = Duration::from_secs(10);
        let dead = Duration::from_secs(60);
        assert_eq!(state_at(1_000, 1_000, stale, dead), DatanodeState::Healthy);
        assert_eq!(state_at(1_000, 10_999, stale, dead), DatanodeState::Healthy);
        assert_eq!(state_at(1_000, 11_000, stale, dead), DatanodeState::Stale);
        assert_eq!(state_at(1_000, 61_000, stale, dead), DatanodeState::Dead);
        // A clock that went backwards is not silence.
        assert_eq!(state_at(5_000, 1_000, stale, dead), DatanodeState::Healthy);
    }

    #[test]
    fn liveness_follows_what_this_member_heard_not_the_wall_clock() {
        // Loaded (a start): ages come from the stored stamps, bounded.
        let (registry, clock) = registry_at(
            100_000,
            vec![
                record("silent", "s:1", -5_000_000),
                record("ahead", "a:1", 9_000_000),
            ],
        );
        let state = |registry: &Registry, id: &str| {
            let nodes = registry.snapshot();
            nodes
                .iter()
                .find(|n| n.record.id.0 == id)
                .unwrap()
                .record
                .state
        };
        assert_eq!(state(&registry, "silent"), DatanodeState::Dead);
        // Stamped by a clock that ran ahead: heard of now, dead in time.
        assert_eq!(state(&registry, "ahead"), DatanodeState::Healthy);
        clock.set(100_000 + 60_000);
        assert_eq!(state(&registry, "ahead"), DatanodeState::Dead);
        // A heartbeat stamped by a wall clock hours off still counts now,
        // and so does the next one, stamped true again.
        registry.upsert(record("silent", "s:1", 9_000_000));
        assert_eq!(state(&registry, "silent"), DatanodeState::Healthy);
        clock.set(100_000 + 60_000 * 2);
        registry.upsert(record("silent", "s:2", 220_000));
        let node = registry
            .snapshot()
            .into_iter()
            .find(|n| n.record.id.0 == "silent")
            .unwrap();
        assert_eq!(
            (node.record.state, node.record.addr.as_str()),
            (DatanodeState::Healthy, "s:2")
        );
    }
}
