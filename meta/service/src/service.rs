//! The metadata service: opens the store, bootstraps the root user and the
//! secrets, and serves requests in process (as a [`MetaTransport`]) and for
//! the RPC server, each for the principal its caller proved to be. Request
//! logic is synchronous over redb: point reads run on the caller's task,
//! everything else on the blocking pool. A member of a meta group sends its
//! writes through the group's log and serves reads only while it leads
//! (`crate::group`).

use crate::authentication::Refusal;
use crate::config::MetaConfig;
use crate::credentials::{self, RootCredentials};
use crate::group::{self, Action, Applied, GroupSettings, MetaGroup, StateSlot};
use crate::ops::bad_replicas::{self, BadReplicaReport};
use crate::ops::repairs::Scan;
use crate::state::MetaState;
use crate::store::lifecycle_passes;
use crate::store::{self, DATABASE_FILE};
use futures::future::BoxFuture;
use meta_api::lifecycle::LifecyclePass;
use meta_api::{
    Access, AnyRequest, AnyResponse, GroupStatus, MetaClient, MetaError, MetaRequest,
    MetaTransport, ObjectRecord, Principal,
};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tls::ClusterTls;

/// How often the datanode gauges are refreshed when no heartbeat arrives.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);

/// How often meta looks for groups to scan and repairs to hand out.
const REDUNDANCY_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long the lifecycle worker waits after a failed step.
const LIFECYCLE_RETRY: Duration = Duration::from_secs(10);

/// The metadata service over its redb store: alone, or as a member of a
/// meta group ([`MetaService::join_group`]).
pub struct MetaService {
    slot: Arc<StateSlot>,
    /// The token of `tessera admin` (and of a group's members).
    admin_token: String,
    /// The root user's credentials; a group member knows them once its
    /// group's first leader has written them.
    root: Option<RootCredentials>,
    group: OnceLock<Arc<MetaGroup>>,
    /// Whether this member leads and has applied its term's start-up
    /// writes ([`MetaService::wait_until_leading`]).
    started: Arc<tokio::sync::watch::Sender<bool>>,
}

impl MetaService {
    /// Opens (or creates) the store in `config.data_dir`, ensures the root user,
    /// its access key and the tokens exist. Blocking: call it at start-up or
    /// inside `spawn_blocking`.
    pub fn open(config: MetaConfig) -> Result<Arc<MetaService>, MetaError> {
        if group::holds_log(&config.data_dir) {
            // Written here directly, a member's store would part from its
            // group's (and from its own log).
            return Err(MetaError::InvalidRequest(format!(
                "{} holds a meta group member's log: start it as that member (--node-id and \
                 --peers, or tessera server without --lone-meta)",
                config.data_dir.display()
            )));
        }
        let store = Self::open_store(&config, false)?;
        let state = MetaState::load(config, Arc::new(store))?;
        let root = state.startup_writes(state.config.clock.now())?;
        let service = Self::serving(state, Some(root));
        spawn_redundancy_checker(Arc::downgrade(&service));
        if service.state().config.lifecycle.background {
            spawn_lifecycle_worker(Arc::downgrade(&service));
        }
        Ok(service)
    }

    /// Opens the store of a meta group's member in `config.data_dir`
    /// without writing to it (a member's store changes only by its log);
    /// [`MetaService::join_group`] then starts its Raft. Blocking.
    pub fn open_member(config: MetaConfig) -> Result<Arc<MetaService>, MetaError> {
        group::mark_adopted_store(&config.data_dir)?;
        let store = Self::open_store(&config, true)?;
        let state = MetaState::load(config, Arc::new(store))?;
        let root = credentials::saved_root(&state.config)?;
        Ok(Self::serving(state, root))
    }

    fn open_store(config: &MetaConfig, member: bool) -> Result<store::Store, MetaError> {
        if config.block_size == 0 {
            return Err(MetaError::InvalidRequest("block size must not be 0".into()));
        }
        if config.dead_after < config.stale_after {
            return Err(MetaError::InvalidRequest(
                "dead_after must not be shorter than stale_after".into(),
            ));
        }
        proto::durable::create_private_dir(&config.data_dir).map_err(|e| {
            MetaError::Store(format!("creating {}: {e}", config.data_dir.display()))
        })?;
        let path = config.data_dir.join(DATABASE_FILE);
        let store = if member {
            store::open_replicated(&path)?
        } else {
            store::open_committing(&path, config.commits)?
        };
        // redb syncs the database file; a new file's name needs its folder synced.
        proto::durable::sync_dir(&config.data_dir)
            .map_err(|e| MetaError::Store(format!("syncing {}: {e}", config.data_dir.display())))?;
        Ok(store)
    }

    fn serving(state: MetaState, root: Option<RootCredentials>) -> Arc<MetaService> {
        tracing::info!(data_dir = %state.config.data_dir.display(), "meta store opened");
        let service = Arc::new(MetaService {
            admin_token: state.authenticator.admin_token().to_string(),
            slot: Arc::new(StateSlot::new(Arc::new(state))),
            root,
            group: OnceLock::new(),
            started: Arc::new(tokio::sync::watch::Sender::new(false)),
        });
        spawn_gauge_refresher(Arc::downgrade(&service));
        service
    }

    /// The state requests are served from now.
    fn state(&self) -> Arc<MetaState> {
        self.slot.current()
    }

    /// Starts this member's Raft (the store must come from
    /// [`MetaService::open_member`]), forms the group when this member is
    /// the first of its peers and none of them holds a log yet, and runs
    /// the background work while this member leads.
    pub async fn join_group(
        self: &Arc<Self>,
        settings: GroupSettings,
        tls: Option<Arc<ClusterTls>>,
    ) -> Result<(), MetaError> {
        if !self.state().store.is_replicated() {
            return Err(MetaError::InvalidRequest(
                "a meta joins a group only with a member's store (open_member)".into(),
            ));
        }
        let token = self.admin_token().to_string();
        let group =
            MetaGroup::start(settings, self.slot.clone(), token.clone(), tls.clone()).await?;
        self.group
            .set(group.clone())
            .map_err(|_| MetaError::InvalidRequest("this meta already joined a group".into()))?;
        tokio::spawn(group::form(Arc::downgrade(&group), token, tls));
        spawn_leader_work(Arc::downgrade(self));
        Ok(())
    }

    /// Stops this member's Raft (a lone meta has none): it neither votes
    /// nor applies from then on.
    pub async fn leave_group(&self) {
        if let Some(group) = self.group() {
            group.shutdown().await;
        }
    }

    /// This meta's group, when it is a member of one.
    fn group(&self) -> Option<&Arc<MetaGroup>> {
        self.group.get()
    }

    /// The token of `tessera admin` (the [`Principal::Admin`]).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The principal a handshake's secret proves (the admin token or a
    /// credential), or why it proves none. Blocking: reads the store.
    pub fn authenticate(&self, secret: &str) -> Result<Result<Principal, Refusal>, MetaError> {
        let state = self.state();
        state.authenticator.authenticate(&state.store, secret)
    }

    /// The text of `principal`'s current credential (as `tessera admin
    /// credential` prints it), for processes started alongside meta.
    pub fn mint_credential(&self, principal: Principal) -> Result<String, MetaError> {
        let state = self.state();
        let credential = state.authenticator.mint(&state.store, principal, false)?;
        Ok(credential.to_string())
    }

    /// The root user's S3 credentials (a group member's only once its
    /// group's first leader made them).
    pub fn root_credentials(&self) -> Option<RootCredentials> {
        self.root.clone().or_else(|| {
            let config = &self.state().config;
            match (&config.root_access_key, &config.root_secret_key) {
                (Some(access_key), Some(secret_key)) => Some(RootCredentials {
                    access_key: access_key.clone(),
                    secret_key: secret_key.clone(),
                    generated: false,
                }),
                _ => credentials::saved_root(config).ok().flatten(),
            }
        })
    }

    /// Waits until this member leads and has applied its term's start-up
    /// writes (the root user among them): what `tessera server`, a group
    /// of one, waits for before it starts its datanodes and gateway. A
    /// lone meta serves from the start.
    pub async fn wait_until_leading(&self, within: Duration) -> Result<(), MetaError> {
        if self.group().is_none() {
            return Ok(());
        }
        let mut started = self.started.subscribe();
        let led = tokio::time::timeout(within, started.wait_for(|started| *started))
            .await
            .is_ok_and(|waited| waited.is_ok());
        if !led {
            return Err(MetaError::Transport(format!(
                "this meta did not lead its group within {within:?}"
            )));
        }
        Ok(())
    }

    /// The configuration the service was opened with.
    pub fn config(&self) -> MetaConfig {
        self.state().config.clone()
    }

    /// A client of this service in this process, acting as `principal`.
    pub fn client(self: &Arc<Self>, principal: Principal) -> MetaClient {
        MetaClient::new(Arc::new(LocalMeta {
            service: self.clone(),
            principal,
        }))
    }

    /// Loads many fresh objects in one write transaction (seconds for a
    /// million keys, where one commit per object would take minutes): for
    /// imports and the listing benchmark. Buckets must exist; replaced
    /// records' blocks are not freed. Blocking.
    pub fn bulk_insert_objects(&self, records: &[ObjectRecord]) -> Result<(), MetaError> {
        crate::ops::listing::bulk_insert_objects(&self.state(), records)
    }

    /// Why the store refuses writes now (a full disk, or for a group
    /// member too little free space), or None when healthy: what meta's
    /// `/health` reports.
    pub fn store_failure(&self) -> Option<String> {
        self.group()
            .and_then(|group| group.space_refusal())
            .or_else(|| self.state().store.failure())
    }

    /// Ends the lifecycle pass under way, then runs a whole new pass at
    /// once, and answers what it did (tests and tools; the worker keeps its
    /// own schedule). Blocking.
    pub fn run_lifecycle_pass(&self) -> Result<LifecyclePass, MetaError> {
        self.state().run_lifecycle_pass()
    }

    /// One batch of the lifecycle pass under way, or of a new one when
    /// none is (tests of passes cut short). Blocking.
    pub fn step_lifecycle(&self) -> Result<(), MetaError> {
        let state = self.state();
        let running = lifecycle_passes::load(&state.store)?.0.is_some();
        state
            .lifecycle_step(state.config.clock.now(), !running)
            .map(drop)
    }

    /// Every bad-replica report kept, in block order (for repair tools and tests).
    pub fn bad_replicas(&self) -> Result<Vec<BadReplicaReport>, MetaError> {
        bad_replicas::bad_replicas(&self.state().store)
    }

    /// Serves `request` for a caller acting as `principal`.
    pub async fn call<R: MetaRequest>(
        &self,
        request: R,
        principal: &Principal,
    ) -> Result<R::Response, MetaError> {
        let answer = self.serve(request.into_any(), principal).await?;
        R::response_of(answer)
            .map_err(|other| MetaError::Protocol(format!("{} answered as {other}", R::NAME)))
    }

    /// Serves one request in its envelope for a caller acting as `principal`.
    pub async fn serve(
        &self,
        request: AnyRequest,
        principal: &Principal,
    ) -> Result<AnyResponse, MetaError> {
        let name = request.name();
        metrics::counter!(crate::telemetry::REQUESTS.name, "kind" => name).increment(1);
        let result = if !request.may_be_sent_by(principal) {
            metrics::counter!(crate::telemetry::UNAUTHORIZED.name, "kind" => name).increment(1);
            tracing::warn!(kind = name, %principal, "meta request refused: not this principal's");
            Err(MetaError::Unauthorized)
        } else if request.access() == Access::Group {
            self.serve_group(request).await
        } else {
            match self.group() {
                Some(group) if request.access() == Access::Write => group.write(request).await,
                Some(group) if request.access() == Access::Reserved => {
                    group.serve_reserved(request).await
                }
                Some(group) => match group.linearizable().await {
                    Ok(()) => self.serve_here(request).await,
                    Err(e) => Err(e),
                },
                // A member whose Raft has not started yet (it opens its
                // store, then its port, then joins): its store may be
                // behind the group's, so it serves nothing.
                None if self.state().store.is_replicated() => {
                    Err(MetaError::NotLeader { leader: None })
                }
                None => self.serve_here(request).await,
            }
        };
        if let Err(e) = &result {
            metrics::counter!(crate::telemetry::ERRORS.name, "kind" => name).increment(1);
            tracing::debug!(kind = name, error = %e, "meta request refused");
        }
        result
    }

    /// Serves a request from this meta's store: every request of a lone
    /// meta, the reads of a group's leader.
    async fn serve_here(&self, request: AnyRequest) -> Result<AnyResponse, MetaError> {
        let state = self.state();
        // Writes return once durable; what reads saw may not be yet.
        let mark = state.store.mark();
        let (answer, horizon) = if request.access() == Access::PointRead {
            let answer =
                store::take_horizon_of(|| request.dispatch(&*state, state.config.clock.now()));
            // Served without awaiting anything: let the task yield in turn.
            tokio::task::consume_budget().await;
            answer
        } else {
            let state = state.clone();
            tokio::task::spawn_blocking(move || {
                store::take_horizon_of(|| request.dispatch(&*state, state.config.clock.now()))
            })
            .await
            .unwrap_or_else(|e| {
                (
                    Err(MetaError::Store(format!("meta request failed: {e}"))),
                    0,
                )
            })
        };
        state.store.settled(mark, horizon).await?;
        answer
    }

    /// Serves the group's own requests: Raft messages, status, membership.
    async fn serve_group(&self, request: AnyRequest) -> Result<AnyResponse, MetaError> {
        // A member that has not joined its group yet (its store open, its
        // Raft about to start) says so: the leader's appends are tried
        // again, nothing is wrong with how it was started.
        let starting = self.state().store.is_replicated();
        let alone = || {
            MetaError::InvalidRequest(if starting {
                "this meta member is starting: its Raft is not running yet".into()
            } else {
                "this meta runs alone: start its members with --node-id and --peers".into()
            })
        };
        match request {
            AnyRequest::GetGroupStatus(_) => Ok(AnyResponse::GetGroupStatus(match self.group() {
                Some(group) => group.status(),
                None => GroupStatus::alone(),
            })),
            AnyRequest::GetGroupSecrets(_) => Ok(AnyResponse::GetGroupSecrets(group::secrets_of(
                &self.state().config.data_dir,
            )?)),
            AnyRequest::RaftMessage(message) => {
                let group = self.group().ok_or_else(alone)?;
                group.receive(message).await.map(AnyResponse::RaftMessage)
            }
            AnyRequest::AddGroupMember(add) => {
                let group = self.group().ok_or_else(alone)?;
                group.add(add).await.map(AnyResponse::AddGroupMember)
            }
            AnyRequest::TakeGroupSnapshot(_) => {
                let group = self.group().ok_or_else(alone)?;
                group.snapshot().await.map(AnyResponse::TakeGroupSnapshot)
            }
            AnyRequest::RemoveGroupMember(remove) => {
                let group = self.group().ok_or_else(alone)?;
                group
                    .remove(remove)
                    .await
                    .map(AnyResponse::RemoveGroupMember)
            }
            other => Err(MetaError::Protocol(format!(
                "{} is not the group's request",
                other.name()
            ))),
        }
    }
}

/// Longest a dropped service waits for a background round to end.
const STOP_WAIT: Duration = Duration::from_secs(30);

impl Drop for MetaService {
    /// Stops the background rounds and waits for one under way, so that the
    /// database is closed when the service is gone (a new service may open
    /// the same file at once).
    fn drop(&mut self) {
        let state = self.state();
        state.stopping.store(true, Ordering::Release);
        drop(state);
        let start = std::time::Instant::now();
        while Arc::strong_count(&self.slot.current()) > 2 && start.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The service reached in process, by a caller acting as one principal.
struct LocalMeta {
    service: Arc<MetaService>,
    principal: Principal,
}

impl MetaTransport for LocalMeta {
    fn send(&self, request: AnyRequest) -> BoxFuture<'_, Result<AnyResponse, MetaError>> {
        Box::pin(self.service.serve(request, &self.principal))
    }
}

/// Keeps the datanode gauges current while the service lives (states change
/// with time alone, without any request).
fn spawn_gauge_refresher(service: Weak<MetaService>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(GAUGE_INTERVAL);
        loop {
            tick.tick().await;
            let Some(state) = service.upgrade().map(|s| s.state()) else {
                return;
            };
            state.registry.publish_gauges();
        }
    });
}

/// Runs one background round on the blocking pool with the state, unless
/// the service is stopping.
async fn background<T: Send + 'static>(
    service: &Weak<MetaService>,
    idle: T,
    round: impl FnOnce(&MetaState) -> Result<T, MetaError> + Send + 'static,
) -> Option<Result<T, MetaError>> {
    // The service itself is not held across the round: only its state,
    // which a dropped service waits for.
    let state = service.upgrade()?.state();
    let ran = tokio::task::spawn_blocking(move || {
        if state.stopping.load(Ordering::Acquire) {
            return Ok(idle);
        }
        round(&state)
    })
    .await;
    Some(ran.unwrap_or_else(|e| Err(MetaError::Store(format!("background round stopped: {e}")))))
}

/// Runs the redundancy upkeep (scans, repair scheduling) of a lone meta
/// while the service lives, on the blocking pool, one round at a time.
fn spawn_redundancy_checker(service: Weak<MetaService>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(REDUNDANCY_CHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let round = background(&service, (), |state| {
                state.check_redundancy(state.config.clock.now(), Scan::IfDue)
            });
            match round.await {
                None => return,
                Some(Ok(())) => {}
                Some(Err(e)) => tracing::warn!(error = %e, "redundancy check failed"),
            }
        }
    });
}

/// Runs the lifecycle worker of a lone meta while the service lives: one
/// step at a time on the blocking pool, each followed by the pause it asks for.
fn spawn_lifecycle_worker(service: Weak<MetaService>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut pause = Duration::ZERO;
        loop {
            tokio::time::sleep(pause).await;
            let step = background(&service, Duration::from_secs(1), |state| {
                state.lifecycle_step(state.config.clock.now(), false)
            });
            pause = match step.await {
                None => return,
                Some(Ok(pause)) => pause,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "lifecycle step failed");
                    LIFECYCLE_RETRY
                }
            };
        }
    });
}

/// Runs a group member's background work while it leads: the start-up
/// writes once per term it leads, the redundancy upkeep every second and
/// the lifecycle steps, each as an entry of the log, so every member
/// applies the same writes.
fn spawn_leader_work(service: Weak<MetaService>) {
    tokio::spawn(async move {
        let weak = service.clone();
        // Often enough that a new leader's start-up writes follow its
        // election at once; the rounds keep their own pace.
        let mut tick = tokio::time::interval(group::LEADER_POLL / 2);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut started_term = None;
        let mut redundancy_at = tokio::time::Instant::now();
        let mut lifecycle_at = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let Some(service) = service.upgrade() else {
                return;
            };
            let Some(group) = service.group().cloned() else {
                return;
            };
            let lifecycle = service.state().config.lifecycle.background;
            let started = service.started.clone();
            drop(service);
            let term = group.status().term;
            if !group.is_leader() {
                started_term = None;
                started.send_if_modified(|started| std::mem::replace(started, false));
                continue;
            }
            if started_term != Some(term) {
                match group.propose(Action::Startup).await {
                    Ok(_) => {
                        started_term = Some(term);
                        group.correct_own_address().await;
                        started.send_replace(true);
                    }
                    Err(e) => background_failed("start-up writes of the new leader", &e),
                }
                continue;
            }
            if tokio::time::Instant::now() >= redundancy_at {
                redundancy_at = tokio::time::Instant::now() + REDUNDANCY_CHECK_INTERVAL;
                // The leader decides whether the round scans; every member
                // then scans at that entry.
                let due = background(&weak, false, |state| {
                    state.scan_due(state.config.clock.now())
                });
                let action = match due.await {
                    None => return,
                    Some(Ok(true)) => Action::RedundancyScan,
                    Some(Ok(false)) => Action::Redundancy,
                    Some(Err(e)) => {
                        background_failed("redundancy check", &e);
                        continue;
                    }
                };
                if let Err(e) = group.propose(action).await {
                    background_failed("redundancy check", &e);
                }
            }
            if lifecycle && tokio::time::Instant::now() >= lifecycle_at {
                let pause = match group.propose(Action::Lifecycle).await {
                    Ok(Applied::Pause(Ok(ms))) => Duration::from_millis(ms),
                    Ok(other) => {
                        tracing::warn!(outcome = ?other, "lifecycle step failed");
                        LIFECYCLE_RETRY
                    }
                    Err(e) => {
                        background_failed("lifecycle step", &e);
                        LIFECYCLE_RETRY
                    }
                };
                lifecycle_at = tokio::time::Instant::now() + pause;
            }
        }
    });
}

/// Logs a background entry that was not applied, except for a full disk's
/// refusal, which the member logs once when it begins.
fn background_failed(what: &str, error: &MetaError) {
    match error {
        MetaError::OutOfSpace(_) => tracing::debug!(%error, "{what} refused"),
        _ => tracing::warn!(%error, "{what} failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::{AllocateBlock, Heartbeat};
    use proto::{BlockId, ReplicationConfig};
    use std::path::Path;

    /// A group of one in `dir`, leading.
    async fn leading_member(dir: &Path) -> Arc<MetaService> {
        let member = MetaService::open_member(MetaConfig::new(dir)).unwrap();
        let settings = GroupSettings {
            node_id: 1,
            peers: [(1, "127.0.0.1:1".to_string())].into(),
        };
        member.join_group(settings, None).await.unwrap();
        member
            .wait_until_leading(Duration::from_secs(30))
            .await
            .unwrap();
        member
    }

    #[tokio::test]
    async fn a_member_serves_nothing_before_its_raft_runs() {
        // A restarted member opens its store before it joins its group:
        // meanwhile its store may be behind the group's, so reads too must
        // go to the leader.
        let dir = tempfile::tempdir().unwrap();
        leading_member(dir.path()).await.leave_group().await;
        let member = MetaService::open_member(MetaConfig::new(dir.path())).unwrap();
        let read = meta_api::GetUser {
            name: "root".into(),
        };
        let write = meta_api::CreateBucket {
            name: "b".into(),
            owner: "root".into(),
            replication: None,
            access: Default::default(),
            object_lock: false,
        };
        for request in [read.into_any(), write.into_any()] {
            let answer = member.serve(request, &Principal::Admin).await;
            assert!(
                matches!(answer, Err(MetaError::NotLeader { leader: None })),
                "{answer:?}"
            );
        }
        // Its group's own requests hear that it is starting, not that it
        // runs alone.
        let snapshot = member
            .serve(meta_api::TakeGroupSnapshot.into_any(), &Principal::Admin)
            .await;
        assert!(
            matches!(&snapshot, Err(MetaError::InvalidRequest(m)) if m.contains("is starting")),
            "{snapshot:?}"
        );
    }

    /// `count` blocks allocated by `member`, and the log entries applied meanwhile.
    async fn allocate(member: &MetaService, count: usize) -> (Vec<BlockId>, u64) {
        let applied = || member.group().unwrap().status().last_applied.unwrap();
        let before = applied();
        let mut ids = Vec::new();
        for _ in 0..count {
            let request = AllocateBlock {
                config: ReplicationConfig::Replicated { replicas: 1 },
                exclude: Vec::new(),
            };
            ids.push(member.call(request, &Principal::Admin).await.unwrap().block);
        }
        (ids, applied() - before)
    }

    #[tokio::test]
    async fn a_leader_allocates_from_ranges_the_log_reserves_per_term() {
        let dir = tempfile::tempdir().unwrap();
        let member = leading_member(dir.path()).await;
        let report = test_support::meta::report("a", 1 << 40, 0);
        member
            .call(Heartbeat { report }, &Principal::Admin)
            .await
            .unwrap();
        let (first, entries) = allocate(&member, 300).await;
        // One entry reserves a range of ids (background rounds may add a few).
        assert!(entries < 30, "{entries} entries for 300 allocations");
        let mut seen = std::collections::HashSet::new();
        assert!(
            first.iter().all(|id| seen.insert(*id)),
            "an id handed out twice"
        );
        let first_reserved = reserved_up_to(&member);
        member.leave_group().await;
        drop(member);

        // The next term's leader reserves anew: none of the last range's
        // ids, handed out or not, is handed out again.
        let member = leading_member(dir.path()).await;
        let (second, _) = allocate(&member, 20).await;
        let second_reserved = reserved_up_to(&member);
        for id in &second {
            assert!(seen.insert(*id), "{id:?} handed out twice");
            assert!(
                (first_reserved..second_reserved).contains(&id.0),
                "{id:?} is not of the new term's range {first_reserved}..{second_reserved}"
            );
        }
        member.leave_group().await;
    }

    /// The stored block id counter: every id reserved is below it.
    fn reserved_up_to(member: &MetaService) -> u64 {
        use crate::store::tables::{COUNTERS, NEXT_BLOCK};
        member
            .state()
            .store
            .read(|txn| {
                Ok(txn
                    .open_table(COUNTERS)?
                    .get(NEXT_BLOCK)?
                    .map(|v| v.value()))
            })
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn a_lone_meta_refuses_a_members_data_folder() {
        let dir = tempfile::tempdir().unwrap();
        let member = leading_member(dir.path()).await;
        member.leave_group().await;
        drop(member);
        let opened = tokio::task::spawn_blocking({
            let config = MetaConfig::new(dir.path());
            move || MetaService::open(config)
        })
        .await
        .unwrap();
        assert!(
            matches!(&opened, Err(MetaError::InvalidRequest(why)) if why.contains("member's log")),
            "{:?}",
            opened.err()
        );
    }
}
