//! Where meta reads the time: a wall clock for what it records, a
//! monotonic one for how long ago it heard something, and a manual one
//! for tests.

use meta_api::{now_millis, UnixMillis};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where meta reads the time: deletion delays, orphan ages and record
/// timestamps follow its wall clock ([`Clock::now`]); datanode liveness
/// follows its monotonic clock ([`Clock::monotonic`]), which a wall-clock
/// jump does not move.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system's wall clock.
    #[default]
    System,
    /// A clock that moves only when told (tests of time-dependent behaviour,
    /// in process or over the RPC alike).
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A manual clock showing `at`.
    pub fn manual(at: UnixMillis) -> Self {
        Self::Manual(Arc::new(AtomicI64::new(at)))
    }

    /// The time now.
    pub fn now(&self) -> UnixMillis {
        match self {
            Self::System => now_millis(),
            Self::Manual(at) => at.load(Ordering::SeqCst),
        }
    }

    /// Milliseconds on a clock that only moves forward at a steady rate:
    /// the system's monotonic clock (from this process's first reading),
    /// or a manual clock's time.
    pub fn monotonic(&self) -> UnixMillis {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        match self {
            Self::System => {
                let elapsed = ORIGIN.get_or_init(std::time::Instant::now).elapsed();
                i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
            }
            Self::Manual(at) => at.load(Ordering::SeqCst),
        }
    }

    /// Sets a manual clock to `at`; a system clock cannot be set.
    pub fn set(&self, at: UnixMillis) {
        match self {
            Self::System => panic!("the system clock cannot be set"),
            Self::Manual(now) => now.store(at, Ordering::SeqCst),
        }
    }

    /// Moves a manual clock on by `by`.
    pub fn advance(&self, by: Duration) {
        self.set(self.now() + i64::try_from(by.as_millis()).unwrap_or(i64::MAX));
    }
}
