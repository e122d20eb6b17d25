//! Requests of `tessera admin`: users, their access keys and the limits of
//! a key, and the cluster overview.

use crate::credentials::{generate_access_key, generate_secret_key, ROOT_USER};
use crate::state::MetaState;
use crate::store::db::{all_json, encode, get_json};
use crate::store::deletions::pending_count;
use crate::store::repairs::queued;
use crate::store::tables::{require_bucket, ACCESS_KEYS, BUCKETS, OBJECTS, USERS};
use meta_api::naming::validate_user_name;
use meta_api::{
    AccessKeyRecord, BucketRecord, ClusterStatus, CreateKey, CreateUser, DeleteKey, DeleteUser,
    GetClusterStatus, Handle, LimitKey, ListKeys, ListUsers, MetaError, MintCredential,
    SetUserPolicy, UnixMillis, UserRecord,
};
use redb::{ReadableTable, ReadableTableMetadata};

impl Handle<CreateUser> for MetaState {
    fn handle(&self, request: CreateUser, now: UnixMillis) -> Result<(), MetaError> {
        let name = request.name.as_str();
        validate_user_name(name).map_err(MetaError::InvalidRequest)?;
        self.store.write(|txn| {
            let mut users = txn.open_table(USERS)?;
            if users.get(name)?.is_some() {
                return Err(MetaError::UserExists(name.to_string()).into());
            }
            let record = UserRecord {
                name: name.to_string(),
                created: now,
                is_root: false,
                policy: None,
            };
            users.insert(name, encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(user = name, "user created");
        Ok(())
    }
}

impl Handle<SetUserPolicy> for MetaState {
    /// Replaces the user's policy (the admin CLI checked it); root keeps none.
    fn handle(&self, request: SetUserPolicy, _now: UnixMillis) -> Result<(), MetaError> {
        let name = request.name.as_str();
        if name == ROOT_USER {
            return Err(MetaError::InvalidRequest(
                "the root user may do anything; it takes no policy".into(),
            ));
        }
        let set = request.policy.is_some();
        self.store.write(|txn| {
            let mut users = txn.open_table(USERS)?;
            let mut user: UserRecord =
                get_json(&users, name)?.ok_or_else(|| MetaError::NoSuchUser(name.to_string()))?;
            user.policy = request.policy;
            users.insert(name, encode(&user)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(user = name, policy = set, "user policy changed");
        Ok(())
    }
}

impl Handle<DeleteUser> for MetaState {
    /// Deletes a user that owns no bucket, with its access keys.
    fn handle(&self, request: DeleteUser, _now: UnixMillis) -> Result<(), MetaError> {
        let name = request.name.as_str();
        if name == ROOT_USER {
            return Err(MetaError::InvalidRequest(
                "the root user cannot be deleted".into(),
            ));
        }
        self.store.write(|txn| {
            let mut users = txn.open_table(USERS)?;
            if users.get(name)?.is_none() {
                return Err(MetaError::NoSuchUser(name.to_string()).into());
            }
            let buckets: Vec<BucketRecord> = all_json(&txn.open_table(BUCKETS)?)?;
            if buckets.iter().any(|b| b.owner == name) {
                return Err(MetaError::UserHasBuckets(name.to_string()).into());
            }
            let mut keys = txn.open_table(ACCESS_KEYS)?;
            let owned: Vec<AccessKeyRecord> = all_json::<&str, AccessKeyRecord>(&keys)?
                .into_iter()
                .filter(|k| k.user == name)
                .collect();
            for key in owned {
                keys.remove(key.access_key.as_str())?;
            }
            users.remove(name)?;
            Ok(())
        })?;
        tracing::info!(user = name, "user deleted");
        Ok(())
    }
}

impl Handle<ListUsers> for MetaState {
    fn handle(&self, _request: ListUsers, _now: UnixMillis) -> Result<Vec<UserRecord>, MetaError> {
        self.store.read(|txn| all_json(&txn.open_table(USERS)?))
    }
}

impl Handle<CreateKey> for MetaState {
    /// A new access key and secret for `user`.
    fn handle(&self, request: CreateKey, now: UnixMillis) -> Result<AccessKeyRecord, MetaError> {
        let user = request.user.as_str();
        let record = self.store.write(|txn| {
            if get_json::<&str, UserRecord>(&txn.open_table(USERS)?, user)?.is_none() {
                return Err(MetaError::NoSuchUser(user.to_string()).into());
            }
            let mut keys = txn.open_table(ACCESS_KEYS)?;
            let access_key = loop {
                let candidate = generate_access_key();
                if keys.get(candidate.as_str())?.is_none() {
                    break candidate;
                }
            };
            let record = AccessKeyRecord {
                access_key,
                secret_key: generate_secret_key(),
                user: user.to_string(),
                created: now,
                bucket_grants: None,
            };
            keys.insert(record.access_key.as_str(), encode(&record)?.as_slice())?;
            Ok(record)
        })?;
        tracing::info!(user, access_key = %record.access_key, "access key created");
        Ok(record)
    }
}

impl Handle<DeleteKey> for MetaState {
    fn handle(&self, request: DeleteKey, _now: UnixMillis) -> Result<(), MetaError> {
        let access_key = request.access_key.as_str();
        self.store.write(|txn| {
            let mut keys = txn.open_table(ACCESS_KEYS)?;
            if keys.remove(access_key)?.is_none() {
                return Err(MetaError::NoSuchAccessKey(access_key.to_string()).into());
            }
            Ok(())
        })?;
        tracing::info!(access_key, "access key deleted");
        Ok(())
    }
}

impl Handle<ListKeys> for MetaState {
    /// Access keys of `user` (which must exist), or all of them.
    fn handle(
        &self,
        request: ListKeys,
        _now: UnixMillis,
    ) -> Result<Vec<AccessKeyRecord>, MetaError> {
        let user = request.user.as_deref();
        self.store.read(|txn| {
            if let Some(user) = user {
                if get_json::<&str, UserRecord>(&txn.open_table(USERS)?, user)?.is_none() {
                    return Err(MetaError::NoSuchUser(user.to_string()).into());
                }
            }
            let keys: Vec<AccessKeyRecord> = all_json(&txn.open_table(ACCESS_KEYS)?)?;
            Ok(keys
                .into_iter()
                .filter(|k| user.is_none_or(|u| k.user == u))
                .collect())
        })
    }
}

impl Handle<MintCredential> for MetaState {
    fn handle(&self, request: MintCredential, _now: UnixMillis) -> Result<String, MetaError> {
        let credential = self
            .authenticator
            .mint(&self.store, request.principal, request.rotate)?;
        Ok(credential.to_string())
    }
}

impl Handle<GetClusterStatus> for MetaState {
    fn handle(
        &self,
        _request: GetClusterStatus,
        _now: UnixMillis,
    ) -> Result<ClusterStatus, MetaError> {
        let datanodes = self
            .registry
            .snapshot()
            .into_iter()
            .map(|n| n.record)
            .collect();
        self.registry.publish_gauges();
        self.store
            .read(|txn| {
                Ok(ClusterStatus {
                    datanodes,
                    buckets: txn.open_table(BUCKETS)?.len()?,
                    objects: txn.open_table(OBJECTS)?.len()?,
                    pending_deletions: pending_count(txn)?,
                    redundancy: self.redundancy_status(queued(txn)?),
                    lifecycle: Default::default(),
                    balance: Default::default(),
                })
            })
            .and_then(|status| {
                let balancing = self.store.read(crate::store::repairs::queued_balance)?;
                Ok(ClusterStatus {
                    lifecycle: crate::store::lifecycle_passes::status(&self.store)?,
                    balance: self.balance_status(balancing)?,
                    ..status
                })
            })
    }
}

impl Handle<LimitKey> for MetaState {
    /// Limits `access_key` to `grants` (None: no limit). Each bucket must exist.
    fn handle(&self, request: LimitKey, _now: UnixMillis) -> Result<(), MetaError> {
        let LimitKey { access_key, grants } = request;
        let access_key = access_key.as_str();
        self.store.write(|txn| {
            let buckets = txn.open_table(BUCKETS)?;
            for grant in grants.iter().flatten() {
                require_bucket(&buckets, &grant.bucket)?;
            }
            let mut keys = txn.open_table(ACCESS_KEYS)?;
            let mut record: AccessKeyRecord = get_json(&keys, access_key)?
                .ok_or_else(|| MetaError::NoSuchAccessKey(access_key.to_string()))?;
            record.bucket_grants = grants;
            keys.insert(access_key, encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(access_key, "access key limits changed");
        Ok(())
    }
}
