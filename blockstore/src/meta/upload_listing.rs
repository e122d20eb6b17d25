//! ListMultipartUploads: one page of a bucket's uploads in S3 order (key in
//! UTF-8 byte order, then initiation time, then upload id), with prefix,
//! key/upload-id markers and delimiter roll-up. The uploads are kept in an
//! ordered index, so a page costs in proportion to its size, not to the
//! bucket: the scan starts at the markers and jumps past each common prefix.
//!
//! Index key: `bucket/` + escaped key + `00 01` + initiation time (8 bytes,
//! order-preserving) + upload id. In the escaped key a NUL byte becomes
//! `00 FF`, so the `00 01` terminator sorts a key before every longer key
//! that starts with it, and the escaped form of a prefix is a prefix of the
//! escaped form of every key under it.

use super::api::MetaError;
use super::buckets::require_bucket;
use super::listing::{scan_rolled_up, utf8, KeyIndex, LastEntry, RollUp, MAX_PAGE};
use super::service::Inner;
use super::store::{bucket_prefix_len, get_json, object_key, prefix_end, BUCKETS, UPLOADS};
use super::types::{UnixMillis, UploadRecord};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::ops::Bound;

/// `upload_order_key(bucket, key, created, upload_id)` -> (): the uploads of
/// one bucket in S3 listing order.
pub(super) const UPLOAD_ORDER: TableDefinition<&[u8], ()> = TableDefinition::new("upload_order");
/// The index of earlier versions, keyed by (bucket, upload id) only; replaced
/// by `UPLOAD_ORDER` when a store is opened.
const LEGACY_UPLOAD_INDEX: TableDefinition<&[u8], ()> = TableDefinition::new("upload_index");

/// Ends the escaped key inside an index key.
const KEY_END: [u8; 2] = [0x00, 0x01];
/// Stands for a NUL byte of the key.
const ESCAPED_NUL: [u8; 2] = [0x00, 0xFF];

/// What one ListMultipartUploads page asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadQuery {
    /// Only uploads whose key starts with this.
    pub prefix: String,
    /// Start after this key (or, with `upload_id_marker`, within it).
    pub key_marker: Option<String>,
    /// Within `key_marker`, start after this upload.
    pub upload_id_marker: Option<String>,
    /// Roll keys up to the first occurrence of this after the prefix.
    pub delimiter: Option<String>,
    /// Most uploads and common prefixes on the page.
    pub max_uploads: u32,
}

/// One page of uploads in progress.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadPage {
    /// Uploads on this page, by key, then initiation time, then id.
    pub uploads: Vec<UploadRecord>,
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow this page.
    pub is_truncated: bool,
    /// When truncated: the key (or common prefix) the next page starts after.
    pub next_key_marker: Option<String>,
    /// When truncated after an upload: its id, the next page's upload-id marker.
    pub next_upload_id_marker: Option<String>,
}

/// Appends `key` escaped (NUL as `00 FF`).
fn push_escaped(out: &mut Vec<u8>, key: &[u8]) {
    for &byte in key {
        if byte == 0 {
            out.extend_from_slice(&ESCAPED_NUL);
        } else {
            out.push(byte);
        }
    }
}

/// The index key of every upload of (bucket, key) starts with this.
fn key_entries(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = object_key(bucket, b"");
    push_escaped(&mut out, key);
    out.extend_from_slice(&KEY_END);
    out
}

/// Index key of one upload.
pub(super) fn upload_order_key(
    bucket: &str,
    key: &str,
    created: UnixMillis,
    upload_id: &str,
) -> Vec<u8> {
    let mut out = key_entries(bucket, key.as_bytes());
    // Flipping the sign bit makes the big-endian bytes sort like the i64.
    out.extend_from_slice(&((created as u64) ^ (1 << 63)).to_be_bytes());
    out.extend_from_slice(upload_id.as_bytes());
    out
}

/// The key and upload id of an index key (without its `bucket/`).
fn split_entry(entry: &[u8]) -> Result<(Vec<u8>, &str), MetaError> {
    let corrupt = || MetaError::Store("malformed upload index entry".into());
    let mut key = Vec::new();
    let mut at = 0;
    loop {
        match entry.get(at..at + 2) {
            Some(pair) if pair == KEY_END => break,
            Some(pair) if pair == ESCAPED_NUL => {
                key.push(0);
                at += 2;
            }
            _ => {
                key.push(*entry.get(at).ok_or_else(corrupt)?);
                at += 1;
            }
        }
    }
    let id = entry.get(at + 2 + 8..).ok_or_else(corrupt)?;
    let id = std::str::from_utf8(id).map_err(|_| corrupt())?;
    Ok((key, id))
}

/// Index key of `upload`.
fn index_key_of(upload: &UploadRecord) -> Vec<u8> {
    upload_order_key(
        &upload.bucket,
        &upload.key,
        upload.created,
        &upload.upload_id,
    )
}

/// Adds an upload to the index.
pub(super) fn index_upload(txn: &WriteTransaction, upload: &UploadRecord) -> Result<(), MetaError> {
    txn.open_table(UPLOAD_ORDER)?
        .insert(index_key_of(upload).as_slice(), ())?;
    Ok(())
}

/// Removes an upload from the index.
pub(super) fn unindex_upload(
    txn: &WriteTransaction,
    upload: &UploadRecord,
) -> Result<(), MetaError> {
    txn.open_table(UPLOAD_ORDER)?
        .remove(index_key_of(upload).as_slice())?;
    Ok(())
}

/// Creates the index; a store written by an earlier version (with the legacy
/// index) gets it rebuilt from the upload records, and loses the legacy table.
pub(super) fn prepare_tables(txn: &WriteTransaction) -> Result<(), MetaError> {
    txn.open_table(UPLOAD_ORDER)?;
    if txn.delete_table(LEGACY_UPLOAD_INDEX)? {
        let uploads = txn.open_table(UPLOADS)?;
        for entry in uploads.iter()? {
            let (_, value) = entry?;
            let upload: UploadRecord = super::store::decode(value.value())?;
            index_upload(txn, &upload)?;
        }
    }
    Ok(())
}

/// `UPLOAD_ORDER` keys of one bucket: `bucket/`, the escaped key, then more.
struct UploadKeys<'a> {
    bucket: &'a str,
}

impl KeyIndex for UploadKeys<'_> {
    fn listed_key<'k>(&self, stored: &'k [u8]) -> Result<Cow<'k, [u8]>, MetaError> {
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
pub(super) fn upload_page(
    index: &impl ReadableTable<&'static [u8], ()>,
    records: &impl ReadableTable<&'static str, &'static [u8]>,
    bucket: &str,
    query: &UploadQuery,
) -> Result<(UploadPage, usize), MetaError> {
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

impl Inner {
    /// One page of the uploads in progress in `bucket`.
    pub(super) fn list_uploads(
        &self,
        bucket: &str,
        query: &UploadQuery,
    ) -> Result<UploadPage, MetaError> {
        self.store.read(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, bucket)?;
            let index = txn.open_table(UPLOAD_ORDER)?;
            Ok(upload_page(&index, &txn.open_table(UPLOADS)?, bucket, query)?.0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_sort_by_key_then_time_then_id() {
        let k = |key: &str, created, id: &str| upload_order_key("b", key, created, id);
        assert!(k("a", 5, "z") < k("a\0", 1, "a"));
        assert!(k("a\0", 1, "a") < k("a\0b", 1, "a"));
        assert!(k("a\0b", 1, "a") < k("a\u{1}", 1, "a"));
        assert!(k("a", -1, "z") < k("a", 0, "a"));
        assert!(k("a", 7, "x") < k("a", 7, "y"));
        assert!(k("a", i64::MAX, "z") < k("ab", i64::MIN, "a"));
    }

    #[test]
    fn index_keys_split_back_into_key_and_id() {
        for key in ["a", "a\0b", "\0", "dir/file\0"] {
            let full = upload_order_key("bkt", key, -3, "up-1");
            let (got, id) = split_entry(&full[bucket_prefix_len("bkt")..]).unwrap();
            assert_eq!((got.as_slice(), id), (key.as_bytes(), "up-1"));
        }
    }
}

#[cfg(test)]
#[path = "upload_listing_tests.rs"]
mod upload_listing_tests;
