//! `tessera datanode`: one datanode process talking to a remote meta.

use super::{print_ready, DatanodeSettings, StorageSettings};
use crate::ops;
use crate::shutdown::Shutdown;
use anyhow::{Context, Result};
use blockstore::meta::{rpc::RemoteMeta, MetaClient};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Flags of `tessera datanode`.
#[derive(Args, Debug)]
pub struct DatanodeArgs {
    /// Address of meta's RPC.
    #[arg(long, env = "TESSERA_META")]
    pub meta: String,
    /// Folder for block files.
    #[arg(long, env = "TESSERA_DATA")]
    pub data: PathBuf,
    /// Address of the block protocol.
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Address clients should dial, when it differs from the bound one (containers, NAT).
    #[arg(long, env = "TESSERA_ADVERTISE")]
    pub advertise: Option<String>,
    /// Address of /health and /metrics.
    #[arg(long, env = "TESSERA_OPS_LISTEN", default_value = "127.0.0.1:0")]
    pub ops_listen: String,
    /// Datanode settings.
    #[command(flatten)]
    pub datanode: DatanodeSettings,
    /// Block store settings.
    #[command(flatten)]
    pub storage: StorageSettings,
}

/// Starts one datanode over `dir`.
pub async fn start(
    dir: &Path,
    listen: &str,
    advertise: Option<String>,
    settings: &DatanodeSettings,
    storage: &StorageSettings,
    meta: MetaClient,
) -> Result<::datanode::RunningDatanode> {
    let config = ::datanode::DatanodeConfig {
        data_dir: dir.to_path_buf(),
        listen: listen.to_string(),
        advertise,
        bytes_per_checksum: u32::try_from(storage.bytes_per_checksum)
            .context("--bytes-per-checksum too large")?,
        fsync: settings.fsync,
        heartbeat_interval: settings.heartbeat_interval,
        capacity: settings.capacity,
    };
    ::datanode::start(config, meta)
        .await
        .with_context(|| format!("starting the datanode in {}", dir.display()))
}

/// Runs a datanode until SIGTERM.
pub async fn run(args: DatanodeArgs) -> Result<()> {
    let metrics = ops::install_recorder()?;
    let shutdown = Shutdown::on_signals();
    let meta = MetaClient::Remote(Arc::new(RemoteMeta::connect(&args.meta)));
    let node = start(
        &args.data,
        &args.listen,
        args.advertise.clone(),
        &args.datanode,
        &args.storage,
        meta,
    )
    .await?;
    let ops_addr = ops::serve(&args.ops_listen, metrics, &shutdown).await?;
    print_ready(&[
        ("datanode", node.addr().to_string()),
        ("ops", format!("http://{ops_addr}")),
    ]);
    shutdown.wait().await;
    node.shutdown().await;
    Ok(())
}
