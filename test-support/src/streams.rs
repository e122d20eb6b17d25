//! Clusters for the client streams' tests: real meta and datanodes with small
//! cells and blocks, so that objects of a few hundred KiB span many stripes
//! and groups, a client, the tests' bucket, and optionally a stalling proxy
//! in front of each datanode or a Unix socket per datanode.

use crate::cluster::{write_key, TestCluster, TestClusterConfig};
use crate::proxy::StallProxy;
use block_client::{ClientConfig, KeyWriter, StoreClient};
use bytes::Bytes;
use meta_api::ObjectRecord;
use proto::{DatanodeId, EcLayout, ReplicationConfig};
use std::ops::{Deref, DerefMut};
use std::time::Duration;
use tokio::net::TcpListener;

/// Cell size of the tests' EC layouts.
pub const CELL: u32 = 16 * 1024;
/// Bytes per CRC of the tests' block files.
pub const BYTES_PER_CHECKSUM: u32 = 4 * 1024;
/// Four cells per block file.
pub const BLOCK_SIZE: u64 = 4 * CELL as u64;
/// The tests' bucket.
pub const BUCKET: &str = "streams";

/// rs-`data`-`parity` with [`CELL`]-byte cells.
pub fn rs(data: u8, parity: u8) -> ReplicationConfig {
    ReplicationConfig::Ec(EcLayout {
        data,
        parity,
        cell_size: CELL,
    })
}

/// Client settings of the tests: [`BLOCK_SIZE`] blocks, small checksums,
/// short timeouts.
pub fn client_config() -> ClientConfig {
    ClientConfig {
        block_size: BLOCK_SIZE,
        bytes_per_checksum: BYTES_PER_CHECKSUM,
        connect_timeout: Duration::from_secs(2),
        io_timeout: Duration::from_secs(10),
        ..ClientConfig::default()
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

/// How a [`StreamCluster`] is set up besides its size.
#[derive(Default)]
struct Setup {
    /// Each datanode behind a [`StallProxy`].
    proxied: bool,
    /// Each datanode with a short-circuit socket.
    local_sockets: bool,
    /// Meta with no deletion delay.
    release_at_once: bool,
}

/// A test cluster, one client of it and the tests' bucket.
pub struct StreamCluster {
    /// Meta and the datanodes.
    pub cluster: TestCluster,
    /// A client with [`client_config`] (as tuned at start).
    pub client: StoreClient,
    /// Block size of meta and the client.
    pub block_size: u64,
    /// Per datanode, when it sits behind a proxy: the proxy.
    proxies: Vec<Option<StallProxy>>,
}

impl Deref for StreamCluster {
    type Target = TestCluster;
    fn deref(&self) -> &TestCluster {
        &self.cluster
    }
}

impl DerefMut for StreamCluster {
    fn deref_mut(&mut self) -> &mut TestCluster {
        &mut self.cluster
    }
}

impl StreamCluster {
    /// `count` datanodes with [`BLOCK_SIZE`] blocks.
    pub async fn start(count: usize) -> Self {
        Self::start_with(count, BLOCK_SIZE, |_| {}, Setup::default()).await
    }

    /// Like [`start`](Self::start), with meta handing released blocks to
    /// their datanodes at once (no deletion delay).
    pub async fn start_releasing_at_once(count: usize) -> Self {
        let setup = Setup {
            release_at_once: true,
            ..Setup::default()
        };
        Self::start_with(count, BLOCK_SIZE, |_| {}, setup).await
    }

    /// `count` datanodes, blocks of `block_size` bytes, and `tune` applied to
    /// the client's settings.
    pub async fn start_tuned(
        count: usize,
        block_size: u64,
        tune: impl FnOnce(&mut ClientConfig),
    ) -> Self {
        Self::start_with(count, block_size, tune, Setup::default()).await
    }

    /// Like [`start_tuned`](Self::start_tuned), with every datanode advertised
    /// behind a proxy that [`stall`](Self::stall) can freeze.
    pub async fn start_proxied(
        count: usize,
        block_size: u64,
        tune: impl FnOnce(&mut ClientConfig),
    ) -> Self {
        let setup = Setup {
            proxied: true,
            ..Setup::default()
        };
        Self::start_with(count, block_size, tune, setup).await
    }

    /// `count` datanodes with [`BLOCK_SIZE`] blocks, each with a Unix socket
    /// for short-circuit reads.
    pub async fn start_with_local_sockets(count: usize) -> Self {
        let setup = Setup {
            local_sockets: true,
            ..Setup::default()
        };
        Self::start_with(count, BLOCK_SIZE, |_| {}, setup).await
    }

    async fn start_with(
        count: usize,
        block_size: u64,
        tune: impl FnOnce(&mut ClientConfig),
        setup: Setup,
    ) -> Self {
        let mut listeners = Vec::new();
        if setup.proxied {
            for _ in 0..count {
                listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
            }
        }
        let advertised: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect();
        let mut config = TestClusterConfig::new(block_size, BYTES_PER_CHECKSUM)
            .each_datanode(move |i, datanode| datanode.advertise = advertised.get(i).cloned());
        if setup.local_sockets {
            config = config.with_local_sockets();
        }
        if setup.release_at_once {
            config = config.meta(|meta| meta.deletion_delay = Duration::ZERO);
        }
        let cluster = TestCluster::start(count, config).await;
        let mut proxies: Vec<Option<StallProxy>> = (0..count).map(|_| None).collect();
        for (i, listener) in listeners.into_iter().enumerate() {
            let target = cluster.datanode(i).addr().to_string();
            proxies[i] = Some(StallProxy::start_on(listener, &target));
        }
        let mut client_config = ClientConfig {
            block_size,
            ..client_config()
        };
        tune(&mut client_config);
        let client = cluster.client(client_config);
        cluster.create_bucket(BUCKET).await;
        Self {
            cluster,
            client,
            block_size,
            proxies,
        }
    }

    /// Freezes datanode `i`'s proxy: requests reach it no more and no reply
    /// comes back, while its connections stay open (a stalled datanode).
    pub fn stall(&self, i: usize) -> DatanodeId {
        self.proxies[i]
            .as_ref()
            .expect("datanode not behind a proxy")
            .stall();
        self.datanode(i).id().clone()
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

    /// Writes `data` with this cluster's client in `piece`-sized writes and
    /// commits it as `key`; returns the record as meta serves it.
    pub async fn put(
        &self,
        key: &str,
        replication: ReplicationConfig,
        data: &[u8],
        piece: usize,
    ) -> ObjectRecord {
        self.put_with(&self.client, key, replication, data, piece)
            .await
    }

    /// [`put`](Self::put) with another client.
    pub async fn put_with(
        &self,
        client: &StoreClient,
        key: &str,
        replication: ReplicationConfig,
        data: &[u8],
        piece: usize,
    ) -> ObjectRecord {
        let written = write_key(client, replication, data, piece).await;
        assert_eq!(written.replication, replication);
        let group_sum: u64 = written.groups.iter().map(|g| g.length).sum();
        assert_eq!(group_sum, data.len() as u64, "{key}: group lengths");
        self.cluster.commit(BUCKET, key, written).await
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
