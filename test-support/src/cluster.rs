//! A real cluster for integration tests: a metadata service in process and
//! datanodes on 127.0.0.1:0 over a temporary folder, with stop and restart of
//! one datanode, and the write-then-commit step most tests start with. One
//! copy, so that every test file starts its cluster the same way.

use crate::meta::TEST_GATEWAY;
use block_client::{ClientConfig, StoreClient, WrittenKey};
use bytes::Bytes;
use datanode::{DatanodeConfig, RunningDatanode};
use meta::{MetaConfig, MetaService};
use meta_api::{
    CommitObject, CreateBucket, DatanodeState, GetClusterStatus, GetObject, MetaClient,
    ObjectRecord, Principal,
};
use proto::{BlockKey, DatanodeId, ReplicationConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// Changes meta's settings before it opens.
type MetaTweak = Box<dyn FnOnce(&mut MetaConfig) + Send>;
/// Changes the settings of datanode `i` before it starts.
type DatanodeTweak = Box<dyn Fn(usize, &mut DatanodeConfig) + Send + Sync>;

/// How a [`TestCluster`] is set up.
pub struct TestClusterConfig {
    /// Meta's block size.
    pub block_size: u64,
    /// Every datanode's settings; `data_dir` (and `local_socket` with
    /// [`TestClusterConfig::local_sockets`]) are set per datanode.
    pub datanode: DatanodeConfig,
    /// Gives each datanode a Unix socket for short-circuit reads; the
    /// cluster's folder is then short (socket paths are limited to 107 bytes).
    pub local_sockets: bool,
    meta_tweak: Option<MetaTweak>,
    datanode_tweak: Option<DatanodeTweak>,
}

impl TestClusterConfig {
    /// Blocks of `block_size` bytes, CRCs over `bytes_per_checksum`, no
    /// fsync, heartbeats every 100 ms.
    pub fn new(block_size: u64, bytes_per_checksum: u32) -> Self {
        Self {
            block_size,
            datanode: DatanodeConfig {
                listen: "127.0.0.1:0".into(),
                bytes_per_checksum,
                fsync: false,
                heartbeat_interval: Duration::from_millis(100),
                ..DatanodeConfig::default()
            },
            local_sockets: false,
            meta_tweak: None,
            datanode_tweak: None,
        }
    }

    /// Changes meta's settings (after `data_dir` and `block_size` are set).
    pub fn meta(mut self, tweak: impl FnOnce(&mut MetaConfig) + Send + 'static) -> Self {
        self.meta_tweak = Some(Box::new(tweak));
        self
    }

    /// Changes the settings of datanode `i` (after the shared ones are set).
    pub fn each_datanode(
        mut self,
        tweak: impl Fn(usize, &mut DatanodeConfig) + Send + Sync + 'static,
    ) -> Self {
        self.datanode_tweak = Some(Box::new(tweak));
        self
    }

    /// See [`TestClusterConfig::local_sockets`].
    pub fn with_local_sockets(mut self) -> Self {
        self.local_sockets = true;
        self
    }
}

/// Meta and datanodes running in this process over one temporary folder.
pub struct TestCluster {
    /// Holds meta's and every datanode's files.
    pub dir: TempDir,
    /// The metadata service.
    pub service: Arc<MetaService>,
    /// A client of `service`, in process, with the cluster role: what the
    /// datanodes, the block client and a gateway get.
    pub meta: MetaClient,
    /// A client of `service` with the admin role, for `tessera admin`'s requests.
    pub admin: MetaClient,
    /// The datanodes by index; None while stopped.
    pub datanodes: Vec<Option<RunningDatanode>>,
    configs: Vec<DatanodeConfig>,
    /// The shared datanode settings and tweak, for datanodes added later.
    datanode_template: DatanodeConfig,
    datanode_tweak: Option<DatanodeTweak>,
}

/// Datanode `config`'s client of meta, acting as that datanode.
fn datanode_client(service: &Arc<MetaService>, config: &DatanodeConfig) -> MetaClient {
    let id = config
        .identity
        .clone()
        .expect("test datanodes get their id up front");
    service.client(Principal::Datanode(id))
}

/// The settings of datanode `i` of a cluster in `dir`.
fn datanode_config(
    template: &DatanodeConfig,
    tweak: Option<&DatanodeTweak>,
    dir: &std::path::Path,
    i: usize,
    local_socket: bool,
) -> DatanodeConfig {
    let mut dn = template.clone();
    dn.data_dirs = vec![dir.join(format!("dn{i}"))];
    if local_socket {
        dn.local_socket = Some(dir.join(format!("dn{i}.sock")));
    }
    dn.identity = Some(DatanodeId(uuid::Uuid::new_v4().to_string()));
    if let Some(tweak) = tweak {
        tweak(i, &mut dn);
    }
    dn
}

impl TestCluster {
    /// Starts meta and `count` datanodes and waits until all are healthy.
    pub async fn start(count: usize, config: TestClusterConfig) -> Self {
        let dir = if config.local_sockets {
            tempfile::Builder::new()
                .prefix("tc")
                .tempdir_in("/tmp")
                .unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let mut meta_config = MetaConfig::new(dir.path().join("meta"));
        meta_config.block_size = config.block_size;
        if let Some(tweak) = config.meta_tweak {
            tweak(&mut meta_config);
        }
        let service = MetaService::open(meta_config).unwrap();
        let meta = service.client(Principal::Gateway(TEST_GATEWAY.into()));
        let admin = service.client(Principal::Admin);
        let mut template = config.datanode.clone();
        if !config.local_sockets {
            template.local_socket = None;
        }
        let configs: Vec<DatanodeConfig> = (0..count)
            .map(|i| {
                datanode_config(
                    &template,
                    config.datanode_tweak.as_ref(),
                    dir.path(),
                    i,
                    config.local_sockets,
                )
            })
            .collect();
        let mut datanodes = Vec::new();
        for dn in &configs {
            let meta = datanode_client(&service, dn);
            datanodes.push(Some(datanode::start(dn.clone(), meta).await.unwrap()));
        }
        let cluster = Self {
            dir,
            service,
            meta,
            admin,
            datanodes,
            configs,
            datanode_template: template,
            datanode_tweak: config.datanode_tweak,
        };
        cluster.wait_healthy(count).await;
        cluster
    }

    /// Starts one more datanode, with a fresh folder and identity; answers its index.
    pub async fn add_datanode(&mut self) -> usize {
        let i = self.configs.len();
        let local_sockets = self.configs.iter().any(|c| c.local_socket.is_some());
        let config = datanode_config(
            &self.datanode_template,
            self.datanode_tweak.as_ref(),
            self.dir.path(),
            i,
            local_sockets,
        );
        let meta = datanode_client(&self.service, &config);
        self.datanodes
            .push(Some(datanode::start(config.clone(), meta).await.unwrap()));
        self.configs.push(config);
        i
    }

    /// A store client of this cluster.
    pub fn client(&self, config: ClientConfig) -> StoreClient {
        StoreClient::new(self.meta.clone(), config)
    }

    /// Datanode `i`'s (first) data folder.
    pub fn datanode_dir(&self, i: usize) -> PathBuf {
        self.configs[i].data_dirs[0].clone()
    }

    /// Running datanode `i`.
    pub fn datanode(&self, i: usize) -> &RunningDatanode {
        self.datanodes[i].as_ref().expect("datanode stopped")
    }

    /// Index of the running datanode serving `addr`.
    pub fn datanode_at(&self, addr: &str) -> usize {
        self.datanodes
            .iter()
            .position(|d| d.as_ref().is_some_and(|d| d.addr().to_string() == addr))
            .unwrap_or_else(|| panic!("no running datanode at {addr}"))
    }

    /// Shuts datanode `i` down and returns its identity.
    pub async fn stop(&mut self, i: usize) -> DatanodeId {
        let datanode = self.datanodes[i].take().expect("datanode already stopped");
        let id = datanode.id().clone();
        // A restart listens where it did, so stored replica addresses stay valid.
        self.configs[i].listen = datanode.addr().to_string();
        datanode.shutdown().await;
        id
    }

    /// Starts stopped datanode `i` again over its folder, on its old address.
    pub async fn restart(&mut self, i: usize) -> &RunningDatanode {
        assert!(self.datanodes[i].is_none(), "datanode {i} is running");
        let meta = datanode_client(&self.service, &self.configs[i]);
        let running = datanode::start(self.configs[i].clone(), meta)
            .await
            .unwrap();
        self.datanodes[i].insert(running)
    }

    /// Waits until meta counts at least `count` healthy datanodes.
    pub async fn wait_healthy(&self, count: usize) {
        for _ in 0..400 {
            let status = self.admin.call(GetClusterStatus).await.unwrap();
            let healthy = status
                .datanodes
                .iter()
                .filter(|d| d.state == DatanodeState::Healthy)
                .count();
            if healthy >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{count} datanodes never became healthy");
    }

    /// The bytes of block file `key` as datanode `i` stores them on disk
    /// now (its data file, or its record in a volume); None when it holds
    /// none.
    pub fn stored_block(&self, i: usize, key: BlockKey) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let store = self.datanode(i).store();
        let (path, base) = store.stored_at(key)?;
        let mut bytes = vec![0u8; store.block(key)?.length as usize];
        std::fs::File::open(path)
            .ok()?
            .read_exact_at(&mut bytes, base)
            .ok()?;
        Some(bytes)
    }

    /// Flips the bits `mask` of byte `at` of block file `key` on datanode
    /// `i`, on disk, behind the datanode's back; answers the damaged bytes.
    pub fn flip_block_byte(&self, i: usize, key: BlockKey, at: u64, mask: u8) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let (path, base) = self.datanode(i).store().stored_at(key).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, base + at).unwrap();
        file.write_all_at(&[byte[0] ^ mask], base + at).unwrap();
        self.stored_block(i, key).unwrap()
    }

    /// Creates `bucket`, owned by root.
    pub async fn create_bucket(&self, bucket: &str) {
        let create = CreateBucket {
            object_lock: false,
            name: bucket.into(),
            owner: "root".into(),
            replication: None,
            access: Default::default(),
        };
        self.meta.call(create).await.unwrap();
    }

    /// Commits `written` as `bucket/key` and returns the record as meta
    /// serves it.
    pub async fn commit(&self, bucket: &str, key: &str, written: WrittenKey) -> ObjectRecord {
        let mut record = ObjectRecord::new(
            bucket,
            key,
            "0".repeat(32),
            written.replication,
            written.groups,
        );
        if let Some(body) = written.inline {
            record.size = body.len() as u64;
            record.inline = Some(meta_api::InlineBody(body));
        }
        assert_eq!(record.size, written.size);
        let commit = CommitObject {
            record,
            condition: None,
        };
        self.meta.call(commit).await.unwrap();
        let lookup = GetObject {
            version: None,
            bucket: bucket.into(),
            key: key.into(),
        };
        let visible = self.meta.call(lookup).await.unwrap().expect("committed");
        std::sync::Arc::unwrap_or_clone(visible)
    }

    /// Shuts every running datanode down.
    pub async fn shutdown(self) {
        for datanode in self.datanodes.into_iter().flatten() {
            datanode.shutdown().await;
        }
    }
}

/// Writes `data` with `client` in `piece`-byte writes and finishes the key.
pub async fn write_key(
    client: &StoreClient,
    replication: ReplicationConfig,
    data: &[u8],
    piece: usize,
) -> WrittenKey {
    let mut writer = client.writer(replication);
    for chunk in data.chunks(piece.max(1)) {
        writer.write(Bytes::copy_from_slice(chunk)).await.unwrap();
    }
    let written = writer.finish().await.unwrap();
    assert_eq!(written.size, data.len() as u64);
    written
}
