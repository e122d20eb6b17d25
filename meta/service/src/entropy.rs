//! Where request handlers draw their random choices (new upload ids, access
//! keys, KMS keys, block placement, token keys).
//!
//! In a meta group every member applies the same requests to its own copy
//! of the store, and those copies must stay equal: so a replicated request
//! carries a seed, drawn by the leader from the system's generator, and
//! every member draws the handler's random values from a generator seeded
//! with it ([`seeded`]). Outside [`seeded`] (a single meta, start-up, tests)
//! the values come from the system's generator, as they always did.

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use std::cell::RefCell;

/// Seed of one replicated request's random values.
pub(crate) type Seed = [u8; 32];

thread_local! {
    /// The generator of the request being applied on this thread, if any.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// A fresh seed from the system's generator, for a request about to be replicated.
pub(crate) fn new_seed() -> Seed {
    let mut seed = Seed::default();
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed
}

/// The seed of the `n`-th of several commands sharing `seed` (the requests
/// of one log entry): each draws its own values.
pub(crate) fn nth(seed: Seed, n: usize) -> Seed {
    let mut derived = seed;
    for (byte, mix) in derived.iter_mut().zip((n as u64).to_le_bytes()) {
        *byte ^= mix;
    }
    derived
}

/// Runs `f` with every draw on this thread coming from a generator seeded
/// with `seed` (ChaCha, so the values are as unpredictable as the seed).
pub(crate) fn seeded<T>(seed: Seed, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<StdRng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SEEDED.with(|cell| *cell.borrow_mut() = previous);
        }
    }
    let previous = SEEDED.with(|cell| cell.replace(Some(StdRng::from_seed(seed))));
    let _restore = Restore(previous);
    f()
}

/// Runs `f` with this thread's generator: the seeded one inside [`seeded`],
/// else the system's.
pub(crate) fn with_rng<T>(f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
    SEEDED.with(|cell| match cell.borrow_mut().as_mut() {
        Some(rng) => f(rng),
        None => f(&mut rand::thread_rng()),
    })
}

/// `N` random bytes from this thread's generator.
pub(crate) fn bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    with_rng(|rng| rng.fill_bytes(&mut out));
    out
}

/// A random (version 4) UUID from this thread's generator.
pub(crate) fn uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(bytes()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_gives_one_sequence_and_unseeded_draws_differ() {
        let seed = new_seed();
        let draw = || (bytes::<16>(), uuid(), with_rng(|rng| rng.next_u64()));
        let first = seeded(seed, draw);
        assert_eq!(seeded(seed, draw), first);
        assert_ne!(seeded(new_seed(), draw), first);
        assert_ne!(draw(), draw());
        assert_eq!(first.1.get_version_num(), 4);
    }

    #[test]
    fn the_seeded_generator_ends_with_its_scope() {
        let seed = new_seed();
        let inner = seeded(seed, || seeded(new_seed(), bytes::<8>));
        let outer = seeded(seed, || {
            let _ = seeded(new_seed(), bytes::<8>);
            bytes::<8>()
        });
        assert_eq!(outer, seeded(seed, bytes::<8>));
        assert_ne!(inner, outer);
    }
}
