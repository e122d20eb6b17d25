//! Test data and waiting: bytes that differ by seed and position, their
//! ETag, and polling until a condition holds.

use md5::{Digest, Md5};
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// `len` random bytes from `seed` (the same seed gives the same bytes).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = vec![0u8; len];
    rng.fill(&mut out[..]);
    out
}

/// The hex MD5 of `data`: the ETag S3 gives a single-part object.
pub fn md5_hex(data: &[u8]) -> String {
    hex::encode(Md5::digest(data))
}

/// Waits (polling every 10 ms, up to 10 s) until `condition` holds; panics
/// with `what` if it never does.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}
