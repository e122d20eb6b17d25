//! The long-running roles of the `tessera` binary and the settings they share.
//! Each role module builds its parts from these settings, prints one `READY`
//! line once every listener is bound, and stops cleanly on SIGTERM.

pub mod console;
pub mod datanode;
pub mod gateway;
pub mod meta;
pub mod server;

use crate::shutdown::Shutdown;
use ::meta::{Clock, Commits, LifecycleSettings, MetaConfig, MetaService, RepairSettings};
use anyhow::{Context, Result};
use block_client::{ClientConfig, StoreClient};
use clap::Args;
use meta_api::lifecycle::LifecycleDay;
use meta_api::{Credential, MetaClient, Principal};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Parses sizes like `256MiB`, `16KiB`, `1048576`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("bad size {text:?}"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {text:?} too large"))
}

/// Parses durations like `3s`, `500ms`, `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("bad duration {text:?}: {e}"))
}

/// Settings of the metadata service.
#[derive(Args, Clone, Debug)]
pub struct MetaSettings {
    /// Time without heartbeat after which a datanode is stale (gets no new blocks).
    #[arg(long, env = "TESSERA_STALE_AFTER", default_value = "15s", value_parser = parse_duration)]
    pub stale_after: Duration,
    /// Time without heartbeat after which a datanode is dead.
    #[arg(long, env = "TESSERA_DEAD_AFTER", default_value = "60s", value_parser = parse_duration)]
    pub dead_after: Duration,
    /// Root S3 access key; generated once and saved in the meta data folder when unset.
    #[arg(long, env = "TESSERA_ROOT_ACCESS_KEY", hide_env_values = true)]
    pub root_access_key: Option<String>,
    /// Root S3 secret key; generated with the access key when unset.
    #[arg(long, env = "TESSERA_ROOT_SECRET_KEY", hide_env_values = true)]
    pub root_secret_key: Option<String>,
    /// How long blocks of an overwritten or deleted object stay readable (GETs
    /// already streaming them finish) before datanodes delete them.
    #[arg(long, env = "TESSERA_DELETION_DELAY", default_value = "60s", value_parser = parse_duration)]
    pub deletion_delay: Duration,
    /// Token for admin requests; generated once and saved in the meta data folder when unset.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Block files no record references are deleted only once allocated and
    /// written longer ago than this; every write must commit within it.
    #[arg(long, env = "TESSERA_ORPHAN_GRACE", default_value = "1h", value_parser = parse_duration)]
    pub orphan_grace: Duration,
    /// How often a new block token signing key takes over; datanodes keep
    /// the old one while tokens it signed may still be used.
    #[arg(long, env = "TESSERA_TOKEN_KEY_ROTATION", default_value = "1d", value_parser = parse_duration)]
    pub token_key_rotation: Duration,
    /// How long a block token meta hands out stays valid: the longest a
    /// single PUT or GET may take.
    #[arg(long, env = "TESSERA_TOKEN_LIFETIME", default_value = "10h", value_parser = parse_duration)]
    pub token_lifetime: Duration,
    /// Repairs of damaged block groups running at once in the cluster.
    #[arg(long, env = "TESSERA_MAX_REPAIRS", default_value_t = RepairSettings::default().max_repairs)]
    pub max_repairs: usize,
    /// Repairs one datanode takes part in at once (running one, or receiving its block files).
    #[arg(long, env = "TESSERA_MAX_REPAIRS_PER_DATANODE", default_value_t = RepairSettings::default().max_repairs_per_datanode)]
    pub max_repairs_per_datanode: usize,
    /// A repair not reported done within this long is handed out again.
    #[arg(long, env = "TESSERA_REPAIR_TIMEOUT", default_value = "10m", value_parser = parse_duration)]
    pub repair_timeout: Duration,
    /// Longest time between two scans for damaged block groups (a datanode's
    /// death or a corrupt block file starts one at once).
    #[arg(long, env = "TESSERA_REDUNDANCY_SCAN_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    pub redundancy_scan_interval: Duration,
    /// Length of a day in lifecycle rules, and between lifecycle passes;
    /// shorter than 24h only to watch rules act in tests.
    #[arg(long, env = "TESSERA_LIFECYCLE_DAY", default_value = "24h", value_parser = parse_duration)]
    pub lifecycle_day: Duration,
    /// Most keys or uploads one lifecycle batch (one meta transaction) looks at.
    #[arg(long, env = "TESSERA_LIFECYCLE_BATCH", default_value_t = ::meta::DEFAULT_LIFECYCLE_BATCH)]
    pub lifecycle_batch: usize,
}

impl MetaSettings {
    /// The repair limits these settings give.
    fn repair(&self) -> RepairSettings {
        RepairSettings {
            max_repairs: self.max_repairs,
            max_repairs_per_datanode: self.max_repairs_per_datanode,
            repair_timeout: self.repair_timeout,
            scan_interval: self.redundancy_scan_interval,
            ..RepairSettings::default()
        }
    }

    /// The lifecycle worker's settings these give.
    fn lifecycle(&self) -> LifecycleSettings {
        LifecycleSettings {
            day: LifecycleDay::new(self.lifecycle_day),
            batch: self.lifecycle_batch,
            background: true,
        }
    }
}

/// How a separate datanode or gateway proves to meta who it is: the
/// credential `tessera admin credential` minted for it.
#[derive(Args, Clone, Debug)]
pub struct CredentialArgs {
    /// This process's credential (`tdn1.…` for a datanode, `tgw1.…` for a
    /// gateway); prefer --credential-file, which keeps it out of `ps`.
    #[arg(long, env = "TESSERA_CREDENTIAL", hide_env_values = true)]
    pub credential: Option<String>,
    /// File holding the credential (mode 0600).
    #[arg(long, env = "TESSERA_CREDENTIAL_FILE")]
    pub credential_file: Option<std::path::PathBuf>,
}

impl CredentialArgs {
    /// The credential, from the flag or the file; its holder must be of the
    /// kind `expected` names (`datanode` or `gateway`), as `is_kind` checks.
    pub fn credential(
        &self,
        expected: &str,
        is_kind: impl Fn(&Principal) -> bool,
    ) -> Result<Credential> {
        let text = if let Some(text) = &self.credential {
            text.clone()
        } else {
            let Some(file) = &self.credential_file else {
                anyhow::bail!(
                    "meta needs this {expected}'s credential: pass --credential-file (or \
                     TESSERA_CREDENTIAL_FILE) with what `tessera admin credential {expected}` printed"
                );
            };
            std::fs::read_to_string(file)
                .with_context(|| format!("reading the credential from {}", file.display()))?
        };
        let credential = Credential::parse(&text)
            .context("the credential is not one `tessera admin credential` prints")?;
        if !is_kind(&credential.principal) {
            anyhow::bail!(
                "the credential is a {}'s, not a {expected}'s",
                credential.principal
            );
        }
        Ok(credential)
    }
}

/// Mutual TLS on the cluster's internal links (meta RPC and datanode
/// ports): the cluster CA and this process's certificate and key, as
/// `tessera admin certs` writes them. All three or none; none speaks clear
/// text, which suits processes on one trusted host only.
#[derive(Args, Clone, Debug, Default)]
pub struct ClusterTlsArgs {
    /// The cluster CA's certificate (PEM): peers must prove a certificate it issued.
    #[arg(long, env = "TESSERA_CLUSTER_CA")]
    pub cluster_ca: Option<PathBuf>,
    /// This process's certificate (PEM), issued by the cluster CA for the
    /// hosts others dial it at.
    #[arg(long, env = "TESSERA_CLUSTER_CERT")]
    pub cluster_cert: Option<PathBuf>,
    /// This process's private key (PEM, mode 0600).
    #[arg(long, env = "TESSERA_CLUSTER_KEY")]
    pub cluster_key: Option<PathBuf>,
}

impl ClusterTlsArgs {
    /// The TLS settings of the internal links, `None` for clear text.
    pub fn load(&self) -> Result<Option<Arc<tls::ClusterTls>>> {
        let files = match (&self.cluster_ca, &self.cluster_cert, &self.cluster_key) {
            (None, None, None) => return Ok(None),
            (Some(ca), Some(cert), Some(key)) => tls::ClusterTlsFiles {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => anyhow::bail!(
                "mutual TLS needs all of --cluster-ca, --cluster-cert and --cluster-key"
            ),
        };
        let tls = tls::ClusterTls::load(&files).context("loading the cluster TLS files")?;
        Ok(Some(tls))
    }
}

/// Settings of the block store shared by writers and datanodes.
#[derive(Args, Clone, Debug)]
pub struct StorageSettings {
    /// Size of one block file (one internal block for EC).
    #[arg(long, env = "TESSERA_BLOCK_SIZE", default_value = "256MiB", value_parser = parse_size)]
    pub block_size: u64,
    /// Bytes covered by one CRC32C checksum.
    #[arg(long, env = "TESSERA_BYTES_PER_CHECKSUM", default_value = "16KiB", value_parser = parse_size)]
    pub bytes_per_checksum: u64,
    /// Deadline for one datanode request before the datanode counts as failed.
    #[arg(long, env = "TESSERA_IO_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub io_timeout: Duration,
    /// Turn off short-circuit reads: datanodes serve no Unix socket and
    /// clients read every block over TCP, even from datanodes on this host.
    #[arg(long, env = "TESSERA_NO_SHORT_CIRCUIT")]
    pub no_short_circuit: bool,
    /// Bytes a sequential reader keeps in flight ahead of its consumer:
    /// larger streams faster alone, smaller leaves more room to positioned
    /// readers beside it.
    #[arg(long, env = "TESSERA_READ_WINDOW", default_value = "32MiB", value_parser = parse_size)]
    pub read_window: u64,
    /// Bytes a sequential reader keeps in flight while positioned reads of
    /// the same object are running (at least one piece; 0 means one piece):
    /// it yields to them rather than queue a full window ahead of them.
    #[arg(long, env = "TESSERA_CONTENDED_READ_WINDOW", default_value = "0", value_parser = parse_size)]
    pub contended_read_window: u64,
    /// Percent of the time (1 to 100) a sequential reader spends reading
    /// while positioned reads of the same object run; 100 turns pacing off.
    #[arg(long, env = "TESSERA_CONTENDED_READ_SHARE", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub contended_read_share: u32,
    /// How long one datanode read may take before the client reads the
    /// bytes another way (another replica, or decoding from parity).
    #[arg(long, env = "TESSERA_READ_DEADLINE", default_value = "3s", value_parser = parse_duration)]
    pub read_deadline: Duration,
}

impl StorageSettings {
    /// The client settings these imply, with `tls` on datanode links.
    pub fn client_config(&self, tls: Option<Arc<tls::ClusterTls>>) -> Result<ClientConfig> {
        Ok(ClientConfig {
            block_size: self.block_size,
            bytes_per_checksum: u32::try_from(self.bytes_per_checksum)
                .context("--bytes-per-checksum too large")?,
            io_timeout: self.io_timeout,
            short_circuit: !self.no_short_circuit,
            read_window: self.read_window.max(1),
            contended_read_window: self.contended_read_window,
            contended_read_share: self.contended_read_share,
            read_deadline: self.read_deadline,
            tls,
            ..ClientConfig::default()
        })
    }
}

/// Settings of a datanode.
#[derive(Args, Clone, Debug)]
pub struct DatanodeSettings {
    /// fsync block files before acknowledging their commit (turn off only for throwaway data).
    #[arg(long, env = "TESSERA_FSYNC", default_value_t = true, action = clap::ArgAction::Set)]
    pub fsync: bool,
    /// Write whole cells of block data straight to disk (O_DIRECT) rather than through the page cache.
    #[arg(long, env = "TESSERA_DIRECT_WRITES", default_value_t = true, action = clap::ArgAction::Set)]
    pub direct_writes: bool,
    /// Disk writes a datanode runs at once; further uploads wait their turn.
    #[arg(long, env = "TESSERA_MAX_DISK_WRITES", default_value_t = ::datanode::store::DEFAULT_DISK_WRITES)]
    pub max_disk_writes: usize,
    /// Block files up to this size are packed into volumes (group-committed appends); larger ones get files of their own; 0 packs none.
    #[arg(long, env = "TESSERA_PACK_MAX", default_value = "1MiB", value_parser = parse_size)]
    pub pack_max: u64,
    /// Size past which a datanode starts a new volume.
    #[arg(long, env = "TESSERA_VOLUME_MAX", default_value = "1GiB", value_parser = parse_size)]
    pub volume_max: u64,
    /// Share of a sealed volume's bytes deleted records must reach before it is rewritten without them (above 1: never).
    #[arg(long, env = "TESSERA_COMPACT_GARBAGE", default_value_t = ::datanode::DEFAULT_COMPACT_GARBAGE_RATIO)]
    pub compact_garbage: f64,
    /// Bytes a second compaction copies; 0: no limit.
    #[arg(long, env = "TESSERA_COMPACT_BANDWIDTH", default_value = "32MiB", value_parser = parse_size)]
    pub compact_bandwidth: u64,
    /// Failed disks a datanode serves on past; one more and it stops
    /// [default: half its disks, rounded down: 0 for one disk].
    #[arg(long, env = "TESSERA_FAILED_DISKS_TOLERATED")]
    pub failed_disks_tolerated: Option<usize>,
    /// Interval between heartbeats to meta.
    #[arg(long, env = "TESSERA_HEARTBEAT_INTERVAL", default_value = "3s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,
    /// Capacity to report, overriding the file system's size.
    #[arg(long, env = "TESSERA_CAPACITY", value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// How read replies send block data: `sendfile` (no copies in the datanode) or `copy`.
    #[arg(long, env = "TESSERA_SEND_MODE", default_value = "sendfile")]
    pub send_mode: ::datanode::SendMode,
    /// Check each read's CRCs against the disk before replying (sends by copy).
    #[arg(long, env = "TESSERA_VERIFY_ON_READ")]
    pub verify_on_read: bool,
    /// Bytes the kernel reads ahead past each read of a block file; 0 turns it off.
    #[arg(long, env = "TESSERA_READAHEAD", default_value = "4MiB", value_parser = parse_size)]
    pub readahead: u64,
    /// Interval between block reports to meta (which deletes the orphans among them).
    #[arg(long, env = "TESSERA_BLOCK_REPORT_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    pub block_report_interval: Duration,
    /// Uploads (temporary block files) untouched this long are discarded.
    #[arg(long, env = "TESSERA_UPLOAD_GRACE", default_value = "1h", value_parser = parse_duration)]
    pub upload_grace: Duration,
    /// Bytes a second the repairs a datanode runs may read, all together; 0: no limit.
    #[arg(long, env = "TESSERA_REPAIR_BANDWIDTH", default_value = "32MiB", value_parser = parse_size)]
    pub repair_bandwidth: u64,
    /// The scrubber reads every block file against its checksums once per period, paced to spread each pass over it; 0s turns it off.
    #[arg(long, env = "TESSERA_SCRUB_PERIOD", default_value = "7d", value_parser = parse_duration)]
    pub scrub_period: Duration,
}

/// Settings of the S3 gateway.
#[derive(Args, Clone, Debug)]
pub struct GatewaySettings {
    /// Region in SigV4 credential scopes.
    #[arg(long, env = "TESSERA_REGION", default_value = "us-east-1")]
    pub region: String,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key); read again on SIGHUP.
    #[arg(long, env = "TESSERA_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "TESSERA_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Domain for virtual-hosted-style requests (`bucket.DOMAIN`); path style always works.
    #[arg(long, env = "TESSERA_DOMAIN")]
    pub domain: Option<String>,
    /// Large object bodies (PUT, UploadPart) streamed at once, each body taking a sixteenth per MiB it declares (a whole one from 16 MiB or undeclared); more wait their turn (default: 2 per core; 0: no bound).
    #[arg(long, env = "TESSERA_MAX_CONCURRENT_UPLOADS")]
    pub max_concurrent_uploads: Option<usize>,
    /// Longest a PUT waits for its turn before a 503 (which SDKs retry).
    #[arg(long, env = "TESSERA_UPLOAD_SLOT_WAIT", default_value = "60s", value_parser = parse_duration)]
    pub upload_slot_wait: Duration,
    /// Longest from a connection's start, or its last response, to a whole request head (also the keep-alive idle timeout).
    #[arg(long, env = "TESSERA_HEADER_READ_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// Most S3 connections open at once; more are answered 503 SlowDown.
    #[arg(long, env = "TESSERA_MAX_CONNECTIONS", default_value_t = ::gateway::listener::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Least rate of a request body, averaged over each --body-rate-window; 0 turns it off.
    #[arg(long, env = "TESSERA_BODY_MIN_RATE", default_value = "1KiB", value_parser = parse_size)]
    pub body_min_rate: u64,
    /// Window over which --body-min-rate is measured; a stalled body is cut after one.
    #[arg(long, env = "TESSERA_BODY_RATE_WINDOW", default_value = "20s", value_parser = parse_duration)]
    pub body_rate_window: Duration,
    /// Bytes all GET bodies may hold in flight at once; more wait (then SlowDown).
    #[arg(long, env = "TESSERA_GET_MEMORY", default_value = "1GiB", value_parser = parse_size)]
    pub get_memory: u64,
    /// Accept AWS Signature Version 2 (older SDKs, s3cmd, aws-cli v1 and boto3 presigned links); false: SigV4 only.
    #[arg(long, env = "TESSERA_SIGV2", default_value_t = true, action = clap::ArgAction::Set)]
    pub sigv2: bool,
    /// Take SSE-C keys over plain HTTP (only when TLS ends in front of the gateway); without it they need HTTPS, as in S3.
    #[arg(long, env = "TESSERA_SSE_C_OVER_HTTP")]
    pub sse_c_over_http: bool,
    /// Objects of at most this size (as stored) are kept in their meta record, with no block on a datanode; 0: none. At most 256KiB.
    #[arg(long, env = "TESSERA_INLINE_MAX", default_value = "16KiB", value_parser = parse_inline_max)]
    pub inline_max: u64,
    /// Object ownership of buckets created without `x-amz-object-ownership`: BucketOwnerEnforced (AWS's default: ACLs off), BucketOwnerPreferred or ObjectWriter (for applications that still send `x-amz-acl`).
    #[arg(long, env = "TESSERA_DEFAULT_OBJECT_OWNERSHIP", default_value = "BucketOwnerEnforced", value_parser = parse_ownership)]
    pub default_object_ownership: access::ObjectOwnership,
    /// Whether new buckets start with every public access block flag on (AWS's default); false lets public ACLs and policies work from the start.
    #[arg(long, env = "TESSERA_DEFAULT_BLOCK_PUBLIC_ACCESS", default_value_t = true, action = clap::ArgAction::Set)]
    pub default_block_public_access: bool,
}

/// `--default-object-ownership`: one of S3's ObjectOwnership names.
fn parse_ownership(text: &str) -> Result<access::ObjectOwnership, String> {
    access::ObjectOwnership::parse(text).ok_or_else(|| {
        format!("{text:?} is not BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter")
    })
}

/// `--inline-max`: a size meta takes in a record.
fn parse_inline_max(text: &str) -> Result<u64, String> {
    let size = parse_size(text)?;
    if size > meta_api::MAX_INLINE_BODY as u64 {
        return Err(format!(
            "{text:?} is over the {} bytes meta keeps in a record",
            meta_api::MAX_INLINE_BODY
        ));
    }
    Ok(size)
}

/// Opens a lone metadata service in `dir` ([`print_root`] then shows its
/// root credentials).
pub fn open_meta(dir: &Path, settings: &MetaSettings, block_size: u64) -> Result<Arc<MetaService>> {
    MetaService::open(meta_config(dir, settings, block_size)?)
        .with_context(|| format!("opening metadata in {}", dir.display()))
}

/// Opens the store of a meta group's member in `dir` (its Raft starts
/// with [`MetaService::join_group`] once its port serves).
pub fn open_meta_member(
    dir: &Path,
    settings: &MetaSettings,
    block_size: u64,
) -> Result<Arc<MetaService>> {
    MetaService::open_member(meta_config(dir, settings, block_size)?)
        .with_context(|| format!("opening metadata in {}", dir.display()))
}

/// Makes a data folder (the owner's alone) if it is not there; the error
/// names it.
pub fn make_data_dir(dir: &Path) -> Result<()> {
    proto::durable::create_private_dir(dir)
        .with_context(|| format!("making the data folder {}", dir.display()))
}

/// Fails, naming the flag and the address, when one of `listens` (flag,
/// address) cannot be bound: checked before a first start makes its data
/// folder and credentials, so a port in use costs nothing to retry. A port
/// taken between this check and the real bind still fails there.
pub fn ensure_bindable(listens: &[(&str, &str)]) -> Result<()> {
    for (flag, addr) in listens {
        std::net::TcpListener::bind(addr)
            .with_context(|| format!("{flag} {addr} cannot be bound"))?;
    }
    Ok(())
}

fn meta_config(dir: &Path, settings: &MetaSettings, block_size: u64) -> Result<MetaConfig> {
    make_data_dir(dir)?;
    Ok(MetaConfig {
        data_dir: dir.to_path_buf(),
        stale_after: settings.stale_after,
        dead_after: settings.dead_after,
        admin_token: settings.admin_token.clone(),
        root_access_key: settings.root_access_key.clone(),
        root_secret_key: settings.root_secret_key.clone(),
        block_size,
        deletion_delay: settings.deletion_delay,
        orphan_grace: settings.orphan_grace,
        token_rotation: settings.token_key_rotation,
        token_lifetime: settings.token_lifetime,
        repair: settings.repair(),
        lifecycle: settings.lifecycle(),
        clock: Clock::System,
        commits: Commits::Grouped,
    })
}

/// Whether meta's folder `dir` holds saved root credentials: looked at
/// before meta opens, it tells [`print_root`] whether this start made them.
pub fn root_saved_in(dir: &Path) -> bool {
    dir.join(::meta::ROOT_CREDENTIALS_FILE).exists()
}

/// Prints the root credentials where the operator starting meta sees them:
/// the secret only on the start that made them (`saved_before` false and
/// saved now), so the logs of later starts never hold it.
pub fn print_root(service: &MetaService, settings: &MetaSettings, saved_before: bool) {
    let saved_in = service
        .config()
        .data_dir
        .join(::meta::ROOT_CREDENTIALS_FILE);
    let Some(root) = service.root_credentials() else {
        eprintln!(
            "root credentials: made by the group's first leader, then saved in {}",
            saved_in.display()
        );
        return;
    };
    if settings.root_access_key.is_some() {
        eprintln!("root access key {} (from the environment)", root.access_key);
    } else if root.generated || !saved_before {
        eprintln!(
            "root credentials, generated now (saved in {}):\n  AWS_ACCESS_KEY_ID={}\n  AWS_SECRET_ACCESS_KEY={}",
            saved_in.display(),
            root.access_key,
            root.secret_key
        );
    } else {
        eprintln!(
            "root access key {} (its secret is in {})",
            root.access_key,
            saved_in.display()
        );
    }
}

pub async fn serve_meta(
    listen: &str,
    service: Arc<MetaService>,
    tls: Option<Arc<tls::ClusterTls>>,
    shutdown: &Shutdown,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding meta on {listen}"))?;
    let addr = listener.local_addr()?;
    let stop = shutdown.wait();
    let task = tokio::spawn(async move {
        if let Err(e) = ::meta::serve(listener, service, tls, stop).await {
            tracing::error!("meta RPC: {e}");
        }
    });
    Ok((addr, task))
}

/// Binds the S3 gateway on `listen` (HTTPS when the settings name a
/// certificate, which SIGHUP reloads); returns its endpoint URL and a task
/// that ends once shutdown was asked and every in-flight request finished.
pub async fn serve_gateway(
    listen: &str,
    meta: MetaClient,
    storage: &StorageSettings,
    settings: &GatewaySettings,
    cluster_tls: Option<Arc<tls::ClusterTls>>,
    shutdown: &Shutdown,
) -> Result<(String, tokio::task::JoinHandle<()>)> {
    let tls = match (&settings.tls_cert, &settings.tls_key) {
        (Some(cert), Some(key)) => {
            let files = ::gateway::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            };
            let tls = ::gateway::tls::Tls::load(files).context("loading the S3 certificate")?;
            reload_on_sighup(tls.clone())?;
            Some(tls)
        }
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the S3 gateway on {listen}"))?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let store = StoreClient::new(meta.clone(), storage.client_config(cluster_tls)?);
    let app = ::gateway::router(
        meta,
        store,
        ::gateway::GatewayConfig {
            region: settings.region.clone(),
            domain: settings.domain.clone(),
            max_concurrent_uploads: settings
                .max_concurrent_uploads
                .unwrap_or_else(::gateway::upload_slots::UploadSlots::default_max),
            upload_slot_wait: settings.upload_slot_wait,
            body_rate: ::gateway::body_rate::BodyRateLimit {
                min_bytes_per_second: settings.body_min_rate,
                window: settings.body_rate_window,
            },
            get_memory: settings.get_memory,
            sigv2: settings.sigv2,
            sse_c_over_http: settings.sse_c_over_http,
            inline_max: settings.inline_max as usize,
            default_ownership: settings.default_object_ownership,
            default_block_public_access: settings.default_block_public_access,
        },
    );
    let limits = ::gateway::listener::ConnectionLimits {
        header_read_timeout: settings.header_read_timeout,
        max_connections: settings.max_connections,
    };
    let stop = shutdown.wait();
    let task = tokio::spawn(async move {
        if let Err(e) = ::gateway::listener::serve(listener, app, limits, tls, stop).await {
            tracing::error!("S3 gateway: {e}");
        }
    });
    Ok((format!("{scheme}://{addr}"), task))
}

/// Reads the S3 certificate and key again on every SIGHUP.
fn reload_on_sighup(tls: Arc<::gateway::tls::Tls>) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = signal(SignalKind::hangup()).context("listening for SIGHUP")?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match tls.reload() {
                Ok(()) => {
                    tracing::info!(cert = %tls.files().cert.display(), "S3 certificate reloaded")
                }
                Err(e) => {
                    tracing::error!(error = %e, "S3 certificate not reloaded; the old one stays")
                }
            }
        }
    });
    Ok(())
}

/// Prints the one line test fixtures and scripts wait for.
pub fn print_ready(fields: &[(&str, String)]) {
    let line: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "READY {}", line.join(" "));
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("16KiB"), Ok(16384));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
