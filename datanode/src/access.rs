//! Block tokens on the datanode: the keys it checks them with, which come
//! from meta with every heartbeat answer, and the check each block request
//! passes before the store sees it (see [`proto::token`]).

use crate::error::StoreError;
use crate::store::BlockStore;
use crate::telemetry;
use parking_lot::RwLock;
use proto::token::{BlockToken, Modes, TokenError, TokenKey, TokenKeys};
use proto::wire::Request;
use proto::BlockKey;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// The token keys a datanode holds, and whether it has any yet: a datanode
/// serves no block request before its first heartbeat answer brought them.
pub struct TokenGate {
    keys: RwLock<TokenKeys>,
    ready: watch::Sender<bool>,
}

impl TokenGate {
    /// A gate holding no key yet: it refuses every token until
    /// [`set_keys`](Self::set_keys).
    pub fn new() -> Arc<Self> {
        Self::with_keys(Vec::new())
    }

    /// A gate holding `keys` already.
    pub fn with_keys(keys: Vec<TokenKey>) -> Arc<Self> {
        let (ready, _) = watch::channel(!keys.is_empty());
        Arc::new(Self {
            keys: RwLock::new(TokenKeys::new(keys)),
            ready,
        })
    }

    /// Replaces the keys with meta's current ones.
    pub fn set_keys(&self, keys: Vec<TokenKey>) {
        let has_keys = !keys.is_empty();
        *self.keys.write() = TokenKeys::new(keys);
        self.ready.send_replace(has_keys);
    }

    /// Waits until the gate holds a key.
    pub async fn ready(&self) {
        let mut ready = self.ready.subscribe();
        // The sender lives as long as `self`: wait_for cannot fail.
        let _ = ready.wait_for(|has_keys| *has_keys).await;
    }

    /// Checks that `token` allows `mode` on `key` now; a refusal is counted.
    pub fn check(
        &self,
        token: Option<&BlockToken>,
        key: BlockKey,
        mode: Modes,
    ) -> Result<(), StoreError> {
        self.verify(token, key, mode)
            .map_err(|reason| refused(key, reason))
    }

    /// Checks that `token` allows `request` on `store`: writing and
    /// committing need [`Modes::WRITE`], reading [`Modes::READ`], deleting
    /// [`Modes::DELETE`], or [`Modes::WRITE`] while the block is uncommitted
    /// (a writer drops the uploads it abandons). Requests that concern no
    /// block need none. A refusal is counted.
    pub fn authorize(
        &self,
        request: &Request,
        token: Option<&BlockToken>,
        store: &BlockStore,
    ) -> Result<(), StoreError> {
        let key = request.key();
        let verdict = match request {
            Request::LocalInfo => return Ok(()),
            Request::WriteChunks(_) | Request::CommitBlock { .. } => {
                self.verify(token, key, Modes::WRITE)
            }
            Request::ReadBlock { .. } => self.verify(token, key, Modes::READ),
            Request::DeleteBlock { .. } => match self.verify(token, key, Modes::DELETE) {
                Err(TokenError::WrongMode(_)) if store.block(key).is_none() => {
                    self.verify(token, key, Modes::WRITE)
                }
                other => other,
            },
        };
        verdict.map_err(|reason| refused(key, reason))
    }

    fn verify(
        &self,
        token: Option<&BlockToken>,
        key: BlockKey,
        mode: Modes,
    ) -> Result<(), TokenError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.keys.read().check(token, key, mode, now)
    }
}

fn refused(key: BlockKey, reason: TokenError) -> StoreError {
    telemetry::token_refused(reason.label());
    tracing::debug!(block = %key, %reason, "block request refused");
    StoreError::Denied { key, reason }
}
