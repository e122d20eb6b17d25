//! Listing tests: every combination against a naive model, pagination over
//! thousands of keys, and the cost of delimiter listings.

use super::*;
use crate::meta::api::MetaRequest;
use crate::meta::api::MetaResponse;
use crate::meta::store::{encode, Store};
use crate::meta::test_support::{call, create_bucket, object, open};

const BUCKET: &str = "bkt";

/// A store holding `keys` in BUCKET, plus neighbours that must never show up.
fn store_with(keys: &[String]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("meta.redb")).unwrap();
    store
        .write(|txn| {
            let mut objects = txn.open_table(OBJECTS)?;
            for (bucket, key) in keys.iter().map(|k| (BUCKET, k.as_str())).chain([
                ("bk", "t/x"),
                ("bkt.a", "a"),
                ("bkt0", "a"),
                ("bkt-", "z"),
            ]) {
                let record = object(bucket, key, vec![]);
                objects.insert(
                    object_key(bucket, key.as_bytes()).as_slice(),
                    encode(&record)?.as_slice(),
                )?;
            }
            Ok(())
        })
        .unwrap();
    (dir, store)
}

fn list(store: &Store, query: ListQuery<'_>) -> (ListPage, usize) {
    store
        .read(|txn| list_page(&txn.open_table(OBJECTS)?, &query))
        .unwrap()
}

fn query<'a>(
    prefix: &'a str,
    start_after: Option<&'a str>,
    delimiter: Option<&'a str>,
    max_keys: u32,
) -> ListQuery<'a> {
    ListQuery {
        bucket: BUCKET,
        prefix,
        start_after,
        delimiter,
        max_keys,
    }
}

/// What S3 returns, computed the slow and obvious way.
fn model(sorted: &[String], q: &ListQuery<'_>) -> (Vec<String>, Vec<String>, bool, Option<String>) {
    let mut entries: Vec<(String, bool)> = Vec::new();
    for key in sorted.iter().filter(|k| k.starts_with(q.prefix)) {
        let rolled = q
            .delimiter
            .and_then(|d| key[q.prefix.len()..].find(d).map(|i| (d, i)))
            .map(|(d, i)| key[..q.prefix.len() + i + d.len()].to_string());
        let entry = match rolled {
            Some(cp) => (cp, true),
            None => (key.clone(), false),
        };
        if q.start_after.is_some_and(|s| entry.0.as_str() <= s) {
            continue;
        }
        if entries.last() != Some(&entry) {
            entries.push(entry);
        }
    }
    let max = q.max_keys as usize;
    let truncated = entries.len() > max;
    let page = &entries[..max.min(entries.len())];
    let marker = if truncated {
        page.last().map(|e| e.0.clone())
    } else {
        None
    };
    let objects = page.iter().filter(|e| !e.1).map(|e| e.0.clone()).collect();
    let prefixes = page.iter().filter(|e| e.1).map(|e| e.0.clone()).collect();
    (objects, prefixes, truncated, marker)
}

fn sample_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "a",
        "a/",
        "a/b",
        "a/b/c",
        "a/b/d",
        "a/c",
        "a//x",
        "ab",
        "ab/c",
        "b",
        "b/ü",
        "b/ü/x",
        "b/日本/1",
        "b/日本/2",
        "b/z",
        "c--d--e",
        "c--f",
        "c-d",
        "ü",
        "ü/1",
        "日本語",
        "🎉/x",
        "z/",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    keys.sort();
    keys
}

#[test]
fn matches_the_model_for_every_combination() {
    let keys = sample_keys();
    let (_dir, store) = store_with(&keys);
    let prefixes = ["", "a", "a/", "a/b", "b/", "b/日本/", "c-", "ü", "zz", "🎉"];
    let afters = [
        None,
        Some(""),
        Some("a"),
        Some("a/"),
        Some("a/b"),
        Some("a/b/c"),
        Some("ab"),
        Some("b/ü"),
        Some("b/日本/"),
        Some("c--d"),
        Some("z"),
        Some("zzz"),
    ];
    let delimiters = [None, Some("/"), Some("--"), Some("ü"), Some("")];
    for prefix in prefixes {
        for after in afters {
            for delimiter in delimiters {
                for max in [0, 1, 2, 3, 1000] {
                    let q = query(prefix, after, delimiter, max);
                    let (page, _) = list(&store, q);
                    let mut model_q = q;
                    model_q.delimiter = delimiter.filter(|d| !d.is_empty());
                    let (objects, prefixes, truncated, marker) = model(&keys, &model_q);
                    let got: Vec<String> = page.objects.iter().map(|o| o.key.clone()).collect();
                    let case = format!("{q:?}");
                    assert_eq!(got, objects, "{case}");
                    assert_eq!(page.common_prefixes, prefixes, "{case}");
                    assert_eq!(page.is_truncated, truncated, "{case}");
                    assert_eq!(page.next_marker, marker, "{case}");
                }
            }
        }
    }
}

fn paginate(
    store: &Store,
    prefix: &str,
    delimiter: Option<&str>,
    max: u32,
) -> (Vec<String>, usize) {
    let mut seen = Vec::new();
    let mut marker: Option<String> = None;
    let mut max_scanned = 0;
    loop {
        let (page, scanned) = list(store, query(prefix, marker.as_deref(), delimiter, max));
        max_scanned = max_scanned.max(scanned);
        let mut entries: Vec<String> = page.objects.iter().map(|o| o.key.clone()).collect();
        entries.extend(page.common_prefixes.iter().cloned());
        entries.sort();
        seen.extend(entries);
        if !page.is_truncated {
            return (seen, max_scanned);
        }
        marker = page.next_marker;
        assert!(marker.is_some());
    }
}

#[test]
fn pagination_returns_every_key_once_in_byte_order() {
    let mut keys: Vec<String> = (0..2500)
        .map(|i| match i % 5 {
            0 => format!("plain/{i:05}"),
            1 => format!("ünï/{i}"),
            2 => format!("日本/{i}/x"),
            3 => format!("{i}"),
            _ => format!("emoji🎉{i}"),
        })
        .collect();
    keys.sort();
    let (_dir, store) = store_with(&keys);
    for max in [1000, 7] {
        let (seen, scanned) = paginate(&store, "", None, max);
        assert_eq!(seen, keys, "max {max}");
        assert!(scanned <= max as usize + 1, "page of {max} read {scanned}");
    }
}

#[test]
fn delimiter_listing_skips_the_keys_under_each_prefix() {
    let mut keys: Vec<String> = (0..10)
        .flat_map(|p| (0..500).map(move |k| format!("p{p}/k{k:04}")))
        .chain((0..5).map(|i| format!("top{i}")))
        .collect();
    keys.sort();
    let (_dir, store) = store_with(&keys);

    let (page, scanned) = list(&store, query("", None, Some("/"), 1000));
    assert_eq!(page.common_prefixes.len(), 10);
    assert_eq!(page.objects.len(), 5);
    assert!(!page.is_truncated);
    assert!(
        scanned <= 15,
        "read {scanned} entries of 5005 for 15 results"
    );

    let (seen, scanned) = paginate(&store, "", Some("/"), 3);
    let mut expected: Vec<String> = (0..10).map(|p| format!("p{p}/")).collect();
    expected.extend((0..5).map(|i| format!("top{i}")));
    assert_eq!(seen, expected);
    assert!(scanned <= 5, "a page of 3 read {scanned} entries");

    // Resuming inside a prefix jumps past the rest of it at once.
    let (page, scanned) = list(&store, query("", Some("p3/k0100"), Some("/"), 2));
    assert_eq!(page.common_prefixes, ["p4/", "p5/"]);
    assert!(scanned <= 4, "read {scanned}");
}

#[tokio::test]
async fn listing_a_missing_bucket_fails() {
    let dir = tempfile::tempdir().unwrap();
    let meta = open(dir.path());
    let list = |bucket: &str| MetaRequest::ListObjects {
        bucket: bucket.into(),
        prefix: String::new(),
        start_after: None,
        delimiter: None,
        max_keys: 1000,
    };
    assert_eq!(
        call(&meta, list("nope")).await.unwrap_err(),
        MetaError::NoSuchBucket("nope".into())
    );
    create_bucket(&meta, "empty", "root").await;
    let Ok(MetaResponse::Listing(page)) = call(&meta, list("empty")).await else {
        panic!()
    };
    assert_eq!(page, ListPage::default());
}

#[tokio::test]
async fn bulk_insert_lands_in_one_transaction_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let meta = open(dir.path());
    create_bucket(&meta, BUCKET, "root").await;
    let records: Vec<_> = (0..2000)
        .map(|i| object(BUCKET, &format!("d{:02}/k{i:05}", i % 20), vec![]))
        .collect();
    meta.bulk_insert_objects(&records).unwrap();
    let request = MetaRequest::ListObjects {
        bucket: BUCKET.into(),
        prefix: String::new(),
        start_after: None,
        delimiter: Some("/".into()),
        max_keys: 1000,
    };
    let Ok(MetaResponse::Listing(page)) = call(&meta, request).await else {
        panic!("listing failed");
    };
    assert_eq!(page.common_prefixes.len(), 20);
    assert!(page.objects.is_empty() && !page.is_truncated);
    // A record for a missing bucket fails the whole batch.
    let stray = [object(BUCKET, "new", vec![]), object("nope", "x", vec![])];
    assert!(matches!(
        meta.bulk_insert_objects(&stray),
        Err(MetaError::NoSuchBucket(_))
    ));
    let request = MetaRequest::GetObject {
        bucket: BUCKET.into(),
        key: "new".into(),
    };
    assert!(matches!(
        call(&meta, request).await,
        Ok(MetaResponse::Object(None))
    ));
}

#[tokio::test]
async fn bucket_cors_public_read_and_key_limits_are_stored() {
    use crate::meta::api::AdminOp;
    use crate::meta::types::{BucketGrant, BucketRight, CorsRule};
    let dir = tempfile::tempdir().unwrap();
    let meta = open(dir.path());
    create_bucket(&meta, BUCKET, "root").await;
    let rule = CorsRule {
        allowed_origins: vec!["*".into()],
        allowed_methods: vec!["GET".into()],
        ..CorsRule::default()
    };
    let set = MetaRequest::SetBucketCors {
        bucket: BUCKET.into(),
        rules: vec![rule.clone()],
    };
    assert!(matches!(call(&meta, set).await, Ok(MetaResponse::Done)));
    let token = meta.admin_token().to_string();
    let admin = |op| MetaRequest::Admin {
        token: token.clone(),
        op,
    };
    let public = AdminOp::SetBucketPublicRead {
        name: BUCKET.into(),
        public_read: true,
    };
    assert!(matches!(
        call(&meta, admin(public)).await,
        Ok(MetaResponse::Done)
    ));
    let get = MetaRequest::GetBucket {
        name: BUCKET.into(),
    };
    let Ok(MetaResponse::Bucket(Some(bucket))) = call(&meta, get).await else {
        panic!("bucket missing");
    };
    assert_eq!(bucket.cors, vec![rule]);
    assert!(bucket.public_read);

    let access_key = meta.root_credentials().access_key;
    let grants = vec![BucketGrant {
        bucket: BUCKET.into(),
        right: BucketRight::Read,
    }];
    let limit = AdminOp::LimitKey {
        access_key: access_key.clone(),
        grants: Some(grants.clone()),
    };
    assert!(matches!(
        call(&meta, admin(limit)).await,
        Ok(MetaResponse::Done)
    ));
    let lookup = MetaRequest::GetAccessKey {
        access_key: access_key.clone(),
    };
    let Ok(MetaResponse::AccessKey(Some(key))) = call(&meta, lookup).await else {
        panic!("key missing");
    };
    assert_eq!(key.bucket_grants, Some(grants));
    // A grant on a missing bucket, or for a missing key, is refused.
    let bad = AdminOp::LimitKey {
        access_key,
        grants: Some(vec![BucketGrant {
            bucket: "nope".into(),
            right: BucketRight::ReadWrite,
        }]),
    };
    assert!(matches!(
        call(&meta, admin(bad)).await,
        Err(MetaError::NoSuchBucket(_))
    ));
    let unknown = AdminOp::LimitKey {
        access_key: "AKNOPE".into(),
        grants: None,
    };
    assert!(matches!(
        call(&meta, admin(unknown)).await,
        Err(MetaError::NoSuchAccessKey(_))
    ));
}
