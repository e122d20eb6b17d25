//! Cost of one page of versions against the meta service: ListObjectVersions
//! of 1,000 entries from a bucket of 1,000 keys with 100 versions each,
//! beside the same page from a bucket of 100,000 keys with one version each
//! (100,000 versions in both), in the same run; and ListObjects of both, to
//! show that older versions cost a listing of the latest nothing. The store lives on /dev/shm where there is one: setting
//! up 100,000 commits there takes seconds, and a page is read from memory
//! either way.
//!
//! `cargo bench -p meta --bench versions`

use criterion::{criterion_group, criterion_main, Criterion};
use meta::{MetaConfig, MetaService, ROOT_USER};
use meta_api::{
    CommitObject, CreateBucket, ListObjectVersions, ListObjects, MetaRequest, ObjectRecord,
    Principal, SetBucketVersioning, Versioning,
};
use proto::ReplicationConfig;
use std::path::Path;
use tokio::runtime::Runtime;

const PAGE: u32 = 1000;

fn call<R: MetaRequest>(runtime: &Runtime, meta: &MetaService, request: R) -> R::Response {
    runtime
        .block_on(meta.call(request, &Principal::Gateway("bench".into())))
        .expect("meta call")
}

/// Bucket `name` with `keys` keys of `versions` versions each.
fn populate(runtime: &Runtime, meta: &MetaService, name: &str, keys: usize, versions: usize) {
    let create = CreateBucket {
        object_lock: false,
        name: name.to_string(),
        owner: ROOT_USER.to_string(),
        replication: None,
        access: Default::default(),
    };
    call(runtime, meta, create);
    let versioning = SetBucketVersioning {
        bucket: name.to_string(),
        versioning: Versioning::Enabled,
    };
    call(runtime, meta, versioning);
    for _ in 0..versions {
        for key in 0..keys {
            let record = ObjectRecord::new(
                name,
                format!("obj-{key:06}"),
                "d41d8cd98f00b204e9800998ecf8427e",
                ReplicationConfig::REPLICATED_1,
                Vec::new(),
            );
            let commit = CommitObject {
                record,
                condition: None,
            };
            call(runtime, meta, commit);
        }
    }
}

/// A page of versions from the middle of a bucket of `keys` keys.
fn list_versions(runtime: &Runtime, meta: &MetaService, bucket: &str, keys: usize) -> usize {
    let request = ListObjectVersions {
        bucket: bucket.to_string(),
        prefix: String::new(),
        // Start in the middle of the bucket, as a deep page would.
        key_marker: Some(format!("obj-{:06}", keys / 2)),
        version_marker: None,
        delimiter: None,
        max_keys: PAGE,
    };
    call(runtime, meta, request).versions.len()
}

fn list_latest(runtime: &Runtime, meta: &MetaService, bucket: &str) -> usize {
    let request = ListObjects {
        bucket: bucket.to_string(),
        prefix: String::new(),
        start_after: None,
        delimiter: None,
        max_keys: PAGE,
    };
    call(runtime, meta, request).objects.len()
}

fn versions(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let meta = runtime
        .block_on(async { MetaService::open(MetaConfig::new(dir.path())) })
        .expect("open meta");
    let started = std::time::Instant::now();
    let buckets = [("deep", 1000, 100), ("flat", 100_000, 1)];
    for (name, keys, versions) in buckets {
        populate(&runtime, &meta, name, keys, versions);
    }
    eprintln!("committed 200,000 versions in {:?}", started.elapsed());
    for (name, keys, _) in buckets {
        assert_eq!(list_versions(&runtime, &meta, name, keys), PAGE as usize);
        assert_eq!(list_latest(&runtime, &meta, name), PAGE as usize);
    }

    let mut group = c.benchmark_group("versions_page_1000");
    group.sample_size(30);
    for (label, bucket, keys) in [
        ("versions/1_per_key", "flat", 100_000),
        ("versions/100_per_key", "deep", 1000),
    ] {
        group.bench_function(label, |b| {
            b.iter(|| list_versions(&runtime, &meta, bucket, keys))
        });
    }
    for (label, bucket) in [("latest/1_per_key", "flat"), ("latest/100_per_key", "deep")] {
        group.bench_function(label, |b| b.iter(|| list_latest(&runtime, &meta, bucket)));
    }
    group.finish();
}

criterion_group!(benches, versions);
criterion_main!(benches);
