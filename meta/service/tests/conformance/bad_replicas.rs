//! Reports of corrupt block files.

use meta_api::*;
use proto::{BlockId, BlockKey};
use test_support::meta::*;

async fn reports_are_kept_per_block_file_and_counted(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    // Reports stay while a record lists their block files (redundancy scans
    // drop the others).
    meta.create_bucket("bkt", "root").await;
    meta.commit(object("bkt", "k", vec![group(7, &["a", "b"])]))
        .await;
    let key = BlockKey::new(BlockId(7), 0);
    for reason in ["crc at 0", "crc at 16384"] {
        let request = ReportBadReplica {
            block: key,
            datanode: dn("a"),
            reason: reason.into(),
        };
        meta.call(request).await.unwrap();
    }
    let other = ReportBadReplica {
        block: key,
        datanode: dn("b"),
        reason: "x".into(),
    };
    meta.gateway_client().call(other).await.unwrap();
    let reports = meta.service.bad_replicas().unwrap();
    assert_eq!(reports.len(), 2, "{reports:?}");
    let a = reports.iter().find(|r| r.datanode == dn("a")).unwrap();
    assert_eq!(
        (a.block, a.count, a.reason.as_str()),
        (key, 2, "crc at 16384")
    );
    assert_eq!(a.reported, T0);
}

test_support::conformance!(reports_are_kept_per_block_file_and_counted);
