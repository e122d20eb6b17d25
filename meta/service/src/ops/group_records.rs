//! Where a group's record is: the object, older version or part that
//! lists a block group, found from a repair queue entry's owner, and the
//! group written back into it once repaired or moved.

use crate::store::db::{decode, encode, get_json, StoreError};
use crate::store::repairs::GroupOwner;
use crate::store::tables::{object_key, part_key, OBJECTS, PARTS, UPLOADS, VERSIONS};
use crate::store::versions::{self, version_key};
use meta_api::{BlockGroup, ObjectRecord, PartRecord, UploadRecord};
use proto::{BlockId, ReplicationConfig};
use redb::{ReadableTable, WriteTransaction};

/// Where a group's record is: its table and key.
pub(crate) enum RecordAt {
    Object(Vec<u8>),
    Version(Vec<u8>),
    Part(Vec<u8>),
}

/// The record holding `block`, as `owner` says, falling back from a part
/// to the object its upload became, wherever that object now is among its
/// key's versions.
pub(crate) fn locate(
    txn: &impl GroupTables,
    owner: &GroupOwner,
    block: BlockId,
) -> Result<Option<(RecordAt, BlockGroup, ReplicationConfig)>, StoreError> {
    if let Some((upload_id, number)) = &owner.part {
        let key = part_key(upload_id, *number);
        if let Some(part) = txn.part(&key)? {
            if let Some(group) = part.groups.iter().find(|g| g.block == block) {
                if let Some(upload) = txn.upload(upload_id)? {
                    return Ok(Some((
                        RecordAt::Part(key),
                        group.clone(),
                        upload.replication,
                    )));
                }
            }
        }
    }
    // The latest version, or an older one by its sequence number.
    let latest = object_key(&owner.bucket, owner.key.as_bytes());
    let older = version_key(&owner.bucket, owner.key.as_bytes(), owner.version);
    for (at, object) in [
        (RecordAt::Object(latest.clone()), txn.object(&latest)?),
        (RecordAt::Version(older.clone()), txn.version(&older)?),
    ] {
        let found = object.and_then(|object| {
            let group = object.groups.iter().find(|g| g.block == block)?.clone();
            Some((group, object.replication))
        });
        if let Some((group, replication)) = found {
            return Ok(Some((at, group, replication)));
        }
    }
    // A group queued for a part names no version: the object its upload
    // became may have been superseded since.
    for (at, object) in txn.older_versions(&owner.bucket, &owner.key)? {
        if let Some(group) = object.groups.iter().find(|g| g.block == block) {
            return Ok(Some((
                RecordAt::Version(at),
                group.clone(),
                object.replication,
            )));
        }
    }
    Ok(None)
}

/// The reads `locate` needs, from a read or a write transaction.
pub(crate) trait GroupTables {
    fn part(&self, key: &[u8]) -> Result<Option<PartRecord>, StoreError>;
    fn upload(&self, id: &str) -> Result<Option<UploadRecord>, StoreError>;
    fn object(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError>;
    fn version(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError>;
    fn older_versions(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Vec<(Vec<u8>, ObjectRecord)>, StoreError>;
}

macro_rules! group_tables {
    ($t:ty) => {
        impl GroupTables for $t {
            fn part(&self, key: &[u8]) -> Result<Option<PartRecord>, StoreError> {
                get_json(&self.open_table(PARTS)?, key)
            }
            fn upload(&self, id: &str) -> Result<Option<UploadRecord>, StoreError> {
                get_json(&self.open_table(UPLOADS)?, id)
            }
            fn object(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError> {
                get_json(&self.open_table(OBJECTS)?, key)
            }
            fn version(&self, key: &[u8]) -> Result<Option<ObjectRecord>, StoreError> {
                get_json(&self.open_table(VERSIONS)?, key)
            }
            fn older_versions(
                &self,
                bucket: &str,
                key: &str,
            ) -> Result<Vec<(Vec<u8>, ObjectRecord)>, StoreError> {
                versions::older_versions(&self.open_table(VERSIONS)?, bucket, key)
            }
        }
    };
}
group_tables!(redb::ReadTransaction);
group_tables!(WriteTransaction);

/// Writes `group` into the object record at `key` of `table` with `swap`.
fn swap_in_object(
    txn: &WriteTransaction,
    table: redb::TableDefinition<&'static [u8], &'static [u8]>,
    key: &[u8],
    group: &BlockGroup,
    swap: fn(&mut [BlockGroup], &BlockGroup),
) -> Result<(), StoreError> {
    let mut objects = txn.open_table(table)?;
    let mut record: ObjectRecord = match objects.get(key)? {
        Some(value) => decode(value.value())?,
        None => return Ok(()),
    };
    swap(&mut record.groups, group);
    objects.insert(key, encode(&record)?.as_slice())?;
    Ok(())
}

/// Writes `group` back into the record at `at`, in place of the group with
/// its block id.
pub(crate) fn replace_group(
    txn: &WriteTransaction,
    at: &RecordAt,
    group: &BlockGroup,
) -> Result<(), StoreError> {
    fn swap(groups: &mut [BlockGroup], group: &BlockGroup) {
        if let Some(slot) = groups.iter_mut().find(|g| g.block == group.block) {
            *slot = group.clone();
        }
    }
    match at {
        RecordAt::Object(key) => swap_in_object(txn, OBJECTS, key, group, swap)?,
        RecordAt::Version(key) => swap_in_object(txn, VERSIONS, key, group, swap)?,
        RecordAt::Part(key) => {
            let mut parts = txn.open_table(PARTS)?;
            let mut record: PartRecord = match parts.get(key.as_slice())? {
                Some(value) => decode(value.value())?,
                None => return Ok(()),
            };
            swap(&mut record.groups, group);
            parts.insert(key.as_slice(), encode(&record)?.as_slice())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redundancy::tests::replica;

    #[test]
    fn a_group_is_found_in_any_version_of_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let group = BlockGroup {
            block: BlockId(7),
            length: 1,
            replicas: vec![replica(0, "d0")],
            token: None,
        };
        let mut record = ObjectRecord::new(
            "b",
            "k",
            "",
            ReplicationConfig::REPLICATED_1,
            vec![group.clone()],
        );
        record.version.seq = 9;
        let at = version_key("b", b"k", 9);
        store
            .write(|txn| {
                let mut versions = txn.open_table(VERSIONS)?;
                versions.insert(at.as_slice(), encode(&record)?.as_slice())?;
                Ok(())
            })
            .unwrap();
        // Queued for a part of the upload that became this version, which
        // is no longer the latest: the entry names no sequence number.
        let owner = GroupOwner {
            bucket: "b".into(),
            key: "k".into(),
            part: Some(("u".into(), 1)),
            version: 0,
        };
        let found = store.read(|txn| locate(txn, &owner, BlockId(7))).unwrap();
        assert!(
            matches!(&found, Some((RecordAt::Version(stored), g, _)) if *stored == at && *g == group)
        );
        let missing = store.read(|txn| locate(txn, &owner, BlockId(8))).unwrap();
        assert!(missing.is_none());
    }
}
