//! What a bench run measured: per-worker latency histograms merged per
//! workload, live counters for the progress bar and the timeline, and the
//! final report printed as text or one JSON object.
//!
//! Units: latencies in milliseconds, throughput in MB/s with MB = 10^6 bytes,
//! CPU in seconds per GB (10^9 bytes) moved.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes in the MB of every MB/s figure.
pub const MB: f64 = 1e6;
/// Bytes in the GB of every per-GB figure.
pub const GB: f64 = 1e9;

/// Live totals of one workload, shared by its workers and the sampler.
#[derive(Default)]
pub struct Counters {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// A snapshot of a workload's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Operations that succeeded.
    pub ops: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Operations that failed.
    pub errors: u64,
}

impl Counters {
    /// The totals so far.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            ops: self.ops.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// The first error seen, to show why a run had errors.
    pub fn first_error(&self) -> Option<String> {
        self.first_error.lock().clone()
    }
}

/// One worker's record: its own histogram (no lock on the hot path) and the
/// shared counters.
pub struct WorkerTally {
    histogram: Histogram<u64>,
}

impl Default for WorkerTally {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkerTally {
    /// An empty tally; latencies are kept in nanoseconds at 3 significant digits.
    pub fn new() -> Self {
        Self {
            histogram: Histogram::new(3).expect("3 significant digits is a valid precision"),
        }
    }

    /// Records one successful operation.
    pub fn ok(&mut self, counters: &Counters, latency: Duration, bytes: u64) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        // `record` grows the auto-resizing histogram; `saturating_record` would
        // clamp to its current range instead.
        if self.histogram.record(nanos).is_err() {
            self.histogram.saturating_record(nanos);
        }
        counters.ops.fetch_add(1, Ordering::Relaxed);
        counters.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records one failed operation.
    pub fn error(&mut self, counters: &Counters, error: &dyn std::fmt::Display) {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = counters.first_error.lock();
        if first.is_none() {
            *first = Some(error.to_string());
        }
    }

    /// The worker's latency histogram.
    pub fn into_histogram(self) -> Histogram<u64> {
        self.histogram
    }
}

/// Latency percentiles of a workload, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest operation.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl LatencySummary {
    /// Percentiles of a histogram recorded in nanoseconds.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        Self {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            mean: h.mean() / 1e6,
        }
    }
}

/// Results of one class of workers (positioned readers, writers, ...).
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadStats {
    /// Class name, e.g. `positioned`.
    pub name: String,
    /// Concurrent workers of this class.
    pub workers: usize,
    /// Bytes per operation asked for (0 when it varies).
    pub op_bytes: u64,
    /// Successful operations.
    pub ops: u64,
    /// Failed operations.
    pub errors: u64,
    /// Bytes moved by successful operations.
    pub bytes: u64,
    /// Operations per second over the run.
    pub ops_per_s: f64,
    /// MB/s over the run.
    pub mb_per_s: f64,
    /// Latency of successful operations.
    pub latency_ms: LatencySummary,
    /// The first error, when there were any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// A workload's stats with its merged histogram (for plotting).
pub struct WorkloadResult {
    /// The summary that goes into the report.
    pub stats: WorkloadStats,
    /// Every worker's latencies, in nanoseconds.
    pub histogram: Histogram<u64>,
}

/// Operations per second over `elapsed`.
pub fn rate(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// MB/s for `bytes` over `elapsed`.
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    rate(bytes, elapsed) / MB
}

impl WorkloadResult {
    /// Merges the workers' histograms of one workload.
    pub fn new(
        name: &str,
        workers: usize,
        op_bytes: u64,
        counters: &Counters,
        tallies: Vec<WorkerTally>,
        elapsed: Duration,
    ) -> Self {
        let mut histogram = WorkerTally::new().into_histogram();
        for tally in tallies {
            // Both are auto-resizing with the same precision, so adding cannot fail.
            let _ = histogram.add(tally.into_histogram());
        }
        let totals = counters.snapshot();
        let stats = WorkloadStats {
            name: name.to_string(),
            workers,
            op_bytes,
            ops: totals.ops,
            errors: totals.errors,
            bytes: totals.bytes,
            ops_per_s: rate(totals.ops, elapsed),
            mb_per_s: mb_per_s(totals.bytes, elapsed),
            latency_ms: LatencySummary::of(&histogram),
            first_error: counters.first_error(),
        };
        Self { stats, histogram }
    }
}

/// Throughput of each workload per sampling interval.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    /// Seconds from the start to the end of each interval.
    pub t_s: Vec<f64>,
    /// One series per workload.
    pub series: Vec<TimelineSeries>,
}

/// One workload's throughput over time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TimelineSeries {
    /// Workload name.
    pub name: String,
    /// Operations per second in each interval.
    pub ops_per_s: Vec<f64>,
    /// MB/s in each interval.
    pub mb_per_s: Vec<f64>,
}

/// Datanode CPU time spent during the run.
#[derive(Clone, Debug, Serialize)]
pub struct CpuReport {
    /// Processes sampled.
    pub pids: Vec<u32>,
    /// User plus system CPU seconds of all of them during the run.
    pub cpu_seconds: f64,
    /// CPU seconds per GB moved by the bench (None when nothing moved).
    pub cpu_seconds_per_gb: Option<f64>,
}

/// Use of the writers' shared buffer pool during a put run.
#[derive(Clone, Debug, Serialize)]
pub struct PoolReport {
    /// Buffer sets taken from the shared pool.
    pub takes: u64,
    /// Of those, sets that ended streams left for reuse (the rest were
    /// allocated, memory the kernel had to fault in).
    pub reused: u64,
    /// Keys written.
    pub streams: u64,
    /// Takes per key stream.
    pub takes_per_stream: f64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `pread`, `get` or `put`.
    pub command: String,
    /// `client` or `s3`.
    pub via: String,
    /// Meta address or S3 endpoint.
    pub target: String,
    /// The workload's settings, as given.
    pub settings: serde_json::Value,
    /// Seconds from the first operation to the last worker's end.
    pub elapsed_s: f64,
    /// Successful operations of all workloads.
    pub ops: u64,
    /// Failed operations of all workloads.
    pub errors: u64,
    /// Bytes moved by all workloads.
    pub bytes: u64,
    /// MB/s of all workloads together.
    pub mb_per_s: f64,
    /// Each class of workers.
    pub workloads: Vec<WorkloadStats>,
    /// Datanode CPU, when asked with --datanode-pids.
    pub datanode_cpu: Option<CpuReport>,
    /// Shared buffer pool use (put --via client, when the client exposes it).
    pub buffer_pool: Option<PoolReport>,
    /// One core's MD5 speed (the ETag's, which bounds one PUT stream),
    /// measured in this run with the gateway's own MD5 (put only).
    pub md5_single_core_mb_per_s: Option<f64>,
    /// Throughput over time.
    pub timeline: Timeline,
}

impl Report {
    /// A report over `workloads` that ran for `elapsed`.
    pub fn new(
        command: &str,
        via: &str,
        target: String,
        settings: serde_json::Value,
        elapsed: Duration,
        workloads: &[WorkloadResult],
        timeline: Timeline,
    ) -> Self {
        let ops = workloads.iter().map(|w| w.stats.ops).sum();
        let errors = workloads.iter().map(|w| w.stats.errors).sum();
        let bytes = workloads.iter().map(|w| w.stats.bytes).sum();
        Self {
            command: command.to_string(),
            via: via.to_string(),
            target,
            settings,
            elapsed_s: elapsed.as_secs_f64(),
            ops,
            errors,
            bytes,
            mb_per_s: mb_per_s(bytes, elapsed),
            workloads: workloads.iter().map(|w| w.stats.clone()).collect(),
            datanode_cpu: None,
            buffer_pool: None,
            md5_single_core_mb_per_s: None,
            timeline,
        }
    }

    /// The report as a human reads it.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "bench {} via {} ({}), {:.1} s\n",
            self.command, self.via, self.target, self.elapsed_s
        );
        out.push_str(&format!(
            "{:<12} {:>4} {:>10} {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}\n",
            "WORKLOAD",
            "N",
            "OPS",
            "ERRORS",
            "OPS/S",
            "MB/S",
            "P50 MS",
            "P90 MS",
            "P99 MS",
            "MAX MS"
        ));
        for w in &self.workloads {
            out.push_str(&format!(
                "{:<12} {:>4} {:>10} {:>7} {:>10.1} {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3}\n",
                w.name,
                w.workers,
                w.ops,
                w.errors,
                w.ops_per_s,
                w.mb_per_s,
                w.latency_ms.p50,
                w.latency_ms.p90,
                w.latency_ms.p99,
                w.latency_ms.max
            ));
        }
        out.push_str(&format!(
            "total: {} ops, {} errors, {:.1} MB/s (MB = 10^6 bytes)\n",
            self.ops, self.errors, self.mb_per_s
        ));
        match &self.datanode_cpu {
            Some(cpu) => out.push_str(&format!(
                "datanode CPU: {:.2} s over {} processes, {} s per GB\n",
                cpu.cpu_seconds,
                cpu.pids.len(),
                cpu.cpu_seconds_per_gb
                    .map_or("n/a".to_string(), |v| format!("{v:.3}"))
            )),
            None => out.push_str("datanode CPU: n/a (--datanode-pids auto|PID,...)\n"),
        }
        if self.command == "put" {
            match &self.buffer_pool {
                Some(p) => out.push_str(&format!(
                    "shared buffer pool: {} takes for {} keys, {:.2} per stream, {} of them reused sets\n",
                    p.takes, p.streams, p.takes_per_stream, p.reused
                )),
                None => out.push_str("shared buffer pool takes per stream: n/a\n"),
            }
            if let Some(md5) = self.md5_single_core_mb_per_s {
                out.push_str(&format!(
                    "one core's MD5 in this run: {md5:.1} MB/s; this run's MB/s is {:.2} of it\n",
                    self.mb_per_s / md5
                ));
            }
        }
        for w in &self.workloads {
            if let Some(e) = &w.first_error {
                out.push_str(&format!("first {} error: {e}\n", w.name));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally_of(counters: &Counters, millis: &[u64]) -> WorkerTally {
        let mut t = WorkerTally::new();
        for ms in millis {
            t.ok(counters, Duration::from_millis(*ms), 1000);
        }
        t
    }

    #[test]
    fn percentiles_of_merged_workers() {
        let counters = Counters::default();
        // 1..=100 ms split over two workers.
        let a: Vec<u64> = (1..=50).collect();
        let b: Vec<u64> = (51..=100).collect();
        let tallies = vec![tally_of(&counters, &a), tally_of(&counters, &b)];
        let result = WorkloadResult::new("w", 2, 1000, &counters, tallies, Duration::from_secs(2));
        let s = &result.stats;
        assert_eq!(s.ops, 100);
        assert_eq!(s.bytes, 100_000);
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.002;
        assert!(near(s.latency_ms.p50, 50.0), "{:?}", s.latency_ms);
        assert!(near(s.latency_ms.p90, 90.0), "{:?}", s.latency_ms);
        assert!(near(s.latency_ms.p99, 99.0), "{:?}", s.latency_ms);
        assert!(near(s.latency_ms.max, 100.0), "{:?}", s.latency_ms);
        assert!(near(s.latency_ms.mean, 50.5), "{:?}", s.latency_ms);
        assert_eq!(s.ops_per_s, 50.0);
        assert_eq!(s.mb_per_s, 0.05);
    }

    #[test]
    fn empty_workload_reports_zeros() {
        let counters = Counters::default();
        let result = WorkloadResult::new("w", 1, 0, &counters, vec![], Duration::ZERO);
        assert_eq!(result.stats.latency_ms, LatencySummary::default());
        assert_eq!(result.stats.ops_per_s, 0.0);
    }

    #[test]
    fn errors_count_and_keep_the_first() {
        let counters = Counters::default();
        let mut t = WorkerTally::new();
        t.error(&counters, &"first");
        t.error(&counters, &"second");
        assert_eq!(counters.snapshot().errors, 2);
        assert_eq!(counters.first_error().as_deref(), Some("first"));
    }

    #[test]
    fn report_json_has_the_agreed_shape() {
        let counters = Counters::default();
        let tallies = vec![tally_of(&counters, &[1, 2, 3])];
        let w = WorkloadResult::new(
            "positioned",
            1,
            1000,
            &counters,
            tallies,
            Duration::from_secs(1),
        );
        let mut report = Report::new(
            "pread",
            "client",
            "127.0.0.1:1".into(),
            serde_json::json!({"threads": 1}),
            Duration::from_secs(1),
            &[w],
            Timeline::default(),
        );
        report.datanode_cpu = Some(CpuReport {
            pids: vec![7],
            cpu_seconds: 0.5,
            cpu_seconds_per_gb: Some(0.5 / (3000.0 / GB)),
        });
        let v = serde_json::to_value(&report).unwrap();
        for field in [
            "command",
            "via",
            "target",
            "settings",
            "elapsed_s",
            "ops",
            "errors",
        ] {
            assert!(v.get(field).is_some(), "no {field} in {v}");
        }
        assert_eq!(v["ops"], 3);
        assert_eq!(v["errors"], 0);
        assert_eq!(v["bytes"], 3000);
        assert_eq!(v["workloads"][0]["name"], "positioned");
        for p in ["p50", "p90", "p99", "max", "mean"] {
            assert!(v["workloads"][0]["latency_ms"][p].is_number(), "{p}");
        }
        assert_eq!(v["datanode_cpu"]["pids"][0], 7);
        assert!(v["buffer_pool"].is_null());
        assert!(v["timeline"]["series"].is_array());
        assert!(report.to_text().contains("positioned"));
    }
}
