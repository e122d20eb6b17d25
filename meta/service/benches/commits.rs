//! Meta's write rate against the number of concurrent writers: object
//! commits from 1, 8 and 64 concurrent callers, with group commit (writes
//! share one fsync) beside every write paying its own fsync, in the same
//! run, on the disk that holds the system's temporary folder.
//!
//! `cargo bench -p meta --bench commits`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use meta::{Commits, MetaConfig, MetaService, ROOT_USER};
use meta_api::{CommitObject, CreateBucket, MetaRequest, ObjectRecord, Principal};
use proto::ReplicationConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

const BUCKET: &str = "commits";

async fn call<R: MetaRequest>(meta: &MetaService, request: R) -> R::Response {
    meta.call(request, &Principal::Gateway("bench".into()))
        .await
        .expect("meta call")
}

/// Commits the object record of key number `n`.
async fn commit(meta: &MetaService, n: u64) {
    let record = ObjectRecord::new(
        BUCKET,
        format!("obj-{n:09}"),
        "d41d8cd98f00b204e9800998ecf8427e",
        ReplicationConfig::REPLICATED_1,
        Vec::new(),
    );
    call(
        meta,
        CommitObject {
            record,
            condition: None,
        },
    )
    .await;
}

/// Makes `total` commits from `writers` concurrent callers; how long it took.
fn commit_concurrently(
    runtime: &Runtime,
    meta: &Arc<MetaService>,
    keys: &Arc<AtomicU64>,
    writers: u64,
    total: u64,
) -> Duration {
    runtime.block_on(async {
        let started = Instant::now();
        let tasks: Vec<_> = (0..writers)
            .map(|writer| {
                let (meta, keys) = (meta.clone(), keys.clone());
                // The first writers take the remainder.
                let share = total / writers + u64::from(writer < total % writers);
                tokio::spawn(async move {
                    for _ in 0..share {
                        commit(&meta, keys.fetch_add(1, Ordering::Relaxed)).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("writer");
        }
        started.elapsed()
    })
}

fn commits(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("meta_commits");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(1));
    for (label, mode) in [
        ("grouped", Commits::Grouped),
        ("one_by_one", Commits::OneByOne),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = MetaConfig::new(dir.path());
        config.commits = mode;
        let meta = runtime
            .block_on(async { MetaService::open(config) })
            .expect("open meta");
        runtime.block_on(call(
            &meta,
            CreateBucket {
                object_lock: false,
                name: BUCKET.to_string(),
                owner: ROOT_USER.to_string(),
                replication: None,
                access: Default::default(),
            },
        ));
        let keys = Arc::new(AtomicU64::new(0));
        for writers in [1, 8, 64] {
            group.bench_function(format!("{label}/{writers}_writers"), |b| {
                b.iter_custom(|iters| commit_concurrently(&runtime, &meta, &keys, writers, iters))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, commits);
criterion_main!(benches);
