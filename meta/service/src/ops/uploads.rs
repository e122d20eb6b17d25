//! Multipart uploads: the upload record, its parts (a re-upload of a number
//! replaces the older part), and completion, which splices the parts' blocks
//! into one object without copying data, in a single transaction.

use super::objects::check_condition;
use crate::redundancy::queue_short_groups;
use crate::state::MetaState;
use crate::store::db::{decode, encode, get_json, StoreError};
use crate::store::deletions::DeletionQueue;
use crate::store::repairs::GroupOwner;
use crate::store::tables::{
    block_ids, object_key, part_key, require_bucket, BUCKETS, OBJECTS, PARTS, UPLOADS,
};
use crate::store::upload_index::{index_upload, unindex_upload};
use crate::store::versions::KeyVersions;
use crate::tokens::forget_tokens;
use md5::{Digest, Md5};
use meta_api::naming::validate_object_key;
use meta_api::{
    AbortUpload, CommitPart, CompleteUpload, CreateUpload, GetUpload, Handle, ListParts, MetaError,
    ObjectAttributes, ObjectRecord, PartRecord, PartSummary, PartsPage, UnixMillis, UploadRecord,
    MAX_PART_NUMBER, MIN_PART_SIZE,
};
use proto::ObjectId;
use redb::{ReadableTable, Table, WriteTransaction};
use std::collections::HashSet;

/// An ETag as sent by a client, compared without quotes and case.
fn normalize_etag(etag: &str) -> String {
    etag.trim().trim_matches('"').to_ascii_lowercase()
}

/// The S3 ETag of a multipart object: hex MD5 of the concatenated binary MD5s
/// of its parts, then `-` and the number of parts.
pub(crate) fn multipart_etag<'a>(
    part_etags: impl IntoIterator<Item = &'a str>,
) -> Result<String, MetaError> {
    let mut hasher = Md5::new();
    let mut count = 0usize;
    for etag in part_etags {
        let digest = hex::decode(normalize_etag(etag))
            .map_err(|_| MetaError::Store(format!("part ETag {etag:?} is not hex")))?;
        hasher.update(&digest);
        count += 1;
    }
    Ok(format!("{}-{count}", hex::encode(hasher.finalize())))
}

/// The upload `upload_id` if it belongs to (bucket, key).
fn upload_for(
    uploads: &impl ReadableTable<&'static str, &'static [u8]>,
    bucket: &str,
    key: &str,
    upload_id: &str,
) -> Result<Option<UploadRecord>, StoreError> {
    let record: Option<UploadRecord> = get_json(uploads, upload_id)?;
    Ok(record.filter(|u| u.bucket == bucket && u.key == key))
}

/// Every stored part of `upload_id`, in number order.
fn all_parts(
    parts: &impl ReadableTable<&'static [u8], &'static [u8]>,
    upload_id: &str,
) -> Result<Vec<PartRecord>, StoreError> {
    let first = part_key(upload_id, 0);
    let last = part_key(upload_id, u32::MAX);
    let mut out = Vec::new();
    for entry in parts.range::<&[u8]>(first.as_slice()..=last.as_slice())? {
        let (_, value) = entry?;
        out.push(decode(value.value())?);
    }
    Ok(out)
}

/// Removes the upload record, its index entry and every part record.
fn remove_upload(
    txn: &WriteTransaction,
    upload: &UploadRecord,
    parts: &mut Table<&[u8], &[u8]>,
    stored: &[PartRecord],
) -> Result<(), StoreError> {
    txn.open_table(UPLOADS)?.remove(upload.upload_id.as_str())?;
    unindex_upload(txn, upload)?;
    for part in stored {
        parts.remove(part_key(&upload.upload_id, part.number).as_slice())?;
    }
    Ok(())
}

impl Handle<CreateUpload> for MetaState {
    /// Stores a new upload of an existing bucket.
    fn handle(&self, request: CreateUpload, _now: UnixMillis) -> Result<(), MetaError> {
        let mut record = request.record;
        self.object_keys.seal_for_store(&mut record.attributes)?;
        validate_object_key(&record.key).map_err(MetaError::InvalidRequest)?;
        if record.upload_id.is_empty() || record.upload_id.len() > 256 {
            return Err(MetaError::InvalidRequest(
                "upload id must be 1 to 256 bytes".into(),
            ));
        }
        self.store.write(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, &record.bucket)?;
            let mut uploads = txn.open_table(UPLOADS)?;
            if uploads.get(record.upload_id.as_str())?.is_some() {
                return Err(MetaError::InvalidRequest(format!(
                    "upload {} already exists",
                    record.upload_id
                ))
                .into());
            }
            uploads.insert(record.upload_id.as_str(), encode(&record)?.as_slice())?;
            index_upload(txn, &record)
        })
    }
}

impl Handle<GetUpload> for MetaState {
    /// The upload if it exists for (bucket, key).
    fn handle(
        &self,
        request: GetUpload,
        _now: UnixMillis,
    ) -> Result<Option<UploadRecord>, MetaError> {
        self.store.read(|txn| {
            let upload = upload_for(
                &txn.open_table(UPLOADS)?,
                &request.bucket,
                &request.key,
                &request.upload_id,
            )?;
            upload
                .map(|mut upload| {
                    self.object_keys.open_for_reading(&mut upload.attributes)?;
                    Ok(upload)
                })
                .transpose()
        })
    }
}

impl Handle<CommitPart> for MetaState {
    /// Stores a part; an older part of the same number is replaced and its
    /// blocks queued for deletion (after the grace period).
    fn handle(&self, request: CommitPart, now: UnixMillis) -> Result<(), MetaError> {
        let mut part = request.part;
        forget_tokens(&mut part.groups);
        if !(1..=MAX_PART_NUMBER).contains(&part.number) {
            return Err(MetaError::InvalidRequest(format!(
                "part numbers run from 1 to {MAX_PART_NUMBER}, not {}",
                part.number
            )));
        }
        self.store.write(|txn| {
            let upload: UploadRecord =
                get_json(&txn.open_table(UPLOADS)?, part.upload_id.as_str())?
                    .ok_or_else(|| MetaError::NoSuchUpload(part.upload_id.clone()))?;
            if upload.attributes.encryption.is_some() != part.key_salt.is_some() {
                return Err(MetaError::InvalidRequest(
                    "a part of an encrypted upload, and only such a part, has a key salt".into(),
                )
                .into());
            }
            let owner = GroupOwner {
                bucket: upload.bucket,
                key: upload.key,
                part: Some((part.upload_id.clone(), part.number)),
                version: 0,
            };
            queue_short_groups(txn, &part.groups, &upload.replication, &owner, now)?;
            let mut parts = txn.open_table(PARTS)?;
            let old = parts.insert(
                part_key(&part.upload_id, part.number).as_slice(),
                encode(&part)?.as_slice(),
            )?;
            if let Some(old) = old {
                let old: PartRecord = decode(old.value())?;
                DeletionQueue::open(txn)?.queue_groups(
                    &old.groups,
                    &block_ids(&part.groups),
                    self.deletion_not_before(now),
                )?;
            }
            Ok(())
        })
    }
}

impl Handle<ListParts> for MetaState {
    /// Parts numbered after `after_part`, at most `max_parts`, and whether more remain.
    fn handle(&self, request: ListParts, now: UnixMillis) -> Result<PartsPage, MetaError> {
        let ListParts {
            upload_id,
            after_part,
            max_parts,
        } = request;
        let upload_id = upload_id.as_str();
        let (mut parts, is_truncated) = self.store.read(|txn| {
            if txn.open_table(UPLOADS)?.get(upload_id)?.is_none() {
                return Err(MetaError::NoSuchUpload(upload_id.to_string()).into());
            }
            let Some(first) = after_part.checked_add(1) else {
                return Ok((Vec::new(), false));
            };
            let table = txn.open_table(PARTS)?;
            let from = part_key(upload_id, first);
            let to = part_key(upload_id, u32::MAX);
            let mut parts = Vec::new();
            let mut is_truncated = false;
            for entry in table.range::<&[u8]>(from.as_slice()..=to.as_slice())? {
                if parts.len() == max_parts.min(MAX_PART_NUMBER) as usize {
                    is_truncated = true;
                    break;
                }
                let (_, value) = entry?;
                parts.push(decode::<PartRecord>(value.value())?);
            }
            Ok((parts, is_truncated))
        })?;
        for part in &mut parts {
            self.hand_out_for_reading(&mut part.groups, now);
        }
        Ok(PartsPage {
            parts,
            is_truncated,
        })
    }
}

impl Handle<CompleteUpload> for MetaState {
    /// Checks the named parts, commits the object made of them, removes the
    /// upload and frees the parts not named, all in one transaction.
    fn handle(&self, request: CompleteUpload, now: UnixMillis) -> Result<ObjectRecord, MetaError> {
        let (bucket, key, upload_id) = (
            request.bucket.as_str(),
            request.key.as_str(),
            request.upload_id.as_str(),
        );
        let named = request.parts.as_slice();
        let condition = request.condition.as_ref();
        if named.is_empty() {
            return Err(MetaError::InvalidRequest(
                "a multipart upload completes with at least one part".into(),
            ));
        }
        if named.windows(2).any(|w| w[0].number >= w[1].number) {
            return Err(MetaError::InvalidPartOrder);
        }
        let completion = self.store.write(|txn| {
            let Some(upload) = upload_for(&txn.open_table(UPLOADS)?, bucket, key, upload_id)?
            else {
                let objects = txn.open_table(OBJECTS)?;
                return completed_before(&objects, &request)
                    .map(Completion::Earlier)
                    .ok_or_else(|| MetaError::NoSuchUpload(upload_id.to_string()).into());
            };
            let bucket_record = require_bucket(&txn.open_table(BUCKETS)?, bucket)?;
            if condition.is_some() {
                let current: Option<ObjectRecord> = get_json(
                    &txn.open_table(OBJECTS)?,
                    object_key(bucket, key.as_bytes()).as_slice(),
                )?;
                check_condition(condition, current.as_ref(), key)?;
            }
            let mut parts_table = txn.open_table(PARTS)?;
            let stored = all_parts(&parts_table, upload_id)?;
            let mut chosen: Vec<&PartRecord> = Vec::with_capacity(named.len());
            for (i, wanted) in named.iter().enumerate() {
                let part = stored
                    .iter()
                    .find(|p| p.number == wanted.number)
                    .filter(|p| normalize_etag(&p.etag) == normalize_etag(&wanted.etag))
                    .filter(|p| {
                        wanted
                            .checksums
                            .iter()
                            .all(|named| p.checksum.as_ref() == Some(named))
                    })
                    .ok_or(MetaError::InvalidPart(wanted.number))?;
                if i + 1 < named.len() && part.size < MIN_PART_SIZE {
                    return Err(MetaError::EntityTooSmall(wanted.number).into());
                }
                chosen.push(part);
            }
            let record = ObjectRecord {
                id: ObjectId(crate::entropy::uuid()),
                bucket: bucket.to_string(),
                key: key.to_string(),
                size: chosen.iter().map(|p| p.size).sum(),
                etag: multipart_etag(chosen.iter().map(|p| p.etag.as_str()))?,
                content_type: upload.content_type.clone(),
                headers: upload.headers.clone(),
                user_metadata: upload.user_metadata.clone(),
                created: now,
                replication: upload.replication,
                groups: chosen
                    .iter()
                    .flat_map(|p| p.groups.iter().cloned())
                    .collect(),
                parts: chosen
                    .iter()
                    .map(|p| PartSummary {
                        number: p.number,
                        size: p.size,
                        etag: normalize_etag(&p.etag),
                        checksum: p.checksum.clone(),
                        key_salt: p.key_salt.clone(),
                    })
                    .collect(),
                attributes: ObjectAttributes {
                    checksum: None,
                    upload_id: Some(upload_id.to_string()),
                    ..upload.attributes.clone()
                },
                version: Default::default(),
                inline: None,
            };
            let kept = block_ids(&record.groups);
            let not_before = self.deletion_not_before(now);
            let mut deletions = DeletionQueue::open(txn)?;
            let named_numbers: HashSet<u32> = named.iter().map(|p| p.number).collect();
            for part in stored.iter().filter(|p| !named_numbers.contains(&p.number)) {
                deletions.queue_groups(&part.groups, &kept, not_before)?;
            }
            drop(deletions);
            let mut versions = KeyVersions::open(txn)?;
            let mut record = record;
            record.version = versions.put(&bucket_record, record.clone(), now)?;
            versions.free_removed(txn, not_before)?;
            remove_upload(txn, &upload, &mut parts_table, &stored)?;
            Ok(Completion::Made(record))
        })?;
        let mut record = match completion {
            Completion::Made(record) => record,
            Completion::Earlier(mut record) => {
                self.hand_out_for_reading(&mut record.groups, now);
                tracing::debug!(bucket, key, upload_id, "completion retried");
                return Ok(record);
            }
        };
        self.repairs.written(crate::redundancy::written_counts(
            &record.groups,
            &record.replication,
        ));
        self.hand_out_for_reading(&mut record.groups, now);
        tracing::debug!(
            bucket,
            key,
            upload_id,
            parts = named.len(),
            "multipart upload completed"
        );
        metrics::counter!(crate::telemetry::OBJECTS_COMMITTED.name).increment(1);
        Ok(record)
    }
}

/// What a completion found.
enum Completion {
    /// The object it made now.
    Made(ObjectRecord),
    /// The object an earlier completion of the same upload made.
    Earlier(ObjectRecord),
}

/// The object a completion of `request`'s upload made earlier, if the key
/// still holds it and the request names the same parts: a client whose first
/// answer was lost retries, and S3 answers it as the first time.
fn completed_before(
    objects: &impl ReadableTable<&'static [u8], &'static [u8]>,
    request: &CompleteUpload,
) -> Option<ObjectRecord> {
    let record: ObjectRecord = get_json(
        objects,
        object_key(&request.bucket, request.key.as_bytes()).as_slice(),
    )
    .ok()??;
    let same_parts = record.parts.len() == request.parts.len()
        && record
            .parts
            .iter()
            .zip(&request.parts)
            .all(|(made, named)| {
                made.number == named.number && made.etag == normalize_etag(&named.etag)
            });
    (record.attributes.upload_id.as_deref() == Some(request.upload_id.as_str()) && same_parts)
        .then_some(record)
}

impl Handle<AbortUpload> for MetaState {
    /// Removes the upload and its parts and queues their blocks for deletion
    /// (after the grace period).
    fn handle(&self, request: AbortUpload, now: UnixMillis) -> Result<(), MetaError> {
        let (bucket, key, upload_id) = (
            request.bucket.as_str(),
            request.key.as_str(),
            request.upload_id.as_str(),
        );
        self.store.write(|txn| {
            let upload = upload_for(&txn.open_table(UPLOADS)?, bucket, key, upload_id)?
                .ok_or_else(|| MetaError::NoSuchUpload(upload_id.to_string()))?;
            abort_upload(txn, &upload, self.deletion_not_before(now))
        })
    }
}

/// Removes `upload` and its parts, and queues their blocks for deletion
/// from `not_before` on.
pub(crate) fn abort_upload(
    txn: &WriteTransaction,
    upload: &UploadRecord,
    not_before: UnixMillis,
) -> Result<(), StoreError> {
    let mut parts = txn.open_table(PARTS)?;
    let stored = all_parts(&parts, &upload.upload_id)?;
    let mut deletions = DeletionQueue::open(txn)?;
    for part in &stored {
        deletions.queue_groups(&part.groups, &HashSet::new(), not_before)?;
    }
    remove_upload(txn, upload, &mut parts, &stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_of_two_parts_matches_an_independent_computation() {
        let a = hex::encode(Md5::digest(b"part one"));
        let b = hex::encode(Md5::digest(b"part two"));
        let mut joined = Md5::digest(b"part one").to_vec();
        joined.extend_from_slice(&Md5::digest(b"part two"));
        let expected = format!("{}-2", hex::encode(Md5::digest(&joined)));
        let quoted = format!("\"{}\"", b.to_uppercase());
        assert_eq!(multipart_etag([a.as_str(), quoted.as_str()]), Ok(expected));
        assert!(multipart_etag(["zz"]).is_err());
    }
}
