//! Short-circuit reads under the object reader: a real metadata service and
//! five real datanodes on 127.0.0.1:0, each serving a Unix socket in a short
//! temporary folder. Objects read through `KeyReader` come back identical
//! whether their blocks are read from local files or over TCP, and a block
//! file corrupted on disk is still repaired (EC rebuild, next replica).

use block_client::{ClientConfig, StoreClient};
use datanode::RunningDatanode;
use meta_api::ObjectRecord;
use proto::ReplicationConfig;
use rand::{Rng, SeedableRng};
use std::os::unix::fs::FileExt;
use test_support::data::random_bytes;
use test_support::streams::{client_config, rs, StreamCluster, BLOCK_SIZE, CELL};

/// The tests' cluster with a Unix socket per datanode, and two clients:
/// one reading block files locally, one over TCP only.
struct Cluster {
    cluster: StreamCluster,
    local: StoreClient,
    tcp: StoreClient,
}

impl Cluster {
    async fn start(count: usize) -> Self {
        let cluster = StreamCluster::start_with_local_sockets(count).await;
        let client = |short_circuit| {
            cluster.client(ClientConfig {
                short_circuit,
                ..client_config()
            })
        };
        Self {
            local: client(true),
            tcp: client(false),
            cluster,
        }
    }

    async fn put(&self, key: &str, replication: ReplicationConfig, data: &[u8]) -> ObjectRecord {
        self.cluster
            .put_with(&self.tcp, key, replication, data, 50_000)
            .await
    }

    fn datanode_at(&self, addr: &str) -> &RunningDatanode {
        self.cluster.datanode(self.cluster.datanode_at(addr))
    }
}

/// Reads the whole object and random ranges through both clients and
/// compares each with `data`.
async fn check_reads(cluster: &Cluster, record: &ObjectRecord, data: &[u8], seed: u64) {
    let local = cluster.local.reader(record);
    let tcp = cluster.tcp.reader(record);
    let size = data.len();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut ranges = vec![(0, size), (size - 1, 1), (size / 2, size)];
    for _ in 0..30 {
        ranges.push((rng.gen_range(0..size), rng.gen_range(1..=3 * CELL as usize)));
    }
    for (offset, len) in ranges {
        let end = (offset + len).min(size);
        let got = local.read_at(offset as u64, len).await.unwrap();
        assert!(
            got[..] == data[offset..end],
            "{}: {offset}+{len}",
            record.key
        );
        let over_tcp = tcp.read_at(offset as u64, len).await.unwrap();
        assert!(got == over_tcp, "{}: {offset}+{len}", record.key);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_read_the_same_through_local_files_and_tcp() {
    let cluster = Cluster::start(5).await;
    let size = 2 * rs(3, 2).group_capacity(BLOCK_SIZE) as usize + 1000;
    for (i, replication) in [rs(3, 2), ReplicationConfig::REPLICATED_3]
        .into_iter()
        .enumerate()
    {
        let data = random_bytes(size, i as u64);
        let record = cluster.put(&format!("same/{i}"), replication, &data).await;
        check_reads(&cluster, &record, &data, 10 + i as u64).await;
    }
    let stats = cluster.local.pool().short_circuit_stats().unwrap();
    assert!(stats.reads > 0, "{stats:?}");
    assert_eq!(stats.fallbacks, 0, "{stats:?}");
    assert!(stats.cached_replicas > 0, "{stats:?}");
    assert!(cluster.tcp.pool().short_circuit_stats().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_local_block_file_is_repaired_like_over_tcp() {
    let cluster = Cluster::start(5).await;
    let size = rs(3, 2).group_capacity(BLOCK_SIZE) as usize;
    for (i, replication) in [rs(3, 2), ReplicationConfig::REPLICATED_3]
        .into_iter()
        .enumerate()
    {
        let data = random_bytes(size, 100 + i as u64);
        let record = cluster.put(&format!("bad/{i}"), replication, &data).await;
        // Cache every replica first, so the corruption lands under open descriptors.
        check_reads(&cluster, &record, &data, 1).await;
        let before = cluster.local.pool().short_circuit_stats().unwrap();
        let (key, replica) = record.groups[0]
            .block_keys()
            .find(|(k, _)| k.index == if i == 0 { 1 } else { 0 })
            .unwrap();
        let (path, base) = cluster
            .datanode_at(&replica.addr)
            .store()
            .stored_at(key)
            .unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, base + 100).unwrap();
        file.write_all_at(&[byte[0] ^ 0x5a], base + 100).unwrap();
        check_reads(&cluster, &record, &data, 2).await;
        let after = cluster.local.pool().short_circuit_stats().unwrap();
        assert!(after.fallbacks > before.fallbacks, "{before:?} {after:?}");
    }
}
