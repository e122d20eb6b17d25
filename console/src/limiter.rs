//! Failed sign-ins per client address: after [`MAX_FAILURES`] within
//! [`WINDOW`], that address may not try again until the window ends, so a
//! secret cannot be guessed through the console at the speed of the network.
//! An IPv6 client counts by its /64, which one host can fill with addresses.
//! (Behind a proxy every browser shares the proxy's address, and the bound
//! applies to all of them together.)

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Failed sign-ins an address may make within [`WINDOW`].
pub(crate) const MAX_FAILURES: u32 = 5;
/// How long failures count, from the first of them.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// The failures of each address whose window is open.
#[derive(Default)]
pub(crate) struct SignInLimiter {
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

/// The address failures are counted by: the client's own for IPv4, its /64
/// for IPv6.
fn counted_as(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
        v4 => v4,
    }
}

impl SignInLimiter {
    /// None when `address` may try to sign in now, else how long it waits.
    pub(crate) fn wait(&self, address: IpAddr, now: Instant) -> Option<Duration> {
        let failures = self.failures.lock();
        let (count, since) = failures.get(&counted_as(address))?;
        let ends = *since + WINDOW;
        (*count >= MAX_FAILURES && now < ends).then(|| ends - now)
    }

    /// Counts a failed sign-in of `address`.
    pub(crate) fn failed(&self, address: IpAddr, now: Instant) {
        let mut failures = self.failures.lock();
        failures.retain(|_, (_, since)| now < *since + WINDOW);
        let entry = failures.entry(counted_as(address)).or_insert((0, now));
        entry.0 += 1;
    }

    /// Forgets the failures of `address`, which signed in.
    pub(crate) fn succeeded(&self, address: IpAddr) {
        self.failures.lock().remove(&counted_as(address));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_waits_after_too_many_failures_and_others_do_not() {
        let limiter = SignInLimiter::default();
        let (guesser, other): (IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let start = Instant::now();
        for i in 0..MAX_FAILURES {
            assert_eq!(limiter.wait(guesser, start), None, "after {i} failures");
            limiter.failed(guesser, start + Duration::from_secs(u64::from(i)));
        }
        let later = start + Duration::from_secs(10);
        assert_eq!(
            limiter.wait(guesser, later),
            Some(WINDOW - Duration::from_secs(10))
        );
        assert_eq!(limiter.wait(other, later), None);
        // The window ends a minute after the first failure.
        assert_eq!(limiter.wait(guesser, start + WINDOW), None);
        // A new failure after it starts a new count.
        limiter.failed(guesser, start + WINDOW);
        assert_eq!(limiter.wait(guesser, start + WINDOW), None);
    }

    #[test]
    fn an_ipv6_host_counts_by_its_64() {
        let limiter = SignInLimiter::default();
        let now = Instant::now();
        for i in 0..MAX_FAILURES {
            let address: IpAddr = format!("2001:db8:1:2::{i:x}").parse().unwrap();
            limiter.failed(address, now);
        }
        assert!(limiter
            .wait("2001:db8:1:2::ffff".parse().unwrap(), now)
            .is_some());
        assert!(limiter
            .wait("2001:db8:1:3::1".parse().unwrap(), now)
            .is_none());
    }

    #[test]
    fn signing_in_forgets_the_failures() {
        let limiter = SignInLimiter::default();
        let address: IpAddr = "::1".parse().unwrap();
        let now = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            limiter.failed(address, now);
        }
        limiter.succeeded(address);
        limiter.failed(address, now);
        assert_eq!(limiter.wait(address, now), None);
    }
}
