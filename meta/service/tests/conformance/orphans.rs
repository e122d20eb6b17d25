//! Orphan detection through the service, with time moved by the test's clock.

use meta_api::*;
use proto::{BlockId, BlockKey, ReplicationConfig};
use std::time::Duration;
use test_support::meta::*;

const GRACE: Duration = Duration::from_secs(60);
const SECOND: UnixMillis = 1000;

async fn allocate(meta: &MetaUnderTest, at: UnixMillis) -> BlockGroup {
    let request = AllocateBlock {
        config: ReplicationConfig::REPLICATED_1,
        exclude: Vec::new(),
    };
    match meta.call_at(request, at).await {
        Ok(mut g) => {
            take_token(&mut g, proto::token::Modes::WRITE);
            g
        }
        other => panic!("allocate: {other:?}"),
    }
}

async fn block_report(
    meta: &MetaUnderTest,
    datanode: &str,
    blocks: Vec<ReportedBlock>,
    at: UnixMillis,
) -> Result<u64, MetaError> {
    let request = BlockReport {
        datanode: dn(datanode),
        blocks,
    };
    meta.call_at(request, at).await
}

fn old(group: &BlockGroup) -> ReportedBlock {
    ReportedBlock {
        key: BlockKey::new(group.block, 0),
        age_ms: 2 * GRACE.as_millis() as u64,
    }
}

async fn only_old_unreferenced_blocks_are_queued(transport: Transport) {
    let meta = MetaUnderTest::open_with(transport, |c| c.orphan_grace = GRACE).await;
    meta.register(1).await;
    meta.create_bucket("bkt", "root").await;
    let committed = allocate(&meta, T0).await;
    let orphan = allocate(&meta, T0).await;
    let in_part = allocate(&meta, T0).await;
    let fresh_file = allocate(&meta, T0).await;
    let noncurrent = allocate(&meta, T0).await;
    // An older version's blocks are as referenced as the latest's.
    let versioning = SetBucketVersioning {
        bucket: "bkt".into(),
        versioning: Versioning::Enabled,
    };
    meta.call(versioning).await.unwrap();
    meta.commit(object("bkt", "k", vec![noncurrent.clone()]))
        .await;
    meta.commit(object("bkt", "k", vec![committed.clone()]))
        .await;
    let upload = upload("bkt", "mp", "u1");
    meta.call(CreateUpload { record: upload }).await.unwrap();
    let part = PartRecord {
        upload_id: "u1".into(),
        number: 1,
        size: 100,
        etag: "e".into(),
        created: T0,
        groups: vec![in_part.clone()],
        checksum: None,
        key_salt: None,
    };
    meta.call(CommitPart { part }).await.unwrap();

    let later = T0 + GRACE.as_millis() as i64 + SECOND;
    meta.heartbeat_at(report("dn0", ROOMY, 0), later).await;
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
    let all = [&committed, &orphan, &in_part, &recent, &noncurrent];

    // Within the grace period of the allocations nothing is judged.
    let early = block_report(&meta, "dn0", report_of(&all), T0 + 30 * SECOND).await;
    assert_eq!(early, Ok(0));
    assert_eq!(meta.queued_for("dn0").await, Vec::<BlockKey>::new());

    assert_eq!(
        block_report(&meta, "dn0", report_of(&all), later + SECOND).await,
        Ok(1)
    );
    let due = meta
        .heartbeat_at(report("dn0", ROOMY, 0), later + SECOND)
        .await;
    assert_eq!(due, vec![BlockKey::new(orphan.block, 0)]);
    // Reported again: already queued, not counted twice.
    assert_eq!(
        block_report(&meta, "dn0", report_of(&all), later + 2 * SECOND).await,
        Ok(0)
    );
    // The same block id on another datanode than the record names is an orphan there.
    meta.heartbeat_at(report("dn1", ROOMY, 0), later).await;
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

test_support::conformance!(only_old_unreferenced_blocks_are_queued,);
