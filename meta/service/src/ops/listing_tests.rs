//! Listing tests: every combination against a naive model, pagination over
//! thousands of keys, and the cost of delimiter listings.

use super::*;
use crate::store::Store;
use proto::ReplicationConfig;

/// A stored object of no data at (bucket, key).
fn object(bucket: &str, key: &str, groups: Vec<meta_api::BlockGroup>) -> ObjectRecord {
    ObjectRecord::new(bucket, key, "", ReplicationConfig::REPLICATED_1, groups)
}

const BUCKET: &str = "bkt";

/// A store holding `keys` in BUCKET, plus neighbours that must never show up.
fn store_with(keys: &[String]) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
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
