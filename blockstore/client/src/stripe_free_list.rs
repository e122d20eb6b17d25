//! A [`StripeFreeList`] per EC writer stream recycles the stream's own
//! stripe buffer sets. As in HDDS-17033, a stream goes to the shared
//! [`BufferPool`](crate::BufferPool) only when its free list is empty, so the
//! pool is touched a few times per stream instead of for every stripe.

use crate::buffer_pool::BufferPool;
use crate::stripe::Stripe;
use crate::ClientError;
use parking_lot::Mutex;
use proto::layout::EcLayout;
use std::sync::Arc;
use tokio::sync::Notify;

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
        let codec = codec::Codec::new(3, 2).unwrap();
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
