//! Administrative operations (`tessera admin`): users, access keys, buckets on
//! behalf of a user, and the cluster status, all behind the admin token.

use super::api::{AdminOp, MetaError, MetaResponse};
use super::credentials::{generate_access_key, generate_secret_key, ROOT_USER};
use super::deletions;
use super::naming::validate_user_name;
use super::service::Inner;
use super::store::{all_json, encode, get_json, ACCESS_KEYS, BUCKETS, OBJECTS, USERS};
use super::types::{AccessKeyRecord, BucketRecord, ClusterStatus, UnixMillis, UserRecord};
use redb::{ReadableTable, ReadableTableMetadata};
use subtle::ConstantTimeEq;

impl Inner {
    /// Refuses a request whose token is not the admin token; the comparison
    /// takes the same time wherever the first difference is.
    pub(super) fn check_admin_token(&self, token: &str) -> Result<(), MetaError> {
        if bool::from(token.as_bytes().ct_eq(self.admin_token.as_bytes())) {
            Ok(())
        } else {
            metrics::counter!("tessera_meta_admin_refused_total").increment(1);
            Err(MetaError::Unauthorized)
        }
    }

    /// Runs an admin operation whose token was checked.
    pub(super) fn admin(&self, op: AdminOp, now: UnixMillis) -> Result<MetaResponse, MetaError> {
        Ok(match op {
            AdminOp::CreateUser { name } => {
                self.create_user(&name, now)?;
                MetaResponse::Done
            }
            AdminOp::DeleteUser { name } => {
                self.delete_user(&name)?;
                MetaResponse::Done
            }
            AdminOp::ListUsers => {
                MetaResponse::Users(self.store.read(|txn| all_json(&txn.open_table(USERS)?))?)
            }
            AdminOp::CreateKey { user } => MetaResponse::Key(self.create_key(&user, now)?),
            AdminOp::DeleteKey { access_key } => {
                self.delete_key(&access_key)?;
                MetaResponse::Done
            }
            AdminOp::ListKeys { user } => MetaResponse::Keys(self.list_keys(user.as_deref())?),
            AdminOp::CreateBucket {
                name,
                owner,
                replication,
            } => {
                self.create_bucket(name, owner, replication, now)?;
                MetaResponse::Done
            }
            AdminOp::DeleteBucket { name } => {
                self.delete_bucket(&name)?;
                MetaResponse::Done
            }
            AdminOp::ListBuckets => MetaResponse::Buckets(self.list_buckets(None)?),
            AdminOp::LimitKey { access_key, grants } => {
                self.limit_key(&access_key, grants)?;
                MetaResponse::Done
            }
            AdminOp::SetBucketPublicRead { name, public_read } => {
                self.set_bucket_public_read(&name, public_read)?;
                MetaResponse::Done
            }
            AdminOp::Status => MetaResponse::Status(self.status(now)?),
        })
    }

    fn create_user(&self, name: &str, now: UnixMillis) -> Result<(), MetaError> {
        validate_user_name(name).map_err(MetaError::InvalidRequest)?;
        self.store.write(|txn| {
            let mut users = txn.open_table(USERS)?;
            if users.get(name)?.is_some() {
                return Err(MetaError::UserExists(name.to_string()));
            }
            let record = UserRecord {
                name: name.to_string(),
                created: now,
                is_root: false,
            };
            users.insert(name, encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(user = name, "user created");
        Ok(())
    }

    /// Deletes a user that owns no bucket, with its access keys.
    fn delete_user(&self, name: &str) -> Result<(), MetaError> {
        if name == ROOT_USER {
            return Err(MetaError::InvalidRequest(
                "the root user cannot be deleted".into(),
            ));
        }
        self.store.write(|txn| {
            let mut users = txn.open_table(USERS)?;
            if users.get(name)?.is_none() {
                return Err(MetaError::NoSuchUser(name.to_string()));
            }
            let buckets: Vec<BucketRecord> = all_json(&txn.open_table(BUCKETS)?)?;
            if buckets.iter().any(|b| b.owner == name) {
                return Err(MetaError::UserHasBuckets(name.to_string()));
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

    /// A new access key and secret for `user`.
    fn create_key(&self, user: &str, now: UnixMillis) -> Result<AccessKeyRecord, MetaError> {
        let record = self.store.write(|txn| {
            if get_json::<&str, UserRecord>(&txn.open_table(USERS)?, user)?.is_none() {
                return Err(MetaError::NoSuchUser(user.to_string()));
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

    fn delete_key(&self, access_key: &str) -> Result<(), MetaError> {
        self.store.write(|txn| {
            let mut keys = txn.open_table(ACCESS_KEYS)?;
            if keys.remove(access_key)?.is_none() {
                return Err(MetaError::NoSuchAccessKey(access_key.to_string()));
            }
            Ok(())
        })?;
        tracing::info!(access_key, "access key deleted");
        Ok(())
    }

    /// Access keys of `user` (which must exist), or all of them.
    fn list_keys(&self, user: Option<&str>) -> Result<Vec<AccessKeyRecord>, MetaError> {
        self.store.read(|txn| {
            if let Some(user) = user {
                if get_json::<&str, UserRecord>(&txn.open_table(USERS)?, user)?.is_none() {
                    return Err(MetaError::NoSuchUser(user.to_string()));
                }
            }
            let keys: Vec<AccessKeyRecord> = all_json(&txn.open_table(ACCESS_KEYS)?)?;
            Ok(keys
                .into_iter()
                .filter(|k| user.is_none_or(|u| k.user == u))
                .collect())
        })
    }

    fn status(&self, now: UnixMillis) -> Result<ClusterStatus, MetaError> {
        let datanodes = self
            .registry
            .snapshot(now, self.config.stale_after, self.config.dead_after)
            .into_iter()
            .map(|n| n.record)
            .collect();
        self.registry
            .publish_gauges(now, self.config.stale_after, self.config.dead_after);
        self.store.read(|txn| {
            Ok(ClusterStatus {
                datanodes,
                buckets: txn.open_table(BUCKETS)?.len()?,
                objects: txn.open_table(OBJECTS)?.len()?,
                pending_deletions: deletions::pending_count(txn)?,
            })
        })
    }
}
