//! Cost of one listing page against the meta service on a temp redb: a page
//! of 1,000 keys from a bucket of 1,000,000 keys, beside the same page from a
//! bucket of 10,000 keys in the same run. The ratio shows that a page costs in
//! proportion to the page, not to the bucket. With a delimiter, each of the
//! 1,000 common prefixes on the page hides 1,000 keys (10 in the small
//! bucket), which the scan must seek past rather than read.
//!
//! `cargo bench -p meta --bench listing`

use criterion::{criterion_group, criterion_main, Criterion};
use meta::{MetaConfig, MetaService, ROOT_USER};
use meta_api::{CreateBucket, ListObjects, ListPage, ObjectRecord, Principal};
use proto::ReplicationConfig;
use std::sync::Arc;
use tokio::runtime::Runtime;

/// Records committed per write transaction while populating.
const BATCH: usize = 100_000;
const PAGE: u32 = 1000;

fn record(bucket: &str, key: String) -> ObjectRecord {
    ObjectRecord::new(
        bucket,
        key,
        "d41d8cd98f00b204e9800998ecf8427e",
        ReplicationConfig::REPLICATED_1,
        Vec::new(),
    )
}

/// Bucket `name` with `keys` keys `dir-{d:06}/obj-{o:06}`, `per_dir` in each folder.
fn populate(runtime: &Runtime, meta: &MetaService, name: &str, keys: usize, per_dir: usize) {
    runtime
        .block_on(meta.call(
            CreateBucket {
                object_lock: false,
                name: name.to_string(),
                owner: ROOT_USER.to_string(),
                replication: None,
                access: Default::default(),
            },
            &Principal::Gateway("bench".into()),
        ))
        .expect("create bucket");
    let mut batch = Vec::with_capacity(BATCH);
    for i in 0..keys {
        batch.push(record(
            name,
            format!("dir-{:06}/obj-{:06}", i / per_dir, i % per_dir),
        ));
        if batch.len() == BATCH || i + 1 == keys {
            meta.bulk_insert_objects(&batch).expect("bulk insert");
            batch.clear();
        }
    }
}

fn list(runtime: &Runtime, meta: &MetaService, bucket: &str, delimiter: bool) -> ListPage {
    let request = ListObjects {
        bucket: bucket.to_string(),
        prefix: String::new(),
        // Start in the middle of the bucket, as a deep page would.
        start_after: Some("dir-000005/".to_string()),
        delimiter: delimiter.then(|| "/".to_string()),
        max_keys: PAGE,
    };
    runtime
        .block_on(meta.call(request, &Principal::Gateway("bench".into())))
        .expect("list")
}

fn listing(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let meta: Arc<MetaService> = runtime
        .block_on(async { MetaService::open(MetaConfig::new(dir.path())) })
        .expect("open meta");
    let started = std::time::Instant::now();
    // 1,000 folders of 1,000 keys, and 1,000 folders of 10 keys.
    populate(&runtime, &meta, "large", 1_000_000, 1000);
    populate(&runtime, &meta, "small", 10_000, 10);
    eprintln!("populated 1,010,000 keys in {:?}", started.elapsed());

    for (bucket, delimiter) in [
        ("large", false),
        ("large", true),
        ("small", false),
        ("small", true),
    ] {
        let page = list(&runtime, &meta, bucket, delimiter);
        let entries = page.objects.len() + page.common_prefixes.len();
        assert!(
            entries > 0 && entries <= PAGE as usize,
            "{bucket}: {entries} entries"
        );
    }

    let mut group = c.benchmark_group("list_page_1000");
    group.sample_size(30);
    for (label, bucket, delimiter) in [
        ("keys/bucket_10k", "small", false),
        ("keys/bucket_1M", "large", false),
        ("delimiter/bucket_10k", "small", true),
        ("delimiter/bucket_1M", "large", true),
    ] {
        group.bench_function(label, |b| {
            b.iter(|| list(&runtime, &meta, bucket, delimiter))
        });
    }
    group.finish();
}

criterion_group!(benches, listing);
criterion_main!(benches);
