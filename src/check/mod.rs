//! `tessera check`: Jepsen-style consistency checking of an S3 endpoint.
//! `run` drives concurrent clients over a few keys (PUT, conditional PUTs,
//! some as multipart uploads with conditional Completes, DELETE, GET,
//! ListObjectsV2 of a prefix, or ListObjectVersions with `--versioned`),
//! records every operation with its invocation and completion times and its
//! answer, then checks the history (the `checker` crate): per-key
//! linearizability (a listing is a read of each key it could show), one
//! winner per precondition, one order of versions for every reader. Faults are
//! injected from outside while it runs (the consistency tests kill and
//! restart processes); operations they leave unanswered are recorded as
//! indeterminate. `replay` checks a saved history again.
//!
//! ```text
//! tessera check run --endpoint http://127.0.0.1:9878 --clients 8 --keys 5 \
//!     --duration 30s --history history.jsonl
//! tessera check replay --history history.jsonl
//! ```

mod workload;

use crate::roles::{parse_duration, parse_size};
use crate::s3_client::S3Args;
use anyhow::{bail, Context, Result};
use checker::History;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// Consistency checking of an S3 endpoint.
#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(subcommand)]
    command: CheckCommand,
}

#[derive(Subcommand, Debug)]
enum CheckCommand {
    /// Runs the workload, saves its history (with --history), checks it.
    Run(Box<RunArgs>),
    /// Checks a history saved by `run`.
    Replay {
        /// The history file (JSON lines).
        #[arg(long)]
        history: PathBuf,
    },
}

/// The workload's shape.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    s3: S3Args,
    /// Bucket the keys live in; created when missing.
    #[arg(long, default_value = "tessera-check")]
    bucket: String,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// Keys the clients race on at a time.
    #[arg(long, default_value_t = 5)]
    keys: u32,
    /// Operations on one key before the clients move to a fresh one (as
    /// Jepsen's independent keys): keeps each key's history short enough to
    /// check, however many writes the faults leave unanswered.
    #[arg(long, default_value_t = 300)]
    ops_per_key: u64,
    /// How long the clients run, before each key is read a last time.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Longest wait for one answer; past it the operation is indeterminate.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    op_timeout: Duration,
    /// How long the last reads keep trying for an answer (faults over).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    final_read_timeout: Duration,
    /// Size of each object written (small ones live in meta's records,
    /// larger ones in block files on the datanodes).
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    object_size: u64,
    /// Seed of the operation mix (random when unset; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Turns versioning on in the bucket and lists each key's versions
    /// (ListObjectVersions) instead of the slot's prefix: every listing of
    /// a key's versions must show them in one order.
    #[arg(long)]
    versioned: bool,
    /// Where to save the history, one operation per line.
    #[arg(long)]
    history: Option<PathBuf>,
}

/// Runs `tessera check`; an error when the history fails a check.
pub async fn run(args: CheckArgs) -> Result<()> {
    let history = match args.command {
        CheckCommand::Run(run) => {
            let history = workload::run(&run).await?;
            if let Some(path) = &run.history {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("creating {}", path.display()))?;
                history.save(file)?;
            }
            history
        }
        CheckCommand::Replay { history } => {
            let file = std::fs::File::open(&history)
                .with_context(|| format!("opening {}", history.display()))?;
            History::load(file)?
        }
    };
    let report = tokio::task::spawn_blocking(move || checker::check(&history)).await?;
    print!("{report}");
    if !report.passed() {
        bail!(
            "the history did not pass: {} anomalies, {} keys undecided",
            report.anomalies.len(),
            report.undecided.len()
        );
    }
    Ok(())
}
