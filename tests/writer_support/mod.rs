//! A cluster for the key writer's integration tests: a real metadata service
//! and real datanodes on 127.0.0.1:0, and a client with small cells and
//! blocks so that objects of a few MiB span many stripes and groups.

#![allow(dead_code)]

use blockstore::client::{ClientConfig, KeyWriter, StoreClient, WrittenKey};
use blockstore::meta::ObjectRecord;
use blockstore::{DatanodeId, EcLayout, ReplicationConfig};
use bytes::Bytes;
use datanode::testing::{TestCluster, TestClusterConfig};
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub const CELL: u32 = 16 * 1024;
pub const BYTES_PER_CHECKSUM: u32 = 4 * 1024;
pub const BUCKET: &str = "writer";

/// rs-d-p with [`CELL`]-byte cells.
pub fn rs(data: u8, parity: u8) -> ReplicationConfig {
    ReplicationConfig::Ec(EcLayout {
        data,
        parity,
        cell_size: CELL,
    })
}

pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = vec![0u8; len];
    rng.fill(&mut out[..]);
    out
}

/// The shared test cluster (meta and datanodes), a client and the tests' bucket.
pub struct Cluster {
    pub cluster: TestCluster,
    pub client: StoreClient,
    pub block_size: u64,
    /// Per datanode, when it sits behind a proxy: the switch that stalls it.
    pub stalls: Vec<Option<Arc<AtomicBool>>>,
}

impl Deref for Cluster {
    type Target = TestCluster;
    fn deref(&self) -> &TestCluster {
        &self.cluster
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut TestCluster {
        &mut self.cluster
    }
}

impl Cluster {
    /// `count` datanodes, blocks of `block_size` bytes, and `tune` applied to
    /// the client's settings.
    pub async fn start(
        count: usize,
        block_size: u64,
        tune: impl FnOnce(&mut ClientConfig),
    ) -> Self {
        Self::start_with(count, block_size, tune, false).await
    }

    /// Like [`start`](Self::start), with every datanode advertised behind a
    /// TCP proxy that [`stall`](Self::stall) can freeze.
    pub async fn start_proxied(
        count: usize,
        block_size: u64,
        tune: impl FnOnce(&mut ClientConfig),
    ) -> Self {
        Self::start_with(count, block_size, tune, true).await
    }

    async fn start_with(
        count: usize,
        block_size: u64,
        tune: impl FnOnce(&mut ClientConfig),
        proxied: bool,
    ) -> Self {
        let mut proxies = Vec::new();
        if proxied {
            for _ in 0..count {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap().to_string();
                proxies.push((listener, addr));
            }
        }
        let advertised: Vec<String> = proxies.iter().map(|(_, addr)| addr.clone()).collect();
        let config = TestClusterConfig::new(block_size, BYTES_PER_CHECKSUM)
            .each_datanode(move |i, datanode| datanode.advertise = advertised.get(i).cloned());
        let cluster = TestCluster::start(count, config).await;
        let mut stalls: Vec<Option<Arc<AtomicBool>>> = vec![None; count];
        for (i, (listener, _)) in proxies.into_iter().enumerate() {
            stalls[i] = Some(run_proxy(listener, cluster.datanode(i).addr()));
        }
        let mut client_config = ClientConfig {
            block_size,
            bytes_per_checksum: BYTES_PER_CHECKSUM,
            connect_timeout: Duration::from_secs(2),
            io_timeout: Duration::from_secs(10),
            ..ClientConfig::default()
        };
        tune(&mut client_config);
        let client = cluster.client(client_config);
        cluster.create_bucket(BUCKET).await;
        Self {
            cluster,
            client,
            block_size,
            stalls,
        }
    }

    /// Freezes datanode `i`'s proxy: requests reach it no more and no reply
    /// comes back, while its connections stay open (a stalled datanode).
    pub fn stall(&self, i: usize) -> DatanodeId {
        let stall = self.stalls[i]
            .as_ref()
            .expect("datanode not behind a proxy");
        stall.store(true, Ordering::SeqCst);
        self.datanodes[i]
            .as_ref()
            .expect("datanode stopped")
            .id()
            .clone()
    }

    /// A running datanode with a block upload in progress (one of the
    /// targets of a writer's open group).
    pub fn datanode_with_open_upload(&self) -> usize {
        self.datanodes
            .iter()
            .position(|d| d.as_ref().is_some_and(|d| d.store().open_uploads() > 0))
            .expect("no datanode has an upload in progress")
    }

    /// Writes `data` in `piece`-sized writes through `writer`.
    pub async fn feed(writer: &mut KeyWriter, data: &[u8], piece: usize) {
        for chunk in data.chunks(piece.max(1)) {
            writer.write(Bytes::copy_from_slice(chunk)).await.unwrap();
        }
    }

    /// Commits what a writer stored as `key` and returns the visible record.
    pub async fn commit(&self, key: &str, written: WrittenKey) -> ObjectRecord {
        self.cluster.commit(BUCKET, key, written).await
    }

    /// Writes and commits `data` as `key`.
    pub async fn put(
        &self,
        key: &str,
        replication: ReplicationConfig,
        data: &[u8],
        piece: usize,
    ) -> ObjectRecord {
        let mut writer = self.client.writer(replication);
        Self::feed(&mut writer, data, piece).await;
        let written = writer.finish().await.unwrap();
        assert_eq!(written.size, data.len() as u64, "{key}");
        self.commit(key, written).await
    }

    /// Reads the whole object back and compares it with `data`, then a few
    /// ranges across group edges.
    pub async fn check_reads(&self, record: &ObjectRecord, data: &[u8]) {
        let reader = self.client.reader(record);
        assert_eq!(reader.len(), data.len() as u64);
        let whole = reader.read_at(0, data.len() + 7).await.unwrap();
        assert!(
            whole[..] == data[..],
            "{}: whole object differs",
            record.key
        );
        let mut start = 0u64;
        for group in &record.groups {
            for (offset, len) in [
                (start.saturating_sub(5), 10usize),
                (start + group.length / 2, CELL as usize + 3),
            ] {
                let offset = offset.min(data.len() as u64) as usize;
                let got = reader.read_at(offset as u64, len).await.unwrap();
                let end = (offset + len).min(data.len());
                assert!(
                    got[..] == data[offset..end],
                    "{}: range {offset}+{len} differs",
                    record.key
                );
            }
            start += group.length;
        }
    }
}

/// Forwards connections from `listener` to `upstream` until the returned
/// switch is set; from then on bytes are taken in and never passed on.
fn run_proxy(listener: TcpListener, upstream: SocketAddr) -> Arc<AtomicBool> {
    let stalled = Arc::new(AtomicBool::new(false));
    let switch = stalled.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::spawn(pump(client_read, server_write, stalled.clone()));
            tokio::spawn(pump(server_read, client_write, stalled.clone()));
        }
    });
    switch
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    stalled: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stalled.load(Ordering::SeqCst) {
            // Hold both ends open and silent for the rest of the test.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
