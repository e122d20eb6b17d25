//! Orphan blocks end to end: real datanodes on 127.0.0.1:0 talk to a real
//! meta over its RPC (each with its own credential) and send block reports; blocks
//! a writer stored but never committed, and uploads it abandoned, disappear
//! once the (tiny) grace period passed, while committed objects keep theirs
//! and still read back.

use block_client::{ClientConfig, StoreClient};
use bytes::Bytes;
use datanode::{DatanodeConfig, RunningDatanode};
use meta::Clock;
use meta_api::{
    BlockGroup, CommitObject, CreateBucket, GetClusterStatus, GetObject, ObjectRecord, Principal,
};
use proto::{DatanodeId, ReplicationConfig};
use std::time::Duration;
use test_support::data::random_bytes;
use test_support::meta::{MetaUnderTest, Transport};

const GRACE: Duration = Duration::from_secs(1);
/// Above the replicated writer's 1 MiB piece, so a block can be half sent.
const BLOCK_SIZE: u64 = 4 << 20;
const BUCKET: &str = "orphans";

/// Whether each block file of `group` is committed on its datanode.
fn file_exists(datanodes: &[RunningDatanode], group: &BlockGroup) -> Vec<bool> {
    group
        .block_keys()
        .map(|(key, replica)| {
            let node = datanodes
                .iter()
                .find(|d| *d.id() == replica.datanode)
                .expect("replica on a known datanode");
            node.store().block(key).is_some()
        })
        .collect()
}

fn tmp_files(datanodes: &[RunningDatanode]) -> usize {
    datanodes
        .iter()
        .map(|d| {
            std::fs::read_dir(d.store().data_dirs()[0].join("tmp"))
                .map(|entries| entries.count())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncommitted_blocks_are_found_and_deleted_while_committed_ones_stay() {
    // Datanodes judge ages by the real clock, so meta does too.
    let under_test = MetaUnderTest::open_with(Transport::Remote, |c| {
        c.block_size = BLOCK_SIZE;
        c.orphan_grace = GRACE;
        c.clock = Clock::System;
    })
    .await;
    let dir = tempfile::tempdir().unwrap();

    let mut datanodes = Vec::new();
    for i in 0..3 {
        let config = DatanodeConfig {
            data_dirs: vec![dir.path().join(format!("dn{i}"))],
            listen: "127.0.0.1:0".into(),
            fsync: false,
            heartbeat_interval: Duration::from_millis(100),
            block_report_interval: Duration::from_millis(200),
            upload_grace: GRACE,
            identity: Some(DatanodeId(uuid::Uuid::new_v4().to_string())),
            ..DatanodeConfig::default()
        };
        let id = config.identity.clone().unwrap();
        let meta = under_test.client_as(Principal::Datanode(id));
        datanodes.push(datanode::start(config, meta).await.unwrap());
    }
    let meta = under_test.gateway_client();
    for _ in 0..200 {
        let status = under_test.call(GetClusterStatus).await;
        let healthy = status.ok().map(|s| s.datanodes.len());
        if healthy == Some(3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let create = CreateBucket {
        object_lock: false,
        name: BUCKET.to_string(),
        owner: "root".into(),
        replication: None,
        access: Default::default(),
    };
    meta.call(create).await.unwrap();
    let client = StoreClient::new(
        meta.clone(),
        ClientConfig {
            block_size: BLOCK_SIZE,
            ..ClientConfig::default()
        },
    );
    let replication = ReplicationConfig::Replicated { replicas: 2 };

    // A committed object spanning several blocks.
    let kept = random_bytes(5 << 20, 1);
    let mut writer = client.writer(replication);
    writer.write(Bytes::from(kept.clone())).await.unwrap();
    let written = writer.finish().await.unwrap();
    let record = ObjectRecord::new(
        BUCKET,
        "kept",
        "0".repeat(32),
        written.replication,
        written.groups,
    );
    let commit = CommitObject {
        record,
        condition: None,
    };
    meta.call(commit).await.unwrap();
    let lookup = GetObject {
        version: None,
        bucket: BUCKET.to_string(),
        key: "kept".into(),
    };
    let kept_record = meta.call(lookup).await.unwrap().unwrap();
    assert!(kept_record.groups.len() >= 2);

    // A writer that stored its blocks, then died before committing the object.
    let mut writer = client.writer(replication);
    writer
        .write(Bytes::from(random_bytes(300 * 1024, 2)))
        .await
        .unwrap();
    let orphaned = writer.finish().await.unwrap().groups;
    assert!(!orphaned.is_empty());
    for group in &orphaned {
        assert_eq!(file_exists(&datanodes, group), vec![true, true]);
    }
    // A writer that died mid-block (one 1 MiB piece sent, the rest still
    // buffered): its uploads stay open on the datanodes.
    let mut writer = client.writer(replication);
    writer
        .write(Bytes::from(random_bytes(1536 * 1024, 3)))
        .await
        .unwrap();
    writer.flush().await.unwrap();
    std::mem::forget(writer);
    let open_uploads: usize = datanodes.iter().map(|d| d.store().open_uploads()).sum();
    assert!(open_uploads > 0, "the dead writer left no upload behind");

    let mut gone = false;
    for _ in 0..300 {
        let orphans_left = orphaned
            .iter()
            .flat_map(|g| file_exists(&datanodes, g))
            .any(|exists| exists);
        let uploads_left: usize = datanodes.iter().map(|d| d.store().open_uploads()).sum();
        if !orphans_left && uploads_left == 0 && tmp_files(&datanodes) == 0 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        gone,
        "orphan blocks or abandoned uploads are still on the datanodes"
    );

    // The committed object kept every block file and reads back whole.
    for group in &kept_record.groups {
        assert_eq!(file_exists(&datanodes, group), vec![true, true]);
    }
    let back = client
        .reader(&kept_record)
        .read_at(0, kept.len())
        .await
        .unwrap();
    assert!(back[..] == kept[..], "the committed object changed");

    for node in datanodes {
        node.shutdown().await;
    }
}
