//! ListObjects: one page of a bucket in UTF-8 byte order, with prefix,
//! start-after and delimiter roll-up. A page costs in proportion to its size,
//! not to the bucket: the scan starts at max(prefix, start_after), and once a
//! common prefix is met the scan restarts just past its last possible key
//! instead of walking the keys under it.

use super::api::MetaError;
use super::buckets::require_bucket;
use super::service::Inner;
use super::store::{bucket_prefix_len, decode, object_key, prefix_end, BUCKETS, OBJECTS};
use super::types::{ListPage, ObjectRecord, ObjectSummary};
use redb::ReadableTable;
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
fn common_prefix<'k>(key: &'k [u8], prefix_len: usize, delimiter: &[u8]) -> Option<&'k [u8]> {
    let rest = key.get(prefix_len..)?;
    rest.windows(delimiter.len())
        .position(|w| w == delimiter)
        .map(|at| &key[..prefix_len + at + delimiter.len()])
}

fn utf8(bytes: &[u8]) -> Result<String, MetaError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| MetaError::Store("object key is not UTF-8".into()))
}

/// One page of `query`, and how many stored entries were read for it.
pub(super) fn list_page(
    objects: &impl ReadableTable<&'static [u8], &'static [u8]>,
    query: &ListQuery<'_>,
) -> Result<(ListPage, usize), MetaError> {
    let max = query.max_keys.min(MAX_PAGE) as usize;
    let delimiter = query.delimiter.filter(|d| !d.is_empty()).map(str::as_bytes);
    let start_after = query.start_after.map(str::as_bytes);
    let skip = bucket_prefix_len(query.bucket);
    let prefix_key = object_key(query.bucket, query.prefix.as_bytes());
    let upper = prefix_end(&prefix_key)
        .ok_or_else(|| MetaError::Store("listing range has no upper bound".into()))?;
    let mut lower = match start_after {
        Some(after) if after >= query.prefix.as_bytes() => {
            Bound::Excluded(object_key(query.bucket, after))
        }
        _ => Bound::Included(prefix_key),
    };

    let mut page = ListPage::default();
    let mut emitted = 0usize;
    let mut last: Option<String> = None;
    let mut scanned = 0usize;
    'scan: loop {
        let start = match &lower {
            Bound::Included(k) | Bound::Excluded(k) if k.as_slice() >= upper.as_slice() => break,
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut jump = None;
        for entry in objects.range::<&[u8]>((start, Bound::Excluded(upper.as_slice())))? {
            let (stored_key, value) = entry?;
            scanned += 1;
            let full = stored_key.value();
            let key = &full[skip..];
            let rolled = delimiter.and_then(|d| common_prefix(key, query.prefix.len(), d));
            if let Some(cp) = rolled {
                // A common prefix at or before start_after was returned on an
                // earlier page (start_after is then that prefix or a key under it).
                if start_after.is_none_or(|after| cp > after) {
                    if emitted == max {
                        page.is_truncated = true;
                        break 'scan;
                    }
                    let cp = utf8(cp)?;
                    last = Some(cp.clone());
                    page.common_prefixes.push(cp);
                    emitted += 1;
                }
                jump = Some(
                    prefix_end(&full[..skip + cp.len()])
                        .ok_or_else(|| MetaError::Store("common prefix has no end".into()))?,
                );
                break;
            }
            if emitted == max {
                page.is_truncated = true;
                break 'scan;
            }
            let record: ObjectRecord = decode(value.value())?;
            last = Some(record.key.clone());
            page.objects.push(ObjectSummary {
                key: record.key,
                size: record.size,
                etag: record.etag,
                created: record.created,
            });
            emitted += 1;
        }
        match jump {
            Some(next) => lower = Bound::Included(next),
            None => break,
        }
    }
    if page.is_truncated {
        page.next_marker = last;
    }
    Ok((page, scanned))
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
