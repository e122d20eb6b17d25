//! The ordered index of multipart uploads behind ListMultipartUploads: S3
//! order (key in UTF-8 byte order, then initiation time, then upload id), so
//! that a page costs in proportion to its size, not to the bucket.
//!
//! Index key: `bucket/` + escaped key + `00 01` + initiation time (8 bytes,
//! order-preserving) + upload id. In the escaped key a NUL byte becomes
//! `00 FF`, so the `00 01` terminator sorts a key before every longer key
//! that starts with it, and the escaped form of a prefix is a prefix of the
//! escaped form of every key under it.

use super::db::decode;
use super::db::StoreError;
use super::tables::{object_key, UPLOADS, UPLOAD_ORDER};
use meta_api::{UnixMillis, UploadRecord};
use redb::{ReadableTable, TableDefinition, WriteTransaction};

/// The index of earlier versions, keyed by (bucket, upload id) only; replaced
/// by `UPLOAD_ORDER` when a store is opened.
pub(crate) const LEGACY_UPLOAD_INDEX: TableDefinition<&[u8], ()> =
    TableDefinition::new("upload_index");

/// Ends the escaped key inside an index key.
const KEY_END: [u8; 2] = [0x00, 0x01];
/// Stands for a NUL byte of the key.
const ESCAPED_NUL: [u8; 2] = [0x00, 0xFF];

/// Appends `key` escaped (NUL as `00 FF`).
pub(crate) fn push_escaped(out: &mut Vec<u8>, key: &[u8]) {
    for &byte in key {
        if byte == 0 {
            out.extend_from_slice(&ESCAPED_NUL);
        } else {
            out.push(byte);
        }
    }
}

/// The index key of every upload of (bucket, key) starts with this.
pub(crate) fn key_entries(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = object_key(bucket, b"");
    push_escaped(&mut out, key);
    out.extend_from_slice(&KEY_END);
    out
}

/// Index key of one upload.
pub(crate) fn upload_order_key(
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
pub(crate) fn split_entry(entry: &[u8]) -> Result<(Vec<u8>, &str), StoreError> {
    let corrupt = || StoreError::Corrupt("malformed upload index entry".into());
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
pub(crate) fn index_upload(
    txn: &WriteTransaction,
    upload: &UploadRecord,
) -> Result<(), StoreError> {
    txn.open_table(UPLOAD_ORDER)?
        .insert(index_key_of(upload).as_slice(), ())?;
    Ok(())
}

/// Removes an upload from the index.
pub(crate) fn unindex_upload(
    txn: &WriteTransaction,
    upload: &UploadRecord,
) -> Result<(), StoreError> {
    txn.open_table(UPLOAD_ORDER)?
        .remove(index_key_of(upload).as_slice())?;
    Ok(())
}

/// Creates the index; a store written by an earlier version (with the legacy
/// index) gets it rebuilt from the upload records, and loses the legacy table.
pub(crate) fn prepare_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(UPLOAD_ORDER)?;
    if txn.delete_table(LEGACY_UPLOAD_INDEX)? {
        let uploads = txn.open_table(UPLOADS)?;
        for entry in uploads.iter()? {
            let (_, value) = entry?;
            let upload: UploadRecord = decode(value.value())?;
            index_upload(txn, &upload)?;
        }
    }
    Ok(())
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
            let (got, id) =
                split_entry(&full[super::super::tables::bucket_prefix_len("bkt")..]).unwrap();
            assert_eq!((got.as_slice(), id), (key.as_bytes(), "up-1"));
        }
    }
}
