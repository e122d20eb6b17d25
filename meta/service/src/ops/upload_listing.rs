//! ListMultipartUploads: one page of a bucket's uploads from the ordered
//! upload index (`store::upload_index`), with prefix, key/upload-id markers
//! and delimiter roll-up; the scan starts at the markers and jumps past each
//! common prefix.

use crate::state::MetaState;
use crate::store::db::{get_json, prefix_end, StoreError};
use crate::store::scan::{scan_rolled_up, utf8, KeyIndex, LastEntry, RollUp, MAX_PAGE};
use crate::store::tables::{
    bucket_prefix_len, object_key, require_bucket, BUCKETS, UPLOADS, UPLOAD_ORDER,
};
use crate::store::upload_index::{key_entries, push_escaped, split_entry, upload_order_key};
use meta_api::{Handle, ListUploads, MetaError, UnixMillis, UploadPage, UploadQuery, UploadRecord};
use redb::ReadableTable;
use std::borrow::Cow;
use std::ops::Bound;

/// `UPLOAD_ORDER` keys of one bucket: `bucket/`, the escaped key, then more.
struct UploadKeys<'a> {
    bucket: &'a str,
}

impl KeyIndex for UploadKeys<'_> {
    fn listed_key<'k>(&self, stored: &'k [u8]) -> Result<Cow<'k, [u8]>, StoreError> {
        let (key, _) = split_entry(&stored[bucket_prefix_len(self.bucket)..])?;
        Ok(Cow::Owned(key))
    }

    fn stored_prefix(&self, prefix: &[u8]) -> Vec<u8> {
        let mut out = object_key(self.bucket, b"");
        push_escaped(&mut out, prefix);
        out
    }
}

/// One page of `query` in `bucket`, and how many index entries were read.
pub(crate) fn upload_page(
    index: &impl ReadableTable<&'static [u8], ()>,
    records: &impl ReadableTable<&'static str, &'static [u8]>,
    bucket: &str,
    query: &UploadQuery,
) -> Result<(UploadPage, usize), StoreError> {
    let keys = UploadKeys { bucket };
    let key_marker = query.key_marker.as_deref();
    let prefix_key = keys.stored_prefix(query.prefix.as_bytes());
    let upper = prefix_end(&prefix_key)
        .ok_or_else(|| MetaError::Store("listing range has no upper bound".into()))?;
    let lower = match key_marker {
        Some(marker) if marker >= query.prefix.as_str() => {
            let after_upload = match &query.upload_id_marker {
                Some(id) => get_json::<&str, UploadRecord>(records, id.as_str())?
                    .filter(|u| u.bucket == bucket && u.key == marker),
                None => None,
            };
            match after_upload {
                Some(u) => {
                    Bound::Excluded(upload_order_key(bucket, marker, u.created, &u.upload_id))
                }
                // Every upload of the marker key is behind: start at the next key.
                None => Bound::Included(
                    prefix_end(&key_entries(bucket, marker.as_bytes()))
                        .ok_or_else(|| MetaError::Store("marker has no end".into()))?,
                ),
            }
        }
        _ => Bound::Included(prefix_key),
    };
    let roll = RollUp {
        prefix_len: query.prefix.len(),
        delimiter: query
            .delimiter
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(str::as_bytes),
        marker: key_marker.map(str::as_bytes),
        max: query.max_uploads.min(MAX_PAGE) as usize,
    };
    let skip = bucket_prefix_len(bucket);
    let mut page = UploadPage::default();
    let found = scan_rolled_up(index, &keys, lower, &upper, roll, |stored, _| {
        let (_, upload_id) = split_entry(&stored[skip..])?;
        let record: UploadRecord = get_json(records, upload_id)?.ok_or_else(|| {
            MetaError::Store(format!("upload index names missing upload {upload_id}"))
        })?;
        page.uploads.push(record);
        Ok(())
    })?;
    page.common_prefixes = found.common_prefixes;
    page.is_truncated = found.is_truncated;
    if found.is_truncated {
        match found.last {
            Some(LastEntry::Prefix(cp)) => page.next_key_marker = Some(cp),
            Some(LastEntry::Stored(stored)) => {
                let (key, upload_id) = split_entry(&stored[skip..])?;
                page.next_key_marker = Some(utf8(&key)?);
                page.next_upload_id_marker = Some(upload_id.to_string());
            }
            None => {}
        }
    }
    Ok((page, found.scanned))
}

impl Handle<ListUploads> for MetaState {
    fn handle(&self, request: ListUploads, _now: UnixMillis) -> Result<UploadPage, MetaError> {
        self.store.read(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, &request.bucket)?;
            let index = txn.open_table(UPLOAD_ORDER)?;
            let uploads = txn.open_table(UPLOADS)?;
            Ok(upload_page(&index, &uploads, &request.bucket, &request.query)?.0)
        })
    }
}

#[cfg(test)]
#[path = "upload_listing_tests.rs"]
mod upload_listing_tests;
