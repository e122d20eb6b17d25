//! Committed objects: commit (atomic replace), lookup, delete, and freeing the
//! blocks of writes that never committed.

use crate::redundancy::queue_short_groups;
use crate::state::MetaState;
use crate::store::db::{decode, encode, get_json};
use crate::store::deletions::DeletionQueue;
use crate::store::repairs::GroupOwner;
use crate::store::tables::{block_ids, object_key, require_bucket, BUCKETS, OBJECTS};
use crate::tokens::forget_tokens;
use meta_api::naming::validate_object_key;
use meta_api::{
    CommitObject, DeleteObject, DiscardBlocks, GetObject, Handle, MetaError, ObjectRecord,
    UnixMillis, WriteCondition,
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

impl Handle<CommitObject> for MetaState {
    /// Makes `record` the object at (bucket, key) when `condition` holds; the
    /// blocks of the object it replaces are queued for deletion (after the
    /// grace period) in the same transaction.
    fn handle(&self, request: CommitObject, now: UnixMillis) -> Result<(), MetaError> {
        let CommitObject {
            mut record,
            condition,
        } = request;
        forget_tokens(&mut record.groups);
        let condition = condition.as_ref();
        validate_object_key(&record.key).map_err(MetaError::InvalidRequest)?;
        let key = object_key(&record.bucket, record.key.as_bytes());
        let replaced = self.store.write(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, &record.bucket)?;
            let mut objects = txn.open_table(OBJECTS)?;
            if condition.is_some() {
                let current: Option<ObjectRecord> = get_json(&objects, key.as_slice())?;
                check_condition(condition, current.as_ref(), &record.key)?;
            }
            let old = objects.insert(key.as_slice(), encode(&record)?.as_slice())?;
            let owner = GroupOwner {
                bucket: record.bucket.clone(),
                key: record.key.clone(),
                part: None,
            };
            queue_short_groups(txn, &record.groups, &record.replication, &owner, now)?;
            let Some(old) = old else {
                return Ok(false);
            };
            let old: ObjectRecord = decode(old.value())?;
            DeletionQueue::open(txn)?.queue_groups(
                &old.groups,
                &block_ids(&record.groups),
                self.deletion_not_before(now),
            )?;
            Ok(true)
        })?;
        tracing::debug!(bucket = %record.bucket, key = %record.key, size = record.size, replaced, "object committed");
        metrics::counter!("tessera_meta_objects_committed_total").increment(1);
        Ok(())
    }
}

impl Handle<GetObject> for MetaState {
    /// The object at (bucket, key), with current datanode addresses and
    /// read tokens. The record decoded for an earlier read is shared while
    /// the stored bytes and the datanode addresses are unchanged and its
    /// tokens were signed in the current token period.
    fn handle(
        &self,
        request: GetObject,
        now: UnixMillis,
    ) -> Result<Option<Arc<ObjectRecord>>, MetaError> {
        let (bucket, key) = (request.bucket.as_str(), request.key.as_str());
        // Address generations stay far below 2^32, and periods differ from
        // one read to the next by a few at most.
        let generation =
            (self.registry.address_generation() << 32) | (self.tokens.period(now) & 0xffff_ffff);
        let epoch = self.store.write_epoch();
        let key = object_key(bucket, key.as_bytes());
        if let Some(record) = self.decoded_objects.unchanged(&key, epoch, generation) {
            return Ok(Some(record));
        }
        self.store.read(|txn| {
            let Some(stored) = txn.open_table(OBJECTS)?.get(key.as_slice())? else {
                // An object exists only in an existing bucket: the bucket is
                // looked up only to tell NoSuchBucket from NoSuchKey.
                if txn.open_table(BUCKETS)?.get(bucket)?.is_none() {
                    return Err(MetaError::NoSuchBucket(bucket.to_string()).into());
                }
                return Ok(None);
            };
            let record = self.decoded_objects.get_or_decode(
                &key,
                stored.value(),
                epoch,
                generation,
                |bytes| {
                    let mut record: ObjectRecord = decode(bytes)?;
                    self.hand_out_for_reading(&mut record.groups, now);
                    Ok(record)
                },
            )?;
            Ok(Some(record))
        })
    }
}

impl Handle<DeleteObject> for MetaState {
    /// Removes the object, if any, and queues its blocks for deletion (after
    /// the grace period).
    fn handle(
        &self,
        request: DeleteObject,
        now: UnixMillis,
    ) -> Result<Option<ObjectRecord>, MetaError> {
        let (bucket, key) = (request.bucket.as_str(), request.key.as_str());
        let removed = self.store.write(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, bucket)?;
            let mut objects = txn.open_table(OBJECTS)?;
            let old = objects.remove(object_key(bucket, key.as_bytes()).as_slice())?;
            let Some(old) = old else {
                return Ok(None);
            };
            let old: ObjectRecord = decode(old.value())?;
            DeletionQueue::open(txn)?.queue_groups(
                &old.groups,
                &HashSet::new(),
                self.deletion_not_before(now),
            )?;
            Ok(Some(old))
        })?;
        Ok(removed.map(|mut r| {
            self.registry.refresh_addrs(&mut r.groups);
            r
        }))
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
