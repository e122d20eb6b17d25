//! `tessera bench get`: whole-object GETs of a set of objects through S3,
//! from many concurrent clients.

use super::args::GetArgs;
use super::live::{run_worker, Budget, Goal};
use super::pread::collect;
use super::report::{Counters, WorkloadResult};
use super::store_ops::Payload;
use super::{Phase, RunOutcome};
use crate::s3_client::S3Client;
use anyhow::{bail, Context, Result};
use futures::future::join_all;
use rand::Rng;
use std::sync::Arc;

/// Name of object `i` of the set for `object_size`: sets of different sizes
/// do not overwrite each other.
pub fn object_key(object_size: u64, i: u64) -> String {
    format!("bench-get/{object_size}/{i:06}")
}

/// Writes the objects of the set that are absent or of another size.
/// With `--verify`, every object is written anew, so that each holds the
/// payload GETs are checked against.
async fn ensure_objects(client: &S3Client, args: &GetArgs, payload: &Payload) -> Result<()> {
    client.create_bucket(&args.bucket).await?;
    for i in 0..args.objects {
        let key = object_key(args.object_size, i);
        let found = client.head_object(&args.bucket, &key).await?;
        if !args.verify && found == Some(args.object_size) {
            continue;
        }
        let data = payload.data.clone();
        client
            .put_object(
                &args.bucket,
                &key,
                data,
                args.replication,
                args.sse.as_deref(),
            )
            .await
            .with_context(|| format!("writing {}/{key}", args.bucket))?;
    }
    Ok(())
}

/// Runs the workload and returns its report.
pub async fn run(args: GetArgs) -> Result<RunOutcome> {
    if args.clients == 0 || args.objects == 0 {
        bail!("--clients and --objects must be at least 1");
    }
    let s3 = &args.s3;
    let client = s3.client()?;
    let payload = Payload::pattern(args.object_size)?;
    ensure_objects(&client, &args, &payload).await?;
    let expected = args.verify.then_some(payload.data);
    let counters = Arc::new(Counters::default());
    let phase = Phase::begin(
        &args.output,
        Goal::Duration(args.duration),
        vec![("get".to_string(), counters.clone())],
    );
    let budget = Arc::new(Budget::new(None, args.duration));
    let tasks: Vec<_> = (0..args.clients)
        .map(|_| {
            let client = client.clone();
            let bucket = args.bucket.clone();
            let expected = expected.clone();
            let (size, objects) = (args.object_size, args.objects);
            tokio::spawn(run_worker(budget.clone(), counters.clone(), move |_| {
                let client = client.clone();
                let bucket = bucket.clone();
                let expected = expected.clone();
                async move {
                    let i = rand::thread_rng().gen_range(0..objects);
                    let key = object_key(size, i);
                    client
                        .get_object(&bucket, &key, None, size, expected.as_ref())
                        .await
                }
            }))
        })
        .collect();
    let tallies = collect(join_all(tasks).await)?;
    let ended = phase.end().await;
    let results = vec![WorkloadResult::new(
        "get",
        args.clients,
        args.object_size,
        &counters,
        tallies,
        ended.elapsed,
    )];
    let settings = serde_json::json!({
        "bucket": args.bucket, "clients": args.clients, "object_size": args.object_size,
        "objects": args.objects, "duration_s": args.duration.as_secs_f64(),
        "replication": args.replication.map(|r| r.to_string()),
        "sse": args.sse,
        "verify": args.verify,
    });
    let report = ended.report("get", "s3", s3.endpoint.clone(), settings, &results);
    Ok(RunOutcome { report, results })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_keys_separate_sizes() {
        assert_eq!(object_key(1024, 3), "bench-get/1024/000003");
        assert_ne!(object_key(1024, 3), object_key(2048, 3));
    }
}
