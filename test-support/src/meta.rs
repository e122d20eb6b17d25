//! The metadata service under test, in process or behind its RPC server on
//! 127.0.0.1:0, with a clock the test moves, and constructors of the records
//! and reports meta tests start from. [`conformance!`](crate::conformance)
//! runs one test against both transports.

use meta::{Clock, LifecycleSettings, MetaConfig, MetaService};
use meta_api::*;
use proto::token::{BlockToken, Modes};
use proto::{BlockId, BlockKey, DatanodeId, ReplicationConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The time the tests' clock starts at.
pub const T0: UnixMillis = 1_700_000_000_000;
/// Block size of the tests' meta.
pub const BLOCK: u64 = 1024;
/// Capacity of a datanode with room to spare.
pub const ROOMY: u64 = 1 << 40;
/// The tests' admin token.
pub const ADMIN_TOKEN: &str = "admin-secret";
/// The name of the gateway tests act as.
pub const TEST_GATEWAY: &str = "test-gateway";

/// How the test reaches meta.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// In process, through the service's own transport.
    Local,
    /// Over TCP, through the RPC server and [`RemoteMeta`].
    Remote,
}

/// Test settings: stale after 10 s, dead after 30 s, 1 KiB blocks, a fixed
/// admin token, released blocks handed out at once (the grace period has its
/// own tests), a manual clock at [`T0`], and lifecycle passes only when a
/// test runs them.
pub fn config(dir: &Path) -> MetaConfig {
    MetaConfig {
        stale_after: Duration::from_secs(10),
        dead_after: Duration::from_secs(30),
        admin_token: Some(ADMIN_TOKEN.into()),
        block_size: BLOCK,
        deletion_delay: Duration::ZERO,
        clock: Clock::manual(T0),
        lifecycle: LifecycleSettings {
            background: false,
            ..LifecycleSettings::default()
        },
        ..MetaConfig::new(dir)
    }
}

/// A meta service, the folder it lives in, and a client of it with the
/// admin role over the chosen transport.
pub struct MetaUnderTest {
    /// Holds the store and the saved secrets.
    pub dir: TempDir,
    /// The service.
    pub service: Arc<MetaService>,
    /// A client with the admin role (admin requests and cluster requests).
    pub meta: MetaClient,
    /// The service's clock.
    pub clock: Clock,
    /// How `meta` reaches the service.
    pub transport: Transport,
    config: MetaConfig,
    server: Option<RpcServer>,
}

/// Meta's RPC server on a port of 127.0.0.1.
pub struct RpcServer {
    addr: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl RpcServer {
    /// Serves `service` on a fresh port.
    pub async fn start(service: Arc<MetaService>) -> Self {
        Self::start_at(service, "127.0.0.1:0").await
    }

    /// Serves `service` on `bind` (an address a stopped server used, to test
    /// clients across a restart).
    pub async fn start_at(service: Arc<MetaService>, bind: &str) -> Self {
        Self::start_with(service, bind, None).await
    }

    /// Serves `service` on a fresh port over mutual TLS with `tls`.
    pub async fn start_tls(service: Arc<MetaService>, tls: Arc<tls::ClusterTls>) -> Self {
        Self::start_with(service, "127.0.0.1:0", Some(tls)).await
    }

    async fn start_with(
        service: Arc<MetaService>,
        bind: &str,
        tls: Option<Arc<tls::ClusterTls>>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(meta::serve(listener, service, tls, async move {
            let _ = stopped.await;
        }));
        Self { addr, stop, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Stops accepting, lets connections finish their request, and checks
    /// that the server ended cleanly.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let stopped = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        assert!(
            matches!(stopped, Ok(Ok(Ok(())))),
            "meta RPC server did not stop cleanly"
        );
    }
}

impl MetaUnderTest {
    /// A fresh meta with [`config`], reached over `transport`.
    pub async fn open(transport: Transport) -> Self {
        Self::open_with(transport, |_| {}).await
    }

    /// A fresh meta with [`config`] changed by `tweak`.
    pub async fn open_with(transport: Transport, tweak: impl FnOnce(&mut MetaConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        tweak(&mut config);
        Self::start(dir, config, transport).await
    }

    async fn start(dir: TempDir, config: MetaConfig, transport: Transport) -> Self {
        let service = MetaService::open(config.clone()).expect("meta opens");
        let (meta, server) = match transport {
            Transport::Local => (service.client(Principal::Admin), None),
            Transport::Remote => {
                let server = RpcServer::start(service.clone()).await;
                let meta = MetaClient::remote(&server.addr, service.admin_token(), None);
                (meta, Some(server))
            }
        };
        Self {
            dir,
            clock: config.clock.clone(),
            service,
            meta,
            transport,
            config,
            server,
        }
    }

    /// Stops this meta and opens it again over the same folder, settings and
    /// clock (a restart).
    pub async fn reopen(self) -> Self {
        let Self {
            dir,
            service,
            meta,
            transport,
            config,
            server,
            ..
        } = self;
        drop(meta);
        if let Some(server) = server {
            server.stop().await;
        }
        drop(service);
        Self::start(dir, config, transport).await
    }

    /// The RPC address of a remote meta.
    pub fn rpc_addr(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.addr.as_str())
    }

    /// A client acting as `principal` over this meta's transport (over
    /// TCP with the principal's credential, or the admin token).
    pub fn client_as(&self, principal: Principal) -> MetaClient {
        match &self.server {
            None => self.service.client(principal),
            Some(server) => {
                let secret = match principal {
                    Principal::Admin => self.service.admin_token().to_string(),
                    other => self.service.mint_credential(other).unwrap(),
                };
                MetaClient::remote(&server.addr, &secret, None)
            }
        }
    }

    /// A client acting as a gateway (see [`Self::client_as`]).
    pub fn gateway_client(&self) -> MetaClient {
        self.client_as(Principal::Gateway(TEST_GATEWAY.into()))
    }

    /// Sends `request` with the admin role.
    pub async fn call<R: MetaRequest>(&self, request: R) -> Result<R::Response, MetaError> {
        self.meta.call(request).await
    }

    /// Sends `request` as of `at`: the clock shows `at` while it is served,
    /// then goes back to where it was.
    pub async fn call_at<R: MetaRequest>(
        &self,
        request: R,
        at: UnixMillis,
    ) -> Result<R::Response, MetaError> {
        let before = self.clock.now();
        self.clock.set(at);
        let answer = self.meta.call(request).await;
        self.clock.set(before);
        answer
    }

    /// Heartbeats `report` at `at`; returns the deletions handed back.
    pub async fn heartbeat_at(&self, report: DatanodeReport, at: UnixMillis) -> Vec<BlockKey> {
        self.call_at(Heartbeat { report }, at)
            .await
            .expect("heartbeat")
            .deletions
    }

    /// Registers healthy, empty datanodes dn0..dn{n-1} at [`T0`].
    pub async fn register(&self, n: usize) {
        for i in 0..n {
            self.heartbeat_at(report(&format!("dn{i}"), ROOMY, 0), T0)
                .await;
        }
    }

    /// Deletions queued for `name` (a heartbeat at [`T0`] that acknowledges nothing).
    pub async fn queued_for(&self, name: &str) -> Vec<BlockKey> {
        self.heartbeat_at(report(name, ROOMY, 0), T0).await
    }

    /// Creates bucket `name` for `owner`.
    pub async fn create_bucket(&self, name: &str, owner: &str) {
        self.create_bucket_with_lock(name, owner, false).await;
    }

    /// Creates bucket `name` for `owner`, with object lock or without.
    pub async fn create_bucket_with_lock(&self, name: &str, owner: &str, object_lock: bool) {
        let request = CreateBucket {
            object_lock,
            name: name.into(),
            owner: owner.into(),
            replication: None,
            access: Default::default(),
        };
        self.call(request).await.expect("bucket created");
    }

    /// Commits `record` unconditionally.
    pub async fn commit(&self, record: ObjectRecord) {
        let request = CommitObject {
            record,
            condition: None,
        };
        self.call(request).await.expect("committed");
    }

    /// The object at (bucket, key), if any, as stored: each group's read
    /// token is checked (present, for its block, read only) and removed.
    pub async fn get(&self, bucket: &str, key: &str) -> Option<ObjectRecord> {
        let request = GetObject {
            version: None,
            bucket: bucket.into(),
            key: key.into(),
        };
        let mut record = self
            .call(request)
            .await
            .expect("lookup")
            .map(Arc::unwrap_or_clone)?;
        for group in &mut record.groups {
            take_token(group, Modes::READ);
        }
        Some(record)
    }
}

/// Removes `group`'s token after checking that meta signed one for its
/// block allowing exactly `modes`.
pub fn take_token(group: &mut BlockGroup, modes: Modes) -> BlockToken {
    let token = group
        .token
        .take()
        .unwrap_or_else(|| panic!("block {} came without a token", group.block));
    assert_eq!(token.block, group.block, "{token:?}");
    assert_eq!(token.modes, modes, "{token:?}");
    token
}

/// Runs each named test, an `async fn(Transport)`, once in process and once
/// over the RPC, as `local::NAME` and `remote::NAME`.
#[macro_export]
macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test($crate::meta::Transport::Local).await
                }
            )*
        }
        mod remote {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test($crate::meta::Transport::Remote).await
                }
            )*
        }
    };
}

/// The id of datanode `name`.
pub fn dn(name: &str) -> DatanodeId {
    DatanodeId(name.to_string())
}

/// A heartbeat of datanode `name` at `name.test:7000` with no deletions.
pub fn report(name: &str, capacity: u64, used: u64) -> DatanodeReport {
    DatanodeReport {
        id: dn(name),
        addr: format!("{name}.test:7000"),
        local_socket: None,
        capacity,
        used,
        garbage: 0,
        blocks: 0,
        deleted: Vec::new(),
        damaged: Vec::new(),
        scrub: Default::default(),
        location: None,
        disks: Vec::new(),
    }
}

/// A replicated block `block` of 100 bytes on the named datanodes.
pub fn group(block: u64, datanodes: &[&str]) -> BlockGroup {
    BlockGroup {
        block: BlockId(block),
        length: 100,
        replicas: datanodes
            .iter()
            .map(|d| ReplicaLocation {
                index: 0,
                datanode: dn(d),
                addr: format!("{d}.test:7000"),
            })
            .collect(),
        token: None,
    }
}

/// An object at (bucket, key) over `groups`, with a type and a metadata entry.
pub fn object(bucket: &str, key: &str, groups: Vec<BlockGroup>) -> ObjectRecord {
    let mut record = ObjectRecord::new(
        bucket,
        key,
        "d41d8cd98f00b204e9800998ecf8427e",
        ReplicationConfig::REPLICATED_1,
        groups,
    );
    record.content_type = Some("text/plain".into());
    record
        .user_metadata
        .insert("color".to_string(), "blue".to_string());
    record.created = T0;
    record
}

/// Upload `upload_id` of `bucket`/`key` by root, created at [`T0`], with no
/// headers, metadata or checksum, replicated once.
pub fn upload(bucket: &str, key: &str, upload_id: &str) -> UploadRecord {
    UploadRecord {
        upload_id: upload_id.into(),
        bucket: bucket.into(),
        key: key.into(),
        owner: "root".into(),
        created: T0,
        content_type: None,
        headers: Default::default(),
        user_metadata: Default::default(),
        replication: ReplicationConfig::REPLICATED_1,
        attributes: Default::default(),
    }
}

/// Block file 0 of block `block`.
pub fn key(block: u64) -> BlockKey {
    BlockKey::new(BlockId(block), 0)
}
