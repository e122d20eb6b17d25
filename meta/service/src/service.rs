//! The metadata service: opens the store, bootstraps the root user and the
//! secrets, and serves requests in process (as a [`MetaTransport`]) and for
//! the RPC server, each for the principal its caller proved to be. Request logic is synchronous over redb: point reads run on
//! the caller's task, everything else on the blocking pool.

use crate::authentication::{Authenticator, Refusal};
use crate::config::MetaConfig;
use crate::credentials::{self, RootCredentials};
use crate::decoded::{DecodedCache, DEFAULT_DECODED_CACHE_BYTES};
use crate::object_keys;
use crate::ops::bad_replicas::{self, BadReplicaReport};
use crate::orphans::OrphanDetector;
use crate::placement::BlockIds;
use crate::registry::Registry;
use crate::repair::RepairBook;
use crate::state::MetaState;
use crate::store;
use crate::store::db::all_json;
use crate::store::lifecycle_passes;
use crate::store::tables::DATANODES;
use crate::tokens::TokenIssuer;
use futures::future::BoxFuture;
use meta_api::lifecycle::LifecyclePass;
use meta_api::{
    AnyRequest, AnyResponse, DatanodeRecord, MetaClient, MetaError, MetaRequest, MetaTransport,
    ObjectRecord, Principal,
};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Name of the redb file in the data folder.
pub const DATABASE_FILE: &str = "meta.redb";

/// How often the datanode gauges are refreshed when no heartbeat arrives.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);

/// How often meta looks for groups to scan and repairs to hand out.
const REDUNDANCY_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long the lifecycle worker waits after a failed step.
const LIFECYCLE_RETRY: Duration = Duration::from_secs(10);

/// The metadata service over its redb store.
pub struct MetaService {
    state: Arc<MetaState>,
    root: RootCredentials,
}

impl MetaService {
    /// Opens (or creates) the store in `config.data_dir`, ensures the root user,
    /// its access key and the tokens exist. Blocking: call it at start-up or
    /// inside `spawn_blocking`.
    pub fn open(config: MetaConfig) -> Result<Arc<MetaService>, MetaError> {
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
        let now = config.clock.now();
        let store = store::open_committing(&config.data_dir.join(DATABASE_FILE), config.commits)?;
        // redb syncs the database file; a new file's name needs its folder synced.
        proto::durable::sync_dir(&config.data_dir)
            .map_err(|e| MetaError::Store(format!("syncing {}: {e}", config.data_dir.display())))?;
        let datanodes: Vec<DatanodeRecord> =
            store.read(|txn| all_json(&txn.open_table(DATANODES)?))?;
        let registry = Registry::load(datanodes);
        let block_ids = BlockIds::load(&store)?;
        let root = credentials::bootstrap_root(&store, &config, now)?;
        let authenticator = Authenticator::new(
            credentials::admin_token(&config)?,
            credentials::credential_key(&config)?,
        );
        let orphans = OrphanDetector::open(&store, config.orphan_grace, now)?;
        let tokens = TokenIssuer::load(
            &store,
            config.token_rotation,
            config.token_lifetime,
            config.stale_after,
            now,
        )?;
        let repairs = RepairBook::new(config.repair.clone());
        let object_keys = object_keys::ObjectKeys::load(&config.data_dir, &store)?;
        lifecycle_passes::note_restart(&store)?;
        let state = Arc::new(MetaState {
            repairs,
            stopping: Default::default(),
            config,
            store,
            registry,
            block_ids,
            orphans,
            tokens,
            authenticator,
            decoded_objects: DecodedCache::new(DEFAULT_DECODED_CACHE_BYTES),
            decoded_buckets: DecodedCache::new(DEFAULT_DECODED_CACHE_BYTES / 8),
            object_keys,
        });
        spawn_gauge_refresher(Arc::downgrade(&state));
        spawn_redundancy_checker(Arc::downgrade(&state));
        if state.config.lifecycle.background {
            spawn_lifecycle_worker(Arc::downgrade(&state));
        }
        tracing::info!(data_dir = %state.config.data_dir.display(), "meta store opened");
        Ok(Arc::new(MetaService { state, root }))
    }

    /// The token of `tessera admin` (the [`Principal::Admin`]).
    pub fn admin_token(&self) -> &str {
        self.state.authenticator.admin_token()
    }

    /// The principal a handshake's secret proves (the admin token or a
    /// credential), or why it proves none. Blocking: reads the store.
    pub fn authenticate(&self, secret: &str) -> Result<Result<Principal, Refusal>, MetaError> {
        self.state
            .authenticator
            .authenticate(&self.state.store, secret)
    }

    /// The text of `principal`'s current credential (as `tessera admin
    /// credential` prints it), for processes started alongside meta.
    pub fn mint_credential(&self, principal: Principal) -> Result<String, MetaError> {
        let credential = self
            .state
            .authenticator
            .mint(&self.state.store, principal, false)?;
        Ok(credential.to_string())
    }

    /// The root user's S3 credentials.
    pub fn root_credentials(&self) -> RootCredentials {
        self.root.clone()
    }

    /// The configuration the service was opened with.
    pub fn config(&self) -> &MetaConfig {
        &self.state.config
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
        crate::ops::listing::bulk_insert_objects(&self.state, records)
    }

    /// Why the store refuses writes now (a full disk), or None when healthy:
    /// what meta's `/health` reports.
    pub fn store_failure(&self) -> Option<String> {
        self.state.store.failure()
    }

    /// Ends the lifecycle pass under way, then runs a whole new pass at
    /// once, and answers what it did (tests and tools; the worker keeps its
    /// own schedule). Blocking.
    pub fn run_lifecycle_pass(&self) -> Result<LifecyclePass, MetaError> {
        self.state.run_lifecycle_pass()
    }

    /// One batch of the lifecycle pass under way, or of a new one when
    /// none is (tests of passes cut short). Blocking.
    pub fn step_lifecycle(&self) -> Result<(), MetaError> {
        let running = lifecycle_passes::load(&self.state.store)?.0.is_some();
        self.state
            .lifecycle_step(self.state.config.clock.now(), !running)
            .map(drop)
    }

    /// Every bad-replica report kept, in block order (for repair tools and tests).
    pub fn bad_replicas(&self) -> Result<Vec<BadReplicaReport>, MetaError> {
        bad_replicas::bad_replicas(&self.state.store)
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
        metrics::counter!("tessera_meta_requests_total", "kind" => name).increment(1);
        let result = if !request.may_be_sent_by(principal) {
            metrics::counter!("tessera_meta_unauthorized_total", "kind" => name).increment(1);
            tracing::warn!(kind = name, %principal, "meta request refused: not this principal's");
            Err(MetaError::Unauthorized)
        } else {
            // Writes return once durable; what reads saw may not be yet.
            let mark = self.state.store.mark();
            let (answer, horizon) = if request.is_point_read() {
                let answer = store::take_horizon_of(|| {
                    request.dispatch(&*self.state, self.state.config.clock.now())
                });
                // Served without awaiting anything: let the task yield in turn.
                tokio::task::consume_budget().await;
                answer
            } else {
                let state = self.state.clone();
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
            match self.state.store.settled(mark, horizon).await {
                Ok(()) => answer,
                Err(lost) => Err(lost),
            }
        };
        if let Err(e) = &result {
            metrics::counter!("tessera_meta_errors_total", "kind" => name).increment(1);
            tracing::debug!(kind = name, error = %e, "meta request refused");
        }
        result
    }
}

/// Longest a dropped service waits for a background round to end.
const STOP_WAIT: Duration = Duration::from_secs(30);

impl Drop for MetaService {
    /// Stops the background rounds and waits for one under way, so that the
    /// database is closed when the service is gone (a new service may open
    /// the same file at once).
    fn drop(&mut self) {
        self.state.stopping.store(true, Ordering::Release);
        let start = std::time::Instant::now();
        while Arc::strong_count(&self.state) > 1 && start.elapsed() < STOP_WAIT {
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
fn spawn_gauge_refresher(state: Weak<MetaState>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(GAUGE_INTERVAL);
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            state.registry.publish_gauges(
                state.config.clock.now(),
                state.config.stale_after,
                state.config.dead_after,
            );
        }
    });
}

/// Runs the redundancy upkeep (scans, repair scheduling) while the service
/// lives, on the blocking pool, one round at a time.
fn spawn_redundancy_checker(state: Weak<MetaState>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(REDUNDANCY_CHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            let round = tokio::task::spawn_blocking(move || {
                if state.stopping.load(Ordering::Acquire) {
                    return Ok(());
                }
                let now = state.config.clock.now();
                state.check_redundancy(now)
            });
            match round.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "redundancy check failed"),
                Err(e) => tracing::warn!(error = %e, "redundancy check stopped"),
            }
        }
    });
}

/// Runs the lifecycle worker while the service lives: one step at a time on
/// the blocking pool, each followed by the pause it asks for.
fn spawn_lifecycle_worker(state: Weak<MetaState>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut pause = Duration::ZERO;
        loop {
            tokio::time::sleep(pause).await;
            let Some(state) = state.upgrade() else {
                return;
            };
            let step = tokio::task::spawn_blocking(move || {
                if state.stopping.load(Ordering::Acquire) {
                    return Ok(Duration::from_secs(1));
                }
                let now = state.config.clock.now();
                state.lifecycle_step(now, false)
            });
            pause = match step.await {
                Ok(Ok(pause)) => pause,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "lifecycle step failed");
                    LIFECYCLE_RETRY
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lifecycle step stopped");
                    LIFECYCLE_RETRY
                }
            };
        }
    });
}
