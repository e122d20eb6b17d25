//! Orphan blocks end to end: real datanodes on 127.0.0.1:0 talk to a real
//! meta over its RPC (with the cluster token) and send block reports; blocks
//! a writer stored but never committed, and uploads it abandoned, disappear
//! once the (tiny) grace period passed, while committed objects keep theirs
//! and still read back.

use blockstore::client::{ClientConfig, StoreClient};
use blockstore::meta::{
    rpc::RemoteMeta, BlockGroup, MetaClient, MetaConfig, MetaService, ObjectRecord,
};
use blockstore::{ObjectId, ReplicationConfig};
use bytes::Bytes;
use datanode::{DatanodeConfig, RunningDatanode};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const GRACE: Duration = Duration::from_secs(1);
/// Above the replicated writer's 1 MiB piece, so a block can be half sent.
const BLOCK_SIZE: u64 = 4 << 20;
const BUCKET: &str = "orphans";

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = vec![0u8; len];
    rng.fill(&mut out[..]);
    out
}

/// The datanode holding `replica`'s block file, and whether the file is there.
fn file_exists(datanodes: &[RunningDatanode], group: &BlockGroup) -> Vec<bool> {
    group
        .block_keys()
        .map(|(key, replica)| {
            let node = datanodes
                .iter()
                .find(|d| *d.id() == replica.datanode)
                .expect("replica on a known datanode");
            node.store().data_path(key).exists()
        })
        .collect()
}

fn tmp_files(datanodes: &[RunningDatanode]) -> usize {
    datanodes
        .iter()
        .map(|d| {
            std::fs::read_dir(d.store().data_dir().join("tmp"))
                .map(|entries| entries.count())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncommitted_blocks_are_found_and_deleted_while_committed_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let service = MetaService::open(MetaConfig {
        block_size: BLOCK_SIZE,
        deletion_delay: Duration::ZERO,
        orphan_grace: GRACE,
        ..MetaConfig::new(dir.path().join("meta"))
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let meta_addr = listener.local_addr().unwrap().to_string();
    let (stop_meta, meta_stopped) = tokio::sync::oneshot::channel::<()>();
    let rpc = tokio::spawn(blockstore::meta::rpc::serve(
        listener,
        service.clone(),
        async move {
            let _ = meta_stopped.await;
        },
    ));
    let remote = || {
        MetaClient::Remote(Arc::new(RemoteMeta::connect_with_token(
            &meta_addr,
            service.cluster_token(),
        )))
    };

    let mut datanodes = Vec::new();
    for i in 0..3 {
        let config = DatanodeConfig {
            data_dir: dir.path().join(format!("dn{i}")),
            listen: "127.0.0.1:0".into(),
            fsync: false,
            heartbeat_interval: Duration::from_millis(100),
            block_report_interval: Duration::from_millis(200),
            upload_grace: GRACE,
            ..DatanodeConfig::default()
        };
        datanodes.push(datanode::start(config, remote()).await.unwrap());
    }
    let meta = remote();
    for _ in 0..200 {
        let healthy = meta
            .admin(service.admin_token(), blockstore::meta::AdminOp::Status)
            .await
            .ok()
            .and_then(|r| match r {
                blockstore::meta::MetaResponse::Status(s) => Some(s.datanodes.len()),
                _ => None,
            });
        if healthy == Some(3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    meta.create_bucket(BUCKET, "root", None).await.unwrap();
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
    let record = ObjectRecord {
        id: ObjectId::random(),
        bucket: BUCKET.into(),
        key: "kept".into(),
        size: written.size,
        etag: "0".repeat(32),
        content_type: None,
        headers: BTreeMap::new(),
        user_metadata: BTreeMap::new(),
        created: 0,
        replication: written.replication,
        groups: written.groups,
        parts: Vec::new(),
        attributes: Default::default(),
    };
    meta.commit_object(record).await.unwrap();
    let kept_record = meta.get_object(BUCKET, "kept").await.unwrap().unwrap();
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
    let _ = stop_meta.send(());
    rpc.await.unwrap().unwrap();
}
