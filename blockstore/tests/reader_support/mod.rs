//! Fixtures of the reader tests: a meta service and datanodes on
//! 127.0.0.1:0, and a TCP proxy that can stop forwarding, to stall one
//! datanode by real means.

#![allow(dead_code)]

use blockstore::client::{ClientConfig, StoreClient};
use blockstore::meta::ObjectRecord;
use blockstore::{EcLayout, ReplicationConfig};
use datanode::testing::{write_key, TestCluster, TestClusterConfig};
use rand::{Rng, SeedableRng};
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub const CELL: u32 = 16 * 1024;
pub const BYTES_PER_CHECKSUM: u32 = 4 * 1024;
/// Four cells per block file, so objects of a few hundred KiB span several groups.
pub const BLOCK_SIZE: u64 = 4 * CELL as u64;
pub const BUCKET: &str = "readers";

pub fn rs(data: u8, parity: u8) -> ReplicationConfig {
    ReplicationConfig::Ec(EcLayout {
        data,
        parity,
        cell_size: CELL,
    })
}

/// Client settings of the tests: small blocks and checksums, generous
/// timeouts; each test sets the read deadline it needs.
pub fn client_config(read_deadline: Duration) -> ClientConfig {
    ClientConfig {
        block_size: BLOCK_SIZE,
        bytes_per_checksum: BYTES_PER_CHECKSUM,
        connect_timeout: Duration::from_secs(5),
        io_timeout: Duration::from_secs(600),
        read_deadline,
        suspect_ttl: Duration::from_secs(3600),
        ..ClientConfig::default()
    }
}

/// The shared test cluster with the tests' bucket.
pub struct Cluster(TestCluster);

impl Deref for Cluster {
    type Target = TestCluster;
    fn deref(&self) -> &TestCluster {
        &self.0
    }
}

impl Cluster {
    pub async fn start(count: usize) -> Self {
        let config = TestClusterConfig::new(BLOCK_SIZE, BYTES_PER_CHECKSUM);
        let cluster = TestCluster::start(count, config).await;
        cluster.create_bucket(BUCKET).await;
        Self(cluster)
    }

    /// Writes `data` with `client` and commits it as `key`; returns the
    /// record as meta serves it.
    pub async fn put(
        &self,
        client: &StoreClient,
        key: &str,
        replication: ReplicationConfig,
        data: &[u8],
    ) -> ObjectRecord {
        let written = write_key(client, replication, data, 50_000).await;
        self.0.commit(BUCKET, key, written).await
    }
}

/// `record` with every replica at `from` redirected to `to`.
pub fn redirect(record: &ObjectRecord, from: &str, to: &str) -> ObjectRecord {
    let mut out = record.clone();
    for group in &mut out.groups {
        for replica in &mut group.replicas {
            if replica.addr == from {
                replica.addr = to.to_string();
            }
        }
    }
    out
}

pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

/// Waits (polling) until `condition` holds; panics with `what` if it never does.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// A TCP proxy in front of one datanode that can stop forwarding (both
/// ways) and counts the bytes clients sent through it.
pub struct StallProxy {
    addr: String,
    stalled: watch::Sender<bool>,
    /// Bytes received from clients (forwarded or held).
    received: Arc<AtomicU64>,
    /// Bytes passed on to the datanode.
    forwarded: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl StallProxy {
    pub async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stalled, _) = watch::channel(false);
        let received = Arc::new(AtomicU64::new(0));
        let forwarded = Arc::new(AtomicU64::new(0));
        let target = target.to_string();
        let accept = {
            let stalled = stalled.clone();
            let (received, forwarded) = (received.clone(), forwarded.clone());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&target).await else {
                        continue;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::spawn(pump(
                        client_read,
                        server_write,
                        stalled.subscribe(),
                        Some((received.clone(), forwarded.clone())),
                    ));
                    tokio::spawn(pump(server_read, client_write, stalled.subscribe(), None));
                }
            })
        };
        Self {
            addr,
            stalled,
            received,
            forwarded,
            accept,
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Stops forwarding: bytes are read and held.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again, held bytes first.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }

    pub fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.stalled.send_replace(false);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
    counters: Option<(Arc<AtomicU64>, Arc<AtomicU64>)>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((received, _)) = &counters {
            received.fetch_add(n as u64, Ordering::SeqCst);
        }
        if stalled.wait_for(|s| !*s).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        if let Some((_, forwarded)) = &counters {
            forwarded.fetch_add(n as u64, Ordering::SeqCst);
        }
    }
    let _ = to.shutdown().await;
}
