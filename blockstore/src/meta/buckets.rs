//! Buckets, and the user and access key lookups the gateway's auth needs.

use super::api::MetaError;
use super::naming::validate_bucket_name;
use super::placement::validate_replication;
use super::service::Inner;
use super::store::{
    all_json, any_with_prefix, decode, encode, get_json, object_key, ACCESS_KEYS, BUCKETS, OBJECTS,
    USERS,
};
use super::types::{
    AccessKeyRecord, BucketRecord, CorsRule, DatanodeState, UnixMillis, UserRecord,
};
use super::upload_listing::UPLOAD_ORDER;
use crate::layout::ReplicationConfig;
use redb::ReadableTable;
use std::sync::Arc;

/// The bucket `name`, or NoSuchBucket.
pub(super) fn require_bucket(
    buckets: &impl ReadableTable<&'static str, &'static [u8]>,
    name: &str,
) -> Result<BucketRecord, MetaError> {
    get_json(buckets, name)?.ok_or_else(|| MetaError::NoSuchBucket(name.to_string()))
}

impl Inner {
    /// Secret and owner of an access key.
    pub(super) fn get_access_key(
        &self,
        access_key: &str,
    ) -> Result<Option<AccessKeyRecord>, MetaError> {
        self.store
            .read(|txn| get_json(&txn.open_table(ACCESS_KEYS)?, access_key))
    }

    /// A user by name.
    pub(super) fn get_user(&self, name: &str) -> Result<Option<UserRecord>, MetaError> {
        self.store
            .read(|txn| get_json(&txn.open_table(USERS)?, name))
    }

    /// Creates bucket `name` for `owner` (an existing user).
    pub(super) fn create_bucket(
        &self,
        name: String,
        owner: String,
        replication: Option<ReplicationConfig>,
        now: UnixMillis,
    ) -> Result<(), MetaError> {
        validate_bucket_name(&name).map_err(MetaError::InvalidRequest)?;
        if let Some(config) = &replication {
            validate_replication(config)?;
        }
        self.store.write(|txn| {
            let users = txn.open_table(USERS)?;
            if get_json::<&str, UserRecord>(&users, owner.as_str())?.is_none() {
                return Err(MetaError::NoSuchUser(owner.clone()));
            }
            let mut buckets = txn.open_table(BUCKETS)?;
            if let Some(existing) = get_json::<&str, BucketRecord>(&buckets, name.as_str())? {
                return Err(if existing.owner == owner {
                    MetaError::BucketAlreadyOwnedByYou(name.clone())
                } else {
                    MetaError::BucketAlreadyExists(name.clone())
                });
            }
            let record = BucketRecord {
                name: name.clone(),
                owner: owner.clone(),
                created: now,
                replication,
                tags: Default::default(),
                public_read: false,
                cors: Vec::new(),
            };
            buckets.insert(name.as_str(), encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(bucket = %name, %owner, "bucket created");
        Ok(())
    }

    /// A bucket by name.
    pub(super) fn get_bucket(&self, name: &str) -> Result<Option<Arc<BucketRecord>>, MetaError> {
        let epoch = self.store.write_epoch();
        if let Some(record) = self.decoded_buckets.unchanged(name.as_bytes(), epoch, 0) {
            return Ok(Some(record));
        }
        self.store.read(|txn| {
            let Some(stored) = txn.open_table(BUCKETS)?.get(name)? else {
                return Ok(None);
            };
            let record = self.decoded_buckets.get_or_decode(
                name.as_bytes(),
                stored.value(),
                epoch,
                0,
                decode,
            )?;
            Ok(Some(record))
        })
    }

    /// Deletes an empty bucket: no objects and no multipart uploads.
    pub(super) fn delete_bucket(&self, name: &str) -> Result<(), MetaError> {
        self.store.write(|txn| {
            let mut buckets = txn.open_table(BUCKETS)?;
            require_bucket(&buckets, name)?;
            let contents = object_key(name, b"");
            if any_with_prefix(&txn.open_table(OBJECTS)?, &contents)?
                || any_with_prefix(&txn.open_table(UPLOAD_ORDER)?, &contents)?
            {
                return Err(MetaError::BucketNotEmpty(name.to_string()));
            }
            buckets.remove(name)?;
            Ok(())
        })?;
        tracing::info!(bucket = %name, "bucket deleted");
        Ok(())
    }

    /// Buckets of `owner`, or all of them, sorted by name.
    pub(super) fn list_buckets(&self, owner: Option<&str>) -> Result<Vec<BucketRecord>, MetaError> {
        let all: Vec<BucketRecord> = self.store.read(|txn| all_json(&txn.open_table(BUCKETS)?))?;
        Ok(all
            .into_iter()
            .filter(|b| owner.is_none_or(|o| b.owner == o))
            .collect())
    }

    /// Rewrites the record of bucket `name` with `change`.
    fn update_bucket(
        &self,
        name: &str,
        change: impl FnOnce(&mut BucketRecord),
    ) -> Result<(), MetaError> {
        self.store.write(|txn| {
            let mut buckets = txn.open_table(BUCKETS)?;
            let mut record = require_bucket(&buckets, name)?;
            change(&mut record);
            buckets.insert(name, encode(&record)?.as_slice())?;
            Ok(())
        })
    }

    /// Replaces the bucket's CORS rules.
    pub(super) fn set_bucket_cors(
        &self,
        name: &str,
        rules: Vec<CorsRule>,
    ) -> Result<(), MetaError> {
        self.update_bucket(name, |record| record.cors = rules)
    }

    /// Turns anonymous reads of the bucket on or off.
    pub(super) fn set_bucket_public_read(&self, name: &str, on: bool) -> Result<(), MetaError> {
        self.update_bucket(name, |record| record.public_read = on)?;
        tracing::info!(bucket = %name, public_read = on, "bucket access changed");
        Ok(())
    }

    /// The bucket's default replication, else the cluster default for the
    /// datanodes healthy at `now`.
    pub(super) fn default_replication(
        &self,
        bucket: &str,
        now: UnixMillis,
    ) -> Result<ReplicationConfig, MetaError> {
        let record = self
            .store
            .read(|txn| require_bucket(&txn.open_table(BUCKETS)?, bucket))?;
        if let Some(config) = record.replication {
            return Ok(config);
        }
        let healthy = self
            .registry
            .snapshot(now, self.config.stale_after, self.config.dead_after)
            .iter()
            .filter(|n| n.record.state == DatanodeState::Healthy)
            .count();
        Ok(ReplicationConfig::default_for(healthy))
    }
}
