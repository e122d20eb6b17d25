//! ListObjects: one page of a bucket in UTF-8 byte order, with prefix,
//! start-after and delimiter roll-up (the scan is `store::scan`).

use crate::state::MetaState;
use crate::store::db::{decode, encode, prefix_end, StoreError};
use crate::store::scan::{scan_rolled_up, utf8, KeyIndex, LastEntry, RollUp, MAX_PAGE};
use crate::store::tables::{bucket_prefix_len, object_key, require_bucket, BUCKETS, OBJECTS};
use meta_api::{Handle, ListObjects, ListPage, MetaError, ObjectRecord, ObjectSummary, UnixMillis};
use redb::ReadableTable;
use serde::Deserialize;
use std::borrow::Cow;
use std::ops::Bound;

/// What a listing reads of an `ObjectRecord`: the rest (headers, block
/// groups, an inline body) is passed over unparsed.
#[derive(Deserialize)]
struct Listed {
    key: String,
    size: u64,
    etag: String,
    created: UnixMillis,
}

/// What to list within one bucket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListQuery<'a> {
    pub(crate) bucket: &'a str,
    pub(crate) prefix: &'a str,
    pub(crate) start_after: Option<&'a str>,
    pub(crate) delimiter: Option<&'a str>,
    pub(crate) max_keys: u32,
}

/// `OBJECTS` keys: `bucket/` and the key as it is.
struct ObjectKeys<'a> {
    bucket: &'a str,
}

impl KeyIndex for ObjectKeys<'_> {
    fn listed_key<'k>(&self, stored: &'k [u8]) -> Result<Cow<'k, [u8]>, StoreError> {
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
) -> Result<(ListPage, usize), StoreError> {
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
        let record: Listed = decode(value.value())?;
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

impl Handle<ListObjects> for MetaState {
    /// One page of the objects of `bucket`.
    fn handle(&self, request: ListObjects, _now: UnixMillis) -> Result<ListPage, MetaError> {
        let query = ListQuery {
            bucket: &request.bucket,
            prefix: &request.prefix,
            start_after: request.start_after.as_deref(),
            delimiter: request.delimiter.as_deref(),
            max_keys: request.max_keys,
        };
        self.store.read(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, query.bucket)?;
            Ok(list_page(&txn.open_table(OBJECTS)?, &query)?.0)
        })
    }
}

/// Stores `records` in one write transaction. Each bucket must exist; a
/// record replacing an existing key does not free the old blocks, so this
/// is only for loading fresh namespaces (imports, benchmarks).
pub(crate) fn bulk_insert_objects(
    state: &MetaState,
    records: &[ObjectRecord],
) -> Result<(), MetaError> {
    state.store.write(|txn| {
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

#[cfg(test)]
#[path = "listing_tests.rs"]
mod listing_tests;
