//! A bound on the object bodies (PutObject, UploadPart) the gateway streams
//! at once.
//!
//! One large PUT stream keeps about one core busy (its MD5 cannot be
//! split), and each holds its stripe buffers, hash queue and receive
//! buffers. Past a few streams per core, more of them at once only share the
//! same cores, while their memory grows with their number: on 2 cores, 16
//! concurrent 16 MiB PUTs moved 0.75-0.81 of the MB/s of 2
//! (`docs/benchmarks.md`). A small body is another matter: its PUT spends
//! most of its time waiting for the datanodes' and meta's syncs, not on a
//! core, and bounding small PUTs like large ones capped 64 KiB PUTs at four
//! in flight on 2 cores. So a slot is cut into [`SHARES_PER_SLOT`] shares of
//! [`SHARE_BYTES`]: a body takes a share per MiB it declares (one at least),
//! a whole slot from 16 MiB, or when its length is not known. A PUT waits
//! for its shares before its body is read (a client sending `Expect:
//! 100-continue` is answered only then), in arrival order, and gets a 503
//! (which SDKs retry) if they do not free up within the wait.

use crate::error::{S3Code, S3Error};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default slots per core.
pub const DEFAULT_SLOTS_PER_CORE: usize = 2;

/// Default longest wait for a slot.
pub const DEFAULT_SLOT_WAIT: Duration = Duration::from_secs(60);

/// Shares a slot is cut into.
pub const SHARES_PER_SLOT: u32 = 16;

/// Bytes of declared body one share stands for.
pub const SHARE_BYTES: u64 = 1 << 20;

/// Slots for object bodies being streamed into the block store.
pub struct UploadSlots {
    slots: Option<Arc<Semaphore>>,
    wait: Duration,
}

/// A slot held while one body streams; freed on drop.
pub struct UploadSlot(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

impl UploadSlots {
    /// `max` large bodies at once (0: no bound), each waiting at most
    /// `wait` for its slot.
    pub fn new(max: usize, wait: Duration) -> Self {
        let shares = max * SHARES_PER_SLOT as usize;
        Self {
            slots: (max > 0).then(|| Arc::new(Semaphore::new(shares))),
            wait,
        }
    }

    /// The default bound: two bodies per core of this machine.
    pub fn default_max() -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get()) * DEFAULT_SLOTS_PER_CORE
    }

    /// Waits for the shares of a body of `length` bytes (None: not
    /// declared), in arrival order; ServiceUnavailable after the wait.
    pub async fn acquire(&self, length: Option<u64>) -> Result<UploadSlot, S3Error> {
        let Some(slots) = &self.slots else {
            return Ok(UploadSlot(None));
        };
        let shares = match length {
            Some(bytes) => bytes
                .div_ceil(SHARE_BYTES)
                .clamp(1, u64::from(SHARES_PER_SLOT)) as u32,
            None => SHARES_PER_SLOT,
        };
        match tokio::time::timeout(self.wait, slots.clone().acquire_many_owned(shares)).await {
            Ok(Ok(permit)) => Ok(UploadSlot(Some(permit))),
            // The semaphore is never closed.
            Ok(Err(_)) => Ok(UploadSlot(None)),
            Err(_) => {
                metrics::counter!(crate::telemetry::UPLOAD_SLOT_TIMEOUTS.name).increment(1);
                Err(S3Error::new(S3Code::ServiceUnavailable))
            }
        }
    }

    /// Shares free now (None when unbounded).
    pub fn available(&self) -> Option<usize> {
        self.slots.as_ref().map(|s| s.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bodies_past_the_bound_wait_in_order_then_get_a_503() {
        let slots = Arc::new(UploadSlots::new(2, Duration::from_millis(200)));
        let a = slots.acquire(None).await.unwrap();
        let _b = slots.acquire(Some(64 << 20)).await.unwrap();
        assert_eq!(slots.available(), Some(0));
        // A third waits until a slot frees up...
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire(Some(1)).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(a);
        assert!(waiting.await.unwrap());
        // ...and one that waits too long is refused with a retryable 503.
        let _c = slots.acquire(None).await.unwrap();
        let refused = slots
            .acquire(None)
            .await
            .err()
            .expect("no slot within the wait");
        assert_eq!(refused.code(), S3Code::ServiceUnavailable);
    }

    #[tokio::test]
    async fn small_bodies_take_a_share_per_mib_so_many_fit_one_slot() {
        let slots = UploadSlots::new(1, Duration::from_millis(50));
        let small: Vec<_> =
            futures::future::join_all((0..16).map(|_| slots.acquire(Some(64 << 10)))).await;
        assert!(
            small.iter().all(Result::is_ok),
            "16 bodies of 64 KiB share one slot"
        );
        assert!(slots.acquire(Some(0)).await.is_err(), "a 17th waits");
        drop(small);
        let four = slots.acquire(Some(4 << 20)).await.unwrap();
        assert_eq!(slots.available(), Some(12));
        assert!(
            slots.acquire(None).await.is_err(),
            "a body of unknown length takes a whole slot"
        );
        drop(four);
        assert!(slots.acquire(Some(1 << 40)).await.is_ok());
    }

    #[tokio::test]
    async fn zero_means_unbounded() {
        let slots = UploadSlots::new(0, Duration::from_millis(1));
        let held: Vec<_> = futures::future::join_all((0..100).map(|_| slots.acquire(None))).await;
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(slots.available(), None);
    }
}
