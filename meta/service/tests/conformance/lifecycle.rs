//! Lifecycle rules applied by meta's passes: expiration of current versions
//! with and without versioning, noncurrent versions by age and count, lone
//! delete markers, object lock, aborted uploads, and a pass cut short by a
//! restart going on where it was.

use meta_api::lifecycle::*;
use meta_api::naming::VersionRef;
use meta_api::*;
use test_support::meta::*;

const BUCKET: &str = "bkt";
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

fn rule(prefix: &str) -> LifecycleRule {
    LifecycleRule {
        id: format!("rule-{prefix}"),
        enabled: true,
        filter: LifecycleFilter {
            prefix: Some(prefix.into()),
            ..LifecycleFilter::everything()
        },
        expiration: None,
        noncurrent_expiration: None,
        abort_incomplete_upload_days: None,
    }
}

async fn with_rules(transport: Transport, versioning: Option<Versioning>) -> MetaUnderTest {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket(BUCKET, "root").await;
    if let Some(versioning) = versioning {
        let request = SetBucketVersioning {
            bucket: BUCKET.into(),
            versioning,
        };
        meta.call(request).await.unwrap();
    }
    meta
}

async fn set_rules(meta: &MetaUnderTest, rules: Vec<LifecycleRule>) {
    let request = SetBucketLifecycle {
        bucket: BUCKET.into(),
        rules,
    };
    meta.call(request).await.unwrap();
}

async fn put_at(meta: &MetaUnderTest, key: &str, block: u64, created: UnixMillis) -> VersionStamp {
    let mut record = object(BUCKET, key, vec![group(block, &["dn0"])]);
    record.created = created;
    record.size = block;
    let request = CommitObject {
        record,
        condition: None,
    };
    meta.call_at(request, created).await.unwrap()
}

/// Runs a whole pass with the clock at `at`.
fn pass_at(meta: &MetaUnderTest, at: UnixMillis) -> LifecyclePass {
    meta.clock.set(at);
    meta.service.run_lifecycle_pass().unwrap()
}

/// Every version of `key`, newest first: its size (which `put_at` makes
/// its block number), or None for a delete marker.
async fn versions_of(meta: &MetaUnderTest, key: &str) -> Vec<Option<u64>> {
    let request = ListObjectVersions {
        bucket: BUCKET.into(),
        prefix: key.into(),
        delimiter: None,
        key_marker: None,
        version_marker: None,
        max_keys: 1000,
    };
    let page = meta.call(request).await.unwrap();
    page.versions
        .into_iter()
        .filter(|v| v.key == key)
        .map(|v| (!v.version.delete_marker).then_some(v.size))
        .collect()
}

/// Blocks handed out for deletion to dn0 once every delay has passed.
async fn freed(meta: &MetaUnderTest) -> Vec<u64> {
    let mut blocks: Vec<u64> = meta
        .heartbeat_at(report("dn0", ROOMY, 0), T0 + 1000 * DAY)
        .await
        .into_iter()
        .map(|k| k.block.0)
        .collect();
    blocks.sort();
    blocks
}

async fn current_versions_expire_on_their_day(transport: Transport) {
    let meta = with_rules(transport, None).await;
    let mut expire = rule("tmp/");
    expire.expiration = Some(Expiration::Days(1));
    set_rules(&meta, vec![expire]).await;
    // Keys under no rule's prefix are not even looked at.
    for (n, key) in ["a", "keep/b", "tmp", "tmp/a", "tmq", "z"]
        .into_iter()
        .enumerate()
    {
        put_at(&meta, key, n as u64 + 1, T0).await;
    }
    let due = LifecycleDay::REAL.after(T0, 1);
    let early = pass_at(&meta, due - 1);
    assert_eq!((early.examined, early.expired), (1, 0));
    assert!(meta.get(BUCKET, "tmp/a").await.is_some());
    let on_time = pass_at(&meta, due);
    assert_eq!((on_time.examined, on_time.expired), (1, 1));
    for key in ["a", "keep/b", "tmp", "tmq", "z"] {
        assert!(meta.get(BUCKET, key).await.is_some(), "{key}");
    }
    assert!(meta.get(BUCKET, "tmp/a").await.is_none());
    assert_eq!(freed(&meta).await, vec![4]);
    // Without rules, nothing is looked at.
    set_rules(&meta, Vec::new()).await;
    let idle = pass_at(&meta, due + 10 * DAY);
    assert_eq!(idle.examined, 0);
    assert!(meta.get(BUCKET, "keep/b").await.is_some());
}

async fn expiring_a_versioned_key_leaves_a_delete_marker(transport: Transport) {
    let meta = with_rules(transport, Some(Versioning::Enabled)).await;
    let mut expire = rule("");
    expire.expiration = Some(Expiration::Days(1));
    set_rules(&meta, vec![expire]).await;
    put_at(&meta, "k", 1, T0).await;
    let pass = pass_at(&meta, T0 + 2 * DAY);
    assert_eq!(pass.expired, 1);
    assert_eq!(versions_of(&meta, "k").await, vec![None, Some(1)]);
    assert!(matches!(
        meta.call(GetObject {
            bucket: BUCKET.into(),
            key: "k".into(),
            version: None
        })
        .await,
        Err(MetaError::DeleteMarker { .. })
    ));
    // The marker hides the key: a later pass expires nothing more, and the
    // marker is not alone, so it stays.
    let later = pass_at(&meta, T0 + 10 * DAY);
    assert_eq!((later.expired, later.removed), (0, 0));
    assert_eq!(versions_of(&meta, "k").await, vec![None, Some(1)]);
    assert!(freed(&meta).await.is_empty());
}

async fn noncurrent_versions_go_by_age_and_count(transport: Transport) {
    let meta = with_rules(transport, Some(Versioning::Enabled)).await;
    let mut noncurrent = rule("");
    noncurrent.noncurrent_expiration = Some(NoncurrentExpiration {
        days: 2,
        newer_versions: Some(1),
    });
    set_rules(&meta, vec![noncurrent]).await;
    for (n, block) in [1, 2, 3, 4].into_iter().enumerate() {
        put_at(&meta, "k", block, T0 + n as i64 * DAY).await;
    }
    // Version 3 became noncurrent at T0 + 3 days; version 2 at T0 + 2 days.
    let due_2 = LifecycleDay::REAL.after(T0 + 2 * DAY, 2);
    let early = pass_at(&meta, due_2 - 1);
    assert_eq!(early.removed, 1, "version 1 only");
    assert_eq!(
        versions_of(&meta, "k").await,
        vec![Some(4), Some(3), Some(2)]
    );
    let pass = pass_at(&meta, due_2 + 100 * DAY);
    assert_eq!(
        pass.removed, 1,
        "version 2; version 3 is the newest noncurrent"
    );
    assert_eq!(versions_of(&meta, "k").await, vec![Some(4), Some(3)]);
    assert_eq!(freed(&meta).await, vec![1, 2]);
}

async fn a_lone_delete_marker_is_removed(transport: Transport) {
    let meta = with_rules(transport, Some(Versioning::Enabled)).await;
    let mut markers = rule("");
    markers.expiration = Some(Expiration::ExpiredObjectDeleteMarker(true));
    set_rules(&meta, vec![markers]).await;
    let first = put_at(&meta, "k", 1, T0).await;
    let delete = DeleteObject {
        marker_owner: None,
        bypass_governance: false,
        bucket: BUCKET.into(),
        key: "k".into(),
        version: None,
    };
    meta.call(delete.clone()).await.unwrap();
    assert_eq!(
        pass_at(&meta, T0 + DAY).removed,
        0,
        "the marker is not alone"
    );
    let by_id = DeleteObject {
        version: Some(VersionRef::of(&first)),
        ..delete
    };
    meta.call(by_id).await.unwrap();
    assert_eq!(versions_of(&meta, "k").await, vec![None]);
    assert_eq!(pass_at(&meta, T0 + DAY).removed, 1);
    assert!(versions_of(&meta, "k").await.is_empty());
}

async fn object_lock_keeps_noncurrent_versions_until_it_ends(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket_with_lock(BUCKET, "root", true).await;
    let mut noncurrent = rule("");
    noncurrent.noncurrent_expiration = Some(NoncurrentExpiration {
        days: 1,
        newer_versions: None,
    });
    noncurrent.expiration = Some(Expiration::Days(1));
    set_rules(&meta, vec![noncurrent]).await;
    let mut record = object(BUCKET, "k", vec![group(1, &["dn0"])]);
    record.size = 1;
    record.attributes.retention = Some(Retention {
        mode: LockMode::Compliance,
        until: T0 + 10 * DAY,
    });
    let commit = CommitObject {
        record,
        condition: None,
    };
    meta.call_at(commit, T0).await.unwrap();
    // Expiring the locked current version only puts a marker on top.
    let first = pass_at(&meta, T0 + 2 * DAY);
    assert_eq!((first.expired, first.locked), (1, 0));
    let kept = pass_at(&meta, T0 + 5 * DAY);
    assert_eq!((kept.removed, kept.locked), (0, 1));
    assert_eq!(versions_of(&meta, "k").await, vec![None, Some(1)]);
    // Once the retention ends the version goes, and the marker left alone
    // goes with it (an expiration by days removes lone markers too).
    let after = pass_at(&meta, T0 + 11 * DAY);
    assert_eq!((after.removed, after.locked), (2, 0));
    assert!(versions_of(&meta, "k").await.is_empty());
}

async fn incomplete_uploads_are_aborted(transport: Transport) {
    let meta = with_rules(transport, None).await;
    let mut abort = rule("tmp/");
    abort.abort_incomplete_upload_days = Some(2);
    set_rules(&meta, vec![abort]).await;
    for (key, id) in [("tmp/a", "u1"), ("keep/b", "u2")] {
        let request = CreateUpload {
            record: upload(BUCKET, key, id),
        };
        meta.call(request).await.unwrap();
    }
    let get = |key: &str, id: &str| GetUpload {
        bucket: BUCKET.into(),
        key: key.into(),
        upload_id: id.into(),
    };
    let due = LifecycleDay::REAL.after(T0, 2);
    assert_eq!(pass_at(&meta, due - 1).aborted, 0);
    let pass = pass_at(&meta, due);
    assert_eq!((pass.examined, pass.aborted), (2, 1));
    assert!(meta.call(get("tmp/a", "u1")).await.unwrap().is_none());
    assert!(meta.call(get("keep/b", "u2")).await.unwrap().is_some());
}

async fn a_pass_goes_on_where_it_was_after_a_restart(transport: Transport) {
    let meta = MetaUnderTest::open_with(transport, |config| {
        config.lifecycle.batch = 2;
    })
    .await;
    meta.register(1).await;
    for bucket in ["aaa", "bbb"] {
        meta.create_bucket(bucket, "root").await;
        let request = SetBucketLifecycle {
            bucket: bucket.into(),
            rules: vec![LifecycleRule {
                expiration: Some(Expiration::Days(1)),
                ..rule("")
            }],
        };
        meta.call(request).await.unwrap();
        for n in 0..5 {
            let record = object(bucket, &format!("k{n}"), vec![group(n + 1, &["dn0"])]);
            meta.commit(record).await;
        }
    }
    meta.clock.set(T0 + 2 * DAY);
    meta.service.step_lifecycle().unwrap();
    meta.service.step_lifecycle().unwrap();
    let status = meta.call(GetClusterStatus {}).await.unwrap().lifecycle;
    let running = status.running.expect("the pass is under way");
    assert_eq!((running.examined, running.expired), (4, 4));
    assert_eq!(running.bucket.as_deref(), Some("aaa"));

    let meta = meta.reopen().await;
    let mut status = meta.call(GetClusterStatus {}).await.unwrap().lifecycle;
    while status.running.is_some() {
        meta.service.step_lifecycle().unwrap();
        status = meta.call(GetClusterStatus {}).await.unwrap().lifecycle;
    }
    let last = status.last.expect("the pass ended");
    assert_eq!(last.resumed, 1);
    assert_eq!((last.examined, last.expired), (10, 10), "{last:?}");
    for bucket in ["aaa", "bbb"] {
        for n in 0..5 {
            assert!(meta.get(bucket, &format!("k{n}")).await.is_none());
        }
    }
}

test_support::conformance!(
    current_versions_expire_on_their_day,
    expiring_a_versioned_key_leaves_a_delete_marker,
    noncurrent_versions_go_by_age_and_count,
    a_lone_delete_marker_is_removed,
    object_lock_keeps_noncurrent_versions_until_it_ends,
    incomplete_uploads_are_aborted,
    a_pass_goes_on_where_it_was_after_a_restart,
);
