//! The client streams against a real metadata service and real datanodes on
//! 127.0.0.1:0: round trips for every replication config at the sizes around
//! cell, stripe and group boundaries, then faults by real means (datanodes
//! shut down, a byte flipped in a block file on disk).

use block_client::{ClientError, StoreClient};
use bytes::Bytes;
use meta_api::ObjectRecord;
use proto::ReplicationConfig;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;
use test_support::data::random_bytes;
use test_support::streams::{client_config, rs, StreamCluster as Cluster, BLOCK_SIZE, CELL};

/// Sizes around cell, stripe and group boundaries for `replication`.
fn sizes(replication: ReplicationConfig) -> Vec<usize> {
    let cell = CELL as usize;
    let stripe = match replication {
        ReplicationConfig::Ec(l) => l.stripe_width() as usize,
        ReplicationConfig::Replicated { .. } => cell,
    };
    let group = replication.group_capacity(BLOCK_SIZE) as usize;
    vec![
        0,
        1,
        cell - 1,
        cell,
        cell + 1,
        stripe + 1,
        group,
        2 * group + stripe + cell / 2 + 3,
    ]
}

/// Reads the whole object, edge ranges and random ranges, and compares each
/// with `data`.
async fn check_reads(client: &StoreClient, record: &ObjectRecord, data: &[u8], seed: u64) {
    let reader = client.reader(record);
    assert_eq!(reader.len(), data.len() as u64);
    let size = data.len();
    let whole = reader.read_at(0, size + 10).await.unwrap();
    assert!(
        whole[..] == data[..],
        "{}: whole object differs",
        record.key
    );
    assert!(reader.read_at(size as u64, 10).await.unwrap().is_empty());
    assert!(reader
        .read_at(size as u64 + 100, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(reader.read_at(0, 0).await.unwrap().is_empty());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut ranges = vec![(size.saturating_sub(1), 1), (size / 2, size)];
    for _ in 0..24 {
        let offset = rng.gen_range(0..=size);
        let len = if rng.gen_bool(0.5) {
            rng.gen_range(0..=2 * CELL as usize)
        } else {
            rng.gen_range(0..=size + 1)
        };
        ranges.push((offset, len));
    }
    for (offset, len) in ranges {
        let got = reader.read_at(offset as u64, len).await.unwrap();
        let end = (offset + len).min(size);
        let want = &data[offset.min(size)..end];
        assert!(
            got[..] == want[..],
            "{}: range {offset}+{len} differs",
            record.key
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_every_replication_at_boundary_sizes() {
    let cluster = Cluster::start(9).await;
    let configs = [
        rs(3, 2),
        rs(6, 3),
        ReplicationConfig::REPLICATED_3,
        ReplicationConfig::REPLICATED_1,
    ];
    let mut seed = 0;
    for replication in configs {
        for size in sizes(replication) {
            seed += 1;
            let data = random_bytes(size, seed);
            // Odd write sizes cross cell edges inside one write; one big write too.
            for piece in [7_777, size] {
                let key = format!("{replication}/{size}/{piece}");
                let record = cluster.put(&key, replication, &data, piece).await;
                check_reads(&cluster.client, &record, &data, seed).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_object_has_no_groups() {
    let cluster = Cluster::start(5).await;
    let written = cluster.client.writer(rs(3, 2)).finish().await.unwrap();
    assert_eq!(written.size, 0);
    assert!(written.groups.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec_reads_survive_up_to_parity_lost_datanodes() {
    let mut cluster = Cluster::start(5).await;
    let mut objects = Vec::new();
    let ec = rs(3, 2);
    for (i, size) in sizes(ec).into_iter().enumerate() {
        let data = random_bytes(size, 100 + i as u64);
        let record = cluster.put(&format!("ec/{size}"), ec, &data, 10_000).await;
        objects.push((record, data));
    }
    let size = 3 * BLOCK_SIZE as usize + 5;
    let data = random_bytes(size, 200);
    let record = cluster
        .put("replicated", ReplicationConfig::REPLICATED_3, &data, 10_000)
        .await;
    objects.push((record, data));

    for stop in [0, 1] {
        cluster.stop(stop).await;
        for (seed, (record, data)) in objects.iter().enumerate() {
            check_reads(&cluster.client, record, data, seed as u64).await;
        }
    }

    // With p + 1 datanodes gone, a stripe of a multi-group object has only 2 of
    // the 3 cells it needs.
    cluster.stop(2).await;
    let (record, data) = objects
        .iter()
        .find(|(r, _)| r.groups.len() > 1 && r.replication == ec)
        .unwrap();
    let err = cluster
        .client
        .reader(record)
        .read_at(0, data.len())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Unavailable(_)), "{err:?}");
}

/// A stopped datanode restarted over its folder serves its blocks again:
/// an object with its only replica there is unreadable, then readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_datanode_serves_its_blocks_again() {
    let mut cluster = Cluster::start(3).await;
    let data = random_bytes(100_000, 600);
    let record = cluster
        .put("single", ReplicationConfig::REPLICATED_1, &data, 30_000)
        .await;
    let holder = cluster.datanode_at(&record.groups[0].replicas[0].addr);
    cluster.stop(holder).await;
    let err = cluster
        .client
        .reader(&record)
        .read_at(0, data.len())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Unavailable(_)), "{err:?}");
    cluster.restart(holder).await;
    cluster.wait_healthy(3).await;
    // A new client: the first one remembers the datanode as suspect.
    let client = cluster.cluster.client(client_config());
    check_reads(&client, &record, &data, 600).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_repair_a_corrupt_block_file() {
    let cluster = Cluster::start(5).await;
    let size = 2 * rs(3, 2).group_capacity(BLOCK_SIZE) as usize + 1000;
    for (i, replication) in [rs(3, 2), ReplicationConfig::REPLICATED_3]
        .into_iter()
        .enumerate()
    {
        let data = random_bytes(size, 300 + i as u64);
        let record = cluster
            .put(&format!("corrupt/{i}"), replication, &data, 50_000)
            .await;
        // Internal block 1 (EC) or the first replica of the first group.
        let group = &record.groups[0];
        let (key, replica) = group
            .block_keys()
            .find(|(k, _)| k.index == if i == 0 { 1 } else { 0 })
            .unwrap();
        let holder = cluster.datanode_at(&replica.addr);
        let at = cluster.stored_block(holder, key).unwrap().len() as u64 / 2;
        cluster.flip_block_byte(holder, key, at, 0x5a);
        check_reads(&cluster.client, &record, &data, 7).await;
    }
}

/// Block files committed on the datanodes, all together.
fn committed_blocks(cluster: &Cluster) -> u64 {
    (0..cluster.datanodes.len())
        .map(|i| cluster.datanode(i).store().stats().blocks)
        .sum()
}

/// Every file under the `sub` folder of each datanode's data folder.
fn files_under(cluster: &Cluster, sub: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs: Vec<PathBuf> = (0..cluster.datanodes.len())
        .map(|i| cluster.datanode_dir(i).join(sub))
        .filter(|d| d.is_dir())
        .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_deletes_written_blocks() {
    let cluster = Cluster::start_releasing_at_once(5).await;
    for replication in [rs(3, 2), ReplicationConfig::REPLICATED_3] {
        let mut writer = cluster.client.writer(replication);
        // Two sealed groups, then a third still being written.
        let size = 2 * replication.group_capacity(BLOCK_SIZE) as usize + 3 * CELL as usize;
        writer
            .write(Bytes::from(random_bytes(size, 400)))
            .await
            .unwrap();
        // `write` only queues whole stripes for the flush task; wait until
        // they are on the datanodes.
        writer.flush().await.unwrap();
        assert!(committed_blocks(&cluster) > 0);
        writer.abort().await;
        // The writer's token drops the uploads still open (as each datanode
        // sees the discard); meta has the committed groups deleted by their
        // datanodes' next heartbeats.
        test_support::data::eventually("the open uploads are dropped", || {
            files_under(&cluster, "tmp").is_empty()
        })
        .await;
        test_support::data::eventually("meta deletes the sealed groups", || {
            committed_blocks(&cluster) == 0
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reads_share_one_reader() {
    let cluster = Cluster::start(5).await;
    let size = 3 * rs(3, 2).group_capacity(BLOCK_SIZE) as usize + 17;
    let data = Arc::new(random_bytes(size, 500));
    let record = cluster.put("shared", rs(3, 2), &data, size).await;
    let reader = Arc::new(cluster.client.reader(&record));
    let reads = (0..32u64).map(|i| {
        let (reader, data) = (reader.clone(), data.clone());
        tokio::spawn(async move {
            let offset = (i * 9_973) as usize % size;
            let len = 3 * CELL as usize + i as usize;
            let got = reader.read_at(offset as u64, len).await.unwrap();
            assert!(got[..] == data[offset..(offset + len).min(size)]);
        })
    });
    for read in futures::future::join_all(reads).await {
        read.unwrap();
    }
}
