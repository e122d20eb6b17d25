//! Flags of `tessera bench pread | get | put`.

use crate::roles::{parse_duration, parse_size, StorageSettings};
pub use crate::s3_client::S3Args;
use clap::{Args, Subcommand, ValueEnum};
use proto::ReplicationConfig;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of `tessera bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The workload to run.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The workloads, after Ozone's freon generators and HDFS's TestDFSIO.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Positioned reads of one key by many tasks sharing one reader, beside
    /// sequential readers of the same key (freon ocpr).
    Pread(PreadArgs),
    /// Whole-object GETs of many small objects through S3.
    Get(GetArgs),
    /// Key writes through the client library or S3 PUT (freon ockg).
    Put(PutArgs),
}

/// The path the bench drives: the client library straight to meta and
/// datanodes, or HTTP through the S3 gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Via {
    /// StoreClient over meta's RPC (what the gateway itself uses).
    Client,
    /// Signed S3 requests to `--endpoint`.
    S3,
}

impl Via {
    /// The name reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Client => "client",
            Via::S3 => "s3",
        }
    }
}

/// Which processes to charge datanode CPU time to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatanodePids {
    /// Every process whose command line is `tessera ... datanode ...`.
    Auto,
    /// These process ids.
    List(Vec<u32>),
}

/// Parses `auto` or a comma-separated list of process ids.
pub fn parse_datanode_pids(text: &str) -> Result<DatanodePids, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(DatanodePids::Auto);
    }
    let pids = text
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<u32>()
                .map_err(|_| format!("bad process id {p:?} in {text:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DatanodePids::List(pids))
}

/// Parses a bucket or key name; the bench keeps to characters that need no
/// percent-encoding, so the signed path is the sent path.
pub fn parse_plain_name(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/'));
    if ok && !text.starts_with('/') {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?}: use letters, digits and - _ . ~ / (not leading) for bench names"
        ))
    }
}

/// Where the bench sends its load.
#[derive(Args, Clone, Debug)]
pub struct TargetArgs {
    /// Address of meta's RPC (for --via client).
    #[arg(long)]
    pub meta: Option<String>,
    /// Client library or S3 gateway.
    #[arg(long, value_enum, default_value = "client")]
    pub via: Via,
    /// S3 endpoint URL (for --via s3), e.g. http://127.0.0.1:9878.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// S3 access key.
    #[arg(long, env = "AWS_ACCESS_KEY_ID", hide_env_values = true)]
    pub access_key: Option<String>,
    /// S3 secret key.
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub secret_key: Option<String>,
    /// Region in the SigV4 credential scope.
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// Client settings for --via client.
    #[command(flatten)]
    pub storage: StorageSettings,
    /// A gateway's credential for meta's RPC (--via client).
    #[command(flatten)]
    pub credential: crate::roles::CredentialArgs,
    /// Mutual TLS to meta and the datanodes (--via client).
    #[command(flatten)]
    pub cluster_tls: crate::roles::ClusterTlsArgs,
}

impl TargetArgs {
    /// The S3 settings, when --via s3 has what it needs.
    pub fn s3(&self) -> anyhow::Result<S3Args> {
        let need = |v: &Option<String>, flag: &str| {
            v.clone()
                .ok_or_else(|| anyhow::anyhow!("--via s3 needs {flag}"))
        };
        Ok(S3Args {
            endpoint: need(&self.endpoint, "--endpoint")?,
            access_key: need(&self.access_key, "--access-key (or AWS_ACCESS_KEY_ID)")?,
            secret_key: need(&self.secret_key, "--secret-key (or AWS_SECRET_ACCESS_KEY)")?,
            region: self.region.clone(),
        })
    }

    /// Meta's RPC address, when --via client has it.
    pub fn meta(&self) -> anyhow::Result<String> {
        self.meta
            .clone()
            .ok_or_else(|| anyhow::anyhow!("--via client needs --meta ADDR"))
    }

    /// What the report names as the target.
    pub fn describe(&self) -> String {
        match self.via {
            Via::Client => self.meta.clone().unwrap_or_default(),
            Via::S3 => self.endpoint.clone().unwrap_or_default(),
        }
    }
}

/// How results are shown.
#[derive(Args, Clone, Debug)]
pub struct OutputArgs {
    /// Print one JSON object on stdout (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Write a latency histogram and a throughput-over-time chart to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Datanode processes whose CPU time to report per GB moved: `auto` finds
    /// every `tessera datanode` on this host, or PID,PID,...
    #[arg(long, value_parser = parse_datanode_pids)]
    pub datanode_pids: Option<DatanodePids>,
}

/// Flags of `tessera bench pread`.
#[derive(Args, Clone, Debug)]
pub struct PreadArgs {
    /// Where to send the reads.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Bucket of the key (created when absent).
    #[arg(long, default_value = "bench", value_parser = parse_plain_name)]
    pub bucket: String,
    /// Key to read (written first when absent).
    #[arg(long, default_value = "pread-key", value_parser = parse_plain_name)]
    pub key: String,
    /// Size of the key when it has to be written.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub size: u64,
    /// Replication of the key when it has to be written.
    #[arg(long, default_value = "rs-3-2-1024k")]
    pub replication: ReplicationConfig,
    /// Positioned-read tasks.
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    /// Bytes per positioned read, at offsets aligned to it.
    #[arg(long, default_value = "64KiB", value_parser = parse_size)]
    pub read_size: u64,
    /// Sequential readers of the same key, beside the positioned reads.
    #[arg(long, default_value_t = 1)]
    pub seq_readers: usize,
    /// Bytes per sequential read.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    pub seq_read_size: u64,
    /// How long to read.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Check every byte read against what the bench wrote, counting a
    /// difference as an error (the key is written anew first, so that its
    /// contents are known).
    #[arg(long)]
    pub verify: bool,
    /// Output settings.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `tessera bench get`.
#[derive(Args, Clone, Debug)]
pub struct GetArgs {
    /// The S3 endpoint.
    #[command(flatten)]
    pub s3: S3Args,
    /// Bucket of the objects (created when absent).
    #[arg(long, default_value = "bench", value_parser = parse_plain_name)]
    pub bucket: String,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Size of each object.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    pub object_size: u64,
    /// Objects to spread the GETs over (written first when absent).
    #[arg(long, default_value_t = 16)]
    pub objects: u64,
    /// Replication of objects that have to be written (bucket default when unset).
    #[arg(long)]
    pub replication: Option<ReplicationConfig>,
    /// How long to read.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Write the objects encrypted: `--sse` for SSE-S3 (AES256), `--sse
    /// aws:kms` for SSE-KMS under the default key.
    #[arg(long, num_args = 0..=1, default_missing_value = "AES256", value_parser = ["AES256", "aws:kms"])]
    pub sse: Option<String>,
    /// Check every byte read against what the bench wrote, counting a
    /// difference as an error (the key is written anew first, so that its
    /// contents are known).
    #[arg(long)]
    pub verify: bool,
    /// Output settings.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `tessera bench put`.
#[derive(Args, Clone, Debug)]
pub struct PutArgs {
    /// Where to send the writes.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Bucket of the keys (created when absent).
    #[arg(long, default_value = "bench", value_parser = parse_plain_name)]
    pub bucket: String,
    /// Concurrent writers (one key stream each).
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Bytes per key.
    #[arg(long, default_value = "16MiB", value_parser = parse_size)]
    pub key_size: u64,
    /// Bytes handed to the writer per call (--via client).
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    pub write_size: u64,
    /// Replication of the keys.
    #[arg(long, default_value = "rs-3-2-1024k")]
    pub replication: ReplicationConfig,
    /// Write encrypted (--via s3 only): `--sse` for SSE-S3 (AES256),
    /// `--sse aws:kms` for SSE-KMS under the default key.
    #[arg(long, num_args = 0..=1, default_missing_value = "AES256", value_parser = ["AES256", "aws:kms"])]
    pub sse: Option<String>,
    /// Keys to write in all; without it, write for --duration.
    #[arg(long)]
    pub count: Option<u64>,
    /// How long to write (30s when neither this nor --count is given).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Output settings.
    #[command(flatten)]
    pub output: OutputArgs,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datanode_pids_parse() {
        assert_eq!(parse_datanode_pids("auto"), Ok(DatanodePids::Auto));
        assert_eq!(
            parse_datanode_pids("12, 34"),
            Ok(DatanodePids::List(vec![12, 34]))
        );
        assert!(parse_datanode_pids("12,x").is_err());
    }

    #[test]
    fn names_need_no_encoding() {
        assert!(parse_plain_name("bench/put-1/a_b.c").is_ok());
        assert!(parse_plain_name("a b").is_err());
        assert!(parse_plain_name("/lead").is_err());
        assert!(parse_plain_name("").is_err());
    }

    #[test]
    fn bench_flags_parse_with_units() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            command: BenchCommand,
        }
        let cli = Cli::try_parse_from([
            "bench",
            "pread",
            "--meta",
            "127.0.0.1:1",
            "--size",
            "4MiB",
            "--read-size",
            "16KiB",
            "--duration",
            "1500ms",
            "--datanode-pids",
            "auto",
        ])
        .unwrap();
        let BenchCommand::Pread(p) = cli.command else {
            panic!("not pread");
        };
        assert_eq!(p.size, 4 << 20);
        assert_eq!(p.read_size, 16 << 10);
        assert_eq!(p.duration, Duration::from_millis(1500));
        assert_eq!(p.output.datanode_pids, Some(DatanodePids::Auto));
        assert_eq!(p.target.via, Via::Client);
    }
}
