//! `tessera`: one binary for every role of the cluster.
#![forbid(unsafe_code)]

mod admin;
mod bench;
mod config;
mod ops;
mod probe;
mod roles;
mod shutdown;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

/// mimalloc instead of glibc's malloc: the gateway allocates and frees a few
/// small buffers per request on every core, and glibc's arenas spent ~20% of
/// its CPU in malloc/free under ranged GETs (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tessera: an S3-compatible object store on an erasure-coded block store.
#[derive(Parser, Debug)]
#[command(name = "tessera", version, about)]
struct Cli {
    /// TOML file of settings; its keys are the role's flags (see README).
    #[arg(long, global = true, env = "TESSERA_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Meta, datanodes and the S3 gateway in one process (the embedded default).
    Server(roles::server::ServerArgs),
    /// The metadata service.
    Meta(roles::meta::MetaArgs),
    /// A datanode.
    Datanode(roles::datanode::DatanodeArgs),
    /// The S3 gateway.
    Gateway(roles::gateway::GatewayArgs),
    /// Users, keys, buckets and cluster status.
    Admin(admin::AdminArgs),
    /// Load generators: positioned reads, S3 GETs, key writes.
    Bench(bench::BenchArgs),
    /// Exits 0 when an HTTP GET of URL answers 200 (container health checks).
    Probe { url: String },
}

fn main() -> Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    config::apply_config_file(&args, &Cli::command())?;
    let cli = Cli::parse_from(args);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Server(a) => roles::server::run(a).await,
            Command::Meta(a) => roles::meta::run(a).await,
            Command::Datanode(a) => roles::datanode::run(a).await,
            Command::Gateway(a) => roles::gateway::run(a).await,
            Command::Admin(a) => admin::run(a).await,
            Command::Bench(a) => bench::run(a).await,
            Command::Probe { url } => probe::probe(&url).await,
        }
    })
}
