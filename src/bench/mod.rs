//! `tessera bench`: load generators in the spirit of Ozone's freon and HDFS's
//! TestDFSIO. `pread` drives positioned and sequential readers over one shared
//! key reader, `get` whole-object S3 GETs, `put` key writers; each reports
//! ops/s, MB/s, latency percentiles, errors and, when asked, the datanodes'
//! CPU seconds per GB moved.
//!
//! ```text
//! scripts/bench-cluster.sh --bin target/release/tessera     # meta, 5 datanodes, gateway
//! tessera bench pread --meta ADDR --threads 8 --read-size 64KiB --seq-readers 1 \
//!     --duration 20s --datanode-pids auto --plot pread.svg
//! tessera bench pread --via s3 --endpoint URL --threads 8 --duration 20s
//! tessera bench get --endpoint URL --clients 8 --object-size 1MiB --objects 16
//! tessera bench put --meta ADDR --writers 16 --key-size 64MiB --replication rs-3-2-1024k --count 64
//! ```
//!
//! `--json` prints one object on stdout: `ops`, `errors`, `bytes`, `mb_per_s`
//! (MB = 10^6 bytes), `workloads[]` with `ops_per_s` and `latency_ms`
//! {p50, p90, p99, max, mean}, `datanode_cpu`, `buffer_pool` and `timeline`.

mod args;
mod cpu;
mod get;
mod live;
mod plot;
mod pread;
mod put;
mod report;
mod store_ops;

pub use args::BenchArgs;

use anyhow::{Context, Result};
use args::{BenchCommand, DatanodePids, OutputArgs};
use cpu::CpuSample;
use live::{Goal, Live};
use report::{Counters, CpuReport, Report, Timeline, WorkloadResult};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a workload measured: the report and the histograms behind it.
pub(crate) struct RunOutcome {
    report: Report,
    results: Vec<WorkloadResult>,
}

/// The measured part of a run: CPU sampled at both ends, the live sampler
/// and progress bar in between.
pub(crate) struct Phase {
    pids: Vec<u32>,
    cpu_before: Option<CpuSample>,
    live: Live,
    start: Instant,
}

/// What a phase saw once its workers ended.
pub(crate) struct PhaseEnd {
    elapsed: Duration,
    timeline: Timeline,
    cpu: Option<(CpuSample, CpuSample)>,
}

impl Phase {
    /// Starts measuring; call right before the workers start.
    fn begin(output: &OutputArgs, goal: Goal, workloads: Vec<(String, Arc<Counters>)>) -> Self {
        let pids = output
            .datanode_pids
            .as_ref()
            .map(cpu::resolve)
            .unwrap_or_default();
        if matches!(output.datanode_pids, Some(DatanodePids::Auto)) && pids.is_empty() {
            tracing::warn!("--datanode-pids auto found no `tessera datanode` process");
        }
        let cpu_before = output
            .datanode_pids
            .as_ref()
            .map(|_| CpuSample::take(&pids));
        Self {
            pids,
            cpu_before,
            live: Live::start(workloads, goal, !output.json),
            start: Instant::now(),
        }
    }

    /// Stops measuring; call once every worker has ended.
    async fn end(self) -> PhaseEnd {
        let elapsed = self.start.elapsed();
        let cpu = self
            .cpu_before
            .map(|before| (before, CpuSample::take(&self.pids)));
        let timeline = self.live.finish().await;
        PhaseEnd {
            elapsed,
            timeline,
            cpu,
        }
    }
}

impl PhaseEnd {
    /// Datanode CPU per GB of `bytes`, when --datanode-pids was given.
    fn cpu_report(&self, bytes: u64) -> Option<CpuReport> {
        self.cpu
            .as_ref()
            .map(|(before, after)| cpu::cpu_report(before, after, bytes))
    }

    /// The report of `command` over this phase, with the datanodes' CPU.
    fn report(
        &self,
        command: &str,
        via: &str,
        target: String,
        settings: serde_json::Value,
        results: &[WorkloadResult],
    ) -> Report {
        let mut report = Report::new(
            command,
            via,
            target,
            settings,
            self.elapsed,
            results,
            self.timeline.clone(),
        );
        report.datanode_cpu = self.cpu_report(report.bytes);
        report
    }
}

/// Runs one bench and prints its report.
pub async fn run(args: BenchArgs) -> Result<()> {
    let (outcome, output) = match args.command {
        BenchCommand::Pread(a) => {
            let output = a.output.clone();
            (pread::run(a).await?, output)
        }
        BenchCommand::Get(a) => {
            let output = a.output.clone();
            (get::run(a).await?, output)
        }
        BenchCommand::Put(a) => {
            let output = a.output.clone();
            (put::run(a).await?, output)
        }
    };
    if let Some(path) = &output.plot {
        plot::write_svg(path, &outcome.results, &outcome.report.timeline)?;
    }
    if output.json {
        println!(
            "{}",
            serde_json::to_string(&outcome.report).context("encoding the report")?
        );
    } else {
        print!("{}", outcome.report.to_text());
        if let Some(path) = &output.plot {
            println!("plot: {}", path.display());
        }
    }
    Ok(())
}
