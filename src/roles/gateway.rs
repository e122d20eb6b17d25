//! `tessera gateway`: the S3 gateway as its own process.

use super::{print_ready, serve_gateway, ClusterTlsArgs, GatewaySettings, StorageSettings};
use crate::ops;
use crate::shutdown::Shutdown;
use anyhow::Result;
use clap::Args;
use meta_api::{MetaClient, Principal};

/// Flags of `tessera gateway`.
#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// Address of meta's RPC.
    #[arg(long, env = "TESSERA_META")]
    pub meta: String,
    /// Address of the S3 endpoint.
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:9878")]
    pub listen: String,
    /// Address of /health and /metrics.
    #[arg(long, env = "TESSERA_OPS_LISTEN", default_value = "127.0.0.1:9880")]
    pub ops_listen: String,
    /// This gateway's credential for meta.
    #[command(flatten)]
    pub credential: super::CredentialArgs,
    /// Gateway settings.
    #[command(flatten)]
    pub gateway: GatewaySettings,
    /// Block store settings.
    #[command(flatten)]
    pub storage: StorageSettings,
    /// Mutual TLS to meta and the datanodes.
    #[command(flatten)]
    pub cluster_tls: ClusterTlsArgs,
}

/// Runs the gateway until SIGTERM, then finishes in-flight requests.
pub async fn run(args: GatewayArgs) -> Result<()> {
    let metrics = ops::install_recorder()?;
    let shutdown = Shutdown::on_signals();
    let credential = args
        .credential
        .credential("gateway", |p| matches!(p, Principal::Gateway(_)))?;
    let tls = args.cluster_tls.load()?;
    let meta = MetaClient::remote(&args.meta, &credential.to_string(), tls.clone());
    let (endpoint, task) = serve_gateway(
        &args.listen,
        meta,
        &args.storage,
        &args.gateway,
        tls,
        &shutdown,
    )
    .await?;
    let ops_addr = ops::serve(&args.ops_listen, metrics, ops::always_healthy(), &shutdown).await?;
    print_ready(&[("s3", endpoint), ("ops", format!("http://{ops_addr}"))]);
    task.await?;
    Ok(())
}
