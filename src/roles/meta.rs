//! `tessera meta`: the metadata service as its own process, alone or as a
//! member of a meta group (`--node-id`, `--peers`).

use super::{
    open_meta, open_meta_member, print_ready, print_root, root_saved_in, serve_meta,
    ClusterTlsArgs, MetaSettings,
};
use crate::ops;
use crate::shutdown::Shutdown;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Flags of `tessera meta`.
#[derive(Args, Debug)]
pub struct MetaArgs {
    /// Folder for the metadata database and generated secrets.
    #[arg(long, env = "TESSERA_DATA", default_value = "./tessera-data/meta")]
    pub data: PathBuf,
    /// Address of the meta RPC (and of the group's Raft traffic).
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:9879")]
    pub listen: String,
    /// Address of /health and /metrics.
    #[arg(long, env = "TESSERA_OPS_LISTEN", default_value = "127.0.0.1:9881")]
    pub ops_listen: String,
    /// Block size the allocator checks free space against.
    #[arg(long, env = "TESSERA_BLOCK_SIZE", default_value = "256MiB", value_parser = super::parse_size)]
    pub block_size: u64,
    /// This member's id in its meta group (with --peers).
    #[arg(long, env = "TESSERA_NODE_ID", requires = "peers")]
    pub node_id: Option<u64>,
    /// Every member of the meta group as ID=HOST:PORT, separated by commas,
    /// this one's included; each address is that member's --listen.
    #[arg(long, env = "TESSERA_PEERS", requires = "node_id", value_parser = parse_peers)]
    pub peers: Option<Peers>,
    /// Metadata service settings.
    #[command(flatten)]
    pub meta: MetaSettings,
    /// Mutual TLS on the meta RPC.
    #[command(flatten)]
    pub cluster_tls: ClusterTlsArgs,
}

/// The members of a meta group: id -> meta address.
#[derive(Clone, Debug)]
pub struct Peers(pub BTreeMap<u64, String>);

/// Parses `1=host:port,2=host:port,...`.
fn parse_peers(text: &str) -> Result<Peers, String> {
    let mut peers = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (id, addr) = item
            .split_once('=')
            .ok_or_else(|| format!("{item}: a peer is ID=HOST:PORT"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("{item}: the id is a number"))?;
        let addr = addr.trim();
        if addr.rsplit_once(':').is_none() {
            return Err(format!("{item}: the address is HOST:PORT"));
        }
        if peers.insert(id, addr.to_string()).is_some() {
            return Err(format!("peer {id} is listed twice"));
        }
    }
    if peers.is_empty() {
        return Err("no peers".into());
    }
    Ok(Peers(peers))
}

/// Runs meta until SIGTERM.
pub async fn run(args: MetaArgs) -> Result<()> {
    let metrics = ops::install_recorder()?;
    let shutdown = Shutdown::on_signals();
    let tls = args.cluster_tls.load()?;
    let root_saved = root_saved_in(&args.data);
    let group = match (args.node_id, &args.peers) {
        (Some(node_id), Some(peers)) => {
            if !peers.0.contains_key(&node_id) {
                bail!("--peers must list this member's own id {node_id} with its --listen address");
            }
            let saved = std::fs::read_to_string(args.data.join(::meta::ADMIN_TOKEN_FILE)).ok();
            let Some(token) = args
                .meta
                .admin_token
                .clone()
                .or_else(|| saved.map(|t| t.trim().to_string()))
            else {
                bail!(
                    "the members of a meta group share one admin token: give each the same \
                     --admin-token (or TESSERA_ADMIN_TOKEN), or the same {} file in --data",
                    ::meta::ADMIN_TOKEN_FILE
                );
            };
            let settings = ::meta::GroupSettings {
                node_id,
                peers: peers.0.clone(),
            };
            tokio::select! {
                fetched = ::meta::fetch_secrets(&settings, &args.data, &token, tls.clone()) => {
                    fetched.context("getting the meta group's secrets")?;
                }
                () = shutdown.wait() => return Ok(()),
            }
            Some(settings)
        }
        _ => None,
    };
    let service = match group {
        Some(_) => open_meta_member(&args.data, &args.meta, args.block_size)?,
        None => open_meta(&args.data, &args.meta, args.block_size)?,
    };
    print_root(&service, &args.meta, root_saved);
    let health = ops::meta_health(service.clone());
    let (addr, rpc) = serve_meta(&args.listen, service.clone(), tls.clone(), &shutdown).await?;
    if let Some(settings) = group {
        service
            .join_group(settings, tls)
            .await
            .context("starting the meta group's raft")?;
    }
    let ops_addr = ops::serve(&args.ops_listen, metrics, health, &shutdown).await?;
    print_ready(&[
        ("meta", addr.to_string()),
        ("ops", format!("http://{ops_addr}")),
    ]);
    rpc.await?;
    service.leave_group().await;
    Ok(())
}
