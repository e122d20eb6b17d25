//! The gateway's credential cache in front of a real meta: an access key is
//! served from the cache until its time to live, and each cache belongs to
//! one meta.

use gateway::auth::cache::CredentialCache;
use meta_api::{CreateKey, DeleteKey};
use std::time::Duration;
use test_support::meta::{MetaUnderTest, Transport};

#[tokio::test]
async fn a_key_is_served_from_the_cache_until_its_ttl() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let key = meta
        .call(CreateKey {
            user: "root".into(),
        })
        .await
        .unwrap();
    let cached = CredentialCache::new(meta.gateway_client(), Duration::from_secs(3600));
    let uncached = CredentialCache::new(meta.gateway_client(), Duration::ZERO);
    for cache in [&cached, &uncached] {
        let (record, user) = cache.lookup(&key.access_key).await.unwrap().unwrap();
        assert_eq!(
            (record.secret_key.as_str(), user.name.as_str()),
            (key.secret_key.as_str(), "root")
        );
    }
    let delete = DeleteKey {
        access_key: key.access_key.clone(),
    };
    meta.call(delete).await.unwrap();
    // The cached entry answers without asking meta; the expired one asks
    // and learns the key is gone.
    assert!(cached.lookup(&key.access_key).await.unwrap().is_some());
    assert!(uncached.lookup(&key.access_key).await.unwrap().is_none());
    // A cache of another meta never sees this one's entries.
    let other = MetaUnderTest::open(Transport::Local).await;
    let elsewhere = CredentialCache::new(other.gateway_client(), Duration::from_secs(3600));
    assert!(elsewhere.lookup(&key.access_key).await.unwrap().is_none());
}
