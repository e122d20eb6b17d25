//! Everything a request may touch, shared by the tasks serving requests: the
//! store, the datanode registry, block placement, orphan detection and the
//! caches of decoded records. The operations (`ops`) sit above it and serve
//! requests over it; the service that owns it sits above them.

use crate::authentication::Authenticator;
use crate::config::MetaConfig;
use crate::decoded::DecodedCache;
use crate::orphans::OrphanDetector;
use crate::placement::BlockIds;
use crate::registry::Registry;
use crate::repair::RepairBook;
use crate::store::Store;
use crate::tokens::TokenIssuer;
use meta_api::{BlockGroup, BucketRecord, ObjectRecord, UnixMillis};
use proto::token::Modes;

/// The state of one meta process.
pub(crate) struct MetaState {
    pub(crate) config: MetaConfig,
    pub(crate) store: Store,
    pub(crate) registry: Registry,
    pub(crate) block_ids: BlockIds,
    pub(crate) orphans: OrphanDetector,
    /// Repairs in flight and what the last redundancy scan found.
    pub(crate) repairs: RepairBook,
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
