//! Per-core cost of each stage of the data path on one rs-3-2-1024k stripe
//! (3 MiB of data), against a plain memory copy of the same bytes measured in
//! the same run: CRC32C at 16 KiB and 1 MiB per checksum, Reed-Solomon encode
//! and reconstruct (reed-solomon-erasure with SIMD, the crate we ship, beside
//! reed-solomon-simd), and MD5 (the ETag).
//!
//! `cargo bench -p codec --bench codec`

use codec::Codec;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use md5::{Digest, Md5};
use proto::checksum;

const CELL: usize = 1024 * 1024;
const DATA: usize = 3;
const PARITY: usize = 2;

fn cells(n: usize) -> Vec<Vec<u8>> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            (0..CELL)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect()
        })
        .collect()
}

fn stripe_stages(c: &mut Criterion) {
    let data = cells(DATA);
    let flat: Vec<u8> = data.concat();
    let mut group = c.benchmark_group("stripe_3MiB");
    group.throughput(Throughput::Bytes((DATA * CELL) as u64));
    group.sample_size(20);

    let mut copy = vec![0u8; flat.len()];
    group.bench_function("memcpy_baseline", |b| {
        b.iter(|| copy.copy_from_slice(black_box(&flat)))
    });
    group.bench_function("crc32c_16k_chunks", |b| {
        b.iter(|| checksum::compute(black_box(&flat), 16 * 1024))
    });
    group.bench_function("crc32c_1m_chunks", |b| {
        b.iter(|| checksum::compute(black_box(&flat), 1024 * 1024))
    });
    group.bench_function("crc_fast_16k_chunks", |b| {
        b.iter(|| {
            black_box(&flat)
                .chunks(16 * 1024)
                .map(|c| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, c) as u32)
                .collect::<Vec<u32>>()
        })
    });
    group.bench_function("crc_fast_1m_chunks", |b| {
        b.iter(|| {
            black_box(&flat)
                .chunks(1024 * 1024)
                .map(|c| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, c) as u32)
                .collect::<Vec<u32>>()
        })
    });
    group.bench_function("md5", |b| b.iter(|| Md5::digest(black_box(&flat))));

    let codec = Codec::new(DATA, PARITY).unwrap();
    let mut parity = vec![vec![0u8; CELL]; PARITY];
    group.bench_function("rs_erasure_simd_encode", |b| {
        b.iter(|| codec.encode(black_box(&data), &mut parity).unwrap())
    });
    codec.encode(&data, &mut parity).unwrap();
    let full: Vec<Vec<u8>> = data.iter().chain(parity.iter()).cloned().collect();
    group.bench_function("rs_erasure_simd_reconstruct_2_lost", |b| {
        b.iter(|| {
            let mut shards: Vec<Option<Vec<u8>>> = full.iter().cloned().map(Some).collect();
            shards[0] = None;
            shards[2] = None;
            codec.reconstruct_data(&mut shards).unwrap();
            shards
        })
    });
    group.bench_function("clone_5_cells_baseline", |b| {
        b.iter(|| {
            let shards: Vec<Option<Vec<u8>>> = full.iter().cloned().map(Some).collect();
            shards
        })
    });

    group.bench_function("rs_simd_encode", |b| {
        b.iter(|| reed_solomon_simd::encode(DATA, PARITY, black_box(&data)).unwrap())
    });
    let recovery = reed_solomon_simd::encode(DATA, PARITY, &data).unwrap();
    group.bench_function("rs_simd_reconstruct_2_lost", |b| {
        b.iter(|| {
            reed_solomon_simd::decode(
                DATA,
                PARITY,
                [(1usize, &data[1])],
                [(0usize, &recovery[0]), (1usize, &recovery[1])],
            )
            .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, stripe_stages);
criterion_main!(benches);
