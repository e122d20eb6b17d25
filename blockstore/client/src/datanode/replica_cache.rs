//! The short-circuit replica cache: open block files (with their CRCs) kept
//! per (datanode address, block), so that repeated local reads of a block
//! skip the Unix-socket round trip.
//!
//! As in HDFS-10690, the cache is a linked hash map ([`lru::LruCache`]):
//! lookup, insertion, removal and eviction of the least recently used entry
//! are all O(1), with no ordered tree to rebalance. The map is bounded (each
//! entry holds a descriptor), entries idle for longer than the expiry are
//! dropped, and a datanode's revocations remove entries one by one or all at
//! once. Committed blocks are immutable, so an entry never goes stale by
//! itself, only by deletion, which the datanode reports.

use lru::LruCache;
use parking_lot::Mutex;
use proto::ids::BlockKey;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// Identifies a cached replica: the same block on two datanodes is two files.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ReplicaKey {
    addr: String,
    key: BlockKey,
}

struct Entry<V> {
    value: V,
    last_used: Instant,
}

/// A bounded, idle-expiring LRU map of open replicas; `V` is what is kept
/// per replica (the open file and its CRCs for short-circuit reads).
pub struct ReplicaCache<V> {
    entries: Mutex<LruCache<ReplicaKey, Entry<V>>>,
    idle_expiry: Duration,
}

impl<V: Clone> ReplicaCache<V> {
    /// A cache of at most `capacity` replicas (at least one), each dropped
    /// after `idle_expiry` without use.
    pub fn new(capacity: usize, idle_expiry: Duration) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            entries: Mutex::new(LruCache::new(capacity)),
            idle_expiry,
        }
    }

    /// The replica of `key` on `addr`, marked most recently used; `None` when
    /// absent or idle past the expiry (then dropped).
    pub fn get(&self, addr: &str, key: BlockKey) -> Option<V> {
        self.get_at(addr, key, Instant::now())
    }

    /// Caches `value` for `key` on `addr` (replacing any previous one),
    /// evicting the least recently used replica when full.
    pub fn insert(&self, addr: &str, key: BlockKey, value: V) {
        self.insert_at(addr, key, value, Instant::now());
    }

    /// Drops the replica of `key` on `addr`; returns whether it was cached.
    pub fn remove(&self, addr: &str, key: BlockKey) -> bool {
        let id = ReplicaKey {
            addr: addr.to_string(),
            key,
        };
        let removed = self.entries.lock().pop(&id);
        removed.is_some()
    }

    /// Drops every replica of the datanode at `addr` (its watch connection
    /// ended, so its revocations can no longer be heard); returns how many.
    pub fn remove_datanode(&self, addr: &str) -> usize {
        let removed: Vec<Entry<V>> = {
            let mut entries = self.entries.lock();
            let ids: Vec<ReplicaKey> = entries
                .iter()
                .filter(|(id, _)| id.addr == addr)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| entries.pop(id)).collect()
        };
        removed.len()
    }

    /// Replicas cached now.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most replicas kept.
    pub fn capacity(&self) -> usize {
        self.entries.lock().cap().get()
    }

    fn get_at(&self, addr: &str, key: BlockKey, now: Instant) -> Option<V> {
        let id = ReplicaKey {
            addr: addr.to_string(),
            key,
        };
        let mut entries = self.entries.lock();
        let expired = Self::expire_idle(&mut entries, self.idle_expiry, now);
        let value = entries.get_mut(&id).map(|entry| {
            entry.last_used = now;
            entry.value.clone()
        });
        drop(entries);
        drop(expired);
        value
    }

    fn insert_at(&self, addr: &str, key: BlockKey, value: V, now: Instant) {
        let id = ReplicaKey {
            addr: addr.to_string(),
            key,
        };
        let mut entries = self.entries.lock();
        let expired = Self::expire_idle(&mut entries, self.idle_expiry, now);
        let evicted = entries.push(
            id,
            Entry {
                value,
                last_used: now,
            },
        );
        // Dropped (descriptors closed) after the lock is released.
        drop(entries);
        drop((expired, evicted));
    }

    /// Pops entries idle past `idle_expiry`. Use order is LRU order, so
    /// they are all at the cold end: the cost is the number expired.
    fn expire_idle(
        entries: &mut LruCache<ReplicaKey, Entry<V>>,
        idle_expiry: Duration,
        now: Instant,
    ) -> Vec<Entry<V>> {
        let mut expired = Vec::new();
        while let Some((_, entry)) = entries.peek_lru() {
            if now.saturating_duration_since(entry.last_used) < idle_expiry {
                break;
            }
            if let Some((_, entry)) = entries.pop_lru() {
                expired.push(entry);
            }
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ids::BlockId;

    fn key(n: u64) -> BlockKey {
        BlockKey::new(BlockId(n), 0)
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn least_recently_used_is_evicted_first() {
        let cache = ReplicaCache::new(3, HOUR);
        let t = Instant::now();
        for n in 1..=3 {
            cache.insert_at("dn", key(n), n, t);
        }
        // Using 1 makes 2 the coldest.
        assert_eq!(cache.get_at("dn", key(1), t), Some(1));
        cache.insert_at("dn", key(4), 4, t);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get_at("dn", key(2), t), None);
        for n in [1, 3, 4] {
            assert_eq!(cache.get_at("dn", key(n), t), Some(n), "block {n}");
        }
        // Now 1 is coldest (3 and 4 were used after it).
        cache.insert_at("dn", key(5), 5, t);
        assert_eq!(cache.get_at("dn", key(1), t), None);
    }

    #[test]
    fn the_bound_holds_and_reinsertion_replaces() {
        let cache = ReplicaCache::new(2, HOUR);
        let t = Instant::now();
        for n in 0..100 {
            cache.insert_at("dn", key(n), n, t);
            assert!(cache.len() <= 2);
        }
        cache.insert_at("dn", key(99), 7, t);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get_at("dn", key(99), t), Some(7));
        assert_eq!(cache.capacity(), 2);
        assert_eq!(ReplicaCache::<u8>::new(0, HOUR).capacity(), 1);
    }

    #[test]
    fn the_same_block_on_two_datanodes_is_two_entries() {
        let cache = ReplicaCache::new(8, HOUR);
        cache.insert("a:1", key(1), 'a');
        cache.insert("b:1", key(1), 'b');
        assert_eq!(cache.get("a:1", key(1)), Some('a'));
        assert_eq!(cache.get("b:1", key(1)), Some('b'));
        assert_eq!(cache.get("c:1", key(1)), None);
    }

    #[test]
    fn idle_entries_expire_and_use_keeps_them() {
        let cache = ReplicaCache::new(8, Duration::from_secs(60));
        let t0 = Instant::now();
        cache.insert_at("dn", key(1), 1, t0);
        cache.insert_at("dn", key(2), 2, t0);
        let t1 = t0 + Duration::from_secs(50);
        assert_eq!(cache.get_at("dn", key(1), t1), Some(1));
        // At t2, block 2 was idle 70 s, block 1 only 20 s.
        let t2 = t0 + Duration::from_secs(70);
        assert_eq!(cache.get_at("dn", key(2), t2), None);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get_at("dn", key(1), t2), Some(1));
        // An insertion sweeps expired entries too.
        cache.insert_at("dn", key(3), 3, t2 + Duration::from_secs(61));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn removal_of_one_block_and_of_a_whole_datanode() {
        let cache = ReplicaCache::new(16, HOUR);
        for n in 0..5 {
            cache.insert("a:1", key(n), n);
            cache.insert("b:1", key(n), n + 10);
        }
        assert!(cache.remove("a:1", key(3)));
        assert!(!cache.remove("a:1", key(3)));
        assert_eq!(cache.get("a:1", key(3)), None);
        assert_eq!(cache.get("b:1", key(3)), Some(13));
        assert_eq!(cache.remove_datanode("b:1"), 5);
        assert_eq!(cache.len(), 4);
        assert!((0..5).all(|n| cache.get("b:1", key(n)).is_none()));
        assert_eq!(cache.get("a:1", key(4)), Some(4));
        assert_eq!(cache.remove_datanode("nobody"), 0);
    }
}
