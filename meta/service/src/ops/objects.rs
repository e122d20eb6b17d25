//! Committed objects: commit (atomic replace), lookup, delete, and freeing the
//! blocks of writes that never committed.

use crate::redundancy::queue_short_groups;
use crate::state::MetaState;
use crate::store::db::{decode, encode, get_json, StoreError};
use crate::store::deletions::DeletionQueue;
use crate::store::repairs::GroupOwner;
use crate::store::tables::{object_key, require_bucket, BUCKETS, OBJECTS, VERSIONS};
use crate::store::versions::{
    find_version, newest_older, no_such_version, version_key, KeyVersions, Unlock,
};
use crate::tokens::forget_tokens;
use meta_api::naming::validate_object_key;
use meta_api::{
    BucketRecord, CommitObject, DeleteObject, Deleted, DiscardBlocks, GetObject, Handle, MetaError,
    ObjectRecord, UnixMillis, UpdateObject, VersionStamp, WriteCondition, MAX_INLINE_BODY,
};
use std::collections::HashSet;
use std::sync::Arc;

/// Checks a conditional write against the object now at the key.
pub(crate) fn check_condition(
    condition: Option<&WriteCondition>,
    current: Option<&ObjectRecord>,
    key: &str,
) -> Result<(), MetaError> {
    let Some(condition) = condition else {
        return Ok(());
    };
    let holds = match (condition, current) {
        (WriteCondition::KeyAbsent, current) => current.is_none(),
        (WriteCondition::EtagMatches(_), None) | (WriteCondition::SameObject(_), None) => {
            return Err(MetaError::NoSuchKey(key.to_string()))
        }
        (WriteCondition::EtagMatches(etag), Some(current)) => {
            let wanted = etag.trim().trim_matches('"');
            wanted == "*" || wanted.eq_ignore_ascii_case(&current.etag)
        }
        (WriteCondition::SameObject(id), Some(current)) => *id == current.id,
    };
    if holds {
        Ok(())
    } else {
        Err(MetaError::PreconditionFailed)
    }
}

/// An object's bytes are somewhere: in block groups, or in an inline body
/// that stands alone (no block groups), holds the object's stored bytes
/// (sealed, when encrypted) and fits meta's bound.
fn check_inline(record: &ObjectRecord) -> Result<(), MetaError> {
    let stored = match record.attributes.encryption {
        Some(_) => sse::sealed_len(record.size),
        None => record.size,
    };
    let refusal = match &record.inline {
        None if record.groups.is_empty() && stored > 0 => {
            format!("an object of {stored} bytes with neither block groups nor an inline body")
        }
        None => return Ok(()),
        Some(_) if !record.groups.is_empty() => {
            "an object with an inline body has no block groups".to_string()
        }
        Some(body) if body.len() > MAX_INLINE_BODY => format!(
            "an inline body of {} bytes is over the {MAX_INLINE_BODY} meta keeps",
            body.len()
        ),
        Some(body) if body.len() as u64 != stored => format!(
            "an inline body of {} bytes for an object stored in {stored}",
            body.len()
        ),
        Some(_) => return Ok(()),
    };
    Err(MetaError::InvalidRequest(refusal))
}

impl Handle<CommitObject> for MetaState {
    /// Makes `record` the latest version at (bucket, key) when `condition`
    /// holds (see `KeyVersions::put`); the blocks of what it replaces for
    /// good are queued for deletion (after the grace period) in the same
    /// transaction.
    fn handle(&self, request: CommitObject, now: UnixMillis) -> Result<VersionStamp, MetaError> {
        let CommitObject {
            mut record,
            condition,
        } = request;
        check_inline(&record)?;
        forget_tokens(&mut record.groups);
        self.object_keys.seal_for_store(&mut record.attributes)?;
        let condition = condition.as_ref();
        validate_object_key(&record.key).map_err(MetaError::InvalidRequest)?;
        let (bucket, key, size) = (record.bucket.clone(), record.key.clone(), record.size);
        let written = crate::redundancy::written_counts(&record.groups, &record.replication);
        let stamp = self.store.write(|txn| {
            let bucket_record = require_bucket(&txn.open_table(BUCKETS)?, &bucket)?;
            let mut versions = KeyVersions::open(txn)?;
            if condition.is_some() {
                let current = versions.latest_object(&bucket, &key)?;
                check_condition(condition, current.as_ref(), &key)?;
            }
            let (groups, replication) = (record.groups.clone(), record.replication);
            let stamp = versions.put(&bucket_record, record, now)?;
            let owner = GroupOwner {
                bucket: bucket.clone(),
                key: key.clone(),
                part: None,
                version: stamp.seq,
            };
            versions.free_removed(txn, self.deletion_not_before(now))?;
            queue_short_groups(txn, &groups, &replication, &owner, now)?;
            Ok(stamp)
        })?;
        self.repairs.written(written);
        tracing::debug!(%bucket, %key, size, version = stamp.id_or_null(), "object committed");
        metrics::counter!(crate::telemetry::OBJECTS_COMMITTED.name).increment(1);
        Ok(stamp)
    }
}

impl Handle<GetObject> for MetaState {
    /// The latest object at (bucket, key), or the version named, with
    /// current datanode addresses and read tokens. The latest record decoded
    /// for an earlier read is shared while the stored bytes and the datanode
    /// addresses are unchanged and its tokens were signed in the current
    /// token period.
    fn handle(
        &self,
        request: GetObject,
        now: UnixMillis,
    ) -> Result<Option<Arc<ObjectRecord>>, MetaError> {
        let (bucket, key) = (request.bucket.as_str(), request.key.as_str());
        if let Some(wanted) = &request.version {
            return self.store.read(|txn| {
                require_bucket(&txn.open_table(BUCKETS)?, bucket)?;
                let (objects, versions) = (txn.open_table(OBJECTS)?, txn.open_table(VERSIONS)?);
                let Some((_, mut record)) = find_version(&objects, &versions, bucket, key, wanted)?
                else {
                    return Err(no_such_version(wanted));
                };
                if record.version.delete_marker {
                    return Err(delete_marker(record, true));
                }
                self.object_keys.open_for_reading(&mut record.attributes)?;
                self.hand_out_for_reading(&mut record.groups, now);
                Ok(Some(Arc::new(record)))
            });
        }
        // Address generations stay far below 2^32, and periods differ from
        // one read to the next by a few at most.
        let generation =
            (self.registry.address_generation() << 32) | (self.tokens.period(now) & 0xffff_ffff);
        let epoch = self.store.write_epoch();
        let object_key = object_key(bucket, key.as_bytes());
        if let Some(record) = self
            .decoded_objects
            .unchanged(&object_key, epoch, generation)
        {
            return Ok(Some(record));
        }
        self.store.read(|txn| {
            let Some(stored) = txn.open_table(OBJECTS)?.get(object_key.as_slice())? else {
                // An object exists only in an existing bucket: the bucket is
                // looked up only to tell NoSuchBucket from NoSuchKey, and
                // then whether a delete marker hides the key.
                let Some(bucket_record) =
                    get_json::<_, BucketRecord>(&txn.open_table(BUCKETS)?, bucket)?
                else {
                    return Err(MetaError::NoSuchBucket(bucket.to_string()).into());
                };
                if bucket_record.versioning.is_some() {
                    let newest = newest_older(&txn.open_table(VERSIONS)?, bucket, key)?;
                    if let Some((_, marker)) = newest.filter(|(_, r)| r.version.delete_marker) {
                        return Err(delete_marker(marker, false));
                    }
                }
                return Ok(None);
            };
            let record = self.decoded_objects.get_or_decode(
                &object_key,
                stored.value(),
                epoch,
                generation,
                |bytes| {
                    let mut record: ObjectRecord = decode(bytes)?;
                    self.object_keys.open_for_reading(&mut record.attributes)?;
                    self.hand_out_for_reading(&mut record.groups, now);
                    Ok(record)
                },
            )?;
            Ok(Some(record))
        })
    }
}

/// The error that answers a read of delete marker `marker`.
fn delete_marker(marker: ObjectRecord, named: bool) -> StoreError {
    MetaError::DeleteMarker {
        key: marker.key,
        version_id: marker.version.id,
        named,
    }
    .into()
}

impl Handle<DeleteObject> for MetaState {
    /// Removes the object or the version named, or puts a delete marker on
    /// top (see `KeyVersions`); queues the blocks of what was removed for
    /// good for deletion (after the grace period).
    fn handle(&self, request: DeleteObject, now: UnixMillis) -> Result<Deleted, MetaError> {
        let (bucket, key) = (request.bucket.as_str(), request.key.as_str());
        let (removed, version) = self.store.write(|txn| {
            let versioning = require_bucket(&txn.open_table(BUCKETS)?, bucket)?.versioning;
            let mut versions = KeyVersions::open(txn)?;
            let unlock = Unlock {
                now,
                bypass_governance: request.bypass_governance,
            };
            let version = match &request.version {
                Some(wanted) => versions.delete_version(bucket, key, wanted, unlock)?,
                None => {
                    let owner = request.marker_owner.clone();
                    versions.delete_latest(versioning, bucket, key, now, owner)?
                }
            };
            let removed = versions.free_removed(txn, self.deletion_not_before(now))?;
            Ok((removed, version))
        })?;
        // The object removed for good, when the request removed one.
        let removed = removed
            .into_iter()
            .find(|r| !r.version.delete_marker && (request.version.is_some() || version.is_none()))
            .map(|mut r| {
                self.registry.refresh_addrs(&mut r.groups);
                r
            });
        Ok(Deleted { removed, version })
    }
}

impl Handle<UpdateObject> for MetaState {
    /// Sets the tags and ACL of the version whose object id is `id`: the
    /// latest, or the older version of its sequence number.
    fn handle(&self, request: UpdateObject, _now: UnixMillis) -> Result<(), MetaError> {
        let UpdateObject {
            bucket,
            key,
            id,
            seq,
            tags,
            acl,
        } = request;
        self.store.write(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, &bucket)?;
            let latest = object_key(&bucket, key.as_bytes());
            let older = version_key(&bucket, key.as_bytes(), seq);
            for (table, at) in [(OBJECTS, &latest), (VERSIONS, &older)] {
                let mut records = txn.open_table(table)?;
                let found: Option<ObjectRecord> = get_json(&records, at.as_slice())?;
                if let Some(mut record) = found.filter(|r| r.id == id) {
                    record.attributes.tags = tags;
                    record.attributes.acl = acl;
                    records.insert(at.as_slice(), encode(&record)?.as_slice())?;
                    return Ok(());
                }
            }
            Err(MetaError::PreconditionFailed.into())
        })
    }
}

impl Handle<DiscardBlocks> for MetaState {
    /// Queues the block files of an uncommitted write for deletion (after the
    /// grace period, like every release: one rule for every queued block).
    fn handle(&self, request: DiscardBlocks, now: UnixMillis) -> Result<(), MetaError> {
        let groups = request.groups.as_slice();
        if groups.is_empty() {
            return Ok(());
        }
        self.store.write(|txn| {
            DeletionQueue::open(txn)?.queue_groups(
                groups,
                &HashSet::new(),
                self.deletion_not_before(now),
            )?;
            Ok(())
        })
    }
}
