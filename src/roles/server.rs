//! `tessera server`: the embedded default. Meta, several datanodes (each on its
//! own folder and loopback port) and the gateway in one process over one data
//! folder; the meta RPC is served too so `tessera admin` works against it.
//! Its meta is a meta group of one member, which can grow into a group
//! (`tessera admin meta add`) without a move of its data; `--lone-meta`
//! makes it a lone meta, which writes its store directly with no log.

use super::{
    datanode, ensure_bindable, make_data_dir, open_meta, open_meta_member, print_ready, print_root,
    root_saved_in, serve_gateway, serve_meta, ClusterTlsArgs, DatanodeSettings, GatewaySettings,
    MetaSettings, StorageSettings,
};
use crate::ops;
use crate::shutdown::Shutdown;
use ::meta::MetaService;
use anyhow::{Context, Result};
use clap::Args;
use meta_api::{DatanodeState, GetClusterStatus, Principal};
use proto::DatanodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The name of the gateway inside `tessera server` (its principal at meta).
const SERVER_GATEWAY: &str = "server";

/// The server's member id in its meta group.
const SERVER_META_NODE: u64 = 1;

/// Longest wait for the server's meta to lead its group of one: an
/// election timeout after a restart, a moment on a new data folder.
const META_START: Duration = Duration::from_secs(60);

/// Flags of `tessera server`.
#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Data folder: meta/ and datanode-N/ live under it.
    #[arg(long, env = "TESSERA_DATA", default_value = "./tessera-data")]
    pub data: PathBuf,
    /// Address of the S3 endpoint.
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:9878")]
    pub listen: String,
    /// Address of the meta RPC (for `tessera admin`).
    #[arg(long, env = "TESSERA_META_LISTEN", default_value = "127.0.0.1:9879")]
    pub meta_listen: String,
    /// Address of /health and /metrics.
    #[arg(long, env = "TESSERA_OPS_LISTEN", default_value = "127.0.0.1:9880")]
    pub ops_listen: String,
    /// Run meta alone, writing its store directly with no Raft log: it
    /// cannot grow into a group. Without it meta is a group of one member
    /// (node 1 at --meta-listen), which members started later with --peers
    /// can join (`tessera admin meta add`); a lone meta's data folder
    /// becomes such a group's when the server starts without this flag.
    #[arg(long, env = "TESSERA_LONE_META")]
    pub lone_meta: bool,
    /// Number of datanodes to run.
    #[arg(long, env = "TESSERA_DATANODES", default_value_t = 5)]
    pub datanodes: usize,
    /// Metadata service settings.
    #[command(flatten)]
    pub meta: MetaSettings,
    /// Datanode settings.
    #[command(flatten)]
    pub datanode: DatanodeSettings,
    /// Block store settings.
    #[command(flatten)]
    pub storage: StorageSettings,
    /// Gateway settings.
    #[command(flatten)]
    pub gateway: GatewaySettings,
    /// The web console.
    #[command(flatten)]
    pub console: super::console::ConsoleListenArgs,
    /// Mutual TLS on the meta RPC and datanode ports (and the server's own
    /// links to them); clear text by default, for loopback.
    #[command(flatten)]
    pub cluster_tls: ClusterTlsArgs,
}

/// Starts the server's meta and serves its port: the one member of its
/// group (its membership records the meta port, for members added later),
/// once it leads and has written its start-up records; or with
/// `--lone-meta` a lone meta.
async fn start_meta(
    args: &ServerArgs,
    tls: Option<Arc<tls::ClusterTls>>,
    shutdown: &Shutdown,
) -> Result<(Arc<MetaService>, SocketAddr, tokio::task::JoinHandle<()>)> {
    let dir = args.data.join("meta");
    let root_saved = root_saved_in(&dir);
    let service = if args.lone_meta {
        open_meta(&dir, &args.meta, args.storage.block_size)?
    } else {
        open_meta_member(&dir, &args.meta, args.storage.block_size)?
    };
    let (addr, rpc) = serve_meta(&args.meta_listen, service.clone(), tls.clone(), shutdown).await?;
    if !args.lone_meta {
        let settings = ::meta::GroupSettings {
            node_id: SERVER_META_NODE,
            peers: BTreeMap::from([(SERVER_META_NODE, addr.to_string())]),
        };
        service
            .join_group(settings, tls)
            .await
            .context("starting meta's raft")?;
        service
            .wait_until_leading(META_START)
            .await
            .context("starting meta")?;
    }
    print_root(&service, &args.meta, root_saved);
    Ok((service, addr, rpc))
}

/// Waits until meta sees `count` healthy datanodes, so the first PUT gets the
/// default replication of a full cluster.
async fn wait_for_datanodes(service: &Arc<MetaService>, count: usize) {
    for _ in 0..100 {
        if let Ok(status) = service.call(GetClusterStatus, &Principal::Admin).await {
            let healthy = status
                .datanodes
                .iter()
                .filter(|d| d.state == DatanodeState::Healthy)
                .count();
            if healthy >= count {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::warn!("not every datanode registered in time; continuing");
}

/// Serves the web console in front of this server's gateway (over HTTPS
/// trusting the gateway's own certificate when it has one), unless
/// `--console-listen off`.
async fn start_console(
    args: &ServerArgs,
    service: &Arc<MetaService>,
    endpoint: &str,
    metrics: &metrics_exporter_prometheus::PrometheusHandle,
    shutdown: &Shutdown,
) -> Result<Option<(String, tokio::task::JoinHandle<()>)>> {
    if !args.console.enabled() {
        return Ok(None);
    }
    // A gateway on every address is reached on loopback (its certificate
    // is pinned, so the name it holds does not matter).
    let gateway = endpoint
        .replace("://0.0.0.0:", "://127.0.0.1:")
        .replace("://[::]:", "://[::1]:");
    let config = ::web_console::ConsoleConfig {
        gateway,
        gateway_ca: args.gateway.tls_cert.clone(),
        public_endpoint: args.console.console_public_endpoint.clone(),
        region: args.gateway.region.clone(),
        meta: service.client(Principal::Admin),
        admin_token: Some(service.admin_token().to_string()),
        metrics: super::console::own_metrics(metrics.clone()),
        sample_every: args.console.console_sample_interval,
        host_names: args.console.console_hosts.clone(),
    };
    let served = super::console::serve(&args.console.console_listen, config, shutdown).await?;
    Ok(Some(served))
}

/// Runs the whole cluster in this process until SIGTERM.
pub async fn run(args: ServerArgs) -> Result<()> {
    let metrics = ops::install_recorder()?;
    let shutdown = Shutdown::on_signals();
    let mut listens = vec![
        ("--listen", args.listen.as_str()),
        ("--meta-listen", args.meta_listen.as_str()),
        ("--ops-listen", args.ops_listen.as_str()),
    ];
    if args.console.enabled() {
        listens.push(("--console-listen", args.console.console_listen.as_str()));
    }
    ensure_bindable(&listens)?;
    make_data_dir(&args.data)?;
    let tls = args.cluster_tls.load()?;
    let (service, meta_addr, meta_rpc) = start_meta(&args, tls.clone(), &shutdown).await?;
    let meta = service.client(Principal::Gateway(SERVER_GATEWAY.into()));
    let mut nodes = Vec::with_capacity(args.datanodes);
    for i in 1..=args.datanodes {
        let dir = args.data.join(format!("datanode-{i}"));
        let local_socket = datanode::local_socket_path(&dir, None, &args.storage)?;
        let id = ::datanode::BlockStore::identity_in(&dir)
            .with_context(|| format!("reading the datanode id in {}", dir.display()))?
            .unwrap_or_else(|| DatanodeId(uuid::Uuid::new_v4().to_string()));
        let addresses = datanode::Addresses {
            listen: "127.0.0.1:0".into(),
            advertise: None,
            local_socket,
            location: None,
        };
        let meta = service.client(Principal::Datanode(id.clone()));
        let (settings, storage) = (&args.datanode, &args.storage);
        let node =
            datanode::start(&[dir], id, addresses, settings, storage, tls.clone(), meta).await?;
        nodes.push(node);
    }
    wait_for_datanodes(&service, args.datanodes).await;
    let (endpoint, gateway) = serve_gateway(
        &args.listen,
        meta,
        &args.storage,
        &args.gateway,
        tls,
        &shutdown,
    )
    .await?;
    let console = start_console(&args, &service, &endpoint, &metrics, &shutdown).await?;
    let health = ops::meta_health(service.clone());
    let ops_addr = ops::serve(&args.ops_listen, metrics, health, &shutdown).await?;
    eprintln!(
        "tessera server: S3 endpoint {endpoint}, data in {}",
        args.data.display()
    );
    let mut ready = vec![
        ("s3", endpoint),
        ("meta", meta_addr.to_string()),
        ("ops", format!("http://{ops_addr}")),
    ];
    if let Some((url, _)) = &console {
        ready.push(("console", url.clone()));
    }
    print_ready(&ready);
    gateway.await?;
    if let Some((_, task)) = console {
        task.await?;
    }
    for node in nodes {
        node.shutdown().await;
    }
    meta_rpc.await?;
    service.leave_group().await;
    Ok(())
}
