//! Readers shared by concurrent GETs of the same object version.
//!
//! A bounded LRU of `Arc<KeyReader>` keyed by (bucket, key); an entry serves
//! only the object id (and replica addresses) it was built for, so an
//! overwrite or a delete-then-put (a new `ObjectId`) retires the old entry
//! and builds a new reader. GETs already streaming keep their `Arc` to the
//! old reader. The mutex is held for one map operation; reads take no lock.
//! Object records themselves are never cached: every GET asks meta, so
//! read-after-write stays exact.

use block_client::{KeyReader, StoreClient};
use lru::LruCache;
use meta_api::ObjectRecord;
use parking_lot::Mutex;
use proto::ObjectId;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::Arc;

/// Default number of readers kept (each holds its object's block locations).
pub const DEFAULT_READER_CACHE_ENTRIES: usize = 1024;

struct CachedReader {
    /// The record the reader was built from: while meta answers with this
    /// very `Arc` (its decoded cache shares it), nothing needs comparing.
    record: Arc<ObjectRecord>,
    id: ObjectId,
    /// Hash of the replica addresses the reader was built with: a datanode
    /// that came back on another port makes the entry stale.
    locations: u64,
    reader: Arc<KeyReader>,
}

/// Bounded cache of object readers, one per (bucket, key) at its current version.
pub struct ReaderCache {
    entries: Mutex<LruCache<(String, String), CachedReader>>,
}

fn locations_hash(record: &ObjectRecord) -> u64 {
    let mut hasher = DefaultHasher::new();
    for group in &record.groups {
        for replica in &group.replicas {
            replica.addr.hash(&mut hasher);
        }
    }
    hasher.finish()
}

impl ReaderCache {
    /// An empty cache of at most `capacity` readers (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity.max(1)).expect("at least one");
        Self {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The shared reader of `record`'s version, built with `store` when the
    /// cache has none for it (or only one for an older version, which it
    /// replaces).
    pub fn get_or_open(&self, store: &StoreClient, record: &Arc<ObjectRecord>) -> Arc<KeyReader> {
        if record.inline.is_some() {
            // Its body is the record's: built at no cost, and a cached one
            // would keep the body alive past the record.
            return Arc::new(store.reader(record));
        }
        let name = (record.bucket.clone(), record.key.clone());
        if let Some(entry) = self.entries.lock().get(&name) {
            if Arc::ptr_eq(&entry.record, record) {
                metrics::counter!(crate::telemetry::READER_CACHE_HITS.name).increment(1);
                return Arc::clone(&entry.reader);
            }
        }
        let locations = locations_hash(record);
        if let Some(entry) = self.entries.lock().get_mut(&name) {
            if entry.id == record.id && entry.locations == locations {
                // The same version decoded anew (evicted from meta's cache,
                // or a remote meta): keep the reader, remember this record.
                entry.record = Arc::clone(record);
                metrics::counter!(crate::telemetry::READER_CACHE_HITS.name).increment(1);
                return Arc::clone(&entry.reader);
            }
        }
        // Built outside the lock: construction only walks the record.
        let reader = Arc::new(store.reader(record));
        let mut entries = self.entries.lock();
        match entries.get(&name) {
            // Another GET of the same version won the race: share its reader.
            Some(entry) if entry.id == record.id && entry.locations == locations => {
                Arc::clone(&entry.reader)
            }
            _ => {
                entries.put(
                    name,
                    CachedReader {
                        record: Arc::clone(record),
                        id: record.id,
                        locations,
                        reader: Arc::clone(&reader),
                    },
                );
                reader
            }
        }
    }

    /// Forgets the reader of (bucket, key), e.g. after a delete.
    pub fn retire(&self, bucket: &str, key: &str) {
        self.entries
            .lock()
            .pop(&(bucket.to_string(), key.to_string()));
    }

    /// Readers cached now.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True when no reader is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for ReaderCache {
    fn default() -> Self {
        Self::new(DEFAULT_READER_CACHE_ENTRIES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use block_client::ClientConfig;
    use futures::future::BoxFuture;
    use meta_api::{
        AnyRequest, AnyResponse, BlockGroup, MetaClient, MetaError, MetaTransport, ReplicaLocation,
    };
    use proto::{BlockId, DatanodeId, ReplicationConfig};

    /// Opening a reader asks meta nothing: a meta that answers nothing shows it.
    struct NoMeta;

    impl MetaTransport for NoMeta {
        fn send(&self, _: AnyRequest) -> BoxFuture<'_, Result<AnyResponse, MetaError>> {
            Box::pin(async { Err(MetaError::Transport("no meta in this test".into())) })
        }
    }

    fn record(key: &str, addr: &str) -> Arc<ObjectRecord> {
        let group = BlockGroup {
            block: BlockId(1),
            length: 10,
            replicas: vec![ReplicaLocation {
                index: 0,
                datanode: DatanodeId("dn".into()),
                addr: addr.into(),
            }],
            token: None,
        };
        let replication = ReplicationConfig::REPLICATED_1;
        Arc::new(ObjectRecord::new("b", key, "e", replication, vec![group]))
    }

    #[test]
    fn one_reader_per_version_and_a_new_one_after_overwrite() {
        let meta = MetaClient::new(Arc::new(NoMeta));
        let store = StoreClient::new(meta, ClientConfig::default());
        let cache = ReaderCache::new(2);
        let v1 = record("k", "127.0.0.1:1");
        let a = cache.get_or_open(&store, &v1);
        let b = cache.get_or_open(&store, &v1);
        assert!(Arc::ptr_eq(&a, &b), "same version shares one reader");

        // Overwrite: a new object id retires the old entry.
        let v2 = record("k", "127.0.0.1:1");
        let c = cache.get_or_open(&store, &v2);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(cache.len(), 1);
        assert!(Arc::ptr_eq(&c, &cache.get_or_open(&store, &v2)));
        // The same version decoded again (another Arc): still the same reader.
        let v2_decoded_again = Arc::new((*v2).clone());
        assert!(Arc::ptr_eq(
            &c,
            &cache.get_or_open(&store, &v2_decoded_again)
        ));
        // The old reader still works for whoever holds it.
        assert_eq!(a.len(), 10);

        // Same version, datanode moved: rebuilt with the new address.
        let mut moved = (*v2).clone();
        moved.groups[0].replicas[0].addr = "127.0.0.1:2".into();
        let moved = Arc::new(moved);
        assert!(!Arc::ptr_eq(&c, &cache.get_or_open(&store, &moved)));

        // Bounded: the least recently used name goes first.
        cache.get_or_open(&store, &record("x", "a:1"));
        cache.get_or_open(&store, &record("y", "a:1"));
        assert_eq!(cache.len(), 2);
        cache.retire("b", "y");
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_record_holding_its_body_gets_a_reader_of_its_own_never_cached() {
        let meta = MetaClient::new(Arc::new(NoMeta));
        let store = StoreClient::new(meta, ClientConfig::default());
        let cache = ReaderCache::new(2);
        let mut record = ObjectRecord::new("b", "k", "e", ReplicationConfig::REPLICATED_1, vec![]);
        record.size = 5;
        record.inline = Some(meta_api::InlineBody(bytes::Bytes::from_static(b"hello")));
        let record = Arc::new(record);
        let a = cache.get_or_open(&store, &record);
        let b = cache.get_or_open(&store, &record);
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(cache.is_empty());
        assert_eq!(a.len(), 5);
    }
}
