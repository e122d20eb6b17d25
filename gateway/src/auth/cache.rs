//! Short-lived caches in front of SigV4's lookups, so that a request does not
//! pay two meta round trips (access key, then user) before its handler runs.
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
use blockstore::meta::{
    AccessKeyRecord, MetaClient, MetaError, MetaService, RemoteMeta, UserRecord,
};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a looked-up access key and its user are trusted.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(5);
/// Access keys remembered at once.
const CREDENTIAL_ENTRIES: usize = 4096;
/// Signing keys remembered at once (one per key, day and region in use).
const SIGNING_KEY_ENTRIES: usize = 1024;

/// The meta instance an entry came from, held weakly: two gateways of one
/// process (tests) never see each other's entries, and the pointer compared
/// cannot be reused while the entry exists.
#[derive(Clone)]
enum MetaIdentity {
    Local(Weak<MetaService>),
    Remote(Weak<RemoteMeta>),
}

impl MetaIdentity {
    fn of(meta: &MetaClient) -> Self {
        match meta {
            MetaClient::Local(service) => Self::Local(Arc::downgrade(service)),
            MetaClient::Remote(remote) => Self::Remote(Arc::downgrade(remote)),
        }
    }

    fn is(&self, meta: &MetaClient) -> bool {
        match (self, meta) {
            (Self::Local(weak), MetaClient::Local(arc)) => {
                std::ptr::eq(weak.as_ptr(), Arc::as_ptr(arc))
            }
            (Self::Remote(weak), MetaClient::Remote(arc)) => {
                std::ptr::eq(weak.as_ptr(), Arc::as_ptr(arc))
            }
            _ => false,
        }
    }
}

struct CredentialEntry {
    meta: MetaIdentity,
    key: AccessKeyRecord,
    user: UserRecord,
    expires: Instant,
}

/// Access key -> key and user records, with a time to live.
pub struct CredentialCache {
    ttl: Duration,
    entries: Mutex<LruCache<String, CredentialEntry>>,
}

impl CredentialCache {
    /// An empty cache whose entries last `ttl`.
    pub fn new(ttl: Duration) -> Self {
        let capacity = NonZeroUsize::new(CREDENTIAL_ENTRIES).expect("nonzero");
        Self {
            ttl,
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The key record of `access_key` and its user (None when either does
    /// not exist), from the cache when fresh, else from meta.
    pub async fn lookup(
        &self,
        meta: &MetaClient,
        access_key: &str,
    ) -> Result<Option<(AccessKeyRecord, UserRecord)>, MetaError> {
        if let Some(hit) = self.fresh(meta, access_key) {
            metrics::counter!("tessera_gateway_credential_cache_hits_total").increment(1);
            return Ok(Some(hit));
        }
        let Some(key) = meta.get_access_key(access_key).await? else {
            return Ok(None);
        };
        let Some(user) = meta.get_user(&key.user).await? else {
            return Ok(None);
        };
        let entry = CredentialEntry {
            meta: MetaIdentity::of(meta),
            key: key.clone(),
            user: user.clone(),
            expires: Instant::now() + self.ttl,
        };
        self.entries.lock().put(access_key.to_string(), entry);
        Ok(Some((key, user)))
    }

    fn fresh(&self, meta: &MetaClient, access_key: &str) -> Option<(AccessKeyRecord, UserRecord)> {
        let mut entries = self.entries.lock();
        let entry = entries.get(access_key)?;
        if entry.expires > Instant::now() && entry.meta.is(meta) {
            return Some((entry.key.clone(), entry.user.clone()));
        }
        entries.pop(access_key);
        None
    }
}

/// The process-wide credential cache `authenticate` uses.
pub fn credentials() -> &'static CredentialCache {
    static CACHE: OnceLock<CredentialCache> = OnceLock::new();
    CACHE.get_or_init(|| CredentialCache::new(CREDENTIAL_TTL))
}

/// The SigV4 signing key of `secret` for the day of `time` in `region`,
/// derived once per (secret, day, region).
pub(crate) fn signing_key(secret: &str, time: SystemTime, region: &str) -> SigningKey {
    type Cache = Mutex<LruCache<(String, u64, String), SigningKey>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let day = time
        .duration_since(UNIX_EPOCH)
        .map_or(u64::MAX, |d| d.as_secs() / 86_400);
    let cache = CACHE.get_or_init(|| {
        Mutex::new(LruCache::new(
            NonZeroUsize::new(SIGNING_KEY_ENTRIES).expect("nonzero"),
        ))
    });
    let id = (secret.to_string(), day, region.to_string());
    if let Some(key) = cache.lock().get(&id) {
        return key.clone();
    }
    let key = SigningKey::derive(secret, time, region);
    cache.lock().put(id, key.clone());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockstore::meta::{AdminOp, MetaConfig, MetaResponse};

    #[test]
    fn signing_keys_are_per_secret_day_and_region() {
        let t = UNIX_EPOCH + Duration::from_secs(20_000 * 86_400 + 5);
        let later_same_day = t + Duration::from_secs(3600);
        let next_day = t + Duration::from_secs(86_400);
        let sign = |k: SigningKey| k.sign("x");
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

    #[tokio::test]
    async fn a_key_is_served_from_the_cache_until_its_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let service = MetaService::open(MetaConfig::new(dir.path())).unwrap();
        let meta = MetaClient::Local(service.clone());
        let token = service.admin_token().to_string();
        let MetaResponse::Key(key) = meta
            .admin(
                &token,
                AdminOp::CreateKey {
                    user: "root".into(),
                },
            )
            .await
            .unwrap()
        else {
            panic!("no key created");
        };
        let cached = CredentialCache::new(Duration::from_secs(3600));
        let uncached = CredentialCache::new(Duration::ZERO);
        for cache in [&cached, &uncached] {
            let (record, user) = cache.lookup(&meta, &key.access_key).await.unwrap().unwrap();
            assert_eq!(
                (record.secret_key.as_str(), user.name.as_str()),
                (key.secret_key.as_str(), "root")
            );
        }
        meta.admin(
            &token,
            AdminOp::DeleteKey {
                access_key: key.access_key.clone(),
            },
        )
        .await
        .unwrap();
        // The cached entry answers without asking meta; the expired one asks
        // and learns the key is gone.
        assert!(cached
            .lookup(&meta, &key.access_key)
            .await
            .unwrap()
            .is_some());
        assert!(uncached
            .lookup(&meta, &key.access_key)
            .await
            .unwrap()
            .is_none());
        // Another meta instance never sees this one's entries.
        let other_dir = tempfile::tempdir().unwrap();
        let other =
            MetaClient::Local(MetaService::open(MetaConfig::new(other_dir.path())).unwrap());
        assert!(cached
            .lookup(&other, &key.access_key)
            .await
            .unwrap()
            .is_none());
    }
}
