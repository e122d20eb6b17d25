//! Write buffers: one memory-bounded [`BufferPool`] per `StoreClient`, shared
//! by every writer stream, and a [`StripeFreeList`] per EC writer stream that
//! recycles the stream's own stripe buffer sets.
//!
//! As in HDDS-17033, a stream goes to the shared pool only when its free list
//! is empty, so the pool is touched a few times per stream instead of for
//! every stripe; the pool's bound still caps the memory of all streams.
//!
//! A stream that ends leaves its buffer sets in the pool (up to a bound of
//! idle memory), and the next stream's takes reuse them: a fresh set is
//! memory the kernel has to fault in and zero, which for a 16 MiB PUT cost
//! more than hashing it on the machines measured here.

use super::stripe::Stripe;
use super::ClientError;
use bytes::BytesMut;
use parking_lot::Mutex;
use proto::layout::EcLayout;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

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
        self.in_use_bytes.fetch_add(bytes, Ordering::Relaxed);
        metrics::counter!("tessera_client_buffer_pool_takes_total").increment(1);
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

/// One writer stream's stripe buffer sets: the flush task gives each sent
/// stripe back here, reset, and the writer takes the next stripe from here,
/// going to the shared pool only when the list is empty and the stream holds
/// fewer than `bound` sets (the queued stripes plus the one being filled and
/// the one being flushed).
pub(crate) struct StripeFreeList {
    pool: Arc<BufferPool>,
    layout: EcLayout,
    bound: usize,
    state: Mutex<FreeState>,
    /// Signalled when a set comes back or the list closes. The writer is the
    /// only taker, so a signal with nobody waiting is kept for its next wait.
    changed: Notify,
}

struct FreeState {
    free: Vec<Stripe>,
    /// Sets this stream took from the pool (each one is free, queued, being
    /// filled or being flushed, until the stream ends).
    taken: usize,
    closed: bool,
}

impl StripeFreeList {
    /// An empty list for a stream of `layout` holding at most `bound` sets.
    pub(crate) fn new(pool: Arc<BufferPool>, layout: EcLayout, bound: usize) -> Self {
        Self {
            pool,
            layout,
            bound: bound.max(1),
            state: Mutex::new(FreeState {
                free: Vec::new(),
                taken: 0,
                closed: false,
            }),
            changed: Notify::new(),
        }
    }

    /// Bytes of one set: every data and parity cell.
    fn set_bytes(&self) -> u64 {
        self.layout.width() as u64 * u64::from(self.layout.cell_size)
    }

    /// The next empty stripe: a returned one if any, else a new set from the
    /// pool while the stream is under its bound, else waits for a return.
    /// Fails with `Closed` once the stream ended (its flush task stopped).
    pub(crate) async fn take(&self) -> Result<Stripe, ClientError> {
        loop {
            let may_take_new = {
                let mut state = self.state.lock();
                if state.closed {
                    return Err(ClientError::Closed);
                }
                if let Some(stripe) = state.free.pop() {
                    return Ok(stripe);
                }
                state.taken < self.bound
            };
            if !may_take_new {
                self.changed.notified().await;
                continue;
            }
            // The pool may be full while this stream's own sets come back:
            // wait for whichever comes first, so streams never wait on each
            // other for memory they hold themselves.
            tokio::select! {
                lease = self.pool.take(self.set_bytes()) => {
                    let mut state = self.state.lock();
                    if state.closed {
                        return Err(ClientError::Closed);
                    }
                    state.taken += 1;
                    let width = self.layout.width();
                    let cell_size = self.layout.cell_size as usize;
                    return Ok(match self.pool.reuse(width, cell_size) {
                        Some(cells) => Stripe::with_cells(&self.layout, cells, Some(lease)),
                        None => Stripe::new(&self.layout, Some(lease)),
                    });
                }
                () = self.changed.notified() => {}
            }
        }
    }

    /// Gives back a sent stripe, fully reset, for the stream's next stripe.
    pub(crate) fn put(&self, mut stripe: Stripe) {
        stripe.reset();
        let mut state = self.state.lock();
        if !state.closed {
            state.free.push(stripe);
        }
        drop(state);
        self.changed.notify_one();
    }

    /// Ends the stream: every free set goes back to the pool now (its room,
    /// and its buffers for reuse), sets still in use when they are dropped,
    /// and `take` fails from here on.
    pub(crate) fn close(&self) {
        let free = {
            let mut state = self.state.lock();
            state.closed = true;
            std::mem::take(&mut state.free)
        };
        let cell_size = self.layout.cell_size as usize;
        for stripe in free {
            self.pool.recycle(cell_size, stripe.into_cells());
        }
        self.changed.notify_one();
    }

    /// Sets this stream took from the shared pool.
    #[cfg(test)]
    pub(crate) fn sets_taken(&self) -> usize {
        self.state.lock().taken
    }
}

impl Drop for StripeFreeList {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    const LAYOUT: EcLayout = EcLayout {
        data: 3,
        parity: 2,
        cell_size: 8,
    };
    const SET: u64 = 5 * 8;

    #[tokio::test]
    async fn a_stream_reuses_its_sets_and_returns_them_on_close() {
        let pool = Arc::new(BufferPool::new(1 << 20));
        let list = StripeFreeList::new(pool.clone(), LAYOUT, 3);
        for round in 0..10u8 {
            let mut stripe = list.take().await.unwrap();
            let mut src = Bytes::from(vec![round; 24]);
            stripe.fill(&mut src);
            list.put(stripe);
        }
        assert_eq!(list.sets_taken(), 1);
        assert_eq!(pool.stats().takes, 1);
        assert_eq!(pool.stats().in_use_bytes, SET);
        list.close();
        let stats = pool.stats();
        assert_eq!((stats.returns, stats.in_use_bytes), (1, 0));
        assert!(matches!(list.take().await, Err(ClientError::Closed)));
    }

    #[tokio::test]
    async fn the_next_stream_reuses_an_ended_streams_buffers() {
        let pool = Arc::new(BufferPool::new(1 << 20));
        let first = StripeFreeList::new(pool.clone(), LAYOUT, 2);
        let mut stripe = first.take().await.unwrap();
        stripe.fill(&mut Bytes::from(vec![7u8; 24]));
        first.put(stripe);
        first.close();
        assert_eq!(pool.stats().in_use_bytes, 0, "room is given back on close");

        let second = StripeFreeList::new(pool.clone(), LAYOUT, 2);
        let mut reused = second.take().await.unwrap();
        assert_eq!(pool.stats().reused, 1);
        assert_eq!(
            pool.stats().in_use_bytes,
            SET,
            "a reused set still takes room"
        );
        assert_eq!(reused.len(), 0, "a reused set starts empty");
        // A partial stripe in reused buffers: the padding is zero again.
        reused.fill(&mut Bytes::from(vec![1u8; 10]));
        let codec = codec::Codec::get(3, 2).unwrap();
        let cells = reused.encode(&codec).unwrap();
        let fresh = {
            let mut s = Stripe::new(&LAYOUT, None);
            s.fill(&mut Bytes::from(vec![1u8; 10]));
            s.encode(&codec).unwrap()
        };
        assert_eq!(cells, fresh);
        // A different layout never gets these buffers.
        let other = EcLayout {
            cell_size: 16,
            ..LAYOUT
        };
        assert!(pool
            .reuse(other.width(), other.cell_size as usize)
            .is_none());
    }

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

    #[tokio::test]
    async fn a_stream_never_holds_more_than_its_bound() {
        let pool = Arc::new(BufferPool::new(1 << 20));
        let list = Arc::new(StripeFreeList::new(pool.clone(), LAYOUT, 2));
        let a = list.take().await.unwrap();
        let _b = list.take().await.unwrap();
        let waiting = tokio::spawn({
            let list = list.clone();
            async move { list.take().await.map(|s| s.len()) }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        list.put(a);
        assert_eq!(waiting.await.unwrap().unwrap(), 0);
        assert_eq!(pool.stats().takes, 2);
    }

    #[tokio::test]
    async fn a_full_pool_waits_for_room() {
        let pool = Arc::new(BufferPool::new(SET));
        let first = StripeFreeList::new(pool.clone(), LAYOUT, 4);
        let held = first.take().await.unwrap();
        let second = Arc::new(StripeFreeList::new(pool.clone(), LAYOUT, 4));
        let waiting = tokio::spawn({
            let second = second.clone();
            async move { second.take().await.is_ok() }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(pool.stats().in_use_bytes, SET);
        drop(held);
        assert!(waiting.await.unwrap());
        assert_eq!(pool.stats().takes, 2);
    }

    #[tokio::test]
    async fn a_returned_set_wakes_a_stream_waiting_on_a_full_pool() {
        let pool = Arc::new(BufferPool::new(SET));
        let list = Arc::new(StripeFreeList::new(pool.clone(), LAYOUT, 4));
        let only = list.take().await.unwrap();
        let waiting = tokio::spawn({
            let list = list.clone();
            async move { list.take().await.is_ok() }
        });
        tokio::task::yield_now().await;
        list.put(only);
        assert!(waiting.await.unwrap());
        assert_eq!(pool.stats().takes, 1);
    }
}
