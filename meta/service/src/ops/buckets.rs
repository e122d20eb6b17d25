//! Buckets and their settings (tags, CORS rules, public reads, default
//! replication), and the credential lookups that precede every S3 request.

use crate::ops::uploads::abort_upload;
use crate::placement::validate_replication;
use crate::state::MetaState;
use crate::store::db::{
    all_json, any_with_prefix, decode, encode, get_json, prefix_end, StoreError,
};
use crate::store::tables::{
    object_key, require_bucket, ACCESS_KEYS, BUCKETS, OBJECTS, UPLOADS, UPLOAD_ORDER, USERS,
    VERSIONS,
};
use crate::store::upload_index::split_entry;
use crate::store::versions;
use meta_api::naming::validate_bucket_name;
use meta_api::{
    AccessKeyRecord, BucketAccessChange, BucketRecord, CreateBucket, DatanodeState,
    DefaultReplication, DeleteBucket, GetAccessKey, GetBucket, GetUser, Handle, ListBuckets,
    MetaError, ObjectLock, SetBucketAccess, SetBucketCors, SetBucketEncryption, SetBucketLifecycle,
    SetBucketPublicRead, SetBucketTags, SetBucketVersioning, SetObjectLockConfiguration,
    UnixMillis, UploadRecord, UserRecord, Versioning,
};
use proto::ReplicationConfig;
use redb::{ReadableTable, WriteTransaction};
use std::sync::Arc;

impl Handle<GetAccessKey> for MetaState {
    fn handle(
        &self,
        request: GetAccessKey,
        _now: UnixMillis,
    ) -> Result<Option<AccessKeyRecord>, MetaError> {
        self.store
            .read(|txn| get_json(&txn.open_table(ACCESS_KEYS)?, request.access_key.as_str()))
    }
}

impl Handle<GetUser> for MetaState {
    fn handle(&self, request: GetUser, _now: UnixMillis) -> Result<Option<UserRecord>, MetaError> {
        self.store
            .read(|txn| get_json(&txn.open_table(USERS)?, request.name.as_str()))
    }
}

impl Handle<CreateBucket> for MetaState {
    /// Creates bucket `name` for `owner` (an existing user).
    fn handle(&self, request: CreateBucket, now: UnixMillis) -> Result<(), MetaError> {
        let CreateBucket {
            name,
            owner,
            replication,
            access,
            object_lock,
        } = request;
        validate_bucket_name(&name).map_err(MetaError::InvalidRequest)?;
        if let Some(config) = &replication {
            validate_replication(config)?;
        }
        self.store.write(|txn| {
            let users = txn.open_table(USERS)?;
            if get_json::<&str, UserRecord>(&users, owner.as_str())?.is_none() {
                return Err(MetaError::NoSuchUser(owner.clone()).into());
            }
            let mut buckets = txn.open_table(BUCKETS)?;
            if let Some(existing) = get_json::<&str, BucketRecord>(&buckets, name.as_str())? {
                return Err(if existing.owner == owner {
                    MetaError::BucketAlreadyOwnedByYou(name.clone()).into()
                } else {
                    MetaError::BucketAlreadyExists(name.clone()).into()
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
                acl: access.acl,
                ownership: Some(access.ownership),
                public_access_block: access.public_access_block,
                policy: None,
                versioning: object_lock.then_some(Versioning::Enabled),
                object_lock: object_lock.then(ObjectLock::default),
                lifecycle: Vec::new(),
                encryption: None,
            };
            buckets.insert(name.as_str(), encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(bucket = %name, %owner, "bucket created");
        Ok(())
    }
}

impl Handle<GetBucket> for MetaState {
    fn handle(
        &self,
        request: GetBucket,
        _now: UnixMillis,
    ) -> Result<Option<Arc<BucketRecord>>, MetaError> {
        let name = request.name.as_str();
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
}

impl Handle<DeleteBucket> for MetaState {
    /// Deletes a bucket with no objects, versions or delete markers. Its
    /// multipart uploads in progress are aborted with it, as S3 does: an
    /// upload a client gave up on does not keep a bucket alive.
    fn handle(&self, request: DeleteBucket, now: UnixMillis) -> Result<(), MetaError> {
        let name = request.name.as_str();
        let aborted = self.store.write(|txn| {
            let mut buckets = txn.open_table(BUCKETS)?;
            require_bucket(&buckets, name)?;
            let contents = object_key(name, b"");
            if any_with_prefix(&txn.open_table(OBJECTS)?, &contents)?
                || versions::any_in_bucket(&txn.open_table(VERSIONS)?, name)?
            {
                return Err(MetaError::BucketNotEmpty(name.to_string()).into());
            }
            let uploads = uploads_in(txn, name)?;
            for upload in &uploads {
                abort_upload(txn, upload, self.deletion_not_before(now))?;
            }
            buckets.remove(name)?;
            Ok(uploads.len())
        })?;
        tracing::info!(bucket = %name, aborted_uploads = aborted, "bucket deleted");
        Ok(())
    }
}

/// Every multipart upload in progress in `bucket`.
fn uploads_in(txn: &WriteTransaction, bucket: &str) -> Result<Vec<UploadRecord>, StoreError> {
    let start = object_key(bucket, b"");
    let order = txn.open_table(UPLOAD_ORDER)?;
    let entries = match prefix_end(&start) {
        Some(end) => order.range::<&[u8]>(start.as_slice()..end.as_slice())?,
        None => order.range::<&[u8]>(start.as_slice()..)?,
    };
    let uploads = txn.open_table(UPLOADS)?;
    let mut found = Vec::new();
    for entry in entries {
        let (entry, _) = entry?;
        let (_, id) = split_entry(&entry.value()[start.len()..])?;
        let upload: Option<UploadRecord> = get_json(&uploads, id)?;
        found.extend(upload);
    }
    Ok(found)
}

impl Handle<ListBuckets> for MetaState {
    /// Buckets of `owner`, or all of them, sorted by name.
    fn handle(
        &self,
        request: ListBuckets,
        _now: UnixMillis,
    ) -> Result<Vec<BucketRecord>, MetaError> {
        let all: Vec<BucketRecord> = self.store.read(|txn| all_json(&txn.open_table(BUCKETS)?))?;
        Ok(all
            .into_iter()
            .filter(|b| request.owner.as_deref().is_none_or(|o| b.owner == o))
            .collect())
    }
}

/// Rewrites the record of bucket `name` with `change`.
fn update_bucket(
    state: &MetaState,
    name: &str,
    change: impl FnOnce(&mut BucketRecord),
) -> Result<(), MetaError> {
    checked_update_bucket(state, name, |record| {
        change(record);
        Ok(())
    })
}

/// [`update_bucket`] with a change that may refuse.
fn checked_update_bucket(
    state: &MetaState,
    name: &str,
    change: impl FnOnce(&mut BucketRecord) -> Result<(), MetaError>,
) -> Result<(), MetaError> {
    state.store.write(|txn| {
        let mut buckets = txn.open_table(BUCKETS)?;
        let mut record = require_bucket(&buckets, name)?;
        change(&mut record)?;
        buckets.insert(name, encode(&record)?.as_slice())?;
        Ok(())
    })
}

impl Handle<SetBucketCors> for MetaState {
    fn handle(&self, request: SetBucketCors, _now: UnixMillis) -> Result<(), MetaError> {
        update_bucket(self, &request.bucket, |record| record.cors = request.rules)
    }
}

impl Handle<SetBucketLifecycle> for MetaState {
    fn handle(&self, request: SetBucketLifecycle, _now: UnixMillis) -> Result<(), MetaError> {
        update_bucket(self, &request.bucket, |record| {
            record.lifecycle = request.rules
        })
    }
}

impl Handle<SetBucketEncryption> for MetaState {
    fn handle(&self, request: SetBucketEncryption, _now: UnixMillis) -> Result<(), MetaError> {
        update_bucket(self, &request.bucket, |record| {
            record.encryption = request.encryption
        })
    }
}

impl Handle<SetBucketTags> for MetaState {
    /// Replaces the tags whole, as S3's PutBucketTagging does; an empty map removes them.
    fn handle(&self, request: SetBucketTags, _now: UnixMillis) -> Result<(), MetaError> {
        update_bucket(self, &request.name, |record| record.tags = request.tags)
    }
}

impl Handle<SetBucketVersioning> for MetaState {
    fn handle(&self, request: SetBucketVersioning, _now: UnixMillis) -> Result<(), MetaError> {
        tracing::info!(bucket = %request.bucket, versioning = request.versioning.as_str(), "bucket versioning changed");
        checked_update_bucket(self, &request.bucket, |record| {
            if record.object_lock.is_some() && request.versioning != Versioning::Enabled {
                return Err(MetaError::InvalidBucketState(
                    "An Object Lock configuration is present on this bucket, so the versioning \
                     state cannot be changed."
                        .into(),
                ));
            }
            record.versioning = Some(request.versioning);
            Ok(())
        })
    }
}

impl Handle<SetObjectLockConfiguration> for MetaState {
    /// Enables object lock (for good) and sets the default retention; the
    /// bucket's versioning must be enabled.
    fn handle(
        &self,
        request: SetObjectLockConfiguration,
        _now: UnixMillis,
    ) -> Result<(), MetaError> {
        checked_update_bucket(self, &request.bucket, |record| {
            if record.versioning != Some(Versioning::Enabled) {
                return Err(MetaError::InvalidBucketState(
                    "Versioning must be 'Enabled' on the bucket to apply a Object Lock \
                     configuration"
                        .into(),
                ));
            }
            record.object_lock = Some(request.lock);
            Ok(())
        })
    }
}

impl Handle<SetBucketAccess> for MetaState {
    fn handle(&self, request: SetBucketAccess, _now: UnixMillis) -> Result<(), MetaError> {
        let change = request.change;
        tracing::info!(bucket = %request.bucket, ?change, "bucket access changed");
        update_bucket(self, &request.bucket, |record| match change {
            BucketAccessChange::Acl(acl) => record.acl = acl,
            BucketAccessChange::Ownership(ownership) => record.ownership = ownership,
            BucketAccessChange::PublicAccessBlock(block) => record.public_access_block = block,
            BucketAccessChange::Policy(policy) => record.policy = policy,
        })
    }
}

/// The bucket policy the administrator's public-read switch writes: anyone
/// may read the bucket's objects and list it.
pub(crate) fn public_read_policy(bucket: &str) -> String {
    format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::{bucket}","arn:aws:s3:::{bucket}/*"]}}]}}"#
    )
}

impl Handle<SetBucketPublicRead> for MetaState {
    /// A shortcut for a bucket policy: on writes [`public_read_policy`] (and
    /// lifts the public access block flags that would stop it), off removes
    /// it; a bucket with a policy of its own is left to its owner.
    fn handle(&self, request: SetBucketPublicRead, _now: UnixMillis) -> Result<(), MetaError> {
        let on = request.public_read;
        let shortcut = public_read_policy(&request.name);
        self.store.write(|txn| {
            let mut buckets = txn.open_table(BUCKETS)?;
            let mut record = require_bucket(&buckets, &request.name)?;
            if record.policy.as_ref().is_some_and(|p| *p != shortcut) {
                return Err(MetaError::InvalidRequest(format!(
                    "bucket {} has a policy of its own; change it with PutBucketPolicy",
                    request.name
                ))
                .into());
            }
            // Buckets switched on before the switch wrote a policy.
            record.public_read = false;
            record.policy = on.then(|| shortcut.clone());
            if let (true, Some(block)) = (on, record.public_access_block.as_mut()) {
                block.block_public_policy = false;
                block.restrict_public_buckets = false;
            }
            buckets.insert(request.name.as_str(), encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(bucket = %request.name, public_read = on, "bucket access changed");
        Ok(())
    }
}

impl Handle<DefaultReplication> for MetaState {
    /// The bucket's default replication, else the cluster default for the
    /// datanodes healthy now.
    fn handle(
        &self,
        request: DefaultReplication,
        _now: UnixMillis,
    ) -> Result<ReplicationConfig, MetaError> {
        let record = self
            .store
            .read(|txn| require_bucket(&txn.open_table(BUCKETS)?, &request.bucket))?;
        if let Some(config) = record.replication {
            return Ok(config);
        }
        let healthy = self
            .registry
            .snapshot()
            .iter()
            .filter(|n| n.record.state == DatanodeState::Healthy)
            .count();
        Ok(ReplicationConfig::default_for(healthy))
    }
}
