//! Decoded records kept beside the stored bytes they were decoded from.
//!
//! Every GET reads its bucket and object record; decoding a record's JSON
//! (an object of 32 parts carries 160 replica locations) cost more than the
//! rest of a small ranged GET together. The cache answers with the record
//! decoded earlier when the bytes stored under the key now are *the same
//! bytes*: it is compared with the store on every lookup, so it can never
//! answer with a record that was overwritten or deleted, whichever write
//! path did it, and needs no invalidation. A `generation` (the datanode
//! address generation, for object records) makes an entry stale as well, for
//! what a record is refreshed with after decoding.
//!
//! Each entry also remembers the store's write epoch at which it was last
//! found equal to the store: while no write transaction has ended since,
//! [`DecodedCache::unchanged`] answers without a read transaction at all
//! (a ranged GET spent 7% of the gateway's CPU in the two lookups).

use crate::store::db::StoreError;
use lru::LruCache;
use parking_lot::Mutex;
use std::sync::Arc;

/// Default bound on the stored bytes of the records kept.
pub(crate) const DEFAULT_DECODED_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Most records kept, whatever their size.
const MAX_ENTRIES: usize = 16 * 1024;

struct Entry<T> {
    stored: Box<[u8]>,
    generation: u64,
    /// The store's write epoch loaded before the read that last found
    /// `stored` under the key.
    verified_epoch: u64,
    record: Arc<T>,
}

struct Entries<T> {
    map: LruCache<Box<[u8]>, Entry<T>>,
    bytes: usize,
}

/// Records decoded from one table, keyed by their table key, bounded in
/// count and in stored bytes (least recently used go first).
pub(crate) struct DecodedCache<T> {
    entries: Mutex<Entries<T>>,
    max_bytes: usize,
}

impl<T> DecodedCache<T> {
    /// An empty cache holding at most `max_bytes` of stored records.
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            entries: Mutex::new(Entries {
                map: LruCache::unbounded(),
                bytes: 0,
            }),
            max_bytes,
        }
    }

    /// The record under `key` when the store has not been written since a
    /// read found it (at `epoch`, the current write epoch) and `generation`
    /// is unchanged; None means: read the store.
    pub(crate) fn unchanged(&self, key: &[u8], epoch: u64, generation: u64) -> Option<Arc<T>> {
        let mut entries = self.entries.lock();
        let entry = entries.map.get(key)?;
        (entry.verified_epoch == epoch && entry.generation == generation)
            .then(|| Arc::clone(&entry.record))
    }

    /// The record stored as `stored` under `key`, read in a snapshot opened
    /// after loading write epoch `epoch`: the cached one when it was decoded
    /// from equal bytes at the same `generation`, else `decode(stored)`
    /// (which is then kept).
    pub(crate) fn get_or_decode(
        &self,
        key: &[u8],
        stored: &[u8],
        epoch: u64,
        generation: u64,
        decode: impl FnOnce(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Arc<T>, StoreError> {
        if let Some(entry) = self.entries.lock().map.get_mut(key) {
            if entry.generation == generation && *entry.stored == *stored {
                // Epochs only grow: never move an entry back to an older one.
                entry.verified_epoch = entry.verified_epoch.max(epoch);
                metrics::counter!(crate::telemetry::DECODED_CACHE_HITS.name).increment(1);
                return Ok(Arc::clone(&entry.record));
            }
        }
        metrics::counter!(crate::telemetry::DECODED_CACHE_MISSES.name).increment(1);
        let record = Arc::new(decode(stored)?);
        let cost = key.len() + stored.len();
        if cost > self.max_bytes / 16 {
            // One huge record must not flush everything else.
            return Ok(record);
        }
        let mut entries = self.entries.lock();
        let entry = Entry {
            stored: stored.into(),
            generation,
            verified_epoch: epoch,
            record: Arc::clone(&record),
        };
        if let Some((old_key, old)) = entries.map.push(key.into(), entry) {
            entries.bytes -= old_key.len() + old.stored.len();
        }
        entries.bytes += cost;
        while entries.bytes > self.max_bytes || entries.map.len() > MAX_ENTRIES {
            let Some((old_key, old)) = entries.map.pop_lru() else {
                break;
            };
            entries.bytes -= old_key.len() + old.stored.len();
        }
        Ok(record)
    }

    /// Records kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn decode_counting<'a>(
        count: &'a Cell<u32>,
    ) -> impl Fn(&[u8]) -> Result<String, StoreError> + 'a {
        move |bytes| {
            count.set(count.get() + 1);
            Ok(String::from_utf8(bytes.to_vec()).unwrap())
        }
    }

    #[test]
    fn equal_bytes_share_one_decoded_record() {
        let cache = DecodedCache::new(1 << 20);
        let decodes = Cell::new(0);
        let a = cache
            .get_or_decode(b"k", b"v1", 0, 0, decode_counting(&decodes))
            .unwrap();
        let b = cache
            .get_or_decode(b"k", b"v1", 0, 0, decode_counting(&decodes))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(decodes.get(), 1);
    }

    #[test]
    fn changed_bytes_or_generation_decode_again() {
        let cache = DecodedCache::new(1 << 20);
        let decodes = Cell::new(0);
        let v1 = cache
            .get_or_decode(b"k", b"v1", 0, 0, decode_counting(&decodes))
            .unwrap();
        // Overwritten with bytes of the same length: never the old record.
        let v2 = cache
            .get_or_decode(b"k", b"v2", 0, 0, decode_counting(&decodes))
            .unwrap();
        assert_eq!((v1.as_str(), v2.as_str()), ("v1", "v2"));
        let v2_again = cache
            .get_or_decode(b"k", b"v2", 0, 1, decode_counting(&decodes))
            .unwrap();
        assert!(
            !Arc::ptr_eq(&v2, &v2_again),
            "a new generation decodes afresh"
        );
        assert_eq!(decodes.get(), 3);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn bounded_by_stored_bytes() {
        let cache = DecodedCache::new(1600);
        let decodes = Cell::new(0);
        let value = [b'x'; 90];
        for i in 0..100u32 {
            let key = i.to_be_bytes();
            cache
                .get_or_decode(&key, &value, 0, 0, decode_counting(&decodes))
                .unwrap();
        }
        // 94 bytes per entry: at most 17 fit in 1,600.
        assert!(cache.len() <= 17, "{} entries", cache.len());
        assert!(cache.entries.lock().bytes <= 1600);
        // A record above a sixteenth of the bound is decoded, not kept.
        let big = [b'y'; 200];
        let before = cache.len();
        cache
            .get_or_decode(b"big", &big, 0, 0, decode_counting(&decodes))
            .unwrap();
        assert_eq!(cache.len(), before);
    }

    #[test]
    fn an_entry_is_reused_without_reading_only_at_the_epoch_it_was_verified() {
        let cache = DecodedCache::new(1 << 20);
        let decodes = Cell::new(0);
        let v1 = cache
            .get_or_decode(b"k", b"v1", 5, 0, decode_counting(&decodes))
            .unwrap();
        let reused = cache.unchanged(b"k", 5, 0).expect("no write since epoch 5");
        assert!(Arc::ptr_eq(&v1, &reused));
        assert!(cache.unchanged(b"k", 6, 0).is_none(), "a write ended since");
        assert!(cache.unchanged(b"k", 5, 1).is_none(), "new addresses");
        assert!(cache.unchanged(b"other", 5, 0).is_none());
        // Found equal again at epoch 6: reusable at 6, and never back at 5.
        cache
            .get_or_decode(b"k", b"v1", 6, 0, decode_counting(&decodes))
            .unwrap();
        assert!(cache.unchanged(b"k", 6, 0).is_some());
        cache
            .get_or_decode(b"k", b"v1", 5, 0, decode_counting(&decodes))
            .unwrap();
        assert!(cache.unchanged(b"k", 6, 0).is_some());
        assert!(cache.unchanged(b"k", 5, 0).is_none());
        // Overwritten: the new bytes' entry starts at the epoch of its read.
        let v2 = cache
            .get_or_decode(b"k", b"v2", 7, 0, decode_counting(&decodes))
            .unwrap();
        assert_eq!(v2.as_str(), "v2");
        assert!(cache.unchanged(b"k", 6, 0).is_none());
        assert_eq!(cache.unchanged(b"k", 7, 0).unwrap().as_str(), "v2");
        assert_eq!(decodes.get(), 2);
    }

    #[test]
    fn bounds_are_exact() {
        let decodes = Cell::new(0);
        // Entries of 100 bytes (a 4-byte key, 96 stored) in 1,600: a record
        // of exactly a sixteenth is kept, and sixteen fill the bound exactly.
        let cache = DecodedCache::new(1600);
        for i in 0..16u32 {
            cache
                .get_or_decode(
                    &i.to_be_bytes(),
                    &[b'x'; 96],
                    0,
                    0,
                    decode_counting(&decodes),
                )
                .unwrap();
        }
        assert_eq!(cache.len(), 16);
        assert_eq!(cache.entries.lock().bytes, 1600);
        // Overwriting a key replaces its bytes in the count, whatever their size.
        for size in [10, 96, 50] {
            cache
                .get_or_decode(
                    &0u32.to_be_bytes(),
                    &vec![b'y'; size],
                    0,
                    0,
                    decode_counting(&decodes),
                )
                .unwrap();
        }
        assert_eq!(cache.entries.lock().bytes, 1500 + 4 + 50);
        assert_eq!(cache.len(), 16);
        // However small the records, no more than MAX_ENTRIES are kept.
        let cache = DecodedCache::new(1 << 30);
        for i in 0..MAX_ENTRIES as u32 + 10 {
            cache
                .get_or_decode(&i.to_be_bytes(), b"v", 0, 0, |_| Ok(()))
                .unwrap();
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
    }

    #[test]
    fn decode_errors_are_not_kept() {
        let cache: DecodedCache<String> = DecodedCache::new(1 << 20);
        let failed = cache.get_or_decode(b"k", b"bad", 0, 0, |_| {
            Err(StoreError::Corrupt("corrupt".into()))
        });
        assert!(failed.is_err());
        assert_eq!(cache.len(), 0);
    }
}
