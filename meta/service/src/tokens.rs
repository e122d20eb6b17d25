//! Block tokens (see [`proto::token`]): meta's signing keys, and the tokens
//! it signs whenever it hands out block locations.
//!
//! A key signs for one rotation period, from its `active_from`; it is made
//! a heartbeat-staleness ahead of that, so that every live datanode holds it
//! before the first token it signs arrives, and it stays with the datanodes
//! until the last token it signed has expired (`retire_at`). Keys are kept
//! in the store, so tokens outlive a meta restart.

use crate::store::db::{decode, encode, StoreError};
use crate::store::tables::TOKEN_KEYS;
use crate::store::Store;
use meta_api::{BlockGroup, MetaError, UnixMillis};
use parking_lot::RwLock;
use proto::token::{index_mask, BlockToken, Modes, TokenKey};
use redb::ReadableTable;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A signing key and when it starts signing.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct IssuerKey {
    key: TokenKey,
    /// Unix ms from which it signs (until the next key's `active_from`).
    active_from: u64,
}

/// Meta's block token keys.
pub(crate) struct TokenIssuer {
    /// Every key not yet retired, oldest first.
    keys: RwLock<Vec<IssuerKey>>,
    rotation: u64,
    lifetime: u64,
    /// How far ahead of its use a key is made.
    lead: u64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn unix(now: UnixMillis) -> u64 {
    u64::try_from(now).unwrap_or(0)
}

impl TokenIssuer {
    /// Loads the stored keys (the start-up writes make the ones due,
    /// [`TokenIssuer::rotate`]).
    pub(crate) fn load(
        store: &Store,
        rotation: Duration,
        lifetime: Duration,
        lead: Duration,
    ) -> Result<Self, MetaError> {
        let keys = store.read(|txn| {
            let table = txn.open_table(TOKEN_KEYS)?;
            let mut keys = Vec::new();
            for entry in table.iter()? {
                let (_, value) = entry?;
                keys.push(decode::<IssuerKey>(value.value())?);
            }
            Ok(keys)
        })?;
        Ok(Self {
            keys: RwLock::new(keys),
            rotation: millis(rotation),
            lifetime: millis(lifetime),
            lead: millis(lead).min(millis(rotation) / 2),
        })
    }

    /// Makes the next key when it is due, and drops retired ones; a write
    /// only when something changed (once a rotation period).
    pub(crate) fn rotate(&self, store: &Store, now: UnixMillis) -> Result<(), MetaError> {
        let now = unix(now);
        let due = |keys: &[IssuerKey]| match keys.last() {
            None => true,
            Some(newest) => newest.active_from.saturating_add(self.rotation) <= now + self.lead,
        };
        let retired = |keys: &[IssuerKey]| keys.iter().any(|k| k.key.retire_at < now);
        {
            let keys = self.keys.read();
            if !due(&keys) && !retired(&keys) {
                return Ok(());
            }
        }
        let mut keys = self.keys.write();
        let mut added = None;
        if due(&keys) {
            let active_from = keys
                .last()
                .map_or(now, |newest| {
                    newest.active_from.saturating_add(self.rotation)
                })
                .max(now);
            let secret = crate::entropy::bytes::<32>();
            added = Some(IssuerKey {
                key: TokenKey {
                    id: keys.last().map_or(1, |k| k.key.id.wrapping_add(1)),
                    secret,
                    retire_at: active_from
                        .saturating_add(self.rotation)
                        .saturating_add(self.lifetime),
                },
                active_from,
            });
        }
        let gone: Vec<u32> = keys
            .iter()
            .filter(|k| k.key.retire_at < now)
            .map(|k| k.key.id)
            .collect();
        store.write(|txn| {
            let mut table = txn.open_table(TOKEN_KEYS)?;
            for id in &gone {
                table.remove(*id)?;
            }
            if let Some(new) = &added {
                table.insert(new.key.id, encode(new)?.as_slice())?;
            }
            Ok::<_, StoreError>(())
        })?;
        keys.retain(|k| !gone.contains(&k.key.id));
        if let Some(new) = added {
            tracing::info!(
                key = new.key.id,
                active_from = new.active_from,
                "new block token key"
            );
            keys.push(new);
        }
        Ok(())
    }

    /// Every key a datanode must hold at `now`.
    pub(crate) fn keys(&self, now: UnixMillis) -> Vec<TokenKey> {
        let now = unix(now);
        self.keys
            .read()
            .iter()
            .filter(|k| k.key.retire_at >= now)
            .map(|k| k.key.clone())
            .collect()
    }

    /// Signs a token for every block file of `group`, allowing `modes`, with
    /// the key active at `now`: valid for the token lifetime, but never past
    /// its key's retirement.
    pub(crate) fn sign(&self, group: &mut BlockGroup, modes: Modes, now: UnixMillis) {
        let now = unix(now);
        let keys = self.keys.read();
        // The newest key already active; a fresh meta has made one active now.
        let Some(signing) = keys
            .iter()
            .rev()
            .find(|k| k.active_from <= now)
            .or(keys.first())
        else {
            return;
        };
        let indexes = index_mask(group.replicas.iter().map(|r| r.index));
        let expires = now.saturating_add(self.lifetime).min(signing.key.retire_at);
        group.token = Some(BlockToken::sign(
            &signing.key,
            group.block,
            indexes,
            modes,
            expires,
        ));
    }

    /// Changes once a quarter of the token lifetime: a record whose tokens
    /// were signed in the current period is handed out again unchanged,
    /// with at least three quarters of their lifetime left.
    pub(crate) fn period(&self, now: UnixMillis) -> u64 {
        unix(now) / (self.lifetime / 4).max(1)
    }
}

/// Drops the tokens a writer sent back with its groups: records are stored
/// without them.
pub(crate) fn forget_tokens(groups: &mut [BlockGroup]) {
    for group in groups {
        group.token = None;
    }
}
