//! A byte-rate pacer for background work that must leave the disks and the
//! network to clients: each step waits for its turn, so that the steps of
//! every task sharing the pacer stay at the rate over time.

use parking_lot::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The longest one step may hold the pacer.
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Spreads background reads (repairs, scrubbing) over time: at most `rate`
/// bytes a second across every task sharing it, with bursts of one step.
pub struct Pacer {
    /// Bytes a second; 0: unpaced.
    rate: u64,
    /// When the next step may start.
    next: Mutex<Instant>,
}

impl Pacer {
    /// A pacer allowing `bytes_per_second` (0: no limit).
    pub fn new(bytes_per_second: u64) -> Self {
        Self {
            rate: bytes_per_second,
            next: Mutex::new(Instant::now()),
        }
    }

    /// Bytes a second it allows (0: no limit).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Waits for the turn of a step of `bytes`: steps are spaced so that
    /// their bytes, over time, stay at the rate.
    pub async fn take(&self, bytes: u64) {
        if self.rate == 0 {
            return;
        }
        // Absurd steps wait a year rather than overflow.
        let cost = Duration::try_from_secs_f64(bytes as f64 / self.rate as f64)
            .unwrap_or(Duration::MAX)
            .min(YEAR);
        let start = {
            let mut next = self.next.lock();
            let start = (*next).max(Instant::now());
            *next = start + cost;
            start
        };
        tokio::time::sleep_until(start).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn steps_are_spaced_by_their_bytes_at_the_rate() {
        let pacer = Pacer::new(1000);
        let start = tokio::time::Instant::now();
        pacer.take(500).await;
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the first step goes at once"
        );
        pacer.take(2000).await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        pacer.take(1).await;
        assert_eq!(start.elapsed(), Duration::from_millis(2500));
        let unpaced = Pacer::new(0);
        unpaced.take(u64::MAX).await;
        assert_eq!(start.elapsed(), Duration::from_millis(2500));
        // A step no rate can pay for holds the pacer, without overflowing.
        let slow = Pacer::new(1);
        slow.take(1).await;
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            slow.take(u64::MAX).await;
            slow.take(1).await;
        })
        .await;
        assert!(waited.is_err(), "the step after a huge one waits");
    }
}
