//! `tessera bench put`: concurrent key writers through the client library
//! (KeyWriter, then meta's commit) or S3 PUT (freon ockg, TestDFSIO -write).
//! With --via client it also reports how often the writers took buffer sets
//! from the client's shared pool (HDDS-17033).

use super::args::{PutArgs, Via};
use super::live::{run_worker, Budget, Goal};
use super::pread::collect;
use super::report::{Counters, PoolReport, WorkloadResult};
use super::store_ops::{self, Payload};
use super::{Phase, RunOutcome};
use anyhow::{bail, Result};
use block_client::StoreClient;
use futures::future::join_all;
use std::sync::Arc;
use std::time::Duration;

/// Run length when neither --count nor --duration is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(30);

/// Buffer sets taken from the client's shared pool so far, and how many of
/// them were sets an ended stream left (the rest were new memory).
fn pool_takes(store: &StoreClient) -> Option<(u64, u64)> {
    let stats = store.buffer_pool().stats();
    Some((stats.takes, stats.reused))
}

/// Takes per stream, when both counts are known.
pub fn pool_report(
    before: Option<(u64, u64)>,
    after: Option<(u64, u64)>,
    streams: u64,
) -> Option<PoolReport> {
    let (before, after) = (before?, after?);
    let takes = after.0.checked_sub(before.0)?;
    let reused = after.1.checked_sub(before.1)?;
    Some(PoolReport {
        takes,
        reused,
        streams,
        takes_per_stream: if streams == 0 {
            0.0
        } else {
            takes as f64 / streams as f64
        },
    })
}

/// Name of the `n`th key of writer `w` in run `run`.
pub fn put_key(run: &str, w: usize, n: u64) -> String {
    format!("bench-put/{run}/w{w:03}-{n:08}")
}

/// Runs the workload and returns its report.
pub async fn run(args: PutArgs) -> Result<RunOutcome> {
    if args.writers == 0 {
        bail!("--writers must be at least 1");
    }
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let run_id = format!("{:08x}", rand::random::<u32>());
    let payload = Payload::pattern(args.key_size)?;
    let counters = Arc::new(Counters::default());
    let duration = args.duration.unwrap_or(DEFAULT_DURATION);
    let goal = match args.count {
        Some(n) => Goal::Count(n),
        None => Goal::Duration(duration),
    };
    let mut budget = Budget::new(args.count, duration);
    if let (Budget::Count { deadline, .. }, Some(d)) = (&mut budget, args.duration) {
        *deadline = Some(std::time::Instant::now() + d);
    }
    let budget = Arc::new(budget);
    let write_size = usize::try_from(args.write_size.max(1)).unwrap_or(usize::MAX);
    let bucket = args.bucket.clone();
    let replication = args.replication;

    let (phase, tasks, store, takes_before) = match args.target.via {
        Via::Client => {
            if args.sse.is_some() {
                bail!("--sse needs --via s3: encryption is the gateway's");
            }
            let store = store_ops::connect(
                &args.target.meta()?,
                &args.target.credential,
                &args.target.cluster_tls,
                &args.target.storage,
            )?;
            store_ops::ensure_bucket(&store, &bucket).await?;
            let takes_before = pool_takes(&store);
            let phase = Phase::begin(&args.output, goal, vec![("put".into(), counters.clone())]);
            let tasks: Vec<_> = (0..args.writers)
                .map(|w| {
                    let (store, payload, bucket, run_id) = (
                        store.clone(),
                        payload.clone(),
                        bucket.clone(),
                        run_id.clone(),
                    );
                    tokio::spawn(run_worker(budget.clone(), counters.clone(), move |n| {
                        let (store, payload, bucket) =
                            (store.clone(), payload.clone(), bucket.clone());
                        let key = put_key(&run_id, w, n);
                        async move {
                            store_ops::write_key(
                                &store,
                                &bucket,
                                &key,
                                &payload,
                                write_size,
                                replication,
                            )
                            .await
                            .map(|r| r.size)
                        }
                    }))
                })
                .collect();
            (phase, tasks, Some(store), takes_before)
        }
        Via::S3 => {
            let s3 = args.target.s3()?;
            let client = s3.client()?;
            client.create_bucket(&bucket).await?;
            let phase = Phase::begin(&args.output, goal, vec![("put".into(), counters.clone())]);
            let tasks: Vec<_> = (0..args.writers)
                .map(|w| {
                    let (client, payload, bucket, run_id) = (
                        client.clone(),
                        payload.clone(),
                        bucket.clone(),
                        run_id.clone(),
                    );
                    let sse = args.sse.clone();
                    tokio::spawn(run_worker(budget.clone(), counters.clone(), move |n| {
                        let (client, data, bucket) =
                            (client.clone(), payload.data.clone(), bucket.clone());
                        let key = put_key(&run_id, w, n);
                        let sse = sse.clone();
                        async move {
                            let len = data.len() as u64;
                            client
                                .put_object(&bucket, &key, data, Some(replication), sse.as_deref())
                                .await
                                .map(|()| len)
                        }
                    }))
                })
                .collect();
            (phase, tasks, None, None)
        }
    };
    let tallies = collect(join_all(tasks).await)?;
    let ended = phase.end().await;
    let takes_after = store.as_ref().and_then(pool_takes);
    let results = vec![WorkloadResult::new(
        "put",
        args.writers,
        args.key_size,
        &counters,
        tallies,
        ended.elapsed,
    )];
    let settings = serde_json::json!({
        "bucket": args.bucket, "run": run_id, "writers": args.writers, "key_size": args.key_size,
        "write_size": args.write_size, "replication": replication.to_string(), "sse": args.sse,
        "count": args.count, "duration_s": args.duration.map(|d| d.as_secs_f64()),
    });
    let mut report = ended.report(
        "put",
        args.target.via.as_str(),
        args.target.describe(),
        settings,
        &results,
    );
    report.buffer_pool = pool_report(takes_before, takes_after, report.ops);
    // After the PUTs, on a quiet machine: the same cores, the same run.
    report.md5_single_core_mb_per_s =
        Some(tokio::task::spawn_blocking(store_ops::md5_single_core_mb_per_s).await?);
    Ok(RunOutcome { report, results })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_per_stream() {
        let r = pool_report(Some((10, 4)), Some((40, 24)), 10).unwrap();
        assert_eq!((r.takes, r.reused, r.streams), (30, 20, 10));
        assert_eq!(r.takes_per_stream, 3.0);
        assert!(pool_report(None, Some((3, 0)), 1).is_none());
        assert_eq!(
            pool_report(Some((0, 0)), Some((0, 0)), 0)
                .unwrap()
                .takes_per_stream,
            0.0
        );
    }

    #[test]
    fn keys_are_unique_per_writer_and_number() {
        assert_eq!(put_key("ab", 1, 2), "bench-put/ab/w001-00000002");
        assert_ne!(put_key("ab", 1, 2), put_key("ab", 2, 1));
    }
}
