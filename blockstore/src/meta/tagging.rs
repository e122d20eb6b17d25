//! Bucket tags: kept in the bucket record, replaced whole as S3's
//! PutBucketTagging does.

use super::api::MetaError;
use super::service::Inner;
use super::store::{encode, get_json, BUCKETS};
use super::types::BucketRecord;
use std::collections::BTreeMap;

impl Inner {
    /// Replaces the tags of bucket `name`; an empty map removes them.
    pub(super) fn set_bucket_tags(
        &self,
        name: &str,
        tags: BTreeMap<String, String>,
    ) -> Result<(), MetaError> {
        self.store.write(|txn| {
            let mut buckets = txn.open_table(BUCKETS)?;
            let mut record: BucketRecord = get_json(&buckets, name)?
                .ok_or_else(|| MetaError::NoSuchBucket(name.to_string()))?;
            record.tags = tags;
            buckets.insert(name, encode(&record)?.as_slice())?;
            Ok(())
        })
    }
}
