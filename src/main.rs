//! `tessera`: one binary for every role of the cluster.
#![forbid(unsafe_code)]

mod admin;
mod bench;
mod check;
mod config;
mod ops;
mod probe;
mod roles;
mod s3_client;
mod shutdown;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

/// mimalloc instead of glibc's malloc: the gateway allocates and frees a few
/// small buffers per request on every core, and glibc's arenas spent ~20% of
/// its CPU in malloc/free under ranged GETs (docs/benchmarks.md). Built
/// without transparent huge pages (`no_thp`): with them, each span mimalloc
/// takes back from the kernel after a burst faulted in a whole 2 MiB page
/// zeroed, 9% of meta's CPU under small PUTs (docs/benchmarks.md).
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
    Server(Box<roles::server::ServerArgs>),
    /// The metadata service.
    Meta(Box<roles::meta::MetaArgs>),
    /// A datanode.
    Datanode(Box<roles::datanode::DatanodeArgs>),
    /// The S3 gateway.
    Gateway(Box<roles::gateway::GatewayArgs>),
    /// The web console, in front of a cluster's gateway.
    Console(Box<roles::console::ConsoleArgs>),
    /// Users, keys, buckets, credentials, certificates and cluster status.
    Admin(Box<admin::AdminArgs>),
    /// Load generators: positioned reads, S3 GETs, key writes.
    Bench(Box<bench::BenchArgs>),
    /// Consistency checking: concurrent clients, a recorded history, and
    /// the checks it must pass (per-key linearizability).
    Check(Box<check::CheckArgs>),
    /// Exits 0 when an HTTP GET of URL answers 200 (container health checks).
    Probe { url: String },
}

/// What is logged when RUST_LOG is unset.
const DEFAULT_LOG: &str = "info,openraft=warn";

fn main() -> Result<()> {
    // Block files, the database, sockets and saved secrets are the owner's
    // alone: every file this process creates is 0600, every folder 0700.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    config::apply_config_file(&args, &Cli::command())?;
    let cli = Cli::parse_from(args);
    // Colour only for a terminal: a log file or journal gets plain text.
    // openraft's own INFO lines (whole Raft states on one line) say more
    // than an operator reads; RUST_LOG=openraft=info brings them back.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Server(a) => roles::server::run(*a).await,
            Command::Meta(a) => roles::meta::run(*a).await,
            Command::Datanode(a) => roles::datanode::run(*a).await,
            Command::Gateway(a) => roles::gateway::run(*a).await,
            Command::Console(a) => roles::console::run(*a).await,
            Command::Admin(a) => admin::run(*a).await,
            Command::Bench(a) => bench::run(*a).await,
            Command::Check(a) => check::run(*a).await,
            Command::Probe { url } => probe::probe(&url).await,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// Every flag of every role and of their subcommands (`check run`,
    /// `admin ...`) with its default, as `--help` shows them.
    fn flag_defaults() -> BTreeMap<String, Vec<Option<String>>> {
        fn walk(command: &clap::Command, flags: &mut BTreeMap<String, Vec<Option<String>>>) {
            for arg in command.get_arguments() {
                if let Some(long) = arg.get_long() {
                    let default = arg
                        .get_default_values()
                        .first()
                        .map(|v| v.to_string_lossy().into_owned());
                    flags.entry(format!("--{long}")).or_default().push(default);
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, flags);
            }
        }
        let mut flags: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
        for role in Cli::command().get_subcommands() {
            walk(role, &mut flags);
        }
        flags
    }

    fn default_of(flag: &str) -> String {
        let flags = flag_defaults();
        let defaults = &flags[flag];
        defaults[0]
            .clone()
            .unwrap_or_else(|| panic!("{flag} has no default"))
    }

    #[test]
    fn liveness_defaults_are_meta_own() {
        let parse = |flag| roles::parse_duration(&default_of(flag)).unwrap();
        assert_eq!(parse("--stale-after"), ::meta::DEFAULT_STALE_AFTER);
        assert_eq!(parse("--dead-after"), ::meta::DEFAULT_DEAD_AFTER);
        assert_eq!(parse("--deletion-delay"), ::meta::DEFAULT_DELETION_DELAY);
        assert_eq!(parse("--orphan-grace"), ::meta::DEFAULT_ORPHAN_GRACE);
        assert!(parse("--stale-after") > Duration::ZERO);
    }

    /// README.md names flags as `--flag` followed by its default in
    /// parentheses; each must exist and, where it states a value, state the
    /// one `--help` shows.
    #[test]
    fn readme_flags_exist_with_their_defaults() {
        let readme = include_str!("../README.md");
        let flags = flag_defaults();
        let mentioned = regex_lite_flags(readme);
        assert!(mentioned.len() > 20, "found {} flags", mentioned.len());
        for (flag, stated) in mentioned {
            let Some(defaults) = flags.get(&flag) else {
                panic!("README names {flag}, which no role has");
            };
            let Some(stated) = stated else { continue };
            assert!(
                defaults
                    .iter()
                    .any(|d| d.as_deref() == Some(stated.as_str())),
                "README says {flag} defaults to {stated}; --help says {defaults:?}"
            );
        }
    }

    /// Every flag of the roles an operator runs appears in README.md.
    #[test]
    fn readme_names_every_flag_of_the_roles() {
        let readme = include_str!("../README.md");
        let named = |flag: &str| {
            readme.match_indices(flag).any(|(at, _)| {
                let next = readme[at + flag.len()..].chars().next();
                !next.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
        };
        for role in ["server", "meta", "datanode", "gateway"] {
            let command = Cli::command();
            let role = command.find_subcommand(role).expect("role");
            for arg in role.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let flag = format!("--{long}");
                if long == "config" {
                    continue;
                }
                assert!(
                    named(&flag),
                    "README.md does not name {flag} of `tessera {}`",
                    role.get_name()
                );
            }
        }
    }

    /// (`--flag`, the value in the parentheses right after it when it reads
    /// like a default: starts with a digit, or is true/false/sendfile).
    fn regex_lite_flags(text: &str) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        for piece in text.split("`--").skip(1) {
            let Some(end) = piece.find('`') else { continue };
            let name = &piece[..end];
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                continue;
            }
            let rest = piece[end + 1..].trim_start();
            let stated = rest.strip_prefix('(').and_then(|inner| {
                let value: String = inner
                    .chars()
                    .take_while(|c| !matches!(c, ')' | ':' | ',' | ';' | ' '))
                    .collect();
                let plausible = value.starts_with(|c: char| c.is_ascii_digit())
                    || matches!(value.as_str(), "true" | "false" | "sendfile");
                plausible.then_some(value)
            });
            out.push((format!("--{name}"), stated));
        }
        out
    }
}
