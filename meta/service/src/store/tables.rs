//! Every table of the meta store and the byte encodings of their keys,
//! chosen so that range scans follow the orders meta needs. Values are JSON
//! records (`super::db::encode`).

use super::db::StoreError;
use meta_api::{BlockGroup, BucketRecord, MetaError};
use proto::BlockId;
use redb::{ReadableTable, TableDefinition};
use std::collections::HashSet;

/// Bucket name -> `BucketRecord`.
pub(crate) const BUCKETS: TableDefinition<&str, &[u8]> = TableDefinition::new("buckets");
/// `object_key(bucket, key)` -> `ObjectRecord`; one bucket's keys are contiguous
/// and in UTF-8 byte order.
pub(crate) const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("objects");
/// `versions::version_key(bucket, key, seq)` -> `ObjectRecord`: the versions
/// of keys that are not their latest object, delete markers included (see
/// `super::versions`).
pub(crate) const VERSIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("versions");
/// Upload id -> `UploadRecord`.
pub(crate) const UPLOADS: TableDefinition<&str, &[u8]> = TableDefinition::new("uploads");
/// `part_key(upload_id, number)` -> `PartRecord`, parts of one upload in number order.
pub(crate) const PARTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("parts");
/// User name -> `UserRecord`.
pub(crate) const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("users");
/// Access key -> `AccessKeyRecord`.
pub(crate) const ACCESS_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("access_keys");
/// Datanode id -> `DatanodeRecord`.
pub(crate) const DATANODES: TableDefinition<&str, &[u8]> = TableDefinition::new("datanodes");
/// `bad_replica_key(block, datanode)` -> `BadReplicaReport`: block files a
/// client found corrupt, awaiting repair.
pub(crate) const BAD_REPLICAS: TableDefinition<&str, &[u8]> = TableDefinition::new("bad_replicas");
/// Key id -> `IssuerKey`: block token signing keys still valid (see `crate::tokens`).
pub(crate) const TOKEN_KEYS: TableDefinition<u32, &[u8]> = TableDefinition::new("token_keys");
/// `Principal::generation_key` -> the current generation of that datanode's
/// or gateway's credential (absent: 0); older ones are refused.
pub(crate) const CREDENTIAL_GENERATIONS: TableDefinition<&str, u64> =
    TableDefinition::new("credential_generations");
/// Name of a key -> a random value sealed under it, which only that key
/// opens (see `crate::object_keys`).
pub(crate) const KEY_CHECKS: TableDefinition<&str, &[u8]> = TableDefinition::new("key_checks");
/// KMS key id -> the key and its material sealed under the master key
/// (see `crate::kms`).
pub(crate) const KMS_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("kms_keys");
/// Cluster settings an operator changed, by name -> JSON (`"balancer"`:
/// the balancer's, see `crate::balance::BalancerSettings`).
pub(crate) const SETTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("settings");
/// The balancer's settings in `SETTINGS`.
pub(crate) const BALANCER_SETTINGS: &str = "balancer";

/// Named counters (the next free block id).
pub(crate) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// Counter holding the first block id not yet handed out.
pub(crate) const NEXT_BLOCK: &str = "next_block";

/// Start of a range of block ids a group's leader reserved -> the time of
/// the reserving entry: every id below the start was handed out by then.
/// The orphan detector dates ids from it, so every member, restarted or
/// not, dates them alike (see `crate::placement::reserve`).
pub(crate) const BLOCK_ID_RESERVATIONS: TableDefinition<u64, i64> =
    TableDefinition::new("block_id_reservations");

/// Separator between bucket and key in `OBJECTS`; bucket names never contain it.
const BUCKET_SEPARATOR: u8 = b'/';

/// `upload_order_key(bucket, key, created, upload_id)` -> (): the uploads of
/// one bucket in S3 listing order (see `super::upload_index`).
pub(crate) const UPLOAD_ORDER: TableDefinition<&[u8], ()> = TableDefinition::new("upload_order");

/// `OBJECTS` key of (bucket, key).
pub(crate) fn object_key(bucket: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bucket.len() + 1 + key.len());
    out.extend_from_slice(bucket.as_bytes());
    out.push(BUCKET_SEPARATOR);
    out.extend_from_slice(key);
    out
}

/// Length of the bucket part of an `OBJECTS` or `UPLOAD_ORDER` key.
pub(crate) fn bucket_prefix_len(bucket: &str) -> usize {
    bucket.len() + 1
}

/// Appends `id` with a big-endian u16 length, so that no id is a prefix of
/// another's encoding.
pub(crate) fn push_length_prefixed(out: &mut Vec<u8>, id: &str) {
    // Ids longer than u16::MAX are refused at the boundary; truncating the
    // length here would only merge keys of such (impossible) ids.
    let len = u16::try_from(id.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(id.as_bytes());
}

/// `PARTS` key prefix of one upload.
pub(crate) fn parts_prefix(upload_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + upload_id.len() + 4);
    push_length_prefixed(&mut out, upload_id);
    out
}

/// `PARTS` key of part `number` of `upload_id`.
pub(crate) fn part_key(upload_id: &str, number: u32) -> Vec<u8> {
    let mut out = parts_prefix(upload_id);
    out.extend_from_slice(&number.to_be_bytes());
    out
}

/// The block ids of `groups`, for `DeletionQueue::queue_groups`' `keep`.
pub(crate) fn block_ids(groups: &[BlockGroup]) -> HashSet<BlockId> {
    groups.iter().map(|g| g.block).collect()
}

/// The bucket `name` from `buckets`, or NoSuchBucket.
pub(crate) fn require_bucket(
    buckets: &impl ReadableTable<&'static str, &'static [u8]>,
    name: &str,
) -> Result<BucketRecord, StoreError> {
    super::db::get_json(buckets, name)?
        .ok_or_else(|| MetaError::NoSuchBucket(name.to_string()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_keys_sort_by_number() {
        assert!(part_key("u", 2) < part_key("u", 10));
        assert!(part_key("u", 255) < part_key("u", 256));
        assert!(!part_key("uu", 1).starts_with(&parts_prefix("u")));
    }
}
