//! The repairs in flight, in memory: which groups are being repaired by
//! which datanodes, the commands waiting for their datanode's heartbeat,
//! groups whose last attempt failed, and what the last redundancy scan
//! found. The queue itself is in the store (`store::repairs`); what is here
//! may be lost with a restart, after which the queued groups are simply
//! handed out again (a repair that was running meanwhile still reports, and
//! whichever result comes second becomes garbage).

use crate::redundancy::GroupCounts;
use meta_api::{RepairCommand, UnixMillis};
use parking_lot::Mutex;
use proto::{BlockId, DatanodeId};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

/// Limits on repair work.
#[derive(Clone, Debug)]
pub struct RepairSettings {
    /// Repairs running at once in the whole cluster.
    pub max_repairs: usize,
    /// Repairs one datanode takes part in at once (running them or
    /// receiving their block files).
    pub max_repairs_per_datanode: usize,
    /// A repair not reported within this long is handed out again.
    pub repair_timeout: Duration,
    /// Longest time between two redundancy scans (a datanode's death or a
    /// corrupt block file starts one at once).
    pub scan_interval: Duration,
    /// Wait before a group whose repair failed is tried again.
    pub retry_after: Duration,
}

impl Default for RepairSettings {
    fn default() -> Self {
        Self {
            max_repairs: 16,
            max_repairs_per_datanode: 2,
            repair_timeout: Duration::from_secs(600),
            scan_interval: Duration::from_secs(600),
            retry_after: Duration::from_secs(10),
        }
    }
}

/// While repairs drain the queue, the group counts are taken again this often.
const RECOUNT_AFTER_REPAIRS: Duration = Duration::from_secs(10);

/// The balancer's moves still queued with none handed out for this long
/// are scanned again (their targets may have gone).
const BALANCE_STALL: Duration = Duration::from_secs(30);

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// One repair handed out.
#[derive(Clone, Debug)]
struct Running {
    /// The datanode running it.
    coordinator: DatanodeId,
    /// The datanodes receiving its block files.
    targets: Vec<DatanodeId>,
    /// Handed out again after this.
    deadline: UnixMillis,
    /// Copies from a leaving datanode rather than rebuilds.
    copy: bool,
    /// One of the balancer's moves.
    balance: bool,
}

#[derive(Default)]
struct Book {
    running: HashMap<BlockId, Running>,
    /// Commands waiting for their coordinator's next heartbeat.
    inbox: HashMap<DatanodeId, Vec<RepairCommand>>,
    /// Groups whose repair failed, and when they may be tried again.
    retry_at: HashMap<BlockId, UnixMillis>,
    /// Groups whose copy from a leaving datanode failed: rebuilt instead.
    copy_failed: HashSet<BlockId>,
    /// The dead datanodes the last scan saw.
    scanned_dead: Option<BTreeSet<DatanodeId>>,
    last_scan: UnixMillis,
    /// A corrupt block file was reported since the last scan.
    rescan: bool,
    /// A repair succeeded since the last scan (whose counts it changed).
    repaired_since_scan: bool,
    counts: GroupCounts,
    repaired_bytes: u64,
    /// A scan is due at this time, whatever else happens.
    scan_at: Option<UnixMillis>,
    /// Decommissioning datanodes, from the first scan that found no block
    /// file listed on them.
    emptied_since: HashMap<DatanodeId, UnixMillis>,
    /// The balancer's last round queued moves.
    balance_planned: bool,
    /// When the last of the balancer's moves was handed out.
    balance_handed_out: UnixMillis,
}

/// The repairs in flight and the redundancy scan's findings.
pub(crate) struct RepairBook {
    pub(crate) settings: RepairSettings,
    book: Mutex<Book>,
}

/// What `tessera admin status` shows of repairs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RepairProgress {
    pub(crate) counts: GroupCounts,
    pub(crate) running: u64,
    pub(crate) repaired_bytes: u64,
    pub(crate) last_scan: UnixMillis,
}

impl RepairBook {
    pub(crate) fn new(settings: RepairSettings) -> Self {
        Self {
            settings,
            book: Mutex::default(),
        }
    }

    /// Whether a scan is due: the set of dead datanodes changed since the
    /// last one, a corrupt block file was reported, the interval passed,
    /// repairs changed the counts (once the queue is empty, or every
    /// [`RECOUNT_AFTER_REPAIRS`] while it drains) with `queued` groups left,
    /// or the balancer's moves are done (`balancing` of them queued) and
    /// its next round waits for a scan.
    pub(crate) fn scan_due(
        &self,
        dead: &BTreeSet<DatanodeId>,
        queued: u64,
        balancing: u64,
        now: UnixMillis,
    ) -> bool {
        let book = self.book.lock();
        let since = now.saturating_sub(book.last_scan);
        let moves_running = book.running.values().any(|r| r.balance);
        // Moves left queued that none is handed out of (their targets
        // left): a scan drops them, so the next round can start.
        let moves_stalled = now.saturating_sub(book.balance_handed_out) >= millis(BALANCE_STALL);
        book.rescan
            || book.scan_at.is_some_and(|at| at <= now)
            || book.scanned_dead.as_ref() != Some(dead)
            || since >= millis(self.settings.scan_interval)
            || (book.repaired_since_scan && (queued == 0 || since >= millis(RECOUNT_AFTER_REPAIRS)))
            || (book.balance_planned && !moves_running && (balancing == 0 || moves_stalled))
    }

    /// Records whether the balancer has moves queued (as of `now`): once
    /// they are done, or none is handed out for a while, the next round's
    /// scan is due.
    pub(crate) fn balance_planned(&self, planned: bool, now: UnixMillis) {
        let mut book = self.book.lock();
        book.balance_planned = planned;
        if planned {
            book.balance_handed_out = now;
        }
    }

    /// Records a scan that saw `dead` and found `counts`.
    pub(crate) fn scanned(&self, dead: BTreeSet<DatanodeId>, counts: GroupCounts, now: UnixMillis) {
        let mut book = self.book.lock();
        book.scanned_dead = Some(dead);
        book.last_scan = now;
        book.rescan = false;
        book.scan_at = None;
        book.repaired_since_scan = false;
        book.counts = counts;
    }

    /// Counts groups written since the last scan (`counts`, as they were
    /// written), so that status and `tessera_meta_block_groups` show them
    /// at once rather than at the next scan. Groups removed are counted
    /// out by the next scan.
    pub(crate) fn written(&self, counts: GroupCounts) {
        let mut book = self.book.lock();
        book.counts.merge(counts);
        book.counts.publish();
    }

    /// Asks for a scan at the next check (a corrupt block file was reported).
    pub(crate) fn request_scan(&self) {
        self.book.lock().rescan = true;
    }

    /// When scans first found decommissioning datanode `id` empty (now, if
    /// this one is the first).
    pub(crate) fn emptied_since(&self, id: &DatanodeId, now: UnixMillis) -> UnixMillis {
        *self
            .book
            .lock()
            .emptied_since
            .entry(id.clone())
            .or_insert(now)
    }

    /// Forgets that `id` was found empty (a block file is listed there again, or it is done).
    pub(crate) fn not_emptied(&self, id: &DatanodeId) {
        self.book.lock().emptied_since.remove(id);
    }

    /// Asks for a scan at `at` at the latest.
    pub(crate) fn scan_by(&self, at: UnixMillis) {
        let mut book = self.book.lock();
        book.scan_at = Some(book.scan_at.map_or(at, |earlier| earlier.min(at)));
    }

    /// Whether a copy of `block` from a leaving datanode failed before.
    pub(crate) fn copy_failed(&self, block: BlockId) -> bool {
        self.book.lock().copy_failed.contains(&block)
    }

    /// Repairs running in the cluster.
    pub(crate) fn running(&self) -> usize {
        self.book.lock().running.len()
    }

    /// Whether `block` may be handed out now: not running, not waiting to retry.
    pub(crate) fn may_start(&self, block: BlockId, now: UnixMillis) -> bool {
        let book = self.book.lock();
        !book.running.contains_key(&block) && book.retry_at.get(&block).is_none_or(|at| *at <= now)
    }

    /// Repairs each datanode takes part in.
    pub(crate) fn load(&self) -> HashMap<DatanodeId, usize> {
        let book = self.book.lock();
        let mut load: HashMap<DatanodeId, usize> = HashMap::new();
        for running in book.running.values() {
            let involved: HashSet<&DatanodeId> = running
                .targets
                .iter()
                .chain([&running.coordinator])
                .collect();
            for datanode in involved {
                *load.entry(datanode.clone()).or_default() += 1;
            }
        }
        load
    }

    /// Hands `command` to its coordinator, the first target; `balance`: it
    /// is one of the balancer's moves.
    pub(crate) fn assign(&self, command: RepairCommand, balance: bool, now: UnixMillis) {
        let Some(coordinator) = command.targets.first().map(|t| t.datanode.clone()) else {
            return;
        };
        let running = Running {
            coordinator: coordinator.clone(),
            targets: command.targets.iter().map(|t| t.datanode.clone()).collect(),
            deadline: now.saturating_add(millis(self.settings.repair_timeout)),
            copy: matches!(command.source, meta_api::RepairSource::Copy(_)),
            balance,
        };
        let mut book = self.book.lock();
        if balance {
            book.balance_handed_out = now;
        }
        book.running.insert(command.group.block, running);
        book.retry_at.remove(&command.group.block);
        book.inbox.entry(coordinator).or_default().push(command);
    }

    /// The commands waiting for `datanode`.
    pub(crate) fn take_commands(&self, datanode: &DatanodeId) -> Vec<RepairCommand> {
        self.book.lock().inbox.remove(datanode).unwrap_or_default()
    }

    /// A repair of `block` by `coordinator` ended; a failed one waits before
    /// it is tried again. A report of an earlier assignment (handed out
    /// again since) leaves the running one alone.
    pub(crate) fn finished(
        &self,
        block: BlockId,
        coordinator: &DatanodeId,
        failed: bool,
        bytes: u64,
        now: UnixMillis,
    ) {
        let mut book = self.book.lock();
        if let Some(running) = book.running.remove_entry(&block).map(|(_, r)| r) {
            if running.coordinator != *coordinator {
                book.running.insert(block, running);
            } else if failed && running.copy {
                book.copy_failed.insert(block);
            }
        }
        book.repaired_bytes += bytes;
        book.repaired_since_scan |= !failed;
        if failed {
            book.retry_at
                .insert(block, now.saturating_add(millis(self.settings.retry_after)));
        }
    }

    /// Forgets the repairs past their deadline and those a datanode not in
    /// `up` takes part in (they are handed out again); answers how many.
    pub(crate) fn expire(&self, now: UnixMillis, up: &HashSet<DatanodeId>) -> usize {
        let mut book = self.book.lock();
        let expired: Vec<(BlockId, Running)> = book
            .running
            .iter()
            .filter(|(_, r)| r.deadline <= now || !r.targets.iter().all(|t| up.contains(t)))
            .map(|(block, r)| (*block, r.clone()))
            .collect();
        for (block, running) in &expired {
            tracing::warn!(%block, coordinator = %running.coordinator, "repair timed out or lost a datanode; handing it out again");
            book.running.remove(block);
            if let Some(commands) = book.inbox.get_mut(&running.coordinator) {
                commands.retain(|c| c.group.block != *block);
            }
        }
        expired.len()
    }

    pub(crate) fn progress(&self) -> RepairProgress {
        let book = self.book.lock();
        RepairProgress {
            counts: book.counts,
            running: book.running.len() as u64,
            repaired_bytes: book.repaired_bytes,
            last_scan: book.last_scan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::{BlockGroup, RepairSource, ReplicaLocation};
    use proto::ReplicationConfig;

    fn dn(id: &str) -> DatanodeId {
        DatanodeId(id.into())
    }

    fn command(block: u64, targets: &[&str]) -> RepairCommand {
        RepairCommand {
            group: BlockGroup {
                block: BlockId(block),
                length: 1,
                replicas: Vec::new(),
                token: None,
            },
            config: ReplicationConfig::RS_3_2,
            targets: targets
                .iter()
                .enumerate()
                .map(|(i, d)| ReplicaLocation {
                    index: i as u8,
                    datanode: dn(d),
                    addr: String::new(),
                })
                .collect(),
            write_token: None,
            source: RepairSource::Rebuild,
        }
    }

    fn settings() -> RepairSettings {
        RepairSettings {
            repair_timeout: Duration::from_secs(60),
            retry_after: Duration::from_secs(5),
            scan_interval: Duration::from_secs(100),
            ..RepairSettings::default()
        }
    }

    #[test]
    fn commands_wait_for_their_coordinator_and_count_against_every_datanode() {
        let book = RepairBook::new(settings());
        book.assign(command(1, &["a", "b"]), false, 0);
        book.assign(command(2, &["a"]), false, 0);
        assert_eq!(book.running(), 2);
        assert!(!book.may_start(BlockId(1), 0));
        let load = book.load();
        assert_eq!((load[&dn("a")], load[&dn("b")]), (2, 1));
        assert!(book.take_commands(&dn("b")).is_empty());
        let taken: Vec<u64> = book
            .take_commands(&dn("a"))
            .iter()
            .map(|c| c.group.block.0)
            .collect();
        assert_eq!(taken, vec![1, 2]);
        assert!(book.take_commands(&dn("a")).is_empty());

        book.finished(BlockId(1), &dn("b"), true, 0, 1_000);
        assert!(!book.may_start(BlockId(1), 1_000), "b runs no repair of 1");
        book.finished(BlockId(1), &dn("a"), true, 10, 1_000);
        assert!(!book.may_start(BlockId(1), 5_999));
        assert!(book.may_start(BlockId(1), 6_000));
        book.finished(BlockId(2), &dn("a"), false, 32, 1_000);
        assert!(book.may_start(BlockId(2), 1_000));
        assert_eq!(book.running(), 0);
        assert_eq!(book.progress().repaired_bytes, 42);
        assert!(book.load().is_empty());
    }

    #[test]
    fn repairs_past_their_deadline_or_with_a_dead_datanode_are_forgotten() {
        let book = RepairBook::new(settings());
        book.assign(command(1, &["a", "b"]), false, 0);
        book.assign(command(2, &["c"]), false, 0);
        book.assign(command(3, &["a"]), false, 30_000);
        let up: HashSet<DatanodeId> = [dn("a"), dn("c")].into();
        assert_eq!(book.expire(1_000, &up), 1, "b is down");
        assert!(book.may_start(BlockId(1), 1_000));
        let waiting: Vec<u64> = book
            .take_commands(&dn("a"))
            .iter()
            .map(|c| c.group.block.0)
            .collect();
        assert_eq!(waiting, vec![3]);
        assert_eq!(book.expire(59_999, &up), 0);
        assert_eq!(book.expire(60_000, &up), 1);
        assert_eq!(book.running(), 1);
    }

    #[test]
    fn a_scan_is_due_when_the_dead_change_on_request_and_after_the_interval() {
        let book = RepairBook::new(settings());
        let none = BTreeSet::new();
        assert!(book.scan_due(&none, 5, 0, 0), "never scanned");
        book.scanned(none.clone(), GroupCounts::default(), 1_000);
        assert!(!book.scan_due(&none, 5, 0, 1_000));
        assert!(book.scan_due(&[dn("x")].into(), 5, 0, 1_000));
        assert!(book.scan_due(&none, 5, 0, 101_000));
        assert!(!book.scan_due(&none, 5, 0, 100_999));
        book.request_scan();
        assert!(book.scan_due(&none, 5, 0, 1_000));
        book.scanned(none.clone(), GroupCounts::default(), 1_000);

        // A repair done: counted again once the queue is empty, or after a while.
        book.assign(command(1, &["a"]), false, 1_000);
        book.finished(BlockId(1), &dn("a"), true, 0, 1_000);
        assert!(
            !book.scan_due(&none, 0, 0, 2_000),
            "a failed repair changes nothing"
        );
        book.assign(command(1, &["a"]), false, 1_000);
        book.finished(BlockId(1), &dn("a"), false, 0, 1_000);
        assert!(!book.scan_due(&none, 4, 0, 2_000));
        assert!(book.scan_due(&none, 0, 0, 2_000));
        assert!(book.scan_due(&none, 4, 0, 11_000));
    }

    #[test]
    fn the_balancers_next_round_waits_for_its_moves_or_their_stall() {
        let book = RepairBook::new(settings());
        let none = BTreeSet::new();
        book.scanned(none.clone(), GroupCounts::default(), 1_000);
        book.balance_planned(true, 1_000);
        assert!(!book.scan_due(&none, 3, 3, 2_000), "its moves are queued");
        assert!(book.scan_due(&none, 0, 0, 2_000), "its moves are done");
        book.assign(command(1, &["a"]), true, 2_000);
        assert!(!book.scan_due(&none, 2, 0, 2_500), "one is running");
        book.finished(BlockId(1), &dn("a"), true, 0, 2_500);
        assert!(!book.scan_due(&none, 2, 2, 31_999));
        assert!(
            book.scan_due(&none, 2, 2, 32_000),
            "none handed out for 30 s"
        );
        book.balance_planned(false, 32_000);
        assert!(!book.scan_due(&none, 0, 0, 32_000), "no round under way");
    }
}
