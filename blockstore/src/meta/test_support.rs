//! Shared fixtures for meta's unit tests: a service on a temporary folder with
//! short liveness intervals and small blocks, and record builders.

use super::api::{MetaError, MetaRequest, MetaResponse};
use super::service::{MetaConfig, MetaService};
use super::types::*;
use crate::ids::{BlockId, BlockKey, DatanodeId, ObjectId};
use crate::layout::ReplicationConfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The time tests run at (a fixed instant, so liveness is deterministic).
pub(super) const T0: UnixMillis = 1_700_000_000_000;
/// Block size of test services.
pub(super) const BLOCK: u64 = 1024;
/// Capacity of test datanodes that should never be full.
pub(super) const ROOMY: u64 = 1 << 40;

/// Test settings: stale after 10 s, dead after 30 s, 1 KiB blocks, fixed
/// admin token, released blocks handed out at once (the grace period has
/// its own tests).
pub(super) fn config(dir: &Path) -> MetaConfig {
    MetaConfig {
        stale_after: Duration::from_secs(10),
        dead_after: Duration::from_secs(30),
        admin_token: Some("admin-secret".into()),
        block_size: BLOCK,
        deletion_delay: Duration::ZERO,
        ..MetaConfig::new(dir)
    }
}

pub(super) fn open(dir: &Path) -> Arc<MetaService> {
    MetaService::open(config(dir)).expect("meta opens")
}

/// Serves `request` at T0.
pub(super) async fn call(
    meta: &MetaService,
    request: MetaRequest,
) -> Result<MetaResponse, MetaError> {
    meta.handle_at(request, T0).await
}

pub(super) fn dn(name: &str) -> DatanodeId {
    DatanodeId(name.to_string())
}

pub(super) fn report(name: &str, capacity: u64, used: u64) -> DatanodeReport {
    DatanodeReport {
        id: dn(name),
        addr: format!("{name}.test:7000"),
        local_socket: None,
        capacity,
        used,
        blocks: 0,
        deleted: Vec::new(),
    }
}

/// Heartbeats `report` at `at`; returns the deletions handed back.
pub(super) async fn heartbeat_at(
    meta: &MetaService,
    report: DatanodeReport,
    at: UnixMillis,
) -> Vec<BlockKey> {
    match meta.handle_at(MetaRequest::Heartbeat(report), at).await {
        Ok(MetaResponse::Deletions(d)) => d,
        other => panic!("heartbeat: {other:?}"),
    }
}

/// Registers healthy, empty datanodes dn0..dn{n-1} at T0.
pub(super) async fn register(meta: &MetaService, n: usize) {
    for i in 0..n {
        heartbeat_at(meta, report(&format!("dn{i}"), ROOMY, 0), T0).await;
    }
}

/// Deletions queued for `name` (a heartbeat that acknowledges nothing).
pub(super) async fn queued_for(meta: &MetaService, name: &str) -> Vec<BlockKey> {
    heartbeat_at(meta, report(name, ROOMY, 0), T0).await
}

pub(super) async fn create_bucket(meta: &MetaService, name: &str, owner: &str) {
    let request = MetaRequest::CreateBucket {
        name: name.into(),
        owner: owner.into(),
        replication: None,
    };
    assert!(matches!(call(meta, request).await, Ok(MetaResponse::Done)));
}

/// A replicated block `block` on the named datanodes.
pub(super) fn group(block: u64, datanodes: &[&str]) -> BlockGroup {
    BlockGroup {
        block: BlockId(block),
        length: 100,
        replicas: datanodes
            .iter()
            .map(|d| ReplicaLocation {
                index: 0,
                datanode: dn(d),
                addr: format!("{d}.test:7000"),
            })
            .collect(),
    }
}

pub(super) fn object(bucket: &str, key: &str, groups: Vec<BlockGroup>) -> ObjectRecord {
    ObjectRecord {
        id: ObjectId::random(),
        bucket: bucket.into(),
        key: key.into(),
        size: groups.iter().map(|g| g.length).sum(),
        etag: "d41d8cd98f00b204e9800998ecf8427e".into(),
        content_type: Some("text/plain".into()),
        headers: BTreeMap::new(),
        user_metadata: BTreeMap::from([("color".to_string(), "blue".to_string())]),
        created: T0,
        replication: ReplicationConfig::REPLICATED_1,
        groups,
        parts: Vec::new(),
        attributes: Default::default(),
    }
}

pub(super) async fn commit(meta: &MetaService, record: ObjectRecord) {
    let result = call(
        meta,
        MetaRequest::CommitObject {
            record,
            condition: None,
        },
    )
    .await;
    assert!(matches!(result, Ok(MetaResponse::Done)), "{result:?}");
}

pub(super) async fn get(meta: &MetaService, bucket: &str, key: &str) -> Option<ObjectRecord> {
    let request = MetaRequest::GetObject {
        bucket: bucket.into(),
        key: key.into(),
    };
    match call(meta, request).await {
        Ok(MetaResponse::Object(o)) => o.map(std::sync::Arc::unwrap_or_clone),
        other => panic!("get: {other:?}"),
    }
}

pub(super) fn key(block: u64) -> BlockKey {
    BlockKey::new(BlockId(block), 0)
}
