//! `tessera datanode`: one datanode process talking to a remote meta.

use super::{print_ready, ClusterTlsArgs, DatanodeSettings, StorageSettings};
use crate::ops;
use crate::shutdown::Shutdown;
use anyhow::{Context, Result};
use clap::Args;
use meta_api::{Location, MetaClient, Principal};
use proto::DatanodeId;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Flags of `tessera datanode`.
#[derive(Args, Debug)]
pub struct DatanodeArgs {
    /// Address of meta's RPC.
    #[arg(long, env = "TESSERA_META")]
    pub meta: String,
    /// Folders for block files, one per disk, comma-separated: new block
    /// files go to the disk with the most room; a failing disk is taken out
    /// of service and its block files rebuilt elsewhere.
    #[arg(long, env = "TESSERA_DATA", value_delimiter = ',', required = true)]
    pub data: Vec<PathBuf>,
    /// Address of the block protocol.
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Address clients should dial, when it differs from the bound one (containers, NAT).
    #[arg(long, env = "TESSERA_ADVERTISE")]
    pub advertise: Option<String>,
    /// Where this datanode stands among failure domains, widest first, as
    /// `/ZONE/RACK/HOST` (any depth): block files of a group spread over
    /// them [default: its advertised host].
    #[arg(long, env = "TESSERA_LOCATION")]
    pub location: Option<Location>,
    /// Address of /health and /metrics.
    #[arg(long, env = "TESSERA_OPS_LISTEN", default_value = "127.0.0.1:0")]
    pub ops_listen: String,
    /// Unix socket for short-circuit reads by clients on this host
    /// [default: dn.sock in the first data folder]; `--no-short-circuit`
    /// serves none.
    #[arg(long, env = "TESSERA_LOCAL_SOCKET")]
    pub local_socket: Option<PathBuf>,
    /// This datanode's credential for meta; it names the datanode's id.
    #[command(flatten)]
    pub credential: super::CredentialArgs,
    /// Datanode settings.
    #[command(flatten)]
    pub datanode: DatanodeSettings,
    /// Block store settings.
    #[command(flatten)]
    pub storage: StorageSettings,
    /// Mutual TLS on the block port and to meta.
    #[command(flatten)]
    pub cluster_tls: ClusterTlsArgs,
}

/// Longest Unix socket path (`sun_path` holds 108 bytes with the final NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The short-circuit socket of a datanode over `dir`: `requested`, else
/// `<dir>/dn.sock`, made absolute (clients in other folders connect to it).
/// `None` when short-circuit is off, or when the default path is too long
/// for a Unix socket (then reads go over TCP, with a warning).
pub fn local_socket_path(
    dir: &Path,
    requested: Option<&Path>,
    storage: &StorageSettings,
) -> Result<Option<PathBuf>> {
    if storage.no_short_circuit {
        return Ok(None);
    }
    let path = std::path::absolute(requested.unwrap_or(&dir.join("dn.sock")))
        .context("resolving the short-circuit socket path")?;
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        if requested.is_some() {
            anyhow::bail!(
                "--local-socket {} is longer than {MAX_SOCKET_PATH} bytes",
                path.display()
            );
        }
        tracing::warn!(path = %path.display(), "short-circuit socket path too long; serving reads over TCP only (set --local-socket)");
        return Ok(None);
    }
    Ok(Some(path))
}

/// Where a datanode listens, and where it stands.
pub struct Addresses {
    /// The block protocol's TCP address.
    pub listen: String,
    /// The address clients dial, when it differs.
    pub advertise: Option<String>,
    /// The short-circuit socket, if any.
    pub local_socket: Option<PathBuf>,
    /// Its place among failure domains; None: its advertised host.
    pub location: Option<Location>,
}

/// Starts datanode `id` over the disks `dirs`, talking to meta through `meta`.
pub async fn start(
    dirs: &[PathBuf],
    id: DatanodeId,
    addresses: Addresses,
    settings: &DatanodeSettings,
    storage: &StorageSettings,
    tls: Option<Arc<tls::ClusterTls>>,
    meta: MetaClient,
) -> Result<::datanode::RunningDatanode> {
    let Addresses {
        listen,
        advertise,
        local_socket,
        location,
    } = addresses;
    let config = ::datanode::DatanodeConfig {
        data_dirs: dirs.to_vec(),
        failed_disks_tolerated: settings.failed_disks_tolerated,
        listen,
        advertise,
        bytes_per_checksum: u32::try_from(storage.bytes_per_checksum)
            .context("--bytes-per-checksum too large")?,
        fsync: settings.fsync,
        direct_writes: settings.direct_writes,
        max_disk_writes: settings.max_disk_writes,
        pack_max: settings.pack_max,
        volume_max: settings.volume_max,
        compact_garbage_ratio: settings.compact_garbage,
        compact_bandwidth: settings.compact_bandwidth,
        heartbeat_interval: settings.heartbeat_interval,
        capacity: settings.capacity,
        location,
        send_mode: settings.send_mode,
        verify_on_read: settings.verify_on_read,
        readahead_bytes: settings.readahead,
        local_socket,
        block_report_interval: settings.block_report_interval,
        upload_grace: settings.upload_grace,
        identity: Some(id),
        tls,
        repair_bandwidth: settings.repair_bandwidth,
        scrub_period: settings.scrub_period,
    };
    ::datanode::start(config, meta)
        .await
        .with_context(|| format!("starting the datanode in {}", display_dirs(dirs)))
}

/// `dirs` as a comma-separated list.
fn display_dirs(dirs: &[PathBuf]) -> String {
    let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    shown.join(",")
}

/// Runs a datanode until SIGTERM, or until more of its disks fail than it
/// tolerates (then it exits with an error).
pub async fn run(args: DatanodeArgs) -> Result<()> {
    let metrics = ops::install_recorder()?;
    let shutdown = Shutdown::on_signals();
    let credential = args
        .credential
        .credential("datanode", |p| matches!(p, Principal::Datanode(_)))?;
    let tls = args.cluster_tls.load()?;
    let meta = MetaClient::remote(&args.meta, &credential.to_string(), tls.clone());
    let Principal::Datanode(id) = credential.principal else {
        unreachable!("checked to be a datanode's credential");
    };
    let first = args.data.first().context("--data names no folder")?;
    let local_socket = local_socket_path(first, args.local_socket.as_deref(), &args.storage)?;
    let addresses = Addresses {
        listen: args.listen.clone(),
        advertise: args.advertise.clone(),
        local_socket,
        location: args.location.clone(),
    };
    let node = start(
        &args.data,
        id,
        addresses,
        &args.datanode,
        &args.storage,
        tls,
        meta,
    )
    .await?;
    let ops_addr = ops::serve(&args.ops_listen, metrics, ops::always_healthy(), &shutdown).await?;
    print_ready(&[
        ("datanode", node.addr().to_string()),
        ("ops", format!("http://{ops_addr}")),
    ]);
    let disks_lost = tokio::select! {
        () = shutdown.wait() => false,
        () = node.disks_lost() => true,
    };
    node.shutdown().await;
    if disks_lost {
        anyhow::bail!("more disks failed than --failed-disks-tolerated allows; stopped");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        storage: StorageSettings,
    }

    fn storage(args: &[&str]) -> StorageSettings {
        Cli::parse_from(std::iter::once("tessera").chain(args.iter().copied())).storage
    }

    #[test]
    fn the_socket_defaults_under_the_data_folder_and_can_be_turned_off() {
        let on = storage(&[]);
        let dir = Path::new("data/datanode-1");
        let path = local_socket_path(dir, None, &on).unwrap().unwrap();
        assert!(path.is_absolute());
        assert!(path.ends_with("data/datanode-1/dn.sock"));
        let chosen = local_socket_path(dir, Some(Path::new("/run/dn.sock")), &on).unwrap();
        assert_eq!(chosen, Some(PathBuf::from("/run/dn.sock")));
        let off = storage(&["--no-short-circuit"]);
        assert_eq!(local_socket_path(dir, None, &off).unwrap(), None);
        assert!(!off.client_config(None).unwrap().short_circuit);
        assert!(on.client_config(None).unwrap().short_circuit);
    }

    #[test]
    fn a_socket_path_too_long_for_unix_sockets_is_not_used() {
        let on = storage(&[]);
        let deep = PathBuf::from(format!("/{}", "d".repeat(120)));
        // The default quietly falls back to TCP; an explicit path is an error.
        assert_eq!(local_socket_path(&deep, None, &on).unwrap(), None);
        assert!(local_socket_path(&deep, Some(&deep.join("s.sock")), &on).is_err());
    }
}
