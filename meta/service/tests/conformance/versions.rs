//! Versioning through the service: which version is the latest, which
//! blocks are freed and when, listings of versions against a model (keys
//! with zero bytes, delimiters, every page size and marker), and the bucket
//! emptiness check.

use meta_api::naming::VersionRef;
use meta_api::*;
use test_support::meta::*;

const BUCKET: &str = "bkt";

async fn versioned(transport: Transport) -> MetaUnderTest {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket(BUCKET, "root").await;
    set(&meta, Versioning::Enabled).await;
    meta
}

async fn set(meta: &MetaUnderTest, versioning: Versioning) {
    let request = SetBucketVersioning {
        bucket: BUCKET.into(),
        versioning,
    };
    meta.call(request).await.unwrap();
}

async fn put(meta: &MetaUnderTest, key: &str, block: u64) -> VersionStamp {
    let record = object(BUCKET, key, vec![group(block, &["dn0"])]);
    let request = CommitObject {
        record,
        condition: None,
    };
    meta.call(request).await.unwrap()
}

async fn delete(meta: &MetaUnderTest, key: &str, version: Option<VersionRef>) -> Deleted {
    let request = DeleteObject {
        marker_owner: None,
        bypass_governance: false,
        bucket: BUCKET.into(),
        key: key.into(),
        version,
    };
    meta.call(request).await.unwrap()
}

async fn get(
    meta: &MetaUnderTest,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Option<u64>, MetaError> {
    let request = GetObject {
        bucket: BUCKET.into(),
        key: key.into(),
        version,
    };
    let found = meta.call(request).await?;
    Ok(found.map(|r| r.groups[0].block.0))
}

fn named(stamp: &VersionStamp) -> Option<VersionRef> {
    Some(VersionRef::of(stamp))
}

async fn list(
    meta: &MetaUnderTest,
    prefix: &str,
    delimiter: Option<&str>,
    marker: Option<(String, Option<VersionRef>)>,
    max_keys: u32,
) -> VersionsPage {
    let (key_marker, version_marker) = match marker {
        Some((key, version)) => (Some(key), version),
        None => (None, None),
    };
    let request = ListObjectVersions {
        bucket: BUCKET.into(),
        prefix: prefix.into(),
        key_marker,
        version_marker,
        delimiter: delimiter.map(str::to_string),
        max_keys,
    };
    meta.call(request).await.unwrap()
}

async fn old_versions_keep_their_blocks_until_deleted(transport: Transport) {
    let meta = versioned(transport).await;
    let v1 = put(&meta, "k", 1).await;
    let v2 = put(&meta, "k", 2).await;
    assert!(v1.id.is_some() && v2.id.is_some() && v2.seq > v1.seq);
    // Nothing is freed by an overwrite or a delete marker.
    let marker = delete(&meta, "k", None).await;
    let marker = marker.version.expect("a marker");
    assert!(marker.delete_marker && marker.id.is_some());
    assert_eq!(meta.queued_for("dn0").await, vec![]);
    assert!(matches!(
        get(&meta, "k", None).await,
        Err(MetaError::DeleteMarker { named: false, .. })
    ));
    assert!(matches!(
        get(&meta, "k", named(&marker)).await,
        Err(MetaError::DeleteMarker { named: true, .. })
    ));
    assert_eq!(get(&meta, "k", named(&v1)).await, Ok(Some(1)));
    // Deleting a version frees its blocks, and only its own.
    let removed = delete(&meta, "k", named(&v1)).await;
    assert_eq!(removed.version, Some(v1.clone()));
    assert_eq!(removed.removed.map(|r| r.groups[0].block.0), Some(1));
    assert_eq!(meta.queued_for("dn0").await, vec![key(1)]);
    assert_eq!(
        get(&meta, "k", named(&v1)).await,
        Err(MetaError::NoSuchVersion(v1.id.clone().unwrap()))
    );
    // Removing the marker makes v2 the latest again; it removed no object.
    let unmarked = delete(&meta, "k", named(&marker)).await;
    assert_eq!(unmarked.version.map(|v| v.delete_marker), Some(true));
    assert_eq!(unmarked.removed, None);
    assert_eq!(get(&meta, "k", None).await, Ok(Some(2)));
    assert_eq!(meta.queued_for("dn0").await, vec![key(1)]);
    // A version that is not there is no error and frees nothing.
    assert_eq!(delete(&meta, "k", named(&v1)).await, Deleted::default());
    // The bucket is not empty while a version or a marker is left.
    let bucket_delete = DeleteBucket {
        name: BUCKET.into(),
    };
    delete(&meta, "k", None).await;
    delete(&meta, "k", named(&v2)).await;
    assert_eq!(meta.queued_for("dn0").await, vec![key(1), key(2)]);
    assert!(matches!(
        meta.call(bucket_delete.clone()).await,
        Err(MetaError::BucketNotEmpty(_))
    ));
    let page = list(&meta, "", None, None, 10).await;
    for entry in page.versions {
        delete(&meta, "k", named(&entry.version)).await;
    }
    meta.call(bucket_delete).await.unwrap();
}

async fn a_suspended_bucket_replaces_its_null_version(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket(BUCKET, "root").await;
    put(&meta, "k", 1).await; // the null version, from before versioning
    set(&meta, Versioning::Enabled).await;
    let v2 = put(&meta, "k", 2).await;
    set(&meta, Versioning::Suspended).await;
    let null = put(&meta, "k", 3).await;
    assert_eq!(null.id, None);
    // The old null version (block 1) was replaced, v2 kept.
    assert_eq!(meta.queued_for("dn0").await, vec![key(1)]);
    put(&meta, "k", 4).await;
    assert_eq!(meta.queued_for("dn0").await, vec![key(1), key(3)]);
    assert_eq!(get(&meta, "k", Some(VersionRef::Null)).await, Ok(Some(4)));
    // A delete makes a null marker in place of the null version.
    let marker = delete(&meta, "k", None).await.version.unwrap();
    assert!(marker.delete_marker && marker.id.is_none());
    assert_eq!(meta.queued_for("dn0").await, vec![key(1), key(3), key(4)]);
    let page = list(&meta, "", None, None, 10).await;
    let seen: Vec<_> = page
        .versions
        .iter()
        .map(|v| (v.version.id.clone(), v.version.delete_marker, v.is_latest))
        .collect();
    assert_eq!(seen, [(None, true, true), (v2.id.clone(), false, false)]);
    delete(&meta, "k", Some(VersionRef::Null)).await;
    assert_eq!(get(&meta, "k", None).await, Ok(Some(2)));
}

/// The model: every (key, version stamp) in listing order.
fn model_page(
    all: &[(String, VersionStamp)],
    prefix: &str,
    delimiter: Option<&str>,
    after: Option<(&str, Option<u64>)>,
) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for (key, stamp) in all {
        if !key.starts_with(prefix) {
            continue;
        }
        let position_ok = match after {
            None => true,
            Some((marker, None)) => key.as_str() > marker,
            Some((marker, Some(seq))) => {
                key.as_str() > marker || (key == marker && stamp.seq < seq)
            }
        };
        let rolled = delimiter.and_then(|d| {
            key[prefix.len()..]
                .find(d)
                .map(|at| key[..prefix.len() + at + d.len()].to_string())
        });
        match rolled {
            Some(cp) => {
                let after_marker = after.is_none_or(|(m, _)| cp.as_str() > m);
                if after_marker && position_ok && !out.iter().any(|(k, v)| v.is_none() && *k == cp)
                {
                    out.push((cp, None));
                }
            }
            None if position_ok => out.push((key.clone(), stamp.id.clone())),
            None => {}
        }
    }
    out
}

async fn listings_follow_the_model_at_every_page_size(transport: Transport) {
    let meta = versioned(transport).await;
    let keys = [
        "a", "a\0", "a\0b", "a\u{1}", "ab", "d/1", "d/2/x", "d/3", "e",
    ];
    let mut all: Vec<(String, VersionStamp)> = Vec::new();
    let mut block = 0;
    for round in 0..3 {
        for (i, key) in keys.iter().enumerate() {
            block += 1;
            let stamp = if (i + round) % 4 == 3 {
                delete(&meta, key, None).await.version.unwrap()
            } else {
                put(&meta, key, block).await
            };
            all.push((key.to_string(), stamp));
        }
    }
    // Listing order: keys ascending, newest first.
    all.sort_by(|(ka, sa), (kb, sb)| ka.cmp(kb).then(sb.seq.cmp(&sa.seq)));
    for (prefix, delimiter) in [
        ("", None),
        ("", Some("/")),
        ("a", None),
        ("d/", Some("/")),
        ("a\0", None),
    ] {
        let expected = model_page(&all, prefix, delimiter, None);
        for max in [1, 2, 3, 7, 1000] {
            let mut seen = Vec::new();
            let mut marker = None;
            loop {
                let page = list(&meta, prefix, delimiter, marker.clone(), max).await;
                let mut entries: Vec<(String, Option<String>)> = page
                    .versions
                    .iter()
                    .map(|v| (v.key.clone(), v.version.id.clone()))
                    .chain(page.common_prefixes.iter().map(|cp| (cp.clone(), None)))
                    .collect();
                entries.sort_by_key(|e| expected.iter().position(|x| x == e));
                assert!(entries.len() <= max as usize);
                seen.extend(entries);
                if !page.is_truncated {
                    break;
                }
                let key = page.next_key_marker.unwrap();
                let version = page
                    .next_version_id_marker
                    .map(|id| meta_api::naming::parse_version_id(&id).unwrap());
                marker = Some((key, version));
            }
            assert_eq!(
                seen, expected,
                "prefix {prefix:?} delimiter {delimiter:?} max {max}"
            );
        }
    }
    // Exactly one latest per key, and it is the newest.
    let page = list(&meta, "", None, None, 1000).await;
    for key in keys {
        let versions: Vec<_> = page.versions.iter().filter(|v| v.key == key).collect();
        assert!(versions[0].is_latest, "{key:?}");
        assert!(versions[1..].iter().all(|v| !v.is_latest), "{key:?}");
    }
    // A key marker between versions: the rest of that key, none latest.
    let second = &page.versions[1];
    let rest = list(
        &meta,
        "",
        None,
        Some((second.key.clone(), named(&second.version))),
        1,
    )
    .await;
    assert_eq!(rest.versions[0].key, second.key);
    assert!(!rest.versions[0].is_latest);
}

async fn object_lock_protects_versions(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket_with_lock(BUCKET, "root", true).await;
    // Versioning stays enabled under object lock.
    let suspend = SetBucketVersioning {
        bucket: BUCKET.into(),
        versioning: Versioning::Suspended,
    };
    assert!(matches!(
        meta.call(suspend).await,
        Err(MetaError::InvalidBucketState(_))
    ));
    let hour = 3_600_000;
    let mut record = object(BUCKET, "k", vec![group(1, &["dn0"])]);
    record.attributes.retention = Some(Retention {
        mode: LockMode::Governance,
        until: T0 + hour,
    });
    let commit = CommitObject {
        record,
        condition: None,
    };
    let stamp = meta.call_at(commit, T0).await.unwrap();
    let delete = |bypass_governance, at| {
        let request = DeleteObject {
            marker_owner: None,
            bucket: BUCKET.into(),
            key: "k".into(),
            version: named(&stamp),
            bypass_governance,
        };
        meta.call_at(request, at)
    };
    let lock = |change, bypass_governance, at| {
        let request = SetObjectLock {
            bucket: BUCKET.into(),
            key: "k".into(),
            version: named(&stamp),
            change,
            bypass_governance,
        };
        meta.call_at(request, at)
    };
    let retention = |mode, until| LockChange::Retention(Some(Retention { mode, until }));
    assert_eq!(delete(false, T0).await, Err(MetaError::ObjectLocked));
    // Shortening GOVERNANCE needs the bypass; COMPLIANCE cannot be shortened.
    assert_eq!(
        lock(retention(LockMode::Governance, T0 + 1), false, T0).await,
        Err(MetaError::ObjectLocked)
    );
    lock(retention(LockMode::Compliance, T0 + hour), true, T0)
        .await
        .unwrap();
    assert_eq!(
        lock(retention(LockMode::Compliance, T0 + 1), true, T0).await,
        Err(MetaError::ObjectLocked)
    );
    assert_eq!(delete(true, T0).await, Err(MetaError::ObjectLocked));
    // A legal hold outlives the retention; once both are gone the version goes.
    lock(LockChange::LegalHold(true), false, T0).await.unwrap();
    assert_eq!(
        delete(true, T0 + 2 * hour).await,
        Err(MetaError::ObjectLocked)
    );
    lock(LockChange::LegalHold(false), false, T0).await.unwrap();
    assert_eq!(meta.queued_for("dn0").await, vec![]);
    let removed = delete(false, T0 + 2 * hour).await.unwrap();
    assert_eq!(removed.version.map(|s| s.seq), Some(stamp.seq));
    let due = meta
        .heartbeat_at(report("dn0", ROOMY, 0), T0 + 3 * hour)
        .await;
    assert_eq!(due, vec![key(1)]);
}

async fn versions_never_share_blocks(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket(BUCKET, "root").await;
    let first = object(BUCKET, "k", vec![group(1, &["dn0"])]);
    meta.commit(first.clone()).await;
    set(&meta, Versioning::Enabled).await;
    // A metadata-only copy onto itself read the bucket before versioning
    // was enabled: committing the same blocks as a new version would make
    // two versions share them.
    let mut same_blocks = first.clone();
    same_blocks.user_metadata.insert("m".into(), "1".into());
    let commit = CommitObject {
        record: same_blocks,
        condition: Some(WriteCondition::SameObject(first.id)),
    };
    assert_eq!(meta.call(commit).await, Err(MetaError::PreconditionFailed));
    assert_eq!(get(&meta, "k", None).await, Ok(Some(1)));
    assert_eq!(list(&meta, "", None, None, 10).await.versions.len(), 1);
    assert_eq!(meta.queued_for("dn0").await, vec![]);
}

/// The record of `key` (`version`, or the latest).
async fn record(meta: &MetaUnderTest, key: &str, version: Option<VersionRef>) -> ObjectRecord {
    let request = GetObject {
        bucket: BUCKET.into(),
        key: key.into(),
        version,
    };
    let found = meta.call(request).await.unwrap();
    (*found.expect("an object")).clone()
}

async fn tags_and_acls_change_in_place(transport: Transport) {
    use access::{Grant, Grantee, Permission};
    let meta = versioned(transport).await;
    let v1 = put(&meta, "k", 1).await;
    let v2 = put(&meta, "k", 2).await;
    let update = |of: &ObjectRecord, seq: u64, tag: &str| UpdateObject {
        bucket: BUCKET.into(),
        key: "k".into(),
        id: of.id,
        seq,
        tags: [("t".to_string(), tag.to_string())].into(),
        acl: Some(vec![Grant {
            grantee: Grantee::AllUsers,
            permission: Permission::Read,
        }]),
    };
    // The latest version, found in place.
    let latest = record(&meta, "k", None).await;
    meta.call(update(&latest, v2.seq, "two")).await.unwrap();
    let changed = record(&meta, "k", None).await;
    assert_eq!(changed.attributes.tags["t"], "two");
    assert_eq!(changed.attributes.acl.as_ref().map(Vec::len), Some(1));
    assert_eq!(changed.version.seq, v2.seq, "no new version");
    // An older version, found by its sequence number.
    let older = record(&meta, "k", named(&v1)).await;
    assert!(older.attributes.tags.is_empty());
    meta.call(update(&older, v1.seq, "one")).await.unwrap();
    assert_eq!(
        record(&meta, "k", named(&v1)).await.attributes.tags["t"],
        "one"
    );
    assert_eq!(record(&meta, "k", None).await.attributes.tags["t"], "two");
    assert_eq!(list(&meta, "", None, None, 10).await.versions.len(), 2);
    // A version replaced since it was read is left alone.
    let v3 = put(&meta, "k", 3).await;
    assert_eq!(
        meta.call(update(&latest, v3.seq, "stale")).await,
        Err(MetaError::PreconditionFailed)
    );
    assert!(record(&meta, "k", None).await.attributes.tags.is_empty());
    let mut elsewhere = update(&latest, v2.seq, "x");
    elsewhere.bucket = "missing".into();
    assert_eq!(
        meta.call(elsewhere).await,
        Err(MetaError::NoSuchBucket("missing".into()))
    );
}

test_support::conformance!(
    tags_and_acls_change_in_place,
    versions_never_share_blocks,
    object_lock_protects_versions,
    old_versions_keep_their_blocks_until_deleted,
    a_suspended_bucket_replaces_its_null_version,
    listings_follow_the_model_at_every_page_size,
);
