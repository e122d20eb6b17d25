//! Object lock of single versions: PutObjectRetention and PutObjectLegalHold,
//! checked against the version's lock inside the write transaction, so that
//! two changes racing each other cannot loosen a retention between them.

use crate::state::MetaState;
use crate::store::db::{encode, get_json};
use crate::store::tables::{object_key, require_bucket, BUCKETS, OBJECTS, VERSIONS};
use crate::store::versions::{find_version, newest_older, no_such_version, Place};
use meta_api::{Handle, LockChange, MetaError, ObjectRecord, Retention, SetObjectLock, UnixMillis};

impl Handle<SetObjectLock> for MetaState {
    /// Changes the retention or legal hold of the version named (or the
    /// latest); `ObjectLocked` when the retention may not change so.
    fn handle(&self, request: SetObjectLock, now: UnixMillis) -> Result<(), MetaError> {
        let SetObjectLock {
            bucket,
            key,
            version,
            change,
            bypass_governance,
        } = request;
        self.store.write(|txn| {
            let bucket_record = require_bucket(&txn.open_table(BUCKETS)?, &bucket)?;
            if bucket_record.object_lock.is_none() {
                return Err(MetaError::NoObjectLock.into());
            }
            let mut objects = txn.open_table(OBJECTS)?;
            let mut versions = txn.open_table(VERSIONS)?;
            let latest_key = object_key(&bucket, key.as_bytes());
            let (place, mut record) = match &version {
                Some(wanted) => find_version(&objects, &versions, &bucket, &key, wanted)?
                    .ok_or_else(|| no_such_version(wanted))?,
                None => match get_json::<_, ObjectRecord>(&objects, latest_key.as_slice())? {
                    Some(record) => (Place::Latest, record),
                    None => match newest_older(&versions, &bucket, &key)? {
                        Some((at, record)) => (Place::Older(at), record),
                        None => return Err(MetaError::NoSuchKey(key.clone()).into()),
                    },
                },
            };
            if record.version.delete_marker {
                return Err(MetaError::DeleteMarker {
                    key: record.key,
                    version_id: record.version.id,
                    named: version.is_some(),
                }
                .into());
            }
            let attributes = &mut record.attributes;
            match change {
                LockChange::Retention(new) => {
                    let current = attributes.retention.as_ref();
                    if !Retention::may_change(current, new.as_ref(), now, bypass_governance) {
                        return Err(MetaError::ObjectLocked.into());
                    }
                    attributes.retention = new;
                }
                LockChange::LegalHold(on) => attributes.legal_hold = Some(on),
            }
            let stored = encode(&record)?;
            match place {
                Place::Latest => objects.insert(latest_key.as_slice(), stored.as_slice())?,
                Place::Older(at) => versions.insert(at.as_slice(), stored.as_slice())?,
            };
            Ok(())
        })
    }
}
