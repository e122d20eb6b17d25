//! Tessera's datanode: block files with per-chunk CRC32C checksums on local
//! disk ([`store`]), served over TCP with the frames of
//! [`proto::wire`] ([`server`]), registered with meta by heartbeats
//! ([`heartbeat`]).
//!
//! [`start`] runs all of it; [`BlockStore::open`] and [`server::serve`] run
//! the block server alone, without meta.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
mod compact;
mod error;
pub mod heartbeat;
mod local;
mod payload_buffers;
mod peer;
mod repair;
mod scrub;
mod send;
pub mod server;
pub mod store;
pub mod telemetry;

pub use error::{DatanodeError, StoreError};
pub use heartbeat::HeartbeatTarget;
pub use send::{ReadSettings, SendMode, UnknownSendMode, DEFAULT_READAHEAD_BYTES};
pub use store::BlockStore;

use access::TokenGate;
use block_client::{ClientConfig, StoreClient};
use heartbeat::HeartbeatSettings;
use meta_api::MetaClient;
use proto::checksum::DEFAULT_BYTES_PER_CHECKSUM;
use proto::DatanodeId;
use repair::RepairWorker;
use scrub::ScrubState;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Settings of one datanode.
#[derive(Clone, Debug)]
pub struct DatanodeConfig {
    /// One folder per disk, each holding block files and a copy of the
    /// datanode's identity.
    pub data_dirs: Vec<PathBuf>,
    /// Failed disks the datanode serves on past; one more and it stops
    /// (None: [`store::default_failed_disks_tolerated`]).
    pub failed_disks_tolerated: Option<usize>,
    /// Address to listen on for the block protocol (port 0: any free port).
    pub listen: String,
    /// Address clients should use, when not the bound one (NAT, containers).
    pub advertise: Option<String>,
    /// Chunk size of blocks committed without any data; writes carry their own.
    pub bytes_per_checksum: u32,
    /// Fsync block files and folders on commit; off only for tests and scratch clusters.
    pub fsync: bool,
    /// Write aligned block data with O_DIRECT, past the page cache (see
    /// `store::direct` for why); off, or on a file system without O_DIRECT,
    /// every write is buffered.
    pub direct_writes: bool,
    /// Disk writes run at once per datanode (uploads beyond wait their turn).
    pub max_disk_writes: usize,
    /// Block files up to this many bytes are packed into volumes (one
    /// shared write and fdatasync per group of commits); 0 gives every
    /// block file files of its own.
    pub pack_max: u64,
    /// Size past which a datanode starts a new volume.
    pub volume_max: u64,
    /// Share of a sealed volume's bytes that deleted records must reach
    /// before the volume is rewritten without them; above 1: never.
    pub compact_garbage_ratio: f64,
    /// Bytes a second compaction copies (0: no limit).
    pub compact_bandwidth: u64,
    /// Time between heartbeats to meta.
    pub heartbeat_interval: Duration,
    /// Capacity to report; None reports the data folder's filesystem size.
    pub capacity: Option<u64>,
    /// Where it stands among failure domains (`/zone/rack/host`); None
    /// lets meta place it on its advertised host.
    pub location: Option<meta_api::Location>,
    /// How read replies send their data to TCP clients.
    pub send_mode: SendMode,
    /// Check each read's CRCs against the disk before replying (forces copy mode).
    pub verify_on_read: bool,
    /// Bytes read ahead (posix_fadvise WILLNEED) past each read; 0 turns it off.
    pub readahead_bytes: u64,
    /// Unix socket on which clients of this host get block files directly
    /// (short-circuit reads); `None` serves none. A stale socket file left
    /// there by an earlier run is replaced.
    pub local_socket: Option<PathBuf>,
    /// Time between block reports to meta (the first follows registration).
    pub block_report_interval: Duration,
    /// Uploads (temporary block files) untouched this long belong to a
    /// writer that died: they are discarded.
    pub upload_grace: Duration,
    /// The id this datanode must have: its credential's. A fresh data folder
    /// takes it; a folder holding another datanode's blocks refuses to start.
    pub identity: Option<DatanodeId>,
    /// Mutual TLS with the cluster CA on the block port: clients must prove
    /// a certificate of it. `None` serves clear text. (Meta is dialled by
    /// the [`meta_api::MetaClient`] the datanode is given.)
    pub tls: Option<Arc<tls::ClusterTls>>,
    /// Bytes a second this datanode's repairs read, all together (0: no limit).
    pub repair_bandwidth: u64,
    /// The scrubber reads every block file against its checksums once per
    /// this period, paced to spread the pass over it; zero turns it off.
    pub scrub_period: Duration,
}

/// Default [`DatanodeConfig::scrub_period`]: a pass a week.
pub const DEFAULT_SCRUB_PERIOD: Duration = Duration::from_secs(7 * 24 * 3600);

/// Default [`DatanodeConfig::repair_bandwidth`]: 32 MiB/s, where a lost
/// datanode's gigabyte is whole again in half a minute and ranged GETs keep
/// their p99 within 1.5x of idle (docs/benchmarks.md).
pub const DEFAULT_REPAIR_BANDWIDTH: u64 = 32 * 1024 * 1024;

/// Default [`DatanodeConfig::compact_garbage_ratio`]: a volume is rewritten
/// once half of it is deleted records, so compaction copies at most as many
/// bytes as it frees.
pub const DEFAULT_COMPACT_GARBAGE_RATIO: f64 = 0.5;

/// Default [`DatanodeConfig::compact_bandwidth`], the repairs' default.
pub const DEFAULT_COMPACT_BANDWIDTH: u64 = DEFAULT_REPAIR_BANDWIDTH;

/// Default [`DatanodeConfig::block_report_interval`].
pub const DEFAULT_BLOCK_REPORT_INTERVAL: Duration = Duration::from_secs(600);
/// Default [`DatanodeConfig::upload_grace`], meta's default orphan grace.
pub const DEFAULT_UPLOAD_GRACE: Duration = Duration::from_secs(3600);

impl DatanodeConfig {
    /// The read path's part of these settings.
    pub fn read_settings(&self) -> ReadSettings {
        ReadSettings {
            send_mode: self.send_mode,
            verify_on_read: self.verify_on_read,
            readahead_bytes: self.readahead_bytes,
        }
    }
}

impl Default for DatanodeConfig {
    fn default() -> Self {
        Self {
            data_dirs: vec![PathBuf::from("tessera-data/datanode")],
            failed_disks_tolerated: None,
            listen: "127.0.0.1:0".to_string(),
            advertise: None,
            bytes_per_checksum: DEFAULT_BYTES_PER_CHECKSUM,
            fsync: true,
            direct_writes: true,
            max_disk_writes: store::DEFAULT_DISK_WRITES,
            pack_max: store::DEFAULT_PACK_MAX,
            volume_max: store::volumes::DEFAULT_VOLUME_MAX,
            compact_garbage_ratio: DEFAULT_COMPACT_GARBAGE_RATIO,
            compact_bandwidth: DEFAULT_COMPACT_BANDWIDTH,
            heartbeat_interval: Duration::from_secs(3),
            capacity: None,
            location: None,
            send_mode: SendMode::default(),
            verify_on_read: false,
            readahead_bytes: DEFAULT_READAHEAD_BYTES,
            local_socket: None,
            block_report_interval: DEFAULT_BLOCK_REPORT_INTERVAL,
            upload_grace: DEFAULT_UPLOAD_GRACE,
            identity: None,
            tls: None,
            repair_bandwidth: DEFAULT_REPAIR_BANDWIDTH,
            scrub_period: DEFAULT_SCRUB_PERIOD,
        }
    }
}

/// A started datanode: its server and heartbeat loop run until [`shutdown`](Self::shutdown).
pub struct RunningDatanode {
    addr: SocketAddr,
    id: DatanodeId,
    store: Arc<BlockStore>,
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    heartbeat: JoinHandle<()>,
    scrubber: JoinHandle<()>,
    compactor: JoinHandle<()>,
    local: Option<JoinHandle<()>>,
}

impl RunningDatanode {
    /// The address the block server is bound to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The datanode's persistent identity.
    pub fn id(&self) -> &DatanodeId {
        &self.id
    }

    /// The block store it serves.
    pub fn store(&self) -> &Arc<BlockStore> {
        &self.store
    }

    /// Returns once more disks have failed than the datanode tolerates: it
    /// should then be shut down (its process exits with an error).
    pub async fn disks_lost(&self) {
        let mut lost = self.store.disks_lost();
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// Stops accepting connections and heartbeats, and waits for requests in flight.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        match self.server.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "datanode server failed"),
            Err(e) => tracing::error!(error = %e, "datanode server task failed"),
        }
        if let Err(e) = self.heartbeat.await {
            tracing::error!(error = %e, "heartbeat task failed");
        }
        if let Err(e) = self.scrubber.await {
            tracing::error!(error = %e, "scrubber task failed");
        }
        if let Err(e) = self.compactor.await {
            tracing::error!(error = %e, "compactor task failed");
        }
        if let Some(local) = self.local {
            if let Err(e) = local.await {
                tracing::error!(error = %e, "short-circuit server task failed");
            }
        }
        tracing::info!(id = %self.id, "datanode stopped");
    }
}

/// Opens the block store, starts the block server, the heartbeats to `meta`
/// and the repairs meta hands out with them.
pub async fn start(
    config: DatanodeConfig,
    meta: MetaClient,
) -> Result<RunningDatanode, DatanodeError> {
    let client = StoreClient::new(
        meta.clone(),
        ClientConfig {
            bytes_per_checksum: config.bytes_per_checksum,
            tls: config.tls.clone(),
            ..ClientConfig::default()
        },
    );
    let bandwidth = config.repair_bandwidth;
    start_inner(config, meta, Some((client, bandwidth))).await
}

/// [`start`] with any heartbeat receiver (tests use a stand-in for meta);
/// such a datanode runs no repairs.
pub async fn start_with<H: HeartbeatTarget>(
    config: DatanodeConfig,
    target: H,
) -> Result<RunningDatanode, DatanodeError> {
    start_inner(config, target, None).await
}

async fn start_inner<H: HeartbeatTarget>(
    config: DatanodeConfig,
    target: H,
    repair_client: Option<(StoreClient, u64)>,
) -> Result<RunningDatanode, DatanodeError> {
    proto::checksum::validate_bytes_per_checksum(config.bytes_per_checksum)
        .map_err(|e| DatanodeError::Config(e.to_string()))?;
    if config.heartbeat_interval.is_zero() {
        return Err(DatanodeError::Config(
            "heartbeat interval must be positive".into(),
        ));
    }
    let store = BlockStore::open_disks(
        config.data_dirs.clone(),
        config.bytes_per_checksum,
        config.fsync,
        config.identity.clone(),
    )
    .await?;
    let tolerated = config
        .failed_disks_tolerated
        .unwrap_or_else(|| store::default_failed_disks_tolerated(config.data_dirs.len()));
    store.set_failed_disks_tolerated(tolerated);
    if *store.disks_lost().borrow() {
        return Err(DatanodeError::Config(format!(
            "more disks failed than the {tolerated} tolerated"
        )));
    }
    store.set_direct_writes(config.direct_writes);
    store.set_max_disk_writes(config.max_disk_writes);
    store.set_pack_max(config.pack_max);
    store.set_volume_max(config.volume_max);
    let listen_error = |source| DatanodeError::Listen {
        addr: config.listen.clone(),
        source,
    };
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(listen_error)?;
    let addr = listener.local_addr().map_err(listen_error)?;
    let advertised = config.advertise.clone().unwrap_or_else(|| addr.to_string());
    if config.advertise.is_none() && addr.ip().is_unspecified() {
        tracing::warn!(%addr, "listening on a wildcard address without --advertise; other hosts cannot use it");
    }
    let (stop, stop_rx) = watch::channel(false);
    let mut server_stop = stop_rx.clone();
    // Keyless until the first heartbeat answer: nothing is served before.
    let gate = TokenGate::new();
    let server = tokio::spawn(server::serve_with_settings(
        listener,
        store.clone(),
        gate.clone(),
        async move {
            let _ = server_stop.wait_for(|stopped| *stopped).await;
        },
        server::ServerLimits::default(),
        config.read_settings(),
        config.tls.clone(),
    ));
    let local = match &config.local_socket {
        Some(path) => {
            let listener = local::bind(path).map_err(|source| DatanodeError::Listen {
                addr: path.display().to_string(),
                source,
            })?;
            store.set_local_socket(Some(path.clone()));
            let mut local_stop = stop_rx.clone();
            Some(tokio::spawn(local::serve(
                listener,
                path.clone(),
                store.clone(),
                gate.clone(),
                async move {
                    let _ = local_stop.wait_for(|stopped| *stopped).await;
                },
            )))
        }
        None => None,
    };
    let settings = HeartbeatSettings {
        addr: advertised.clone(),
        capacity: config.capacity,
        location: config.location.clone(),
        interval: config.heartbeat_interval,
        block_report_interval: config.block_report_interval,
        upload_grace: config.upload_grace,
    };
    let repairs = repair_client
        .map(|(client, bandwidth)| RepairWorker::new(store.id().clone(), client, bandwidth));
    let scrub_state = Arc::new(ScrubState::reporting_quarantine(&store));
    let scrubber = tokio::spawn(scrub::run(
        store.clone(),
        config.scrub_period,
        scrub_state.clone(),
        stop_rx.clone(),
    ));
    let compactor = tokio::spawn(compact::run(
        store.clone(),
        compact::CompactSettings {
            garbage_ratio: config.compact_garbage_ratio,
            bandwidth: config.compact_bandwidth,
        },
        scrub_state.clone(),
        stop_rx.clone(),
    ));
    let heartbeat = tokio::spawn(heartbeat::run(
        target,
        store.clone(),
        gate,
        settings,
        repairs,
        scrub_state,
        stop_rx,
    ));
    let id = store.id().clone();
    tracing::info!(%id, %addr, advertised, "datanode started");
    Ok(RunningDatanode {
        addr,
        id,
        store,
        stop,
        server,
        heartbeat,
        scrubber,
        compactor,
        local,
    })
}
