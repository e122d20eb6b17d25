//! `tessera meta`: the metadata service as its own process.

use super::{open_meta, print_ready, serve_meta, ClusterTlsArgs, MetaSettings};
use crate::ops;
use crate::shutdown::Shutdown;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Flags of `tessera meta`.
#[derive(Args, Debug)]
pub struct MetaArgs {
    /// Folder for the metadata database and generated secrets.
    #[arg(long, env = "TESSERA_DATA", default_value = "./tessera-data/meta")]
    pub data: PathBuf,
    /// Address of the meta RPC.
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:9879")]
    pub listen: String,
    /// Address of /health and /metrics.
    #[arg(long, env = "TESSERA_OPS_LISTEN", default_value = "127.0.0.1:9881")]
    pub ops_listen: String,
    /// Block size the allocator checks free space against.
    #[arg(long, env = "TESSERA_BLOCK_SIZE", default_value = "256MiB", value_parser = super::parse_size)]
    pub block_size: u64,
    /// Metadata service settings.
    #[command(flatten)]
    pub meta: MetaSettings,
    /// Mutual TLS on the meta RPC.
    #[command(flatten)]
    pub cluster_tls: ClusterTlsArgs,
}

/// Runs meta until SIGTERM.
pub async fn run(args: MetaArgs) -> Result<()> {
    let metrics = ops::install_recorder()?;
    let shutdown = Shutdown::on_signals();
    let tls = args.cluster_tls.load()?;
    let service = open_meta(&args.data, &args.meta, args.block_size)?;
    let health = ops::meta_health(service.clone());
    let (addr, rpc) = serve_meta(&args.listen, service, tls, &shutdown).await?;
    let ops_addr = ops::serve(&args.ops_listen, metrics, health, &shutdown).await?;
    print_ready(&[
        ("meta", addr.to_string()),
        ("ops", format!("http://{ops_addr}")),
    ]);
    rpc.await?;
    Ok(())
}
