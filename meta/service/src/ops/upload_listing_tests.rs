//! Upload listing tests: pages against a naive model, walks across markers,
//! the cost of a page, and stores written before the ordered index existed.

use super::*;
use crate::store::db::encode;
use crate::store::upload_index::{index_upload, LEGACY_UPLOAD_INDEX};
use crate::store::Store;
use proto::ReplicationConfig;

const BUCKET: &str = "bkt";

fn upload(bucket: &str, key: &str, created: UnixMillis, id: &str) -> UploadRecord {
    UploadRecord {
        upload_id: id.into(),
        bucket: bucket.into(),
        key: key.into(),
        owner: "root".into(),
        created,
        content_type: None,
        headers: Default::default(),
        user_metadata: Default::default(),
        replication: ReplicationConfig::REPLICATED_1,
        attributes: Default::default(),
    }
}

/// A store holding `uploads` (records and index), plus uploads of
/// neighbouring buckets that must never show up.
fn store_with(uploads: &[UploadRecord]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
    let neighbours = [
        upload("bk", "t/x", 0, "n1"),
        upload("bkt.a", "a", 0, "n2"),
        upload("bkt0", "a", 0, "n3"),
    ];
    store
        .write(|txn| {
            let mut records = txn.open_table(UPLOADS)?;
            for u in uploads.iter().chain(&neighbours) {
                records.insert(u.upload_id.as_str(), encode(u)?.as_slice())?;
                index_upload(txn, u)?;
            }
            Ok(())
        })
        .unwrap();
    (dir, store)
}

fn page(store: &Store, query: &UploadQuery) -> (UploadPage, usize) {
    store
        .read(|txn| {
            upload_page(
                &txn.open_table(UPLOAD_ORDER)?,
                &txn.open_table(UPLOADS)?,
                BUCKET,
                query,
            )
        })
        .unwrap()
}

fn query(prefix: &str, delimiter: Option<&str>, max_uploads: u32) -> UploadQuery {
    UploadQuery {
        prefix: prefix.into(),
        delimiter: delimiter.map(Into::into),
        max_uploads,
        ..UploadQuery::default()
    }
}

/// One listed entry: an upload id, or a common prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Upload(String),
    Prefix(String),
}

fn entries(page: &UploadPage) -> Vec<Entry> {
    // Uploads and prefixes interleave in key order; rebuild that order.
    let mut out: Vec<(String, Entry)> = page
        .uploads
        .iter()
        .map(|u| (u.key.clone(), Entry::Upload(u.upload_id.clone())))
        .chain(
            page.common_prefixes
                .iter()
                .map(|p| (p.clone(), Entry::Prefix(p.clone()))),
        )
        .collect();
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.into_iter().map(|(_, e)| e).collect()
}

/// Every entry S3 would list for `q` without markers, the slow way.
fn model(all: &[UploadRecord], q: &UploadQuery) -> Vec<Entry> {
    let mut sorted: Vec<&UploadRecord> = all
        .iter()
        .filter(|u| u.key.starts_with(&q.prefix))
        .collect();
    sorted.sort_by(|a, b| {
        (a.key.as_bytes(), a.created, &a.upload_id).cmp(&(
            b.key.as_bytes(),
            b.created,
            &b.upload_id,
        ))
    });
    let mut out = Vec::new();
    for u in sorted {
        let rest = &u.key[q.prefix.len()..];
        let rolled = q.delimiter.as_deref().and_then(|d| {
            rest.find(d)
                .map(|at| u.key[..q.prefix.len() + at + d.len()].to_string())
        });
        match rolled {
            Some(cp) if out.last() == Some(&Entry::Prefix(cp.clone())) => {}
            Some(cp) => out.push(Entry::Prefix(cp)),
            None => out.push(Entry::Upload(u.upload_id.clone())),
        }
    }
    out
}

fn sample() -> Vec<UploadRecord> {
    let mut all = Vec::new();
    let keys = [
        "a",
        "a\0",
        "a\0b",
        "a/1",
        "a/2",
        "a/b/c",
        "a/b/d",
        "ab",
        "b",
        "b/x",
        "photos/2024/1.jpg",
        "photos/2024/2.jpg",
        "photos/2025/1.jpg",
        "photos/index",
        "z\u{e9}",
        "\u{1F600}",
    ];
    for (i, key) in keys.iter().enumerate() {
        // Several uploads per key, initiated out of id order.
        for (j, created) in [30, 10, 20].iter().take(1 + i % 3).enumerate() {
            all.push(upload(BUCKET, key, *created, &format!("u{i:02}-{}", 9 - j)));
        }
    }
    all
}

#[test]
fn pages_walk_across_markers_like_the_model() {
    let all = sample();
    let (_dir, store) = store_with(&all);
    for prefix in ["", "a", "a/", "photos/", "photos/2024/", "nothing"] {
        for delimiter in [None, Some("/"), Some("\0"), Some("/2")] {
            let expected = model(&all, &query(prefix, delimiter, 0));
            let (whole, _) = page(&store, &query(prefix, delimiter, 1000));
            assert_eq!(entries(&whole), expected, "{prefix:?} {delimiter:?}");
            assert!(!whole.is_truncated);
            for max in [1, 2, 3, 7] {
                let mut q = query(prefix, delimiter, max);
                let mut walked = Vec::new();
                loop {
                    let (p, _) = page(&store, &q);
                    assert!(p.uploads.len() + p.common_prefixes.len() <= max as usize);
                    walked.extend(entries(&p));
                    if !p.is_truncated {
                        break;
                    }
                    q.key_marker = p.next_key_marker.clone();
                    q.upload_id_marker = p.next_upload_id_marker.clone();
                    assert!(q.key_marker.is_some());
                }
                assert_eq!(walked, expected, "{prefix:?} {delimiter:?} max {max}");
            }
        }
    }
}

#[test]
fn uploads_of_one_key_list_in_initiation_order() {
    let all = vec![
        upload(BUCKET, "k", 300, "aaa"),
        upload(BUCKET, "k", 100, "zzz"),
        upload(BUCKET, "k", 200, "mmm"),
        upload(BUCKET, "j", 900, "first"),
    ];
    let (_dir, store) = store_with(&all);
    let ids = |p: &UploadPage| {
        p.uploads
            .iter()
            .map(|u| u.upload_id.clone())
            .collect::<Vec<_>>()
    };
    let (p, _) = page(&store, &query("", None, 100));
    assert_eq!(ids(&p), ["first", "zzz", "mmm", "aaa"]);
    let mut q = query("", None, 100);
    q.key_marker = Some("k".into());
    q.upload_id_marker = Some("zzz".into());
    assert_eq!(ids(&page(&store, &q).0), ["mmm", "aaa"]);
    // A key marker alone skips every upload of that key.
    q.upload_id_marker = None;
    assert!(page(&store, &q).0.uploads.is_empty());
    q.key_marker = Some("j".into());
    assert_eq!(ids(&page(&store, &q).0), ["zzz", "mmm", "aaa"]);
    // An upload-id marker that is gone (or of another key) acts like the key marker alone.
    q.upload_id_marker = Some("aaa".into());
    assert_eq!(ids(&page(&store, &q).0), ["zzz", "mmm", "aaa"]);
    let (p, _) = page(&store, &query("", None, 2));
    assert!(p.is_truncated);
    assert_eq!(
        (
            p.next_key_marker.as_deref(),
            p.next_upload_id_marker.as_deref()
        ),
        (Some("k"), Some("zzz"))
    );
}

#[test]
fn a_page_reads_in_proportion_to_its_size() {
    let mut all: Vec<UploadRecord> = (0..2000)
        .map(|i| upload(BUCKET, &format!("deep/{i:05}"), i, &format!("d{i}")))
        .collect();
    all.extend((0..20).map(|i| upload(BUCKET, &format!("top{i:02}"), 0, &format!("t{i}"))));
    let (_dir, store) = store_with(&all);
    let (p, scanned) = page(&store, &query("", Some("/"), 5));
    assert_eq!(p.common_prefixes, ["deep/"]);
    assert_eq!(p.uploads.len(), 4);
    assert!(scanned <= 7, "read {scanned} entries for a page of 5");
    let mut q = query("deep/", None, 10);
    q.key_marker = Some("deep/01500".into());
    let (p, scanned) = page(&store, &q);
    assert_eq!(p.uploads[0].key, "deep/01501");
    assert!(scanned <= 11, "read {scanned} entries for a page of 10");
}

#[test]
fn stores_with_the_legacy_index_are_reindexed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.redb");
    let all = [upload(BUCKET, "b", 2, "u2"), upload(BUCKET, "a", 1, "u1")];
    {
        // What an earlier version wrote: records, and an index by upload id.
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut records = txn.open_table(UPLOADS).unwrap();
            let mut legacy = txn.open_table(LEGACY_UPLOAD_INDEX).unwrap();
            for u in &all {
                records
                    .insert(u.upload_id.as_str(), encode(u).unwrap().as_slice())
                    .unwrap();
                legacy
                    .insert(object_key(BUCKET, u.upload_id.as_bytes()).as_slice(), ())
                    .unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let store = crate::store::open(&path).unwrap();
    let (p, _) = page(&store, &query("", None, 10));
    let keys: Vec<&str> = p.uploads.iter().map(|u| u.key.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    drop(store);
    // The legacy table is gone, so a second open does not rebuild again.
    let db = redb::Database::create(&path).unwrap();
    let txn = db.begin_read().unwrap();
    assert!(txn.open_table(LEGACY_UPLOAD_INDEX).is_err());
}
