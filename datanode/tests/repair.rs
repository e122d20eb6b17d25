//! Repair after datanode loss, with meta and datanodes talking over real
//! TCP: lost block files are rebuilt on other datanodes and the objects
//! point at them; writes go on, short, with a datanode down and are made
//! whole once a datanode joins.

use block_client::ClientConfig;
use meta_api::{
    AdminState, DatanodeState, GetClusterStatus, GetObject, ObjectRecord, RedundancyStatus,
    SetDatanodeAdminState,
};
use proto::{DatanodeId, ReplicationConfig};
use std::collections::HashSet;
use std::time::Duration;
use test_support::cluster::{write_key, TestCluster, TestClusterConfig};
use test_support::data::random_bytes;

const BLOCK_SIZE: u64 = 1024 * 1024;

/// A cluster that declares datanodes dead within seconds. Stale after a
/// second without a heartbeat (ten are sent in it): a loaded two-core
/// machine can delay a few, and a shorter bound made a healthy datanode
/// stale and a write find too few.
fn config() -> TestClusterConfig {
    TestClusterConfig::new(BLOCK_SIZE, 16 * 1024).meta(|meta| {
        meta.stale_after = Duration::from_millis(1_000);
        meta.dead_after = Duration::from_millis(2_000);
    })
}

fn client_config() -> ClientConfig {
    ClientConfig {
        block_size: BLOCK_SIZE,
        read_deadline: Duration::from_millis(500),
        ..ClientConfig::default()
    }
}

async fn record(cluster: &TestCluster, key: &str) -> ObjectRecord {
    let lookup = GetObject {
        version: None,
        bucket: "bkt".into(),
        key: key.into(),
    };
    std::sync::Arc::unwrap_or_clone(cluster.meta.call(lookup).await.unwrap().unwrap())
}

async fn redundancy(cluster: &TestCluster) -> RedundancyStatus {
    cluster
        .admin
        .call(GetClusterStatus)
        .await
        .unwrap()
        .redundancy
}

/// Waits until meta has seen `dead` die, scanned since, and every group is
/// whole again with nothing queued.
async fn wait_whole(cluster: &TestCluster, dead: &DatanodeId) -> RedundancyStatus {
    let mut dead_since = None;
    for _ in 0..600 {
        let status = cluster.admin.call(GetClusterStatus).await.unwrap();
        let seen_dead = status
            .datanodes
            .iter()
            .any(|d| d.id == *dead && d.state == DatanodeState::Dead);
        if seen_dead && dead_since.is_none() {
            dead_since = Some(meta_api::now_millis());
        }
        let r = &status.redundancy;
        let scanned_since = dead_since.is_some_and(|at| r.last_scan > at);
        let idle = r.queued == 0 && r.running == 0;
        if scanned_since && idle && r.degraded == 0 && r.at_risk == 0 && r.lost == 0 {
            return status.redundancy;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never whole again: {:?}", redundancy(cluster).await);
}

/// Every group of `record` has its full width on distinct datanodes, none
/// of them in `gone`.
fn assert_whole(record: &ObjectRecord, gone: &HashSet<DatanodeId>) {
    for group in &record.groups {
        let holders: HashSet<&DatanodeId> = group.replicas.iter().map(|r| &r.datanode).collect();
        assert_eq!(
            holders.len(),
            record.replication.width(),
            "{} in {}: {:?}",
            group.block,
            record.key,
            group.replicas
        );
        assert_eq!(group.replicas.len(), record.replication.width());
        assert!(
            holders.iter().all(|d| !gone.contains(*d)),
            "{:?}",
            group.replicas
        );
        if let ReplicationConfig::Ec(layout) = record.replication {
            let indexes: HashSet<u8> = group.replicas.iter().map(|r| r.index).collect();
            assert_eq!(indexes.len(), layout.width());
        }
    }
}

async fn read_all(cluster: &TestCluster, key: &str) -> Vec<u8> {
    let record = record(cluster, key).await;
    let client = cluster.client(client_config());
    let reader = client.reader(&record);
    reader
        .read_at(0, record.size as usize)
        .await
        .unwrap()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_datanodes_are_repaired_around_one_at_a_time() {
    let mut cluster = TestCluster::start(8, config()).await;
    cluster.create_bucket("bkt").await;
    let client = cluster.client(client_config());
    let sizes = [
        1usize,
        4096,
        1024 * 1024 + 5,
        3 * 1024 * 1024,
        7 * 1024 * 1024 + 77,
    ];
    let mut objects = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        for replication in [ReplicationConfig::RS_3_2, ReplicationConfig::REPLICATED_3] {
            let data = random_bytes(*size, i as u64 * 7 + replication.width() as u64);
            let key = format!("{replication}-{size}");
            let written = write_key(&client, replication, &data, 256 * 1024).await;
            cluster.commit("bkt", &key, written).await;
            objects.push((key, data));
        }
    }
    let mut gone = HashSet::new();
    let mut repaired = 0;
    // Three datanodes lost for good, one at a time, repair in between: rs-3-2
    // survives two losses at once and replicated-3 two, so without repair the
    // third loss would leave groups unreadable.
    for victim in [0usize, 3, 6] {
        let id = cluster.stop(victim).await;
        gone.insert(id.clone());
        let status = wait_whole(&cluster, &id).await;
        assert!(status.repaired_bytes > repaired, "{status:?}");
        repaired = status.repaired_bytes;
        assert!(status.healthy > 0);
        for (key, _) in &objects {
            assert_whole(&record(&cluster, key).await, &gone);
        }
    }
    for (key, data) in &objects {
        assert!(
            read_all(&cluster, key).await == *data,
            "{key} reads back different bytes"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_short_with_a_datanode_down_and_are_made_whole_when_one_joins() {
    let mut cluster = TestCluster::start(5, config()).await;
    cluster.create_bucket("bkt").await;
    let client = cluster.client(client_config());
    let dead = cluster.stop(2).await;
    for _ in 0..100 {
        let status = cluster.admin.call(GetClusterStatus).await.unwrap();
        if status
            .datanodes
            .iter()
            .any(|d| d.id == dead && d.state == DatanodeState::Dead)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut objects = Vec::new();
    for (i, replication) in [ReplicationConfig::RS_3_2, ReplicationConfig::REPLICATED_3]
        .into_iter()
        .enumerate()
    {
        for size in [10usize, 2 * 1024 * 1024 + 3] {
            let data = random_bytes(size, 100 + i as u64);
            let key = format!("{replication}-{size}");
            let written = write_key(&client, replication, &data, 64 * 1024).await;
            let record = cluster.commit("bkt", &key, written).await;
            if replication == ReplicationConfig::RS_3_2 {
                // Four healthy datanodes: every group is one block file short.
                assert!(
                    record.groups.iter().all(|g| g.replicas.len() == 4),
                    "{record:?}"
                );
            }
            objects.push((key, data));
        }
    }
    // Nowhere to put the missing block files until a datanode joins.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting = redundancy(&cluster).await;
    assert!(waiting.queued > 0, "{waiting:?}");
    cluster.add_datanode().await;
    let status = wait_whole(&cluster, &dead).await;
    assert!(status.repaired_bytes > 0);
    assert_eq!(status.healthy, 6, "{status:?}");
    let gone = HashSet::from([dead]);
    for (key, data) in &objects {
        assert_whole(&record(&cluster, key).await, &gone);
        assert!(read_all(&cluster, key).await == *data, "{key}");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_block_files_are_found_by_the_scrubber_and_rebuilt() {
    let config = config().each_datanode(|_, dn| dn.scrub_period = Duration::from_millis(500));
    let cluster = TestCluster::start(6, config).await;
    cluster.create_bucket("bkt").await;
    let client = cluster.client(client_config());
    let mut objects = Vec::new();
    for (i, replication) in [ReplicationConfig::RS_3_2, ReplicationConfig::REPLICATED_3]
        .into_iter()
        .enumerate()
    {
        let data = random_bytes(2 * 1024 * 1024 + 999, 300 + i as u64);
        let key = format!("{replication}");
        let written = write_key(&client, replication, &data, 64 * 1024).await;
        objects.push((
            key.clone(),
            data,
            cluster.commit("bkt", &key, written).await,
        ));
    }
    // One byte flipped in a data cell and in a parity cell of the EC group,
    // and in one replica of the replicated block.
    let mut damaged = Vec::new();
    for (_, _, record) in &objects {
        let group = &record.groups[0];
        let picks: Vec<&meta_api::ReplicaLocation> = match record.replication {
            ReplicationConfig::Ec(_) => group
                .replicas
                .iter()
                .filter(|r| r.index == 1 || r.index == 4)
                .collect(),
            ReplicationConfig::Replicated { .. } => vec![&group.replicas[1]],
        };
        for replica in picks {
            let holder = cluster.datanode_at(&replica.addr);
            let key = proto::BlockKey::new(group.block, replica.index);
            let bytes = cluster.flip_block_byte(holder, key, 1000, 0x01);
            damaged.push((key, replica.datanode.clone(), holder, bytes));
        }
    }
    // Found, quarantined, reported and rebuilt: elsewhere, or in place on
    // the datanode that held the damaged copy (then as a new file). The
    // objects are read only afterwards: a read that met a damaged copy would
    // report it itself, and its repair could beat the scrubber to it.
    let mut rebuilt = false;
    for _ in 0..300 {
        let status = cluster.admin.call(GetClusterStatus).await.unwrap();
        let found: u64 = status.datanodes.iter().map(|d| d.scrub.damaged).sum();
        let mut whole = true;
        for (key, holder_id, holder, flipped) in &damaged {
            let object = objects
                .iter()
                .find(|(_, _, r)| r.groups[0].block == key.block)
                .unwrap();
            let record = record(&cluster, &object.0).await;
            let group = &record.groups[0];
            whole &= group.replicas.len() == record.replication.width();
            if group
                .replicas
                .iter()
                .any(|r| r.index == key.index && r.datanode == *holder_id)
            {
                let current = cluster.stored_block(*holder, *key);
                whole &= current.is_some_and(|bytes| bytes != *flipped);
            }
        }
        let reports_cleared = cluster.service.bad_replicas().unwrap().is_empty();
        if found == damaged.len() as u64
            && whole
            && status.redundancy.queued == 0
            && reports_cleared
        {
            rebuilt = true;
            assert!(
                status.datanodes.iter().all(|d| d.scrub.passes > 0),
                "{status:?}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        rebuilt,
        "{:?}",
        cluster.admin.call(GetClusterStatus).await.unwrap()
    );
    for (key, data, _) in &objects {
        assert!(
            read_all(&cluster, key).await == *data,
            "{key} read wrong bytes"
        );
    }
    for (key, data, _) in &objects {
        assert!(
            read_all(&cluster, key).await == *data,
            "{key} read wrong bytes after repair"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_whose_datanode_dies_is_handed_out_again_and_completes() {
    // Repairs paced at 2 MiB/s over 4-stripe groups take seconds: long
    // enough to stop the datanode running one.
    let config = TestClusterConfig::new(4 * BLOCK_SIZE, 16 * 1024)
        .meta(|meta| {
            meta.stale_after = Duration::from_millis(300);
            meta.dead_after = Duration::from_millis(1_000);
        })
        .each_datanode(|_, dn| dn.repair_bandwidth = 2 * 1024 * 1024);
    let mut cluster = TestCluster::start(8, config).await;
    cluster.create_bucket("bkt").await;
    let client = cluster.client(ClientConfig {
        block_size: 4 * BLOCK_SIZE,
        ..client_config()
    });
    let data = random_bytes(12 * 1024 * 1024, 77);
    let written = write_key(&client, ReplicationConfig::RS_3_2, &data, 256 * 1024).await;
    let committed = cluster.commit("bkt", "big", written).await;
    let holders: HashSet<usize> = committed.groups[0]
        .replicas
        .iter()
        .map(|r| cluster.datanode_at(&r.addr))
        .collect();
    let victim = *holders.iter().next().unwrap();
    let dead = cluster.stop(victim).await;
    // The datanode receiving the rebuilt file holds its upload open.
    let mut target = None;
    for _ in 0..200 {
        target = (0..8).find(|i| {
            !holders.contains(i)
                && cluster.datanodes[*i]
                    .as_ref()
                    .is_some_and(|d| d.store().open_uploads() > 0)
        });
        if target.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let target = target.expect("no repair started");
    let second = cluster.stop(target).await;
    let status = wait_whole(&cluster, &second).await;
    assert!(status.repaired_bytes > 0, "{status:?}");
    let gone = HashSet::from([dead, second]);
    assert_whole(&record(&cluster, "big").await, &gone);
    assert!(read_all(&cluster, "big").await == data);
    cluster.shutdown().await;
}

async fn set_admin(cluster: &TestCluster, id: &DatanodeId, state: AdminState) {
    let set = SetDatanodeAdminState {
        datanode: id.clone(),
        state,
    };
    cluster.admin.call(set).await.unwrap();
}

async fn write_objects(cluster: &TestCluster) -> Vec<(String, Vec<u8>)> {
    cluster.create_bucket("bkt").await;
    let client = cluster.client(client_config());
    let mut objects = Vec::new();
    for (i, size) in [10usize, 2 * 1024 * 1024 + 3, 5 * 1024 * 1024]
        .into_iter()
        .enumerate()
    {
        for replication in [ReplicationConfig::RS_3_2, ReplicationConfig::REPLICATED_3] {
            let data = random_bytes(size, 500 + i as u64);
            let key = format!("{replication}-{size}");
            let written = write_key(&client, replication, &data, 64 * 1024).await;
            cluster.commit("bkt", &key, written).await;
            objects.push((key, data));
        }
    }
    objects
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decommissioned_datanode_is_copied_off_and_can_be_stopped() {
    // Decommissioned once empty for an orphan grace (writes placed before
    // the decommission commit within it). Nothing here waits for a
    // datanode to go stale: a margin wide enough for a loaded machine's
    // late heartbeats.
    let config = config().meta(|meta| {
        meta.stale_after = Duration::from_millis(2_000);
        meta.dead_after = Duration::from_millis(5_000);
        meta.orphan_grace = Duration::from_secs(1);
    });
    let mut cluster = TestCluster::start(7, config).await;
    let objects = write_objects(&cluster).await;
    let id = cluster.datanode(0).id().clone();
    let held = cluster.datanode(0).store().stats().used;
    assert!(held > 0);
    set_admin(&cluster, &id, AdminState::Decommissioning).await;
    let mut status = None;
    for _ in 0..300 {
        let now = cluster.admin.call(GetClusterStatus).await.unwrap();
        let node = now.datanodes.iter().find(|d| d.id == id).unwrap();
        if node.admin == AdminState::Decommissioned {
            status = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = status.expect("never decommissioned");
    // Copied, not rebuilt: the repairs read exactly what it held.
    assert_eq!(status.redundancy.repaired_bytes, held, "{status:?}");
    cluster.stop(0).await;
    let gone = HashSet::from([id]);
    for (key, data) in &objects {
        assert_whole(&record(&cluster, key).await, &gone);
        assert!(read_all(&cluster, key).await == *data, "{key}");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datanode_in_maintenance_is_not_repaired_around_until_it_leaves_maintenance() {
    let mut cluster = TestCluster::start(6, config()).await;
    let objects = write_objects(&cluster).await;
    let id = cluster.datanode(0).id().clone();
    set_admin(&cluster, &id, AdminState::Maintenance).await;
    cluster.stop(0).await;
    // Long past --dead-after: nothing queued, nothing repaired, reads degrade.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let status = cluster.admin.call(GetClusterStatus).await.unwrap();
    let node = status.datanodes.iter().find(|d| d.id == id).unwrap();
    assert_eq!(node.state, DatanodeState::Dead);
    assert_eq!(status.redundancy.queued, 0, "{status:?}");
    assert_eq!(status.redundancy.repaired_bytes, 0, "{status:?}");
    for (key, data) in &objects {
        assert!(read_all(&cluster, key).await == *data, "{key}");
    }
    set_admin(&cluster, &id, AdminState::InService).await;
    let status = wait_whole(&cluster, &id).await;
    assert!(status.repaired_bytes > 0);
    for (key, _) in &objects {
        assert_whole(&record(&cluster, key).await, &HashSet::from([id.clone()]));
    }
    cluster.shutdown().await;
}
