//! Everything a request may touch, shared by the tasks serving requests: the
//! store, the datanode registry, block placement, orphan detection and the
//! caches of decoded records. The operations (`ops`) sit above it and serve
//! requests over it; the service that owns it sits above them.

use crate::authentication::Authenticator;
use crate::config::MetaConfig;
use crate::credentials::{self, RootCredentials};
use crate::decoded::{DecodedCache, DEFAULT_DECODED_CACHE_BYTES};
use crate::object_keys;
use crate::orphans::OrphanDetector;
use crate::placement::BlockIds;
use crate::registry::{Liveness, Registry};
use crate::repair::RepairBook;
use crate::store::db::all_json;
use crate::store::lifecycle_passes;
use crate::store::tables::DATANODES;
use crate::store::Store;
use crate::tokens::TokenIssuer;
use meta_api::{BlockGroup, BucketRecord, DatanodeRecord, MetaError, ObjectRecord, UnixMillis};
use proto::token::Modes;

/// The state of one meta process.
pub(crate) struct MetaState {
    pub(crate) config: MetaConfig,
    pub(crate) store: std::sync::Arc<Store>,
    pub(crate) registry: Registry,
    pub(crate) block_ids: BlockIds,
    pub(crate) orphans: OrphanDetector,
    /// Repairs in flight and what the last redundancy scan found.
    pub(crate) repairs: RepairBook,
    /// What the balancer did.
    pub(crate) balance: crate::balance::BalanceBook,
    /// Set when the service is dropped: background rounds stop starting.
    pub(crate) stopping: std::sync::atomic::AtomicBool,
    /// Block token keys, and the tokens handed out with block locations.
    pub(crate) tokens: TokenIssuer,
    /// The admin token and the cluster credential key.
    pub(crate) authenticator: Authenticator,
    /// Object records decoded for reads, shared while their bytes are unchanged.
    pub(crate) decoded_objects: DecodedCache<ObjectRecord>,
    /// Bucket records decoded for reads, likewise.
    pub(crate) decoded_buckets: DecodedCache<BucketRecord>,
    /// Seal the data keys of encrypted bodies (see `crate::object_keys`).
    pub(crate) object_keys: crate::object_keys::ObjectKeys,
}

impl MetaState {
    /// The state over `store`: the datanode registry, block ids, token
    /// keys, credentials and object keys as the store and the data folder
    /// hold them. Writes nothing to a group member's store (its start-up
    /// writes go through the log: [`MetaState::startup_writes`]); a lone
    /// meta's due token keys and master key check are written here.
    /// Blocking.
    pub(crate) fn load(
        config: MetaConfig,
        store: std::sync::Arc<Store>,
    ) -> Result<MetaState, MetaError> {
        let now = config.clock.now();
        let datanodes: Vec<DatanodeRecord> =
            store.read(|txn| all_json(&txn.open_table(DATANODES)?))?;
        let registry = Registry::load(
            datanodes,
            Liveness {
                clock: config.clock.clone(),
                stale_after: config.stale_after,
                dead_after: config.dead_after,
            },
        );
        let block_ids = BlockIds::load(&store)?;
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
        )?;
        let repairs = RepairBook::new(config.repair.clone());
        let object_keys = object_keys::ObjectKeys::load(&config.data_dir, &store)?;
        Ok(MetaState {
            repairs,
            balance: Default::default(),
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
        })
    }

    /// What a meta writes when it starts: the root user and its key, due
    /// token keys, the master key's check value, and a restart counted in
    /// the lifecycle pass under way. A lone meta runs it on opening; a group
    /// runs it as an entry each new leader proposes. Answers the root
    /// credentials.
    pub(crate) fn startup_writes(&self, now: UnixMillis) -> Result<RootCredentials, MetaError> {
        let root = credentials::bootstrap_root(&self.store, &self.config, now)?;
        self.tokens.rotate(&self.store, now)?;
        object_keys::record_master_check(&self.store, &self.object_keys.master)?;
        lifecycle_passes::note_restart(&self.store)?;
        if self.store.is_replicated() {
            if let Some(end) = crate::placement::close_reserved_ranges(&self.store, now)? {
                self.orphans.clock.note_below(end, now);
            }
        }
        Ok(root)
    }

    /// Readies `groups` to be handed to a reader: current datanode
    /// addresses, and a read token for each group.
    pub(crate) fn hand_out_for_reading(&self, groups: &mut [BlockGroup], now: UnixMillis) {
        self.registry.refresh_addrs(groups);
        for group in groups {
            self.tokens.sign(group, Modes::READ, now);
        }
    }

    /// When blocks released at `now` may be handed to their datanodes.
    pub(crate) fn deletion_not_before(&self, now: UnixMillis) -> UnixMillis {
        let delay = i64::try_from(self.config.deletion_delay.as_millis()).unwrap_or(i64::MAX);
        now.saturating_add(delay)
    }
}
