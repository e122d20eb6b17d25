//! Short-lived caches in front of SigV4's lookups, so that a request does not
//! pay two meta round trips (access key, then user) before its handler runs.
//!
//! Both live in the gateway's state ([`Credentials`]), one set per gateway.
//!
//! - Access key -> (key record, user record), for [`CREDENTIAL_TTL`]. Only
//!   keys that exist are cached; a key created a moment ago works at once.
//!   A deliberate departure from AWS, where revocation is also eventually
//!   consistent: a deleted key or user keeps working for up to the TTL.
//! - (secret, day, region) -> SigV4 signing key: a pure function of its
//!   inputs, so it never goes stale; it saves four HMACs per request.
//!
//! Object records are never cached here or anywhere in the gateway (a GET
//! must see the last committed PUT).

use super::canonical::SigningKey;
use lru::LruCache;
use meta_api::{AccessKeyRecord, GetAccessKey, GetUser, MetaClient, MetaError, UserRecord};
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a looked-up access key and its user are trusted.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(5);
/// Access keys remembered at once.
const CREDENTIAL_ENTRIES: usize = 4096;
/// Signing keys remembered at once (one per key, day and region in use).
const SIGNING_KEY_ENTRIES: usize = 1024;

struct CredentialEntry {
    key: AccessKeyRecord,
    user: UserRecord,
    expires: Instant,
}

/// Access key -> key and user records of one meta, with a time to live.
pub struct CredentialCache {
    meta: MetaClient,
    ttl: Duration,
    entries: Mutex<LruCache<String, CredentialEntry>>,
}

impl CredentialCache {
    /// An empty cache of `meta`'s keys whose entries last `ttl`.
    pub fn new(meta: MetaClient, ttl: Duration) -> Self {
        let capacity = NonZeroUsize::new(CREDENTIAL_ENTRIES).expect("nonzero");
        Self {
            meta,
            ttl,
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The key record of `access_key` and its user (None when either does
    /// not exist), from the cache when fresh, else from meta.
    pub async fn lookup(
        &self,
        access_key: &str,
    ) -> Result<Option<(AccessKeyRecord, UserRecord)>, MetaError> {
        if let Some(hit) = self.fresh(access_key) {
            metrics::counter!(crate::telemetry::CREDENTIAL_CACHE_HITS.name).increment(1);
            return Ok(Some(hit));
        }
        let request = GetAccessKey {
            access_key: access_key.to_string(),
        };
        let Some(key) = self.meta.call(request).await? else {
            return Ok(None);
        };
        let request = GetUser {
            name: key.user.clone(),
        };
        let Some(user) = self.meta.call(request).await? else {
            return Ok(None);
        };
        let entry = CredentialEntry {
            key: key.clone(),
            user: user.clone(),
            expires: Instant::now() + self.ttl,
        };
        self.entries.lock().put(access_key.to_string(), entry);
        Ok(Some((key, user)))
    }

    fn fresh(&self, access_key: &str) -> Option<(AccessKeyRecord, UserRecord)> {
        let mut entries = self.entries.lock();
        let entry = entries.get(access_key)?;
        if entry.expires > Instant::now() {
            return Some((entry.key.clone(), entry.user.clone()));
        }
        entries.pop(access_key);
        None
    }
}

/// SigV4 signing keys by (secret, day, region): a pure function of its
/// inputs, so an entry never goes stale.
pub struct SigningKeyCache {
    entries: Mutex<LruCache<(String, u64, String), SigningKey>>,
}

impl Default for SigningKeyCache {
    fn default() -> Self {
        let capacity = NonZeroUsize::new(SIGNING_KEY_ENTRIES).expect("nonzero");
        Self {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }
}

impl SigningKeyCache {
    /// The SigV4 signing key of `secret` for the day of `time` in `region`,
    /// derived once per (secret, day, region).
    pub(crate) fn key(&self, secret: &str, time: SystemTime, region: &str) -> SigningKey {
        let day = time
            .duration_since(UNIX_EPOCH)
            .map_or(u64::MAX, |d| d.as_secs() / 86_400);
        let id = (secret.to_string(), day, region.to_string());
        if let Some(key) = self.entries.lock().get(&id) {
            return key.clone();
        }
        let key = SigningKey::derive(secret, time, region);
        self.entries.lock().put(id, key.clone());
        key
    }
}

/// What the gateway keeps to authenticate requests: the credentials of one
/// meta and the signing keys derived from them.
pub struct Credentials {
    /// Access keys and their users.
    pub lookups: CredentialCache,
    /// Signing keys.
    pub signing_keys: SigningKeyCache,
}

impl Credentials {
    /// Caches in front of `meta`, access keys trusted for [`CREDENTIAL_TTL`].
    pub fn new(meta: MetaClient) -> Self {
        Self {
            lookups: CredentialCache::new(meta, CREDENTIAL_TTL),
            signing_keys: SigningKeyCache::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signing_keys_are_per_secret_day_and_region() {
        let t = UNIX_EPOCH + Duration::from_secs(20_000 * 86_400 + 5);
        let later_same_day = t + Duration::from_secs(3600);
        let next_day = t + Duration::from_secs(86_400);
        let sign = |k: SigningKey| k.sign("x");
        let cache = SigningKeyCache::default();
        let signing_key = |secret: &str, time, region: &str| cache.key(secret, time, region);
        assert_eq!(
            sign(signing_key("s", t, "r")),
            sign(SigningKey::derive("s", t, "r"))
        );
        assert_eq!(
            sign(signing_key("s", later_same_day, "r")),
            sign(signing_key("s", t, "r"))
        );
        assert_eq!(
            sign(signing_key("s", next_day, "r")),
            sign(SigningKey::derive("s", next_day, "r"))
        );
        assert_ne!(
            sign(signing_key("s", t, "r")),
            sign(signing_key("s2", t, "r"))
        );
        assert_ne!(
            sign(signing_key("s", t, "r")),
            sign(signing_key("s", t, "r2"))
        );
    }
}
