//! `tessera bench pread`: many positioned readers sharing one `KeyReader`
//! beside sequential readers of the same key (freon ocpr, HDDS-17399), through
//! the client library or as ranged GETs through S3.

use super::args::{PreadArgs, Via};
use super::live::{run_worker, Budget, Goal};
use super::report::{Counters, WorkerTally, WorkloadResult};
use super::store_ops::{self, check_content, Payload};
use super::{Phase, RunOutcome};
use crate::s3_client::S3Client;
use anyhow::{bail, Context, Result};
use block_client::KeyReader;
use bytes::Bytes;
use futures::future::join_all;
use futures::StreamExt;
use rand::Rng;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Offset and length of read number `slot_pick` (any number; it is reduced to
/// a slot) of `read_size` bytes aligned to `read_size` within `size` bytes.
pub fn aligned_read(slot_pick: u64, size: u64, read_size: u64) -> (u64, u64) {
    let read_size = read_size.max(1);
    let slots = (size / read_size).max(1);
    let offset = (slot_pick % slots) * read_size;
    (offset, read_size.min(size - offset))
}

/// Where sequential reader `k` of `readers` starts: spread over the key,
/// aligned to `read_size`.
pub fn sequential_start(k: usize, readers: usize, size: u64, read_size: u64) -> u64 {
    let slots = (size / read_size.max(1)).max(1);
    (slots * k as u64 / readers.max(1) as u64) * read_size.max(1)
}

fn random_slot() -> u64 {
    rand::thread_rng().gen()
}

/// One source of reads: the shared client reader or the S3 gateway, and
/// the key's contents when reads are checked against them.
#[derive(Clone)]
struct Source {
    path: Path,
    expected: Option<Bytes>,
}

#[derive(Clone)]
enum Path {
    Client(Arc<KeyReader>),
    S3(Arc<S3Key>),
}

/// The key to read through the gateway.
struct S3Key {
    client: S3Client,
    bucket: String,
    key: String,
}

impl Source {
    /// Reads by `path`, checked against the key's contents with `--verify`.
    fn new(path: Path, args: &PreadArgs) -> Result<Self> {
        let expected = match args.verify {
            true => Some(Payload::pattern(args.size)?.data),
            false => None,
        };
        Ok(Self { path, expected })
    }

    async fn read(&self, offset: u64, len: u64) -> Result<u64> {
        match &self.path {
            Path::Client(reader) => {
                let bytes = reader.read_at(offset, len as usize).await?;
                if bytes.len() as u64 != len {
                    bail!("read_at({offset}, {len}) returned {} bytes", bytes.len());
                }
                check_content(self.expected.as_ref(), offset, &bytes)?;
                Ok(len)
            }
            Path::S3(target) => {
                let range = Some((offset, len));
                let expected = self.expected.as_ref();
                let client = &target.client;
                Ok(client
                    .get_object(&target.bucket, &target.key, range, len, expected)
                    .await?)
            }
        }
    }
}

/// Opens the key (writing it when absent) and returns the source and its size.
async fn open(args: &PreadArgs) -> Result<(Source, u64)> {
    match args.target.via {
        Via::Client => {
            let store = store_ops::connect(
                &args.target.meta()?,
                &args.target.credential,
                &args.target.cluster_tls,
                &args.target.storage,
            )?;
            let (bucket, key) = (&args.bucket, &args.key);
            let record = store_ops::ensure_key(
                &store,
                bucket,
                key,
                args.size,
                args.replication,
                args.verify,
            )
            .await?;
            let size = record.size;
            let path = Path::Client(Arc::new(store.reader(&record)));
            Ok((Source::new(path, args)?, size))
        }
        Via::S3 => {
            let s3 = args.target.s3()?;
            let client = s3.client()?;
            client.create_bucket(&args.bucket).await?;
            let found = client.head_object(&args.bucket, &args.key).await?;
            let size = match found.filter(|_| !args.verify) {
                Some(size) => size,
                None => {
                    let payload = Payload::pattern(args.size)?;
                    client
                        .put_object(
                            &args.bucket,
                            &args.key,
                            payload.data,
                            Some(args.replication),
                            None,
                        )
                        .await
                        .with_context(|| format!("writing {}/{}", args.bucket, args.key))?;
                    args.size
                }
            };
            let path = Path::S3(Arc::new(S3Key {
                client,
                bucket: args.bucket.clone(),
                key: args.key.clone(),
            }));
            Ok((Source::new(path, args)?, size))
        }
    }
}

/// Sequential reader: reads `read_size` pieces in order from `start`,
/// wrapping at the end of the key. Through the client library it consumes a
/// `KeyReader::sequential` stream (its own cursor and read-ahead window over
/// the shared reader); through S3 it sends ranged GETs in order.
async fn sequential_worker(
    source: Source,
    start: u64,
    size: u64,
    read_size: u64,
    budget: Arc<Budget>,
    counters: Arc<Counters>,
) -> WorkerTally {
    if let Path::Client(reader) = &source.path {
        let (reader, expected) = (reader.clone(), source.expected.clone());
        let stream = StreamRead {
            reader,
            expected,
            start,
            read_size,
        };
        return stream_worker(stream, budget, counters).await;
    }
    let first = start / read_size.max(1);
    run_worker(budget, counters, move |i| {
        let source = source.clone();
        async move {
            let (offset, len) = aligned_read(first + i, size, read_size);
            source.read(offset, len).await
        }
    })
    .await
}

/// A sequential stream over the shared reader, from `start`, taken
/// `read_size` bytes at a time.
struct StreamRead {
    reader: Arc<KeyReader>,
    expected: Option<Bytes>,
    start: u64,
    read_size: u64,
}

/// One operation of a stream reader is taking `read_size` bytes from the
/// stream, as a 1 MiB `read()` on a sequential input stream would.
async fn stream_worker(
    stream_read: StreamRead,
    budget: Arc<Budget>,
    counters: Arc<Counters>,
) -> WorkerTally {
    let StreamRead {
        reader,
        expected,
        start,
        read_size,
    } = stream_read;
    let size = reader.len();
    let mut tally = WorkerTally::new();
    let mut position = start;
    let mut stream = reader.sequential(position, size);
    'ops: while budget.take() {
        let began = Instant::now();
        let mut got = 0u64;
        while got < read_size {
            match stream.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = check_content(expected.as_ref(), position, &chunk) {
                        tally.error(&counters, &e);
                        stream = reader.sequential(position, size);
                        continue 'ops;
                    }
                    got += chunk.len() as u64;
                    position += chunk.len() as u64;
                }
                Some(Err(e)) => {
                    tally.error(&counters, &e);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    stream = reader.sequential(position, size);
                    continue 'ops;
                }
                None => {
                    // End of the key: wrap to its start; a partial piece counts as one read.
                    position = 0;
                    stream = reader.sequential(0, size);
                    if got > 0 {
                        break;
                    }
                }
            }
        }
        tally.ok(&counters, began.elapsed(), got);
    }
    tally
}

/// Runs the workload and returns its report.
pub async fn run(args: PreadArgs) -> Result<RunOutcome> {
    if args.threads == 0 && args.seq_readers == 0 {
        bail!("nothing to do: --threads 0 and --seq-readers 0");
    }
    if args.read_size == 0 || args.seq_read_size == 0 {
        bail!("--read-size and --seq-read-size must be at least 1 byte");
    }
    let (source, size) = open(&args).await?;
    if size == 0 {
        bail!("{}/{} is empty", args.bucket, args.key);
    }
    if size != args.size {
        tracing::warn!(
            size,
            "the key exists with another size than --size; reading it as it is"
        );
    }
    let read_size = args.read_size.min(size);
    let seq_read_size = args.seq_read_size.min(size);
    let positioned = Arc::new(Counters::default());
    let sequential = Arc::new(Counters::default());
    let mut names = vec![("positioned".to_string(), positioned.clone())];
    if args.seq_readers > 0 {
        names.push(("sequential".to_string(), sequential.clone()));
    }
    let phase = Phase::begin(&args.output, Goal::Duration(args.duration), names);
    let budget = Arc::new(Budget::new(None, args.duration));
    let pos_tasks: Vec<_> = (0..args.threads)
        .map(|_| {
            let source = source.clone();
            tokio::spawn(run_worker(budget.clone(), positioned.clone(), move |_| {
                let source = source.clone();
                async move {
                    let (offset, len) = aligned_read(random_slot(), size, read_size);
                    source.read(offset, len).await
                }
            }))
        })
        .collect();
    let seq_tasks: Vec<_> = (0..args.seq_readers)
        .map(|k| {
            let start = sequential_start(k, args.seq_readers, size, seq_read_size);
            tokio::spawn(sequential_worker(
                source.clone(),
                start,
                size,
                seq_read_size,
                budget.clone(),
                sequential.clone(),
            ))
        })
        .collect();
    let pos_tallies = collect(join_all(pos_tasks).await)?;
    let seq_tallies = collect(join_all(seq_tasks).await)?;
    let ended = phase.end().await;
    let mut results = vec![WorkloadResult::new(
        "positioned",
        args.threads,
        read_size,
        &positioned,
        pos_tallies,
        ended.elapsed,
    )];
    if args.seq_readers > 0 {
        results.push(WorkloadResult::new(
            "sequential",
            args.seq_readers,
            seq_read_size,
            &sequential,
            seq_tallies,
            ended.elapsed,
        ));
    }
    let settings = serde_json::json!({
        "bucket": args.bucket, "key": args.key, "size": size,
        "replication": args.replication.to_string(), "threads": args.threads,
        "read_size": read_size, "seq_readers": args.seq_readers,
        "seq_read_size": seq_read_size, "duration_s": args.duration.as_secs_f64(),
        "verify": args.verify,
    });
    let report = ended.report(
        "pread",
        args.target.via.as_str(),
        args.target.describe(),
        settings,
        &results,
    );
    Ok(RunOutcome { report, results })
}

/// The tallies of finished worker tasks; a panicked worker is an error.
pub(super) fn collect(
    joined: Vec<Result<WorkerTally, tokio::task::JoinError>>,
) -> Result<Vec<WorkerTally>> {
    joined
        .into_iter()
        .map(|r| r.context("a bench worker panicked"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_aligned_and_inside_the_key() {
        let size = 10 * 65536 + 100;
        for pick in [0, 1, 9, 10, 11, u64::MAX] {
            let (offset, len) = aligned_read(pick, size, 65536);
            assert_eq!(offset % 65536, 0);
            assert_eq!(len, 65536);
            assert!(offset + len <= size, "{pick}: {offset}+{len}");
        }
        // A key smaller than one read is read whole.
        assert_eq!(aligned_read(7, 1000, 65536), (0, 1000));
    }

    #[test]
    fn sequential_readers_spread_over_the_key() {
        let size = 256 << 20;
        let mib = 1 << 20;
        assert_eq!(sequential_start(0, 4, size, mib), 0);
        assert_eq!(sequential_start(1, 4, size, mib), 64 * mib);
        assert_eq!(sequential_start(3, 4, size, mib), 192 * mib);
        assert_eq!(sequential_start(0, 1, 100, mib), 0);
    }
}
