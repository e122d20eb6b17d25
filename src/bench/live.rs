//! The measured phase of a run: workers bounded by a deadline or a count,
//! a sampler that turns the live counters into a throughput timeline, and an
//! indicatif progress bar on stderr (hidden for --json or when stderr is not a
//! terminal).

use super::report::{CounterSnapshot, Counters, Timeline, TimelineSeries, WorkerTally, MB};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::future::Future;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Pause after a failed operation, so a dead target is not spun on.
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

/// When workers stop taking new operations.
pub enum Budget {
    /// Until this moment.
    Until(Instant),
    /// This many operations in all, or until the deadline if one is set.
    Count {
        /// Operations not yet handed out.
        remaining: AtomicU64,
        /// Optional deadline as well.
        deadline: Option<Instant>,
    },
}

impl Budget {
    /// A budget of `count` operations, else of `duration`.
    pub fn new(count: Option<u64>, duration: Duration) -> Self {
        match count {
            Some(n) => Self::Count {
                remaining: AtomicU64::new(n),
                deadline: None,
            },
            None => Self::Until(Instant::now() + duration),
        }
    }

    /// Whether one more operation may start; takes it from the count.
    pub fn take(&self) -> bool {
        match self {
            Self::Until(deadline) => Instant::now() < *deadline,
            Self::Count {
                remaining,
                deadline,
            } => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return false;
                }
                remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
            }
        }
    }
}

/// Runs operations `op(0)`, `op(1)`, ... one after another while `budget`
/// allows, recording each one's latency and bytes.
pub async fn run_worker<F, Fut, E>(
    budget: Arc<Budget>,
    counters: Arc<Counters>,
    mut op: F,
) -> WorkerTally
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<u64, E>>,
    E: std::fmt::Display,
{
    let mut tally = WorkerTally::new();
    let mut index = 0u64;
    while budget.take() {
        let start = Instant::now();
        match op(index).await {
            Ok(bytes) => tally.ok(&counters, start.elapsed(), bytes),
            Err(e) => {
                tally.error(&counters, &e);
                tokio::time::sleep(ERROR_BACKOFF).await;
            }
        }
        index += 1;
    }
    tally
}

/// What the progress bar counts toward.
#[derive(Clone, Copy, Debug)]
pub enum Goal {
    /// Elapsed time.
    Duration(Duration),
    /// Operations done.
    Count(u64),
}

/// The sampler and progress bar of one measured phase.
pub struct Live {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Timeline>,
}

/// Sampling interval: about 100 points over the run, 100 ms to 1 s apart.
pub fn sample_interval(goal: Goal) -> Duration {
    match goal {
        Goal::Duration(d) => (d / 100).clamp(Duration::from_millis(100), Duration::from_secs(1)),
        Goal::Count(_) => Duration::from_millis(500),
    }
}

impl Live {
    /// Starts sampling `workloads`' counters; the bar shows when `show`.
    pub fn start(workloads: Vec<(String, Arc<Counters>)>, goal: Goal, show: bool) -> Self {
        let bar = if show && std::io::stderr().is_terminal() {
            let (len, template) = match goal {
                Goal::Duration(d) => (
                    d.as_millis() as u64,
                    "{spinner} [{elapsed_precise}] {wide_bar} {msg}",
                ),
                Goal::Count(n) => (
                    n,
                    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
                ),
            };
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(sample(workloads, goal, bar, stopped));
        Self { stop, task }
    }

    /// Stops sampling (taking a last partial interval) and returns the timeline.
    pub async fn finish(self) -> Timeline {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

async fn sample(
    workloads: Vec<(String, Arc<Counters>)>,
    goal: Goal,
    bar: ProgressBar,
    mut stopped: oneshot::Receiver<()>,
) -> Timeline {
    let start = Instant::now();
    let every = sample_interval(goal);
    let mut timeline = Timeline {
        t_s: Vec::new(),
        series: workloads
            .iter()
            .map(|(name, _)| TimelineSeries {
                name: name.clone(),
                ..TimelineSeries::default()
            })
            .collect(),
    };
    let mut last: Vec<CounterSnapshot> = vec![CounterSnapshot::default(); workloads.len()];
    let mut last_t = 0.0;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        let done = tokio::select! {
            _ = ticker.tick() => false,
            _ = &mut stopped => true,
        };
        let t = start.elapsed().as_secs_f64();
        let span = t - last_t;
        // A last interval much shorter than the others would only add noise.
        if (!done && span > 0.0) || span >= every.as_secs_f64() / 4.0 {
            timeline.t_s.push(t);
            let (mut ops, mut bytes, mut errors, mut done_ops) = (0.0, 0.0, 0u64, 0u64);
            for (i, (_, counters)) in workloads.iter().enumerate() {
                let now = counters.snapshot();
                let d_ops = (now.ops - last[i].ops) as f64 / span;
                let d_mb = (now.bytes - last[i].bytes) as f64 / span / MB;
                timeline.series[i].ops_per_s.push(d_ops);
                timeline.series[i].mb_per_s.push(d_mb);
                ops += d_ops;
                bytes += d_mb;
                errors += now.errors;
                done_ops += now.ops + now.errors;
                last[i] = now;
            }
            last_t = t;
            bar.set_position(match goal {
                Goal::Duration(_) => start.elapsed().as_millis() as u64,
                Goal::Count(_) => done_ops,
            });
            bar.set_message(format!("{ops:.0} ops/s {bytes:.1} MB/s {errors} errors"));
        }
        if done {
            break;
        }
    }
    bar.finish_and_clear();
    timeline
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_budget_hands_out_exactly_n() {
        let budget = Budget::new(Some(3), Duration::from_secs(3600));
        let taken = (0..10).filter(|_| budget.take()).count();
        assert_eq!(taken, 3);
    }

    #[test]
    fn time_budget_ends() {
        let budget = Budget::new(None, Duration::ZERO);
        assert!(!budget.take());
    }

    #[test]
    fn intervals_stay_within_bounds() {
        assert_eq!(
            sample_interval(Goal::Duration(Duration::from_secs(2))),
            Duration::from_millis(100)
        );
        assert_eq!(
            sample_interval(Goal::Duration(Duration::from_secs(30))),
            Duration::from_millis(300)
        );
        assert_eq!(
            sample_interval(Goal::Duration(Duration::from_secs(600))),
            Duration::from_secs(1)
        );
    }

    #[tokio::test]
    async fn workers_and_sampler_agree() {
        let counters = Arc::new(Counters::default());
        let live = Live::start(vec![("w".into(), counters.clone())], Goal::Count(5), false);
        let budget = Arc::new(Budget::new(Some(5), Duration::ZERO));
        let tally = run_worker(budget, counters.clone(), |i| async move {
            if i == 2 {
                Err("boom")
            } else {
                Ok(10)
            }
        })
        .await;
        let timeline = live.finish().await;
        assert_eq!(
            counters.snapshot(),
            CounterSnapshot {
                ops: 4,
                bytes: 40,
                errors: 1
            }
        );
        assert_eq!(tally.into_histogram().len(), 4);
        assert_eq!(timeline.series.len(), 1);
        assert_eq!(timeline.series[0].ops_per_s.len(), timeline.t_s.len());
    }
}
