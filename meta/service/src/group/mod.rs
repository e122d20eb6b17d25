//! The meta group: meta on three or five nodes kept equal by Raft
//! (openraft), so that the cluster goes on when one of them is lost.
//!
//! What is replicated is the request, not its effect: the member a write
//! reaches proposes it to the log with the time and a random seed
//! ([`Command`]); once a majority holds it, every member applies it to its
//! own store with the same handlers a lone meta runs, drawing its random
//! values from the seed (`crate::entropy`), so every store ends the same.
//! The leader answers the client with what its own apply returned. Reads
//! are served by the leader after a read-index round (Raft's
//! `ensure_linearizable`: a majority still follows it, and its store holds
//! every entry committed before the read began). Followers answer
//! [`MetaError::NotLeader`] with the leader's address, which the clients of
//! meta follow (`meta_api::GroupClient`).
//!
//! Raft shares the meta port: its messages are meta requests of the admin
//! role ([`meta_api::RaftMessage`]), so they pass the same mutual TLS and the
//! same admin token as `tessera admin` does. The members of a group share
//! that token, the credential key and the master key.

mod log;
mod machine;
mod network;
#[cfg(test)]
mod tests;

pub(crate) use machine::StateSlot;

use crate::entropy::Seed;
use crate::placement::ReservedIds;
use meta_api::{
    AddGroupMember, AnyRequest, AnyResponse, GetGroupSecrets, GetGroupStatus, GroupMember,
    GroupSecrets, GroupStatus, MetaError, RaftMessage, RaftMessageKind, RemoteMeta,
    RemoveGroupMember, UnixMillis,
};
use openraft::error::{ClientWriteError, RaftError};
use openraft::raft::AppendEntriesRequest;
use openraft::{BasicNode, ChangeMembers, Config, ServerState, SnapshotPolicy};
use proto::BlockId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tls::ClusterTls;

openraft::declare_raft_types!(
    /// The group's Raft types.
    pub(crate) TypeConfig:
        D = Command,
        R = Applied,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The Raft instance of one member.
type Raft = openraft::Raft<TypeConfig>;

/// A client's write waiting to join an entry, and where its answer goes.
type QueuedWrite = (
    AnyRequest,
    tokio::sync::oneshot::Sender<Result<AnyResponse, MetaError>>,
);

/// Most entries of clients' writes proposed and not yet answered: one
/// being applied while the next is synced to the log (openraft 0.9 syncs
/// one entry at a time).
const ENTRIES_IN_FLIGHT: usize = 2;
/// Most requests in one entry.
const BATCH_REQUESTS: usize = 256;
/// Most ranges of block ids one allocation reserves before it gives up (each
/// one taken by others, or in a term that ended).
const RESERVE_ATTEMPTS: usize = 4;
/// Most bytes of requests (as JSON) in one entry, beyond its first.
const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// How a group is formed: this member and every initial member's address.
#[derive(Clone, Debug)]
pub struct GroupSettings {
    /// This member's id (`--node-id`).
    pub node_id: u64,
    /// Every initial member's id and meta address, this one's included
    /// (`--peers`).
    pub peers: BTreeMap<u64, String>,
}

/// One entry of the log: what to apply, with the leader's clock and the
/// seed of its random choices, so every member applies it alike.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Command {
    /// The time the handlers see.
    pub(crate) now: UnixMillis,
    /// Seed of the handlers' random values.
    pub(crate) seed: Seed,
    /// What to do.
    pub(crate) action: Action,
}

/// What a [`Command`] does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Action {
    /// Clients' writes that reached the leader together, applied one after
    /// the other (see [`MetaGroup::write`]).
    Requests(Vec<AnyRequest>),
    /// What a lone meta writes when it starts (the root user, due token
    /// keys, the master key's check value, a lifecycle pass's restart
    /// count), proposed by each new leader.
    Startup,
    /// One round of redundancy upkeep (repair scheduling) without a scan.
    Redundancy,
    /// The same, after a scan the proposing leader found due: members scan
    /// at the same entries, so their repair queues stay equal.
    RedundancyScan,
    /// One step of the lifecycle worker.
    Lifecycle,
    /// The next range of block ids, for the proposing leader to hand out
    /// in its term (see `crate::placement`).
    ReserveBlockIds,
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.action {
            Action::Requests(requests) => match requests.as_slice() {
                [one] => write!(f, "{}", one.name()),
                many => write!(f, "{} requests", many.len()),
            },
            Action::Startup => f.write_str("startup"),
            Action::Redundancy => f.write_str("redundancy"),
            Action::RedundancyScan => f.write_str("redundancy scan"),
            Action::Lifecycle => f.write_str("lifecycle"),
            Action::ReserveBlockIds => f.write_str("block id reservation"),
        }
    }
}

/// What applying one entry gave, for the member that proposed it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Applied {
    /// The clients' answers, in the order of their requests.
    Answers(Vec<Result<AnyResponse, MetaError>>),
    /// How long the lifecycle worker may pause, in milliseconds.
    Pause(Result<u64, MetaError>),
    /// A background round's outcome.
    Done(Result<(), MetaError>),
    /// The block ids reserved for the proposing leader.
    Reserved(Result<ReservedIds, MetaError>),
    /// Raft's own entries.
    Nothing,
}

/// Free space a member keeps on its data folder's disk beyond the size of
/// its store: room for the entries on their way into the log, the store's
/// growth as they are applied, and a snapshot (a copy of the store file).
/// Below it new entries are refused, since a log or store write that fails
/// stops the member's Raft.
const SPACE_RESERVE: u64 = 64 * 1024 * 1024;

/// How often the leader sends heartbeats.
const HEARTBEAT: Duration = Duration::from_millis(100);
/// The least time a follower waits without hearing from the leader before
/// it stands for election (the most is twice as long).
const ELECTION_TIMEOUT: Duration = Duration::from_millis(500);
/// How long after sending the appends a majority accepted the leader serves
/// reads on its own: a quarter of openraft's leader lease (the longest
/// election timeout, for which a member that accepted an append refuses
/// other candidates), leaving the rest for clocks that run at other rates.
const LEASE: Duration = Duration::from_millis(250);

/// Gathers the writes queued on `group` into entries: it takes every
/// write waiting (up to [`BATCH_REQUESTS`] and [`BATCH_BYTES`]) when no
/// entry is on its way, or when fewer than [`ENTRIES_IN_FLIGHT`] are and
/// the log has synced the last one proposed. openraft 0.9 appends nothing
/// before the last append's sync, so an entry formed earlier would wait
/// for that sync anyway, holding only the writes that came first, and the
/// writes arriving meanwhile would wait for its sync as well.
async fn batch_writes(
    group: Weak<MetaGroup>,
    mut queued: tokio::sync::mpsc::UnboundedReceiver<QueuedWrite>,
    mut log: tokio::sync::watch::Receiver<log::Progress>,
) {
    let (entries_tx, mut entries) = tokio::sync::watch::channel(0_usize);
    let entries_tx = Arc::new(entries_tx);
    // The log's appends when the last entry was proposed: one more means
    // that entry reached the log (or, rarely, another did just before it).
    let mut appends_then = 0;
    while let Some(first) = queued.recv().await {
        loop {
            let on_their_way = *entries.borrow_and_update();
            let progress = *log.borrow_and_update();
            let last_synced = progress.idle && progress.appends > appends_then;
            if on_their_way == 0 || (on_their_way < ENTRIES_IN_FLIGHT && last_synced) {
                break;
            }
            tokio::select! {
                _ = entries.changed() => {}
                changed = log.changed() => if changed.is_err() { return },
            }
        }
        appends_then = log.borrow().appends;
        let mut batch = vec![first];
        let mut bytes = 0;
        while batch.len() < BATCH_REQUESTS && bytes < BATCH_BYTES {
            let Ok(next) = queued.try_recv() else {
                break;
            };
            bytes += encoded_len(&next.0);
            batch.push(next);
        }
        let Some(group) = group.upgrade() else {
            return;
        };
        entries_tx.send_modify(|n| *n += 1);
        let answered = entries_tx.clone();
        tokio::spawn(async move {
            group.propose_writes(batch).await;
            answered.send_modify(|n| *n -= 1);
        });
    }
}

/// Length of `request` as JSON.
fn encoded_len(request: &AnyRequest) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    drop(serde_json::to_writer(&mut counter, request));
    counter.0
}

/// Heartbeats every 100 ms; an election after 0.5-1 s without one.
fn raft_config() -> Result<Config, MetaError> {
    Config {
        cluster_name: "tessera-meta".into(),
        heartbeat_interval: HEARTBEAT.as_millis() as u64,
        election_timeout_min: ELECTION_TIMEOUT.as_millis() as u64,
        election_timeout_max: 2 * ELECTION_TIMEOUT.as_millis() as u64,
        // A snapshot is a copy of the store file: taken rarely, and the log
        // kept behind it lets a briefly stopped member catch up from it.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(20_000),
        max_in_snapshot_log_to_keep: 5_000,
        purge_batch_size: 256,
        snapshot_max_chunk_size: 1024 * 1024,
        install_snapshot_timeout: 5_000,
        // An entry holds up to BATCH_BYTES of requests (one request may
        // exceed it): eight stay well within a meta frame.
        max_payload_entries: 8,
        ..Config::default()
    }
    .validate()
    .map_err(|e| MetaError::InvalidRequest(format!("raft settings: {e}")))
}

/// A member of the meta group.
pub(crate) struct MetaGroup {
    raft: Raft,
    settings: GroupSettings,
    /// The state this member applies to, as the apply sees it.
    slot: Arc<StateSlot>,
    /// Clients' writes on their way into entries ([`batch_writes`]).
    writes: tokio::sync::mpsc::UnboundedSender<QueuedWrite>,
    /// The peers' answers to this member's appends, for its read lease.
    acks: Arc<network::Acks>,
    /// Whether the last look at free space refused writes (to log and
    /// count only the changes).
    refusing: std::sync::atomic::AtomicBool,
    /// Held while a range of block ids is reserved.
    reserving: tokio::sync::Mutex<()>,
}

impl MetaGroup {
    /// Starts this member's Raft over its log in the data folder and the
    /// store in `slot`; peers are reached with `admin_token`.
    pub(crate) async fn start(
        settings: GroupSettings,
        slot: Arc<StateSlot>,
        admin_token: String,
        tls: Option<Arc<ClusterTls>>,
    ) -> Result<Arc<MetaGroup>, MetaError> {
        let dir = slot.current().config.data_dir.clone();
        if dir.join(ADOPTED_STORE_FILE).exists()
            && settings.peers.keys().next() != Some(&settings.node_id)
        {
            // Its records would sit under the group's log, in no other
            // member's store.
            return Err(MetaError::InvalidRequest(format!(
                "{} holds a store and no raft log: a lone meta's store can become a group's \
                 only as the first member (the lowest id in --peers), which adds the others \
                 from a snapshot; a member that lost its raft log is wiped and added again",
                dir.display()
            )));
        }
        let log = log::LogStore::open(&dir)
            .map_err(|e| MetaError::Store(format!("opening the raft log: {e}")))?;
        let progress = log.progress();
        let machine = machine::Machine::open(slot.clone(), &dir)?;
        let acks = Arc::new(network::Acks::default());
        let network = network::Network::new(admin_token, tls, acks.clone());
        let raft = Raft::new(
            settings.node_id,
            Arc::new(raft_config()?),
            network,
            log,
            machine,
        )
        .await
        .map_err(|e| MetaError::Store(format!("starting raft: {e}")))?;
        let (writes, queued) = tokio::sync::mpsc::unbounded_channel();
        let group = Arc::new(MetaGroup {
            raft,
            settings,
            slot,
            writes,
            acks,
            refusing: Default::default(),
            reserving: Default::default(),
        });
        tokio::spawn(batch_writes(Arc::downgrade(&group), queued, progress));
        Ok(group)
    }

    /// Serves a request of [`meta_api::Access::Reserved`] (a block's allocation) on
    /// the leader, from the range of ids the log reserved for its term;
    /// the range is reserved first when it is used up, or was reserved in
    /// another term.
    pub(crate) async fn serve_reserved(
        &self,
        request: AnyRequest,
    ) -> Result<AnyResponse, MetaError> {
        let AnyRequest::AllocateBlock(request) = request else {
            return Err(MetaError::Protocol(format!(
                "{} is not served from a reserved range",
                request.name()
            )));
        };
        // A member that does not lead holds no range of its current term,
        // so it is refused when it proposes one.
        let block = self.granted_block_id().await?;
        // Leading still, after the id was taken: no other leader can have
        // reserved ids since, so the reservation that follows dates this
        // id no earlier than its handout (an id dropped here is skipped).
        self.linearizable().await?;
        let state = self.slot.current();
        state
            .place_block(request, state.config.clock.now(), || Ok(block))
            .map(AnyResponse::AllocateBlock)
    }

    /// The next id of the range reserved for this leader's term. A range
    /// is handed out only in the term it was reserved in: a leader that
    /// lost and won back its place leaves the rest of its old range
    /// unused, since others reserved after it (the orphan detector dates
    /// every id below a reservation by that reservation's time).
    async fn granted_block_id(&self) -> Result<BlockId, MetaError> {
        for _ in 0..RESERVE_ATTEMPTS {
            let term = self.raft.metrics().borrow().current_term;
            let state = self.slot.current();
            if let Some(block) = state.block_ids.take_granted(term) {
                return Ok(block);
            }
            // One reservation at a time: the allocations waiting meanwhile
            // share the range it brings.
            let _reserving = self.reserving.lock().await;
            if let Some(block) = state.block_ids.take_granted(term) {
                return Ok(block);
            }
            // A reservation lost to a change of leader only skips ids: the
            // client may ask the next leader.
            let proposed = self.propose(Action::ReserveBlockIds).await;
            match proposed.map_err(|e| match e {
                MetaError::Transport(_) => self.not_leader(None),
                other => other,
            })? {
                Applied::Reserved(Ok(ids)) => state.block_ids.grant(ids),
                Applied::Reserved(Err(e)) => return Err(e),
                other => return Err(MetaError::Store(format!("block ids reserved as {other:?}"))),
            }
        }
        // Each range was taken by others, or reserved in a term that ended.
        Err(self.not_leader(None))
    }

    /// The peers this member was started with.
    pub(crate) fn settings(&self) -> &GroupSettings {
        &self.settings
    }

    /// This member's data folder.
    fn dir(&self) -> std::path::PathBuf {
        self.slot.current().config.data_dir.clone()
    }

    /// Whether this member's log holds anything (it was part of a group).
    pub(crate) async fn is_initialized(&self) -> Result<bool, MetaError> {
        self.raft
            .is_initialized()
            .await
            .map_err(|e| MetaError::Store(format!("raft: {e}")))
    }

    /// Forms the group of the initial peers, or of this member alone when
    /// `alone` (once, by one member whose log is empty while every peer's
    /// is too).
    pub(crate) async fn initialize(&self, alone: bool) -> Result<(), MetaError> {
        let members: BTreeMap<u64, BasicNode> = self
            .settings
            .peers
            .iter()
            .filter(|(id, _)| !alone || **id == self.settings.node_id)
            .map(|(id, addr)| (*id, BasicNode::new(addr)))
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(MetaError::Store(format!("forming the meta group: {e}"))),
        }
    }

    /// Whether this member leads now (as far as it knows).
    pub(crate) fn is_leader(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.state == ServerState::Leader
    }

    /// The refusal of a member that does not lead: the leader's address
    /// when it knows one.
    fn not_leader(&self, leader: Option<u64>) -> MetaError {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let leader = leader.or(metrics.current_leader);
        let addr = leader.and_then(|id| {
            metrics
                .membership_config
                .membership()
                .get_node(&id)
                .map(|node| node.addr.clone())
        });
        MetaError::NotLeader { leader: addr }
    }

    /// Proposes `action` with this member's clock and a fresh seed, and
    /// waits for its apply here. Only the leader may.
    pub(crate) async fn propose(&self, action: Action) -> Result<Applied, MetaError> {
        if !self.is_leader() {
            // Refused before anything reached the log: the caller may send
            // it to the leader.
            return Err(self.not_leader(None));
        }
        if let Some(reason) = self.space_refusal() {
            return Err(MetaError::OutOfSpace(reason));
        }
        let command = Command {
            now: self.slot.current().config.clock.now(),
            seed: crate::entropy::new_seed(),
            action,
        };
        match self.raft.client_write(command).await {
            Ok(written) => Ok(written.data),
            // Leadership moved while the entry was proposed: a majority may
            // hold it and the next leader commit it, so the caller must treat
            // it as a lost answer, never send it again as if refused.
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(MetaError::Transport(format!(
                    "the meta leader changed (now {:?}) while the write was proposed; it may have been applied",
                    forward.leader_id
                )))
            }
            Err(e) => Err(MetaError::Store(format!("meta group: {e}"))),
        }
    }

    /// Why this member refuses new entries now, or None: its data folder's
    /// disk has less free space than [`SPACE_RESERVE`] beyond the store's
    /// size. Checked once per entry (two system calls), so space freed by
    /// an operator lets writes through again at once.
    pub(crate) fn space_refusal(&self) -> Option<String> {
        let dir = self.slot.current().config.data_dir.clone();
        let store = std::fs::metadata(dir.join(crate::store::DATABASE_FILE)).map_or(0, |m| m.len());
        let needed = SPACE_RESERVE.saturating_add(store);
        let refusal = match proto::durable::available_space(&dir) {
            Ok(free) if free >= needed => None,
            Ok(free) => Some(format!(
                "{free} bytes free on the disk of {}, under the {needed} a meta group member keeps \
                 free (a copy of its store and {SPACE_RESERVE} more)",
                dir.display()
            )),
            Err(e) => Some(format!(
                "cannot tell the free space of {}: {e}",
                dir.display()
            )),
        };
        let was_refusing = self
            .refusing
            .swap(refusal.is_some(), std::sync::atomic::Ordering::Relaxed);
        match &refusal {
            Some(reason) if !was_refusing => {
                tracing::error!(%reason, "meta refuses writes until space is freed");
                metrics::gauge!(crate::telemetry::STORE_FAILED.name).set(1.0);
            }
            None if was_refusing => {
                tracing::info!("meta takes writes again: space was freed");
                metrics::gauge!(crate::telemetry::STORE_FAILED.name).set(0.0);
            }
            _ => {}
        }
        refusal
    }

    /// Serves a client's write through the log, in one entry with the
    /// other writes that reach this member while the entries before are
    /// synced: so concurrent writes share a log sync, a message to each
    /// follower and an apply round.
    pub(crate) async fn write(&self, request: AnyRequest) -> Result<AnyResponse, MetaError> {
        if !self.is_leader() {
            return Err(self.not_leader(None));
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.writes
            .send((request, answer))
            .map_err(|_| MetaError::Transport("the meta group is stopping".into()))?;
        answered.await.unwrap_or_else(|_| {
            Err(MetaError::Transport(
                "the meta group stopped while the write was proposed; it may have been applied"
                    .into(),
            ))
        })
    }

    /// Proposes `writes` as one entry and hands each its answer.
    async fn propose_writes(&self, writes: Vec<QueuedWrite>) {
        let (requests, answers): (Vec<_>, Vec<_>) = writes.into_iter().unzip();
        let count = requests.len();
        match self.propose(Action::Requests(requests)).await {
            Ok(Applied::Answers(answered)) if answered.len() == count => {
                for (answer, result) in answers.into_iter().zip(answered) {
                    drop(answer.send(result));
                }
            }
            outcome => {
                let error = match outcome {
                    Err(e) => e,
                    Ok(other) => MetaError::Store(format!("writes applied as {other:?}")),
                };
                for answer in answers {
                    drop(answer.send(Err(error.clone())));
                }
            }
        }
    }

    /// Waits until this member may serve a read that sees every write
    /// acknowledged before it began: it still leads (a majority answered
    /// its heartbeat) and has applied everything committed.
    pub(crate) async fn linearizable(&self) -> Result<(), MetaError> {
        if self.holds_lease() {
            return Ok(());
        }
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(self.not_leader(f.leader_id))
            }
            Err(RaftError::APIError(e)) => Err(MetaError::NotLeader {
                leader: {
                    tracing::debug!(error = %e, "read refused: leadership not confirmed");
                    None
                },
            }),
            Err(e) => Err(MetaError::Store(format!("meta group: {e}"))),
        }
    }

    /// Whether this leader may serve a read without a round of heartbeats:
    /// a majority of the voters, itself counted, took it for leader in
    /// answer to appends sent within [`LEASE`] ([`network::Acks`]: no other
    /// member can have been elected since), and its store applied an entry
    /// of its own term (so every entry committed before its term, and every
    /// write it acknowledged since, is in the store). A leader that is the
    /// group's only voter is its own majority.
    fn holds_lease(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.state == ServerState::Leader
            && self.acks.quorum_within(
                metrics.membership_config.membership().get_joint_config(),
                self.settings.node_id,
                &metrics.vote,
                std::time::Instant::now(),
                LEASE,
            )
            && metrics
                .last_applied
                .is_some_and(|applied| applied.leader_id.term == metrics.current_term)
    }

    /// Serves one Raft message from a peer. Entries and snapshots are
    /// refused while this member is short of space (a log or store write
    /// that failed would stop its Raft for good): the leader keeps sending
    /// them, and this member catches up once space is freed. Heartbeats
    /// without entries still pass, so it does not stand for election.
    pub(crate) async fn receive(
        &self,
        message: RaftMessage,
    ) -> Result<Box<serde_json::value::RawValue>, MetaError> {
        let body = message.body.get();
        let bad = |e: serde_json::Error| MetaError::Protocol(format!("raft message: {e}"));
        // While short of space it stands for no election either: a
        // candidate's higher term would depose a leader that has room.
        let short_of_space = || {
            let refusal = self.space_refusal();
            self.raft.runtime_config().elect(refusal.is_none());
            match refusal {
                Some(reason) => Err(MetaError::OutOfSpace(reason)),
                None => Ok(()),
            }
        };
        let reply = match message.kind {
            RaftMessageKind::AppendEntries => {
                let append: AppendEntriesRequest<TypeConfig> =
                    serde_json::from_str(body).map_err(bad)?;
                let checked = short_of_space();
                if !append.entries.is_empty() {
                    checked?;
                }
                serde_json::value::to_raw_value(&self.raft.append_entries(append).await)
            }
            RaftMessageKind::Vote => serde_json::value::to_raw_value(
                &self
                    .raft
                    .vote(serde_json::from_str(body).map_err(bad)?)
                    .await,
            ),
            RaftMessageKind::InstallSnapshot => {
                let chunk = serde_json::from_str(body).map_err(bad)?;
                short_of_space()?;
                serde_json::value::to_raw_value(&self.raft.install_snapshot(chunk).await)
            }
        };
        reply.map_err(bad)
    }

    /// The group as this member sees it.
    pub(crate) fn status(&self) -> GroupStatus {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(id, node)| GroupMember {
                id: *id,
                addr: node.addr.clone(),
                voter: voters.contains(id),
            })
            .collect();
        GroupStatus {
            node_id: self.settings.node_id,
            role: match metrics.state {
                ServerState::Leader => "leader",
                ServerState::Follower => "follower",
                ServerState::Candidate => "candidate",
                ServerState::Learner => "learner",
                ServerState::Shutdown => "stopped",
            }
            .to_string(),
            leader: metrics.current_leader,
            term: metrics.current_term,
            last_log_index: metrics.last_log_index,
            last_applied: metrics.last_applied.map(|l| l.index),
            snapshot: metrics.snapshot.map(|l| l.index),
            members,
        }
    }

    /// Adds a member: as a learner until it holds the log, then a voter.
    /// While the log still begins at its first entry, a snapshot is taken
    /// and the log purged first, so the new member starts from a copy of
    /// the store: the store may hold writes from before the log (a lone
    /// meta's store that became a group's) that no entry carries.
    pub(crate) async fn add(&self, request: AddGroupMember) -> Result<(), MetaError> {
        let never_purged = self.raft.metrics().borrow().purged.is_none();
        if never_purged {
            self.snapshot().await?;
        }
        let refused = |e: RaftError<u64, ClientWriteError<u64, BasicNode>>| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                self.not_leader(f.leader_id)
            }
            e => MetaError::InvalidRequest(format!("changing the meta group: {e}")),
        };
        self.raft
            .add_learner(request.id, BasicNode::new(&request.addr), true)
            .await
            .map_err(refused)?;
        self.raft
            .change_membership(ChangeMembers::AddVoterIds([request.id].into()), false)
            .await
            .map_err(refused)?;
        Ok(())
    }

    /// Sets this leader's address in the group's membership to the one it
    /// was started with, when they differ (a member whose port moved, such
    /// as `tessera server` on port 0): the address peers and clients are
    /// sent to. Only the leader's own entry changes, so no vote is at stake.
    pub(crate) async fn correct_own_address(&self) {
        let Some(addr) = self.settings.peers.get(&self.settings.node_id) else {
            return;
        };
        let known = self
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&self.settings.node_id)
            .map(|node| node.addr.clone());
        if known.as_deref().is_none_or(|known| known == addr) {
            return;
        }
        let node = BTreeMap::from([(self.settings.node_id, BasicNode::new(addr))]);
        match self
            .raft
            .change_membership(ChangeMembers::SetNodes(node), false)
            .await
        {
            Ok(_) => {
                tracing::info!(%addr, was = ?known, "this member's address in the group updated")
            }
            Err(e) => {
                tracing::warn!(error = %e, "updating this member's address in the group failed")
            }
        }
    }

    /// Removes a member.
    pub(crate) async fn remove(&self, request: RemoveGroupMember) -> Result<(), MetaError> {
        self.raft
            .change_membership(ChangeMembers::RemoveVoters([request.id].into()), false)
            .await
            .map_err(|e| match e {
                RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                    self.not_leader(f.leader_id)
                }
                e => MetaError::InvalidRequest(format!("changing the meta group: {e}")),
            })?;
        Ok(())
    }

    /// Takes a snapshot of the leader's store now and drops the log entries
    /// it covers; answers the index it covers. Only the leader may.
    pub(crate) async fn snapshot(&self) -> Result<u64, MetaError> {
        if !self.is_leader() {
            return Err(self.not_leader(None));
        }
        let fatal = |e: openraft::error::Fatal<u64>| MetaError::Store(format!("meta group: {e}"));
        let applied = self
            .raft
            .metrics()
            .borrow()
            .last_applied
            .map_or(0, |l| l.index);
        self.raft.trigger().snapshot().await.map_err(fatal)?;
        let taken = self
            .raft
            .wait(Some(SNAPSHOT_WAIT))
            .metrics(
                |m| m.snapshot.is_some_and(|s| s.index >= applied),
                "snapshot taken",
            )
            .await
            .map_err(|e| MetaError::Store(format!("taking a snapshot: {e}")))?;
        let index = taken.snapshot.map_or(0, |s| s.index);
        self.raft.trigger().purge_log(index).await.map_err(fatal)?;
        Ok(index)
    }

    /// Stops this member's Raft.
    pub(crate) async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft did not stop cleanly");
        }
    }
}

/// Whether `dir` holds a group member's log.
pub(crate) fn holds_log(dir: &Path) -> bool {
    dir.join(log::LOG_FILE).exists()
}

/// The mark of a lone meta's store in a member's data folder
/// ([`mark_adopted_store`]).
pub(crate) const ADOPTED_STORE_FILE: &str = "adopted-store";

/// Longest wait for a snapshot asked for by an operator.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(120);

/// A wait before a member's next look at who leads.
pub(crate) const LEADER_POLL: Duration = Duration::from_millis(200);

/// The secret files every member of a group holds alike.
const SHARED_SECRETS: [&str; 2] = [crate::CREDENTIAL_KEY_FILE, crate::MASTER_KEY_FILE];

/// The group's shared secrets as this member holds them (to a new member,
/// over the admin-authenticated meta port).
pub(crate) fn secrets_of(dir: &Path) -> Result<GroupSecrets, MetaError> {
    let mut files = Vec::new();
    for name in SHARED_SECRETS {
        let text = crate::credentials::read_optional(&dir.join(name))?
            .ok_or_else(|| MetaError::InvalidRequest(format!("this meta has no {name} yet")))?;
        files.push((name.to_string(), text));
    }
    Ok(GroupSecrets { files })
}

/// How long a member starting without the group's secrets looks for a peer
/// that has them before giving up.
const SECRETS_WAIT: Duration = Duration::from_secs(300);
/// How long the first member waits for a peer with secrets before it makes
/// the group's own (every peer is new).
const FIRST_MEMBER_WAIT: Duration = Duration::from_secs(3);

/// Before a member opens its store: makes sure its data folder holds the
/// group's credential key and master key, copied from a peer that has them
/// (a new or wiped member), or made here when this is the first member and
/// no peer has any (a new group). Peers are asked with `admin_token`.
pub async fn fetch_secrets(
    settings: &GroupSettings,
    dir: &Path,
    admin_token: &str,
    tls: Option<Arc<ClusterTls>>,
) -> Result<(), MetaError> {
    if SHARED_SECRETS.iter().all(|name| dir.join(name).exists()) {
        return Ok(());
    }
    proto::durable::create_private_dir(dir)
        .map_err(|e| MetaError::Store(format!("creating {}: {e}", dir.display())))?;
    let first = settings.peers.keys().next() == Some(&settings.node_id);
    let started = tokio::time::Instant::now();
    loop {
        for (id, addr) in &settings.peers {
            if *id == settings.node_id {
                continue;
            }
            let peer = RemoteMeta::new(addr, admin_token).with_tls(tls.clone());
            if let Ok(AnyResponse::GetGroupSecrets(secrets)) = peer
                .call(&AnyRequest::GetGroupSecrets(GetGroupSecrets))
                .await
            {
                for (name, text) in &secrets.files {
                    if !SHARED_SECRETS.contains(&name.as_str()) {
                        return Err(MetaError::Protocol(format!("a peer sent the file {name}")));
                    }
                    crate::credentials::write_private(&dir.join(name), text)?;
                }
                tracing::info!(peer = addr, "the group's secrets copied from a peer");
                return Ok(());
            }
        }
        let waited = started.elapsed();
        if first && (waited >= FIRST_MEMBER_WAIT || settings.peers.len() == 1) {
            tracing::info!("no peer holds the group's secrets: this first member makes them");
            return Ok(());
        }
        if waited >= SECRETS_WAIT {
            return Err(MetaError::Transport(
                "no peer of the group answered with its secrets (the group's members share one \
                 admin token: is --admin-token the same on every member?)"
                    .into(),
            ));
        }
        tokio::time::sleep(LEADER_POLL).await;
    }
}

/// Forms the group when this member is the first of its peers, its log is
/// empty, and every other peer answers with an empty log too (a new
/// group). A member that finds a peer with a log waits to be added
/// (`tessera admin meta add`): that is how a wiped member comes back.
/// A lone meta's store ([`ADOPTED_STORE_FILE`]) forms a group of this
/// member alone, which then adds the other peers from a snapshot of it,
/// also after a restart part way.
pub(crate) async fn form(
    group: Weak<MetaGroup>,
    admin_token: String,
    tls: Option<Arc<ClusterTls>>,
) {
    loop {
        let Some(member) = group.upgrade() else {
            return;
        };
        let adopted = member.dir().join(ADOPTED_STORE_FILE);
        match member.is_initialized().await {
            Ok(false) => {}
            Ok(true) if adopted.exists() => return add_peers(&member).await,
            Ok(true) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot tell whether the group is formed");
                return;
            }
        }
        let settings = member.settings().clone();
        if settings.peers.keys().next() != Some(&settings.node_id) {
            return;
        }
        let mut all_new = true;
        for (id, addr) in &settings.peers {
            if *id == settings.node_id {
                continue;
            }
            let peer = RemoteMeta::new(addr, &admin_token).with_tls(tls.clone());
            match peer.call(&AnyRequest::GetGroupStatus(GetGroupStatus)).await {
                Ok(AnyResponse::GetGroupStatus(status)) if status.last_log_index.is_none() => {}
                Ok(AnyResponse::GetGroupStatus(_)) => {
                    tracing::info!(
                        peer = id,
                        "a peer holds the group's log: this member waits to be added"
                    );
                    return;
                }
                _ => all_new = false,
            }
        }
        if all_new {
            let alone = adopted.exists();
            match member.initialize(alone).await {
                Ok(()) if alone => add_peers(&member).await,
                Ok(()) => tracing::info!(members = ?settings.peers, "meta group formed"),
                Err(e) => tracing::warn!(error = %e, "forming the meta group failed"),
            }
            return;
        }
        drop(member);
        tokio::time::sleep(LEADER_POLL).await;
    }
}

/// Longest wait for a group of one, just formed, to elect its member.
const FORMING_WAIT: Duration = Duration::from_secs(30);

/// Adds every other peer not yet in it to the group `member` formed alone
/// around a lone meta's store, once it leads and has applied its log (a
/// snapshot covers applied entries only); then removes the mark
/// ([`ADOPTED_STORE_FILE`]).
async fn add_peers(member: &MetaGroup) {
    let settings = member.settings();
    tracing::info!(
        node = settings.node_id,
        "meta group formed around a lone meta's store; adding the other peers from a snapshot"
    );
    let leading = member
        .raft
        .wait(Some(FORMING_WAIT))
        .metrics(
            |m| {
                m.current_leader == Some(settings.node_id)
                    && m.last_applied.is_some()
                    && m.last_applied.map(|l| l.index) >= m.last_log_index
            },
            "leading the group and applied its log",
        )
        .await;
    let voters: BTreeSet<u64> = match leading {
        Ok(metrics) => metrics.membership_config.membership().voter_ids().collect(),
        Err(e) => {
            tracing::warn!(error = %e, "this member did not come to lead: add the other peers with `tessera admin meta add`");
            return;
        }
    };
    for (id, addr) in &settings.peers {
        if voters.contains(id) {
            continue;
        }
        let request = AddGroupMember {
            id: *id,
            addr: addr.clone(),
        };
        if let Err(e) = member.add(request).await {
            tracing::warn!(peer = id, error = %e, "adding a peer failed: add it with `tessera admin meta add`");
            return;
        }
    }
    if let Err(e) = unmark_adopted_store(&member.dir()) {
        tracing::warn!(error = %e, "could not remove the mark of a lone meta's store");
    }
    tracing::info!(members = ?settings.peers, "meta group formed");
}

/// Removes the mark of a lone meta's store from `dir`, if there, durably:
/// its store is now a group's (its peers added, or a snapshot installed).
pub(crate) fn unmark_adopted_store(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(ADOPTED_STORE_FILE)) {
        Ok(()) => proto::durable::sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Marks a member's data folder whose store a lone meta wrote (a store and
/// no log yet): its records are in no log entry, so its group is formed
/// around it alone and the other peers are added from a snapshot ([`form`]).
/// Called before the member opens its store; synced, so a restart part
/// way finds it.
pub(crate) fn mark_adopted_store(dir: &Path) -> Result<(), MetaError> {
    if !dir.join(crate::store::DATABASE_FILE).exists() || holds_log(dir) {
        return Ok(());
    }
    machine::write_durably(&dir.join(ADOPTED_STORE_FILE), b"")
        .and_then(|()| proto::durable::sync_dir(dir))
        .map_err(|e| MetaError::Store(format!("marking {}: {e}", dir.display())))
}
