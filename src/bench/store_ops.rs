//! Keys through the client library, as the gateway's PUT stores them: a
//! `KeyWriter` fills block groups on the datanodes, then meta commits the
//! object record that makes the key visible.

use crate::roles::StorageSettings;
use crate::s3_client::first_difference;
use anyhow::{Context, Result};
use block_client::StoreClient;
use bytes::Bytes;
use md5::{Digest, Md5};
use meta_api::{
    now_millis, CommitObject, CreateBucket, DiscardBlocks, GetObject, MetaError, ObjectRecord,
};
use proto::ReplicationConfig;
use rand::{RngCore, SeedableRng};
use std::sync::Arc;

/// The bytes every written key holds, with their MD5 computed once.
#[derive(Clone)]
pub struct Payload {
    /// The body.
    pub data: Bytes,
    /// Hex MD5 of `data` (the ETag).
    pub md5: String,
}

/// Bytes hashed when measuring one core's MD5 speed.
const MD5_PROBE_BYTES: u64 = 256 * 1024 * 1024;

impl Payload {
    /// `size` pseudo-random bytes, the same for every run and process asked
    /// for that size, so that a reader can check what it reads.
    pub fn pattern(size: u64) -> Result<Self> {
        let len = usize::try_from(size).context("payload too large for this machine")?;
        let mut data = vec![0u8; len];
        rand::rngs::StdRng::seed_from_u64(size).fill_bytes(&mut data);
        let md5 = hex::encode(Md5::digest(&data));
        Ok(Self {
            data: Bytes::from(data),
            md5,
        })
    }
}

/// MB/s of one core's MD5 (the implementation the gateway computes ETags
/// with) over at least 256 MiB of random bytes: the ceiling of one PUT
/// stream, measured in the same run as the PUTs.
pub fn md5_single_core_mb_per_s() -> f64 {
    let mut block = vec![0u8; 16 * 1024 * 1024];
    rand::thread_rng().fill_bytes(&mut block);
    let mut hasher = Md5::new();
    // One pass to fault the block in and warm the caches, untimed.
    hasher.update(&block);
    let start = std::time::Instant::now();
    let mut hashed = 0u64;
    while hashed < MD5_PROBE_BYTES {
        hasher.update(&block);
        hashed += block.len() as u64;
    }
    std::hint::black_box(hasher.finalize());
    hashed as f64 / 1e6 / start.elapsed().as_secs_f64()
}

/// A client library handle on the cluster behind meta's RPC at `meta_addr`,
/// acting as the gateway whose credential `credential` holds, over mutual
/// TLS when `cluster_tls` names the files.
pub fn connect(
    meta_addr: &str,
    credential: &crate::roles::CredentialArgs,
    cluster_tls: &crate::roles::ClusterTlsArgs,
    storage: &StorageSettings,
) -> Result<StoreClient> {
    let credential =
        credential.credential("gateway", |p| matches!(p, meta_api::Principal::Gateway(_)))?;
    let tls = cluster_tls.load()?;
    let meta = meta_api::MetaClient::remote(meta_addr, &credential.to_string(), tls.clone());
    Ok(StoreClient::new(meta, storage.client_config(tls)?))
}

/// Creates `bucket` for the root user unless it exists.
pub async fn ensure_bucket(store: &StoreClient, bucket: &str) -> Result<()> {
    match store
        .meta()
        .call(CreateBucket {
            object_lock: false,
            name: bucket.to_string(),
            owner: "root".into(),
            replication: None,
            access: Default::default(),
        })
        .await
    {
        Ok(())
        | Err(MetaError::BucketAlreadyOwnedByYou(_))
        | Err(MetaError::BucketAlreadyExists(_)) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating bucket {bucket}")),
    }
}

/// Writes `payload` as `bucket/key` in pieces of `write_size` and commits it.
pub async fn write_key(
    store: &StoreClient,
    bucket: &str,
    key: &str,
    payload: &Payload,
    write_size: usize,
    replication: ReplicationConfig,
) -> Result<ObjectRecord> {
    let mut writer = store.writer(replication);
    let mut offset = 0;
    let total = payload.data.len();
    while offset < total {
        let end = (offset + write_size.max(1)).min(total);
        if let Err(e) = writer.write(payload.data.slice(offset..end)).await {
            writer.abort().await;
            return Err(e).with_context(|| format!("writing {bucket}/{key}"));
        }
        offset = end;
    }
    let written = writer
        .finish()
        .await
        .with_context(|| format!("finishing {bucket}/{key}"))?;
    let mut record = ObjectRecord::new(
        bucket,
        key,
        payload.md5.clone(),
        written.replication,
        written.groups.clone(),
    );
    record.created = now_millis();
    let meta = store.meta();
    let commit = CommitObject {
        record: record.clone(),
        condition: None,
    };
    if let Err(e) = meta.call(commit).await {
        // As the gateway does: free the blocks only when the commit surely failed.
        if !e.may_have_applied() {
            let groups = written.groups;
            let _ = meta.call(DiscardBlocks { groups }).await;
        }
        return Err(e).with_context(|| format!("committing {bucket}/{key}"));
    }
    Ok(record)
}

/// Checks `got`, read at `offset`, against `expected` when there is one.
pub fn check_content(expected: Option<&Bytes>, offset: u64, got: &[u8]) -> Result<()> {
    match expected.and_then(|e| first_difference(e, offset, got)) {
        Some(at) => anyhow::bail!("content differs from what was written at byte {at}"),
        None => Ok(()),
    }
}

/// The object at `bucket/key`, written first (with [`Payload::pattern`] of
/// `size`) when absent or when `rewrite` asks for known contents.
pub async fn ensure_key(
    store: &StoreClient,
    bucket: &str,
    key: &str,
    size: u64,
    replication: ReplicationConfig,
    rewrite: bool,
) -> Result<Arc<ObjectRecord>> {
    ensure_bucket(store, bucket).await?;
    let lookup = || GetObject {
        version: None,
        bucket: bucket.to_string(),
        key: key.to_string(),
    };
    let found = store
        .meta()
        .call(lookup())
        .await
        .with_context(|| format!("looking up {bucket}/{key}"))?;
    if let Some(record) = found.filter(|_| !rewrite) {
        return Ok(record);
    }
    let payload = Payload::pattern(size)?;
    write_key(store, bucket, key, &payload, 1 << 20, replication).await?;
    // Read the record back: meta fills in the datanodes' current addresses.
    store
        .meta()
        .call(lookup())
        .await?
        .with_context(|| format!("{bucket}/{key} vanished after its commit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_repeat_per_size_and_differences_are_found() {
        let payload = Payload::pattern(1000).unwrap();
        assert_eq!(payload.data, Payload::pattern(1000).unwrap().data);
        assert_ne!(payload.data[..999], Payload::pattern(999).unwrap().data[..]);
        let data = &payload.data;
        assert_eq!(first_difference(data, 100, &data[100..200]), None);
        let mut wrong = data[100..200].to_vec();
        wrong[37] ^= 1;
        assert_eq!(first_difference(data, 100, &wrong), Some(137));
        let longer = [&data[990..], &[0u8; 5][..]].concat();
        assert_eq!(first_difference(data, 990, &longer), Some(1000));
        assert!(check_content(Some(&payload.data), 100, &wrong).is_err());
        assert!(check_content(None, 100, &wrong).is_ok());
    }
}
