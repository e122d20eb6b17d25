//! The memory-bounded [`BufferPool`] of a `StoreClient`, shared by every
//! writer stream: each stream's stripe buffer sets are taken from it (see
//! `stripe_free_list`) and given back, and the pool's bound caps the memory
//! of all streams together.
//!
//! A stream that ends leaves its buffer sets in the pool (up to a bound of
//! idle memory), and the next stream's takes reuse them: a fresh set is
//! memory the kernel has to fault in and zero, which for a 16 MiB PUT cost
//! more than hashing it on the machines measured here.

use bytes::BytesMut;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default bound of a client's write buffers: 1 GiB.
pub const DEFAULT_BUFFER_POOL_BYTES: u64 = 1024 * 1024 * 1024;

/// Default number of full stripes a writer queues for its flush task.
pub const DEFAULT_STRIPE_QUEUE: usize = 4;

/// The client-wide bound on write buffer memory. A take waits until enough
/// earlier takes were returned rather than exceed the bound.
pub struct BufferPool {
    limit_bytes: u64,
    room: Arc<Semaphore>,
    takes: AtomicU64,
    returns: AtomicU64,
    in_use_bytes: AtomicU64,
    peak_in_use_bytes: AtomicU64,
    reused: AtomicU64,
    idle: Mutex<IdleSets>,
}

/// Buffer sets of ended streams, kept for the next ones. They hold no room
/// in the pool's bound: taking one still takes room first.
struct IdleSets {
    sets: Vec<IdleSet>,
    bytes: u64,
    limit_bytes: u64,
}

struct IdleSet {
    cell_size: usize,
    cells: Vec<BytesMut>,
}

/// Most idle memory a pool keeps for reuse: half its bound. Writers that
/// start together end together: with 16 writers of rs-3-2-1024k (six 5 MiB
/// sets each, 480 MiB) an eighth of the default bound kept a quarter of the
/// sets the next keys needed, and the rest were new memory again.
fn idle_limit(limit_bytes: u64) -> u64 {
    limit_bytes / 2
}

/// A snapshot of a [`BufferPool`]'s counters, for tests and the admin view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffer sets taken from the pool since it was made.
    pub takes: u64,
    /// Buffer sets given back.
    pub returns: u64,
    /// Takes served with an ended stream's buffers instead of new memory.
    pub reused: u64,
    /// Bytes of the sets taken and not given back.
    pub in_use_bytes: u64,
    /// The most `in_use_bytes` has been since the pool was made.
    pub peak_in_use_bytes: u64,
    /// The bound on `in_use_bytes`.
    pub limit_bytes: u64,
}

impl BufferPool {
    /// A pool that lets at most `limit_bytes` of buffers out at once (a set
    /// larger than the bound takes all of it; a bound of 0 bounds nothing).
    pub fn new(limit_bytes: u64) -> Self {
        let permits = limit_bytes.min(Semaphore::MAX_PERMITS as u64) as usize;
        Self {
            limit_bytes,
            room: Arc::new(Semaphore::new(permits)),
            takes: AtomicU64::new(0),
            returns: AtomicU64::new(0),
            in_use_bytes: AtomicU64::new(0),
            peak_in_use_bytes: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            idle: Mutex::new(IdleSets {
                sets: Vec::new(),
                bytes: 0,
                limit_bytes: idle_limit(limit_bytes),
            }),
        }
    }

    /// Keeps an ended stream's buffer set for a later take, unless the idle
    /// sets already hold their bound.
    pub(crate) fn recycle(&self, cell_size: usize, cells: Vec<BytesMut>) {
        let bytes: u64 = cells.iter().map(|c| c.capacity() as u64).sum();
        let mut idle = self.idle.lock();
        if idle.bytes + bytes <= idle.limit_bytes {
            idle.bytes += bytes;
            idle.sets.push(IdleSet { cell_size, cells });
        }
    }

    /// An idle buffer set of `width` cells of `cell_size` bytes, if any.
    pub(crate) fn reuse(&self, width: usize, cell_size: usize) -> Option<Vec<BytesMut>> {
        let mut idle = self.idle.lock();
        let at = idle
            .sets
            .iter()
            .rposition(|s| s.cell_size == cell_size && s.cells.len() == width)?;
        let set = idle.sets.swap_remove(at);
        idle.bytes -= set.cells.iter().map(|c| c.capacity() as u64).sum::<u64>();
        drop(idle);
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(set.cells)
    }

    /// The pool's counters now.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            takes: self.takes.load(Ordering::Relaxed),
            returns: self.returns.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            in_use_bytes: self.in_use_bytes.load(Ordering::Relaxed),
            peak_in_use_bytes: self.peak_in_use_bytes.load(Ordering::Relaxed),
            limit_bytes: self.limit_bytes,
        }
    }

    /// Permits for a set of `bytes`: a set larger than the whole bound takes
    /// all of it (it still has to fit somehow).
    fn permits_for(&self, bytes: u64) -> u32 {
        let cap = self.limit_bytes.min(Semaphore::MAX_PERMITS as u64);
        u32::try_from(bytes.min(cap)).unwrap_or(u32::MAX)
    }

    /// Waits for room for `bytes` and leases it; the lease gives it back on drop.
    pub(crate) async fn take(self: &Arc<Self>, bytes: u64) -> PoolLease {
        let permits = self.permits_for(bytes);
        // The semaphore is never closed, so acquiring only fails in theory;
        // a lease without a permit still counts in the stats.
        let permit = self.room.clone().acquire_many_owned(permits).await.ok();
        self.takes.fetch_add(1, Ordering::Relaxed);
        let in_use = self.in_use_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_in_use_bytes.fetch_max(in_use, Ordering::Relaxed);
        metrics::counter!(crate::telemetry::BUFFER_POOL_TAKES.name).increment(1);
        PoolLease {
            pool: self.clone(),
            bytes,
            _permit: permit,
        }
    }
}

/// Room for one buffer set taken from a [`BufferPool`], given back on drop
/// whatever the path (sent, failed, cancelled).
pub(crate) struct PoolLease {
    pool: Arc<BufferPool>,
    bytes: u64,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for PoolLease {
    fn drop(&mut self) {
        self.pool.returns.fetch_add(1, Ordering::Relaxed);
        self.pool
            .in_use_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_buffers_are_bounded() {
        // Half of 200 bytes: two sets of 40 bytes fit, the third does not.
        let pool = BufferPool::new(200);
        for _ in 0..3 {
            let set: Vec<BytesMut> = (0..5).map(|_| BytesMut::with_capacity(8)).collect();
            pool.recycle(8, set);
        }
        assert!(pool.idle.lock().bytes <= 100);
        assert!(pool.reuse(5, 8).is_some());
        assert!(pool.reuse(5, 8).is_some());
        assert!(pool.reuse(5, 8).is_none());
    }
}
