//! ListObjects: one page of a bucket in UTF-8 byte order, with prefix,
//! start-after and delimiter roll-up. A page costs in proportion to its size,
//! not to the bucket: the scan starts at max(prefix, start_after), and once a
//! common prefix is met the scan restarts just past its last possible key
//! instead of walking the keys under it.

use super::api::MetaError;
use super::buckets::require_bucket;
use super::service::Inner;
use super::store::{bucket_prefix_len, decode, encode, object_key, prefix_end, BUCKETS, OBJECTS};
use super::types::{ListPage, ObjectRecord, ObjectSummary};
use redb::ReadableTable;
use std::borrow::Cow;
use std::ops::Bound;

/// Most entries one page may hold, whatever the caller asks.
pub(super) const MAX_PAGE: u32 = 10_000;

/// What to list within one bucket.
#[derive(Clone, Copy, Debug)]
pub(super) struct ListQuery<'a> {
    pub(super) bucket: &'a str,
    pub(super) prefix: &'a str,
    pub(super) start_after: Option<&'a str>,
    pub(super) delimiter: Option<&'a str>,
    pub(super) max_keys: u32,
}

/// Where `key` rolls up, if the delimiter occurs after the prefix.
pub(super) fn common_prefix<'k>(
    key: &'k [u8],
    prefix_len: usize,
    delimiter: &[u8],
) -> Option<&'k [u8]> {
    let rest = key.get(prefix_len..)?;
    rest.windows(delimiter.len())
        .position(|w| w == delimiter)
        .map(|at| &key[..prefix_len + at + delimiter.len()])
}

/// `bytes` as a String; stored keys are always UTF-8.
pub(super) fn utf8(bytes: &[u8]) -> Result<String, MetaError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| MetaError::Store("object key is not UTF-8".into()))
}

/// How a scan rolls keys up into common prefixes and where a page ends.
#[derive(Clone, Copy, Debug)]
pub(super) struct RollUp<'a> {
    /// Bytes of the listing prefix (roll-up looks for the delimiter after it).
    pub(super) prefix_len: usize,
    /// The delimiter, if any (never empty).
    pub(super) delimiter: Option<&'a [u8]>,
    /// The marker the page starts after: a common prefix at or before it was
    /// returned on an earlier page.
    pub(super) marker: Option<&'a [u8]>,
    /// Most entries (keys and common prefixes) on the page.
    pub(super) max: usize,
}

/// The last entry a scan put on its page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LastEntry {
    /// A stored (index) key.
    Stored(Vec<u8>),
    /// A common prefix.
    Prefix(String),
}

/// What a scan found besides the keys it handed to its caller.
#[derive(Debug, Default)]
pub(super) struct Scanned {
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub(super) common_prefixes: Vec<String>,
    /// Whether more entries follow the page.
    pub(super) is_truncated: bool,
    /// The last entry on the page.
    pub(super) last: Option<LastEntry>,
    /// Stored entries read.
    pub(super) scanned: usize,
}

/// How a table stores the keys a listing shows.
pub(super) trait KeyIndex {
    /// The listed key of a stored key.
    fn listed_key<'k>(&self, stored: &'k [u8]) -> Result<Cow<'k, [u8]>, MetaError>;
    /// The stored form of a listed-key prefix: every stored key whose listed
    /// key starts with `prefix` starts with it.
    fn stored_prefix(&self, prefix: &[u8]) -> Vec<u8>;
}

/// Walks `table` from `lower` up to `upper`, handing each key that does not
/// roll up to `on_key` (stored key and value) and collecting common prefixes,
/// until the page is full. Once a common prefix is met the scan restarts
/// just past its last possible key, so a page costs in proportion to its size.
pub(super) fn scan_rolled_up<V: redb::Value + 'static>(
    table: &impl ReadableTable<&'static [u8], V>,
    index: &impl KeyIndex,
    mut lower: Bound<Vec<u8>>,
    upper: &[u8],
    roll: RollUp<'_>,
    mut on_key: impl FnMut(&[u8], redb::AccessGuard<'_, V>) -> Result<(), MetaError>,
) -> Result<Scanned, MetaError> {
    let mut out = Scanned::default();
    let mut emitted = 0usize;
    'scan: loop {
        let start = match &lower {
            Bound::Included(k) | Bound::Excluded(k) if k.as_slice() >= upper => break,
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut jump = None;
        for entry in table.range::<&[u8]>((start, Bound::Excluded(upper)))? {
            let (stored_key, value) = entry?;
            out.scanned += 1;
            let stored = stored_key.value();
            let key = index.listed_key(stored)?;
            let rolled = roll
                .delimiter
                .and_then(|d| common_prefix(&key, roll.prefix_len, d));
            if let Some(cp) = rolled {
                if roll.marker.is_none_or(|marker| cp > marker) {
                    if emitted == roll.max {
                        out.is_truncated = true;
                        break 'scan;
                    }
                    let cp = utf8(cp)?;
                    out.last = Some(LastEntry::Prefix(cp.clone()));
                    out.common_prefixes.push(cp);
                    emitted += 1;
                }
                jump = Some(
                    prefix_end(&index.stored_prefix(cp))
                        .ok_or_else(|| MetaError::Store("common prefix has no end".into()))?,
                );
                break;
            }
            if emitted == roll.max {
                out.is_truncated = true;
                break 'scan;
            }
            out.last = Some(LastEntry::Stored(stored.to_vec()));
            on_key(stored, value)?;
            emitted += 1;
        }
        match jump {
            Some(next) => lower = Bound::Included(next),
            None => break,
        }
    }
    Ok(out)
}

/// `OBJECTS` keys: `bucket/` and the key as it is.
struct ObjectKeys<'a> {
    bucket: &'a str,
}

impl KeyIndex for ObjectKeys<'_> {
    fn listed_key<'k>(&self, stored: &'k [u8]) -> Result<Cow<'k, [u8]>, MetaError> {
        Ok(Cow::Borrowed(&stored[bucket_prefix_len(self.bucket)..]))
    }

    fn stored_prefix(&self, prefix: &[u8]) -> Vec<u8> {
        object_key(self.bucket, prefix)
    }
}

/// One page of `query`, and how many stored entries were read for it.
pub(super) fn list_page(
    objects: &impl ReadableTable<&'static [u8], &'static [u8]>,
    query: &ListQuery<'_>,
) -> Result<(ListPage, usize), MetaError> {
    let start_after = query.start_after.map(str::as_bytes);
    let prefix_key = object_key(query.bucket, query.prefix.as_bytes());
    let upper = prefix_end(&prefix_key)
        .ok_or_else(|| MetaError::Store("listing range has no upper bound".into()))?;
    let lower = match start_after {
        Some(after) if after >= query.prefix.as_bytes() => {
            Bound::Excluded(object_key(query.bucket, after))
        }
        _ => Bound::Included(prefix_key),
    };
    let roll = RollUp {
        prefix_len: query.prefix.len(),
        delimiter: query.delimiter.filter(|d| !d.is_empty()).map(str::as_bytes),
        marker: start_after,
        max: query.max_keys.min(MAX_PAGE) as usize,
    };
    let mut page = ListPage::default();
    let index = ObjectKeys {
        bucket: query.bucket,
    };
    let found = scan_rolled_up(objects, &index, lower, &upper, roll, |_, value| {
        let record: ObjectRecord = decode(value.value())?;
        page.objects.push(ObjectSummary {
            key: record.key,
            size: record.size,
            etag: record.etag,
            created: record.created,
        });
        Ok(())
    })?;
    page.common_prefixes = found.common_prefixes;
    page.is_truncated = found.is_truncated;
    if found.is_truncated {
        page.next_marker = match found.last {
            Some(LastEntry::Prefix(cp)) => Some(cp),
            Some(LastEntry::Stored(stored)) => Some(utf8(&index.listed_key(&stored)?)?),
            None => None,
        };
    }
    Ok((page, found.scanned))
}

impl Inner {
    /// One page of the objects of `bucket`.
    pub(super) fn list_objects(
        &self,
        bucket: &str,
        prefix: &str,
        start_after: Option<&str>,
        delimiter: Option<&str>,
        max_keys: u32,
    ) -> Result<ListPage, MetaError> {
        let query = ListQuery {
            bucket,
            prefix,
            start_after,
            delimiter,
            max_keys,
        };
        self.store.read(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, bucket)?;
            Ok(list_page(&txn.open_table(OBJECTS)?, &query)?.0)
        })
    }

    /// Stores `records` in one write transaction. Each bucket must exist; a
    /// record replacing an existing key does not free the old blocks, so this
    /// is only for loading fresh namespaces (imports, benchmarks).
    pub(super) fn bulk_insert_objects(&self, records: &[ObjectRecord]) -> Result<(), MetaError> {
        self.store.write(|txn| {
            let buckets = txn.open_table(BUCKETS)?;
            let mut objects = txn.open_table(OBJECTS)?;
            let mut checked: Option<&str> = None;
            for record in records {
                if checked != Some(record.bucket.as_str()) {
                    require_bucket(&buckets, &record.bucket)?;
                    checked = Some(record.bucket.as_str());
                }
                let key = object_key(&record.bucket, record.key.as_bytes());
                objects.insert(key.as_slice(), encode(record)?.as_slice())?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_starts_after_the_prefix() {
        assert_eq!(common_prefix(b"a/b/c", 0, b"/"), Some(&b"a/"[..]));
        assert_eq!(common_prefix(b"a/b/c", 2, b"/"), Some(&b"a/b/"[..]));
        assert_eq!(common_prefix(b"a/b", 2, b"/"), None);
        assert_eq!(common_prefix(b"x--y--z", 0, b"--"), Some(&b"x--"[..]));
        assert_eq!(common_prefix(b"ab", 3, b"/"), None);
    }
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod listing_tests;
