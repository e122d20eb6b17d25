//! Orphan detection through the service, with time moved by `handle_at`.

use super::*;
use crate::layout::ReplicationConfig;
use crate::meta::api::{MetaRequest, MetaResponse};
use crate::meta::service::MetaService;
use crate::meta::test_support::*;
use crate::meta::types::{PartRecord, UploadRecord};
use std::collections::BTreeMap;

const GRACE: Duration = Duration::from_secs(60);
const SECOND: UnixMillis = 1000;

fn open_with_grace(dir: &std::path::Path) -> Arc<MetaService> {
    MetaService::open(crate::meta::MetaConfig {
        orphan_grace: GRACE,
        ..config(dir)
    })
    .unwrap()
}

async fn allocate(meta: &MetaService, at: UnixMillis) -> BlockGroup {
    let request = MetaRequest::AllocateBlock {
        config: ReplicationConfig::REPLICATED_1,
        exclude: Vec::new(),
    };
    match meta.handle_at(request, at).await {
        Ok(MetaResponse::Allocated(g)) => g,
        other => panic!("allocate: {other:?}"),
    }
}

async fn block_report(
    meta: &MetaService,
    datanode: &str,
    blocks: Vec<ReportedBlock>,
    at: UnixMillis,
) -> Result<u64, MetaError> {
    let request = MetaRequest::BlockReport {
        datanode: dn(datanode),
        blocks,
    };
    match meta.handle_at(request, at).await? {
        MetaResponse::OrphansQueued(n) => Ok(n),
        other => panic!("block report: {other:?}"),
    }
}

fn old(group: &BlockGroup) -> ReportedBlock {
    ReportedBlock {
        key: BlockKey::new(group.block, 0),
        age_ms: 2 * GRACE.as_millis() as u64,
    }
}

#[tokio::test]
async fn only_old_unreferenced_blocks_are_queued() {
    let dir = tempfile::tempdir().unwrap();
    let meta = open_with_grace(dir.path());
    register(&meta, 1).await;
    create_bucket(&meta, "bkt", "root").await;
    let committed = allocate(&meta, T0).await;
    let orphan = allocate(&meta, T0).await;
    let in_part = allocate(&meta, T0).await;
    let fresh_file = allocate(&meta, T0).await;
    commit(&meta, object("bkt", "k", vec![committed.clone()])).await;
    let upload = UploadRecord {
        upload_id: "u1".into(),
        bucket: "bkt".into(),
        key: "mp".into(),
        owner: "root".into(),
        created: T0,
        content_type: None,
        headers: BTreeMap::new(),
        user_metadata: BTreeMap::new(),
        replication: ReplicationConfig::REPLICATED_1,
        attributes: Default::default(),
    };
    call(&meta, MetaRequest::CreateUpload { record: upload })
        .await
        .unwrap();
    let part = PartRecord {
        upload_id: "u1".into(),
        number: 1,
        size: 100,
        etag: "e".into(),
        created: T0,
        groups: vec![in_part.clone()],
        checksum: None,
    };
    call(&meta, MetaRequest::CommitPart { part }).await.unwrap();

    let later = T0 + GRACE.as_millis() as i64 + SECOND;
    heartbeat_at(&meta, report("dn0", ROOMY, 0), later).await;
    let recent = allocate(&meta, later).await;
    let report_of = |blocks: &[&BlockGroup]| {
        let mut out: Vec<ReportedBlock> = blocks.iter().map(|g| old(g)).collect();
        // Written moments ago, though allocated long before.
        out.push(ReportedBlock {
            key: BlockKey::new(fresh_file.block, 0),
            age_ms: 10,
        });
        // An id this meta never handed out.
        out.push(ReportedBlock {
            key: BlockKey::new(BlockId(1 << 40), 0),
            age_ms: u64::MAX,
        });
        out
    };
    let all = [&committed, &orphan, &in_part, &recent];

    // Within the grace period of the allocations nothing is judged.
    let early = block_report(&meta, "dn0", report_of(&all), T0 + 30 * SECOND).await;
    assert_eq!(early, Ok(0));
    assert_eq!(queued_for(&meta, "dn0").await, Vec::<BlockKey>::new());

    assert_eq!(
        block_report(&meta, "dn0", report_of(&all), later + SECOND).await,
        Ok(1)
    );
    let due = heartbeat_at(&meta, report("dn0", ROOMY, 0), later + SECOND).await;
    assert_eq!(due, vec![BlockKey::new(orphan.block, 0)]);
    // Reported again: already queued, not counted twice.
    assert_eq!(
        block_report(&meta, "dn0", report_of(&all), later + 2 * SECOND).await,
        Ok(0)
    );
    // The same block id on another datanode than the record names is an orphan there.
    heartbeat_at(&meta, report("dn1", ROOMY, 0), later).await;
    assert_eq!(
        block_report(&meta, "dn1", vec![old(&committed)], later + SECOND).await,
        Ok(1)
    );
    // Datanodes that never registered are refused.
    let stranger = block_report(&meta, "nobody", vec![old(&orphan)], later).await;
    assert!(
        matches!(stranger, Err(MetaError::InvalidRequest(_))),
        "{stranger:?}"
    );
    let too_many = vec![old(&orphan); MAX_REPORTED_BLOCKS + 1];
    let refused = block_report(&meta, "dn0", too_many, later).await;
    assert!(
        matches!(refused, Err(MetaError::InvalidRequest(_))),
        "{refused:?}"
    );
}

#[test]
fn the_clock_vouches_only_for_ids_allocated_before_the_grace() {
    let clock = AllocationClock::start(GRACE, T0, 0);
    assert_eq!(clock.horizon(T0 + 3_600 * SECOND), 0);
    clock.note(BlockId(5), T0);
    clock.note(BlockId(9), T0 + 500);
    clock.note(BlockId(20), T0 + 30 * SECOND);
    let g = GRACE.as_millis() as i64;
    assert_eq!(clock.horizon(T0 + g - 1), 0);
    assert_eq!(clock.horizon(T0 + g + 500), 10);
    assert_eq!(clock.horizon(T0 + g + 30 * SECOND), 21);
    // Many later allocations keep the memory small.
    for i in 0..1000 {
        clock.note(BlockId(100 + i), T0 + 40 * SECOND + (i as i64) * SECOND);
    }
    assert!(
        clock.samples.lock().len() <= 62,
        "{}",
        clock.samples.lock().len()
    );
    assert!(clock.horizon(T0 + 1040 * SECOND + g) >= 1099);
    // After a restart every id below the stored counter counts as allocated
    // at the restart.
    let reopened = AllocationClock::start(GRACE, T0, 4096);
    assert_eq!(reopened.horizon(T0 + g - 1), 0);
    assert_eq!(reopened.horizon(T0 + g), 4096);
}

#[test]
fn reported_blocks_travel_as_compact_triples() {
    let block = ReportedBlock {
        key: BlockKey::new(BlockId(7), 3),
        age_ms: 1234,
    };
    let text = serde_json::to_string(&block).unwrap();
    assert_eq!(text, "[7,3,1234]");
    assert_eq!(serde_json::from_str::<ReportedBlock>(&text).unwrap(), block);
}
