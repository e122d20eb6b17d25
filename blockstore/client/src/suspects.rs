//! Datanodes that failed or stalled recently, skipped by readers for a while.
//!
//! Without it a degraded read pays the dead host's timeout once per segment:
//! a 64 MiB range over rs-3-2 with 1 MiB cells waits on the same stalled
//! datanode twenty times. Once an address is marked, readers go straight to
//! the other replicas or rebuild from the other cells until the mark expires,
//! then try the address again.
//!
//! Marks live in a few shards, each a short `parking_lot` mutex over a small
//! map (held for one lookup or insert, never across I/O).

use parking_lot::Mutex;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// Default [`SuspectDatanodes`] time to live.
pub const DEFAULT_SUSPECT_TTL: Duration = Duration::from_secs(10);

/// Shards of the map; a power of two well above the reader concurrency of one host.
const SHARDS: usize = 16;

/// Addresses of datanodes that failed or timed out recently, each with the
/// time its mark expires. Shared by every reader of a process.
pub struct SuspectDatanodes {
    ttl: Duration,
    shards: [Mutex<HashMap<String, Instant>>; SHARDS],
}

impl SuspectDatanodes {
    /// An empty set whose marks last `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
        }
    }

    fn shard(&self, addr: &str) -> &Mutex<HashMap<String, Instant>> {
        let mut hasher = DefaultHasher::new();
        addr.hash(&mut hasher);
        &self.shards[hasher.finish() as usize % SHARDS]
    }

    /// Marks `addr` as failed now; readers skip it for the TTL.
    pub fn mark(&self, addr: &str) {
        let until = Instant::now() + self.ttl;
        let mut shard = self.shard(addr).lock();
        if shard.insert(addr.to_string(), until).is_none() {
            metrics::counter!(crate::telemetry::SUSPECT_MARKS.name).increment(1);
            tracing::info!(datanode = addr, ttl = ?self.ttl, "datanode marked suspect; reads skip it");
        }
    }

    /// Whether `addr` is marked and its mark has not expired (expired marks
    /// are dropped here).
    pub fn is_suspect(&self, addr: &str) -> bool {
        let mut shard = self.shard(addr).lock();
        match shard.get(addr) {
            Some(&until) if until > Instant::now() => true,
            Some(_) => {
                shard.remove(addr);
                false
            }
            None => false,
        }
    }

    /// Forgets the mark of `addr` (it answered again).
    pub fn clear(&self, addr: &str) {
        self.shard(addr).lock().remove(addr);
    }

    /// Addresses marked now, for diagnostics and tests.
    pub fn marked(&self) -> Vec<String> {
        let now = Instant::now();
        let mut out: Vec<String> = self
            .shards
            .iter()
            .flat_map(|s| {
                s.lock()
                    .iter()
                    .filter(|(_, &until)| until > now)
                    .map(|(a, _)| a.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    }
}

impl Default for SuspectDatanodes {
    fn default() -> Self {
        Self::new(DEFAULT_SUSPECT_TTL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_lasts_its_ttl_then_expires() {
        let suspects = SuspectDatanodes::new(Duration::from_secs(3600));
        assert!(!suspects.is_suspect("dn:1"));
        suspects.mark("dn:1");
        assert!(suspects.is_suspect("dn:1"));
        assert!(!suspects.is_suspect("dn:2"));
        assert_eq!(suspects.marked(), vec!["dn:1".to_string()]);
        suspects.clear("dn:1");
        assert!(!suspects.is_suspect("dn:1"));

        let expired = SuspectDatanodes::new(Duration::ZERO);
        expired.mark("dn:1");
        assert!(!expired.is_suspect("dn:1"));
        assert!(expired.marked().is_empty());
    }
}
