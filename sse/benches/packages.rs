//! Sealing and opening throughput of the package format against MD5 of the
//! same bytes (what every PUT already computes), measured in the same run:
//! the ratio says what encryption adds to a body's CPU cost.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use md5::{Digest, Md5};
use sse::{DataKey, SealedRange, Sealer};

const BODY: usize = 16 * 1024 * 1024;
const PIECE: usize = 256 * 1024;

/// Seals `body` as a PUT streams it: each package is handed on (here
/// dropped) as soon as it is sealed; answers the stored bytes.
fn seal(key: &DataKey, body: &[u8]) -> usize {
    let mut sealer = Sealer::new(key);
    let mut stored = 0;
    for piece in body.chunks(PIECE) {
        stored += sealer.push(piece).iter().map(|p| p.len()).sum::<usize>();
    }
    stored + sealer.finish().map_or(0, |p| p.len())
}

fn sealed_copy(key: &DataKey, body: &[u8]) -> Vec<u8> {
    let mut sealer = Sealer::new(key);
    let mut out = Vec::new();
    for piece in body.chunks(PIECE) {
        for package in sealer.push(piece) {
            out.extend_from_slice(&package);
        }
    }
    out.extend(sealer.finish().unwrap_or_default());
    out
}

fn packages(c: &mut Criterion) {
    let body: Vec<u8> = (0..BODY).map(|i| i as u8).collect();
    let key = DataKey::random().unwrap();
    let sealed = sealed_copy(&key, &body);
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(BODY as u64));
    group.bench_function("md5 (baseline)", |b| b.iter(|| Md5::digest(&body)));
    group.bench_function("seal", |b| b.iter(|| seal(&key, &body)));
    group.bench_function("open", |b| {
        b.iter(|| {
            let range = SealedRange::of(0..BODY as u64, BODY as u64);
            let mut opener = range.opener(&key);
            let mut n = 0;
            for piece in sealed.chunks(PIECE) {
                n += opener.push(piece).unwrap().len();
            }
            n + opener.finish().unwrap().map_or(0, |_| 1)
        })
    });
    group.finish();
}

criterion_group!(benches, packages);
criterion_main!(benches);
