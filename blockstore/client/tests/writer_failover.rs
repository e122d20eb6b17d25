//! Failover mid-write against real datanodes: a datanode stopped while a key
//! is being written (after some stripes or pieces were sent) makes the writer
//! seal the open group at its last complete unit and carry on in a new group
//! placed without that datanode; the PUT succeeds and reads back whole.

use meta_api::{AllocateBlock, BlockGroup, DiscardBlocks};
use proto::{DatanodeId, ReplicationConfig};
use std::time::Duration;
use test_support::data::random_bytes;
use test_support::streams::{rs, StreamCluster as Cluster, BUCKET, CELL};

/// How the datanode of the open group fails.
#[derive(Clone, Copy)]
enum Fault {
    /// Shut down: connections refused from then on.
    Stop,
    /// Still connected, but silent past the I/O deadline.
    Stall,
}

/// Writes `head`, waits until it is on the datanodes, makes a datanode of the
/// open group fail, writes `tail`, and checks where the groups went.
async fn write_through_a_failure(
    cluster: &mut Cluster,
    fault: Fault,
    replication: ReplicationConfig,
    head: usize,
    tail: usize,
    piece: usize,
) {
    let data = random_bytes(head + tail, head as u64);
    let mut writer = cluster.client.writer(replication);
    Cluster::feed(&mut writer, &data[..head], piece).await;
    writer.flush().await.unwrap();
    // Every group allocated from here on comes after this block id.
    let allocate = AllocateBlock {
        config: replication,
        exclude: vec![],
    };
    let marker = cluster.meta.call(allocate).await.unwrap();
    let discard = DiscardBlocks {
        groups: vec![marker.clone()],
    };
    cluster.meta.call(discard).await.unwrap();
    let victim = cluster.datanode_with_open_upload();
    let dead: DatanodeId = match fault {
        Fault::Stop => cluster.stop(victim).await,
        Fault::Stall => cluster.stall(victim),
    };

    Cluster::feed(&mut writer, &data[head..], piece).await;
    let written = writer.finish().await.unwrap();
    assert_eq!(written.size, data.len() as u64);
    let capacity = replication.group_capacity(cluster.block_size);
    let on_dead = |g: &BlockGroup| g.replicas.iter().any(|r| r.datanode == dead);
    let later: Vec<&BlockGroup> = written
        .groups
        .iter()
        .filter(|g| g.block.0 > marker.block.0)
        .collect();
    assert!(
        !later.is_empty(),
        "no group was allocated after the failure"
    );
    assert!(
        later.iter().all(|g| !on_dead(g)),
        "a new group was placed on the stopped datanode"
    );
    let (last, sealed) = written.groups.split_last().unwrap();
    assert!(last.length <= capacity);
    assert!(
        sealed.iter().any(|g| g.length < capacity && g.length > 0),
        "no group was sealed early: {:?}",
        written.groups.iter().map(|g| g.length).collect::<Vec<_>>()
    );
    assert!(
        written.groups.iter().all(|g| g.length > 0),
        "empty group kept"
    );
    let record = cluster
        .commit(BUCKET, &format!("failover/{replication}"), written)
        .await;
    cluster.check_reads(&record, &data).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec_write_survives_a_datanode_stopped_mid_write() {
    // Seven datanodes: a new rs-3-2 group still finds five without the stopped one.
    let mut cluster = Cluster::start_tuned(7, 8 * CELL as u64, |_| {}).await;
    // 21 full stripes before the failure: the third group holds 5 of its 8.
    let stripe = 3 * CELL as usize;
    write_through_a_failure(
        &mut cluster,
        Fault::Stop,
        rs(3, 2),
        21 * stripe + 100,
        40 * stripe + 777,
        50_000,
    )
    .await;
    let stats = cluster.client.buffer_pool().stats();
    assert_eq!(stats.in_use_bytes, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_write_survives_a_datanode_stopped_mid_write() {
    let mut cluster = Cluster::start_tuned(5, 4 << 20, |_| {}).await;
    // 1 MiB pieces, four to a group: the first group holds two at the failure.
    write_through_a_failure(
        &mut cluster,
        Fault::Stop,
        ReplicationConfig::REPLICATED_3,
        (5 << 19) + 10,
        (10 << 20) + 12_345,
        300_000,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec_write_moves_on_from_a_datanode_stalled_past_the_deadline() {
    let mut cluster = Cluster::start_proxied(7, 8 * CELL as u64, |c| {
        c.io_timeout = Duration::from_secs(1);
    })
    .await;
    let stripe = 3 * CELL as usize;
    write_through_a_failure(
        &mut cluster,
        Fault::Stall,
        rs(3, 2),
        13 * stripe + 5,
        20 * stripe + 9,
        50_000,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_write_moves_on_from_a_datanode_stalled_past_the_deadline() {
    let mut cluster = Cluster::start_proxied(5, 4 << 20, |c| {
        c.io_timeout = Duration::from_secs(1);
    })
    .await;
    write_through_a_failure(
        &mut cluster,
        Fault::Stall,
        ReplicationConfig::REPLICATED_3,
        (3 << 20) + 10,
        (3 << 20) + 7,
        300_000,
    )
    .await;
}
