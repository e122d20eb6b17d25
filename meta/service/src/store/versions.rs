//! The versions of a key, as S3's versioning keeps them.
//!
//! `OBJECTS` holds the latest version of each key when it is an object, so
//! that reads of the latest version and ListObjects never look further.
//! `VERSIONS` holds every other version: older objects and every delete
//! marker (a key whose latest version is a marker has no `OBJECTS` entry).
//! A bucket that never had versioning has no `VERSIONS` entries at all.
//!
//! A `VERSIONS` key is the bucket, the object key escaped so that its end
//! is unambiguous, and the version's sequence number inverted: one key's
//! versions are contiguous, newest first, and keys are in UTF-8 byte order.

use super::db::{decode, encode, get_json, prefix_end, StoreError};
use super::deletions::DeletionQueue;
use super::tables::{block_ids, object_key, COUNTERS, OBJECTS, VERSIONS};
use meta_api::naming::{new_version_id, VersionRef};
use meta_api::{BucketRecord, MetaError, ObjectRecord, UnixMillis, VersionStamp, Versioning};
use proto::BlockId;
use redb::{ReadableTable, Table, WriteTransaction};
use std::collections::HashSet;
use std::ops::Bound;

/// Counter holding the next version sequence number.
const NEXT_VERSION: &str = "next_version";

/// Escape byte pairs: a 0 byte of a key is stored as 0, 0xFF; the key ends
/// with 0, 0 (which sorts before any escaped byte).
const ESCAPED_ZERO: [u8; 2] = [0, 0xff];
const KEY_END: [u8; 2] = [0, 0];

/// `bucket/` and `key` escaped, without the end mark: every `VERSIONS` key
/// of a key starting with `key` starts with it.
pub(crate) fn versions_prefix(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = object_key(bucket, b"");
    out.reserve(key.len() + 10);
    for &byte in key {
        if byte == 0 {
            out.extend_from_slice(&ESCAPED_ZERO);
        } else {
            out.push(byte);
        }
    }
    out
}

/// The `VERSIONS` key prefix of exactly `key`'s versions.
fn versions_of(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = versions_prefix(bucket, key);
    out.extend_from_slice(&KEY_END);
    out
}

/// The first `VERSIONS` key past every version of `key`.
pub(crate) fn after_versions_of(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = versions_prefix(bucket, key);
    out.extend_from_slice(&[0, 1]);
    out
}

/// The `VERSIONS` key of version `seq` of `key`.
pub(crate) fn version_key(bucket: &str, key: &[u8], seq: u64) -> Vec<u8> {
    let mut out = versions_of(bucket, key);
    out.extend_from_slice(&(u64::MAX - seq).to_be_bytes());
    out
}

/// The object key and sequence number of a `VERSIONS` key of `bucket`.
pub(crate) fn split_version_key(bucket: &str, stored: &[u8]) -> Result<(Vec<u8>, u64), StoreError> {
    let corrupt = || StoreError::Corrupt("malformed version key".into());
    let rest = stored.get(bucket.len() + 1..).ok_or_else(corrupt)?;
    let mut key = Vec::with_capacity(rest.len());
    let mut i = 0;
    while i < rest.len() {
        match (rest[i], rest.get(i + 1)) {
            (0, Some(0)) => {
                let seq: [u8; 8] = rest[i + 2..].try_into().map_err(|_| corrupt())?;
                return Ok((key, u64::MAX - u64::from_be_bytes(seq)));
            }
            (0, Some(0xff)) => {
                key.push(0);
                i += 2;
            }
            (0, _) => return Err(corrupt()),
            (byte, _) => {
                key.push(byte);
                i += 1;
            }
        }
    }
    Err(corrupt())
}

/// Where a version was found.
pub(crate) enum Place {
    /// In `OBJECTS`: the latest version, an object.
    Latest,
    /// In `VERSIONS`, under this key.
    Older(Vec<u8>),
}

/// The versions of `key` in `VERSIONS`, newest first, each with its stored
/// key, decoded as the walk reaches them.
fn each_version<'t>(
    versions: &'t impl ReadableTable<&'static [u8], &'static [u8]>,
    bucket: &str,
    key: &str,
) -> Result<impl Iterator<Item = Result<(Vec<u8>, ObjectRecord), StoreError>> + 't, StoreError> {
    let prefix = versions_of(bucket, key.as_bytes());
    let entries = versions.range(prefix.as_slice()..)?;
    Ok(entries.map_while(move |entry| match entry {
        Err(e) => Some(Err(e.into())),
        Ok((stored, value)) => stored.value().starts_with(&prefix).then(|| {
            let record = decode(value.value())?;
            Ok((stored.value().to_vec(), record))
        }),
    }))
}

/// The version `wanted` names, and where it is.
pub(crate) fn find_version(
    objects: &impl ReadableTable<&'static [u8], &'static [u8]>,
    versions: &impl ReadableTable<&'static [u8], &'static [u8]>,
    bucket: &str,
    key: &str,
    wanted: &VersionRef,
) -> Result<Option<(Place, ObjectRecord)>, StoreError> {
    let latest: Option<ObjectRecord> =
        get_json(objects, object_key(bucket, key.as_bytes()).as_slice())?;
    if let Some(latest) = latest.filter(|r| wanted.names(&r.version)) {
        return Ok(Some((Place::Latest, latest)));
    }
    let found = match wanted {
        VersionRef::Id { seq, .. } => {
            let at = version_key(bucket, key.as_bytes(), *seq);
            let found: Option<ObjectRecord> = get_json(versions, at.as_slice())?;
            found.map(|r| (at, r))
        }
        // At most one null version per key; a key's versions are few enough
        // to walk.
        VersionRef::Null => each_version(versions, bucket, key)?
            .find(|v| v.as_ref().map_or(true, |(_, r)| r.version.id.is_none()))
            .transpose()?,
    };
    Ok(found
        .filter(|(_, r)| wanted.names(&r.version))
        .map(|(at, r)| (Place::Older(at), r)))
}

/// The newest version of `key` in `VERSIONS`, and its stored key.
pub(crate) fn newest_older(
    versions: &impl ReadableTable<&'static [u8], &'static [u8]>,
    bucket: &str,
    key: &str,
) -> Result<Option<(Vec<u8>, ObjectRecord)>, StoreError> {
    each_version(versions, bucket, key)?.next().transpose()
}

/// Every version of `key` in `VERSIONS`, newest first, with its stored key.
pub(crate) fn older_versions(
    versions: &impl ReadableTable<&'static [u8], &'static [u8]>,
    bucket: &str,
    key: &str,
) -> Result<Vec<(Vec<u8>, ObjectRecord)>, StoreError> {
    each_version(versions, bucket, key)?.collect()
}

/// Whether `bucket` holds any version at all in `VERSIONS`.
pub(crate) fn any_in_bucket(
    versions: &impl ReadableTable<&'static [u8], &'static [u8]>,
    bucket: &str,
) -> Result<bool, StoreError> {
    super::db::any_with_prefix(versions, &versions_prefix(bucket, b""))
}

/// The upper bound of the `VERSIONS` keys whose object key starts with
/// `prefix` in `bucket`.
pub(crate) fn versions_prefix_end(bucket: &str, prefix: &[u8]) -> Result<Vec<u8>, StoreError> {
    prefix_end(&versions_prefix(bucket, prefix))
        .ok_or_else(|| StoreError::Corrupt("version range has no upper bound".into()))
}

/// The versions of a bucket's keys, open for a write.
pub(crate) struct KeyVersions<'txn> {
    objects: Table<'txn, &'static [u8], &'static [u8]>,
    versions: Table<'txn, &'static [u8], &'static [u8]>,
    counters: Table<'txn, &'static str, u64>,
    /// Records removed for good, whose blocks are to be freed.
    removed: Vec<ObjectRecord>,
    /// Blocks of the record `put` stored, which what it replaced may share.
    kept: HashSet<BlockId>,
}

impl<'txn> KeyVersions<'txn> {
    /// Opens the tables in `txn`.
    pub(crate) fn open(txn: &'txn WriteTransaction) -> Result<Self, StoreError> {
        Ok(Self {
            objects: txn.open_table(OBJECTS)?,
            versions: txn.open_table(VERSIONS)?,
            counters: txn.open_table(COUNTERS)?,
            removed: Vec::new(),
            kept: HashSet::new(),
        })
    }

    /// The latest version of `key` when it is an object.
    pub(crate) fn latest_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<ObjectRecord>, StoreError> {
        get_json(&self.objects, object_key(bucket, key.as_bytes()).as_slice())
    }

    /// Every version of `key`, newest first: the latest object, then the
    /// versions in `VERSIONS`.
    pub(crate) fn all_versions(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Vec<ObjectRecord>, StoreError> {
        let mut all: Vec<ObjectRecord> = self.latest_object(bucket, key)?.into_iter().collect();
        for version in each_version(&self.versions, bucket, key)? {
            all.push(version?.1);
        }
        Ok(all)
    }

    /// The first key of `bucket` within `from` (after a key, at or after a
    /// key, or from the start) that has a version in either table, in key
    /// order.
    pub(crate) fn next_key(
        &self,
        bucket: &str,
        from: Bound<&str>,
    ) -> Result<Option<String>, StoreError> {
        let no_end = || StoreError::Corrupt("bucket range has no upper bound".into());
        let start = object_key(bucket, b"");
        let end = prefix_end(&start).ok_or_else(no_end)?;
        let (lower, versions_from) = match from {
            Bound::Excluded(key) => (
                Bound::Excluded(object_key(bucket, key.as_bytes())),
                after_versions_of(bucket, key.as_bytes()),
            ),
            Bound::Included(key) => (
                Bound::Included(object_key(bucket, key.as_bytes())),
                versions_prefix(bucket, key.as_bytes()),
            ),
            Bound::Unbounded => (Bound::Included(start.clone()), versions_prefix(bucket, b"")),
        };
        let lower = lower.as_ref().map(Vec::as_slice);
        let latest = match self
            .objects
            .range::<&[u8]>((lower, Bound::Excluded(end.as_slice())))?
            .next()
        {
            Some(entry) => Some(entry?.0.value()[start.len()..].to_vec()),
            None => None,
        };
        let older = match self
            .versions
            .range::<&[u8]>(versions_from.as_slice()..versions_prefix_end(bucket, b"")?.as_slice())?
            .next()
        {
            Some(entry) => Some(split_version_key(bucket, entry?.0.value())?.0),
            None => None,
        };
        let next = match (latest, older) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        next.map(|key| {
            String::from_utf8(key).map_err(|_| StoreError::Corrupt("key is not UTF-8".into()))
        })
        .transpose()
    }

    /// A new version stamp for a write under `versioning`.
    fn stamp(
        &mut self,
        versioning: Versioning,
        delete_marker: bool,
    ) -> Result<VersionStamp, StoreError> {
        let seq = self.counters.get(NEXT_VERSION)?.map_or(1, |g| g.value());
        self.counters.insert(NEXT_VERSION, seq + 1)?;
        Ok(VersionStamp {
            id: (versioning == Versioning::Enabled)
                .then(|| crate::entropy::with_rng(|rng| new_version_id(seq, rng))),
            seq,
            delete_marker,
        })
    }

    /// Moves the latest object of `key`, if any, out of the way of a new
    /// latest version: to `VERSIONS`, or away for good when the new version
    /// replaces the null version it is.
    ///
    /// Two versions never share a block (removing one would free the
    /// other's data): an older version that would keep blocks of the new one
    /// (a copy onto itself that raced the bucket's versioning being enabled)
    /// refuses the write with PreconditionFailed.
    fn set_aside_latest(
        &mut self,
        bucket: &str,
        key: &str,
        new_is_null: bool,
        new_blocks: &HashSet<BlockId>,
    ) -> Result<(), StoreError> {
        let okey = object_key(bucket, key.as_bytes());
        let old: ObjectRecord = match self.objects.remove(okey.as_slice())? {
            Some(old) => decode(old.value())?,
            None => return Ok(()),
        };
        if new_is_null && old.version.id.is_none() {
            self.removed.push(old);
        } else if old.groups.iter().any(|g| new_blocks.contains(&g.block)) {
            return Err(MetaError::PreconditionFailed.into());
        } else {
            self.store_older(bucket, &old)?;
        }
        Ok(())
    }

    /// Removes the null version of `key` from `VERSIONS`, if it is there.
    fn remove_older_null(&mut self, bucket: &str, key: &str) -> Result<(), StoreError> {
        let found = find_version(
            &self.objects,
            &self.versions,
            bucket,
            key,
            &VersionRef::Null,
        )?;
        if let Some((Place::Older(at), record)) = found {
            self.versions.remove(at.as_slice())?;
            self.removed.push(record);
        }
        Ok(())
    }

    fn store_older(&mut self, bucket: &str, record: &ObjectRecord) -> Result<(), StoreError> {
        let at = version_key(bucket, record.key.as_bytes(), record.version.seq);
        self.versions
            .insert(at.as_slice(), encode(record)?.as_slice())?;
        Ok(())
    }

    /// Stores `record` as the latest version of its key under the bucket's
    /// versioning (none: the object simply replaces the one at its key),
    /// with the bucket's default retention when it names none; answers its
    /// stamp.
    pub(crate) fn put(
        &mut self,
        bucket_record: &BucketRecord,
        mut record: ObjectRecord,
        now: UnixMillis,
    ) -> Result<VersionStamp, StoreError> {
        let (bucket, key) = (record.bucket.clone(), record.key.clone());
        let default_retention = bucket_record
            .object_lock
            .as_ref()
            .and_then(|lock| lock.default_retention);
        if let (None, Some(rule)) = (record.attributes.retention, default_retention) {
            record.attributes.retention = Some(rule.from(now));
        }
        let kept = block_ids(&record.groups);
        match bucket_record.versioning {
            None => {
                record.version = VersionStamp::default();
                self.set_aside_latest(&bucket, &key, true, &kept)?;
            }
            Some(versioning) => {
                record.version = self.stamp(versioning, false)?;
                let null = record.version.id.is_none();
                self.set_aside_latest(&bucket, &key, null, &kept)?;
                if null {
                    self.remove_older_null(&bucket, &key)?;
                }
            }
        }
        self.kept = kept;
        let okey = object_key(&bucket, key.as_bytes());
        self.objects
            .insert(okey.as_slice(), encode(&record)?.as_slice())?;
        Ok(record.version)
    }

    /// DeleteObject of `key` without a version id under `versioning`.
    pub(crate) fn delete_latest(
        &mut self,
        versioning: Option<Versioning>,
        bucket: &str,
        key: &str,
        now: UnixMillis,
        owner: Option<String>,
    ) -> Result<Option<VersionStamp>, StoreError> {
        let Some(versioning) = versioning else {
            // Without versioning every object is the null version.
            self.set_aside_latest(bucket, key, true, &HashSet::new())?;
            return Ok(None);
        };
        let stamp = self.stamp(versioning, true)?;
        let null = stamp.id.is_none();
        self.set_aside_latest(bucket, key, null, &HashSet::new())?;
        if null {
            self.remove_older_null(bucket, key)?;
        }
        // A marker holds no data: its replication is never used.
        let no_data = proto::ReplicationConfig::Replicated { replicas: 1 };
        let mut marker = ObjectRecord::new(bucket, key, "", no_data, Vec::new());
        // Drawn like every other random choice of a request (`crate::entropy`).
        marker.id = proto::ObjectId(crate::entropy::uuid());
        marker.created = now;
        marker.attributes.owner = owner;
        marker.version = stamp.clone();
        self.store_older(bucket, &marker)?;
        Ok(Some(stamp))
    }

    /// DeleteObject of one version: removes it for good, unless object lock
    /// protects it (`ObjectLocked`); when it was the latest, the next newest
    /// becomes the latest. Answers its stamp, or None when there is no such
    /// version.
    pub(crate) fn delete_version(
        &mut self,
        bucket: &str,
        key: &str,
        wanted: &VersionRef,
        unlock: Unlock,
    ) -> Result<Option<VersionStamp>, StoreError> {
        let Some((place, record)) =
            find_version(&self.objects, &self.versions, bucket, key, wanted)?
        else {
            return Ok(None);
        };
        if record
            .attributes
            .locked(unlock.now, unlock.bypass_governance)
        {
            return Err(MetaError::ObjectLocked.into());
        }
        let okey = object_key(bucket, key.as_bytes());
        match place {
            Place::Latest => {
                self.objects.remove(okey.as_slice())?;
            }
            Place::Older(at) => {
                self.versions.remove(at.as_slice())?;
            }
        }
        let stamp = record.version.clone();
        self.removed.push(record);
        // Only an object lives in OBJECTS: when the key has none now, its
        // newest older version is the latest, and moves up if an object.
        if self.objects.get(okey.as_slice())?.is_none() {
            if let Some((at, newest)) = newest_older(&self.versions, bucket, key)? {
                if !newest.version.delete_marker {
                    self.versions.remove(at.as_slice())?;
                    self.objects
                        .insert(okey.as_slice(), encode(&newest)?.as_slice())?;
                }
            }
        }
        Ok(Some(stamp))
    }

    /// Queues the blocks of every record removed for good, except those the
    /// record `put` stored keeps, for deletion; answers the records.
    pub(crate) fn free_removed(
        self,
        txn: &WriteTransaction,
        not_before: UnixMillis,
    ) -> Result<Vec<ObjectRecord>, StoreError> {
        let Self { removed, kept, .. } = self;
        let mut queue = DeletionQueue::open(txn)?;
        for record in &removed {
            queue.queue_groups(&record.groups, &kept, not_before)?;
        }
        Ok(removed)
    }
}

/// What may lift object lock for a delete: the time, and whether the
/// caller may bypass GOVERNANCE retention.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unlock {
    pub(crate) now: UnixMillis,
    pub(crate) bypass_governance: bool,
}

/// NoSuchVersion for `wanted` (a version named that does not exist).
pub(crate) fn no_such_version(wanted: &VersionRef) -> StoreError {
    let id = match wanted {
        VersionRef::Null => meta_api::NULL_VERSION.to_string(),
        VersionRef::Id { id, .. } => id.clone(),
    };
    MetaError::NoSuchVersion(id).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_keys_sort_by_key_then_newest_first() {
        let k = |key: &[u8], seq| version_key("b", key, seq);
        assert!(k(b"a", 9) < k(b"a", 3));
        assert!(k(b"a", 1) < k(b"a\0", 9));
        assert!(k(b"a\0", 1) < k(b"a\x01", 9));
        assert!(k(b"a\x01", 1) < k(b"ab", 9));
        assert!(k(b"a", 1).starts_with(&versions_prefix("b", b"a")));
        assert!(k(b"ab\0c", 1).starts_with(&versions_prefix("b", b"ab\0")));
        assert!(!k(b"a", 1).starts_with(&versions_of("b", b"a\0")));
        for (key, seq) in [
            (&b"a"[..], 0),
            (b"a\0b", 7),
            (b"\0\0", u64::MAX),
            (b"x/y", 42),
        ] {
            assert_eq!(
                split_version_key("b", &version_key("b", key, seq)).unwrap(),
                (key.to_vec(), seq)
            );
        }
        assert!(split_version_key("b", b"b/a\0").is_err());
        assert!(split_version_key("b", b"b/a\0\0\x01").is_err());
        // A key with no end mark at all.
        assert!(split_version_key("b", b"b/abc").is_err());
    }
}
