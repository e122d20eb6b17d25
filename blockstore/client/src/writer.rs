//! The key writer: cuts an object's bytes into EC stripes (or replicated
//! pieces) and hands them to a flush task that sends them to the datanodes
//! of block groups allocated from meta, failing over to a new group when a
//! datanode fails, and commits every block file when the key is finished.
//!
//! The stages overlap, as in Ozone's `ECKeyOutputStream`: while the caller
//! fills stripe `n + 1`, the flush task encodes stripe `n` (parity and CRC32C
//! chunk checksums, on the blocking pool) and sends stripe `n - 1`'s cells to
//! their `d + p` datanodes in parallel. A bounded queue sits between the
//! writer and the flush task, and stripe buffers come from the stream's
//! [`StripeFreeList`], so one stream holds at most `stripe_queue + 2` stripe
//! buffer sets whatever the object size.

use super::failover::{discard_groups, GroupSink, Unit};
use super::stripe::{EncodedCell, Stripe};
use super::{ClientError, StoreClient};
use crate::stripe_free_list::StripeFreeList;
use bytes::{Buf, Bytes, BytesMut};
use codec::{Codec, CodecError, CodecTable};
use meta_api::{BlockGroup, MetaError};
use proto::layout::{EcLayout, ReplicationConfig};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Largest piece a replicated writer sends in one request.
const REPLICATED_PIECE: u64 = 1024 * 1024;

/// What a finished writer stored: durable on datanodes, not yet visible.
#[derive(Clone, Debug)]
pub struct WrittenKey {
    /// Bytes written.
    pub size: u64,
    /// How the bytes are protected.
    pub replication: ReplicationConfig,
    /// The block groups holding the bytes, in order. A group may end before
    /// its capacity when a datanode failed during the write.
    pub groups: Vec<BlockGroup>,
    /// The bytes themselves, when the writer kept them in memory for the
    /// object's record (see [`StoreClient::small_object_writer`]); then
    /// `groups` is empty.
    pub inline: Option<Bytes>,
}

/// Writes one key's bytes into block groups.
pub struct KeyWriter {
    input: Input,
    pipe: Pipe,
    /// Bytes accepted so far.
    accepted: u64,
    state: WriterState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriterState {
    /// Accepting data.
    Open,
    /// A call failed or was cancelled midway; only abort or drop remain.
    Broken,
    /// Finished or aborted: the blocks are no longer this writer's to clean up.
    Done,
}

/// Bytes accepted but not yet handed to the flush task.
enum Input {
    /// Held here while the key is at most `limit` bytes long; a longer key
    /// goes to `blocks`, held bytes first.
    Inline {
        buf: BytesMut,
        limit: usize,
        blocks: Box<Input>,
    },
    Ec {
        codec: Arc<Codec>,
        /// The stripe being filled, taken from the stream's free list.
        filling: Option<Stripe>,
    },
    Replicated {
        buf: BytesMut,
        /// Largest piece handed over at once (chunk-aligned).
        piece: usize,
    },
    /// The replication config cannot be written (bad shape).
    Invalid(String),
}

/// The flush side of a writer, started with the first byte.
struct Pipe {
    client: StoreClient,
    replication: ReplicationConfig,
    /// EC only: the stream's stripe buffer sets.
    free: Option<Arc<StripeFreeList>>,
    task: Option<FlushTask>,
}

/// A running flush task and the means to feed and stop it.
struct FlushTask {
    jobs: mpsc::Sender<Job>,
    done: JoinHandle<Result<WrittenKey, ClientError>>,
    /// Cancels the task (which then throws the key's blocks away) when the
    /// writer goes away unfinished.
    cancel: DropGuard,
}

/// What the writer hands to its flush task, in order.
enum Job {
    Stripe {
        stripe: Stripe,
        codec: Arc<Codec>,
    },
    Piece(Bytes),
    /// Answer once every earlier job is on its datanodes.
    Flush(oneshot::Sender<()>),
    /// No more data: seal the groups and hand them back.
    Finish,
}

impl KeyWriter {
    pub(crate) fn new(client: StoreClient, replication: ReplicationConfig) -> Self {
        let config = client.config().clone();
        let mut free = None;
        let input = match replication {
            ReplicationConfig::Ec(layout)
                if !layout
                    .cell_size
                    .is_multiple_of(config.bytes_per_checksum.max(1)) =>
            {
                // Stripes start at multiples of the cell size, and writes must
                // start on a checksum chunk.
                Input::Invalid(format!(
                    "replication {replication}: cell size is not a multiple of {} checksum bytes",
                    config.bytes_per_checksum
                ))
            }
            ReplicationConfig::Ec(layout) => match ec_codec(client.codecs(), layout) {
                Ok(codec) => {
                    let bound = config.stripe_queue.max(1) + 2;
                    free = Some(Arc::new(StripeFreeList::new(
                        client.buffer_pool().clone(),
                        layout,
                        bound,
                    )));
                    Input::Ec {
                        codec,
                        filling: None,
                    }
                }
                Err(e) => Input::Invalid(format!("replication {replication}: {e}")),
            },
            ReplicationConfig::Replicated { replicas: 0 } => {
                Input::Invalid(format!("replication {replication}: no replicas"))
            }
            ReplicationConfig::Replicated { .. } => {
                let bpc = u64::from(config.bytes_per_checksum.max(1));
                // Pieces start at multiples of the piece size, so keep it
                // chunk-aligned; no longer than a group, so that a write
                // reaching a group's end sends the group whole.
                let group = replication.group_capacity(config.block_size);
                let piece = ((REPLICATED_PIECE.min(group) / bpc).max(1) * bpc) as usize;
                Input::Replicated {
                    buf: BytesMut::new(),
                    piece,
                }
            }
        };
        Self {
            input,
            pipe: Pipe {
                client,
                replication,
                free,
                task: None,
            },
            accepted: 0,
            state: WriterState::Open,
        }
    }

    /// Keeps a key of at most `limit` bytes in memory for the caller to
    /// store in the object's record ([`WrittenKey::inline`]); a longer one
    /// goes to blocks as it would have.
    pub(crate) fn inline_up_to(mut self, limit: usize) -> Self {
        if limit > 0 && !matches!(self.input, Input::Invalid(_)) {
            let blocks = std::mem::replace(&mut self.input, Input::Invalid(String::new()));
            self.input = Input::Inline {
                buf: BytesMut::new(),
                limit,
                blocks: Box::new(blocks),
            };
        }
        self
    }

    /// Appends `data` to the key. Returns once the bytes are buffered or
    /// queued for the flush task; a failure of an earlier stripe shows here.
    pub async fn write(&mut self, data: Bytes) -> Result<(), ClientError> {
        self.check_open()?;
        // Broken until the call completes, so a cancelled call leaves no half state.
        self.state = WriterState::Broken;
        let len = data.len();
        if let Err(e) = self.write_inner(data).await {
            self.input.release_buffers();
            return Err(self.pipe.failure(e).await);
        }
        metrics::counter!(crate::telemetry::WRITE_BYTES.name).increment(len as u64);
        self.accepted += len as u64;
        self.state = WriterState::Open;
        Ok(())
    }

    /// Waits until every whole stripe (EC) or piece (replicated) accepted so
    /// far is on its datanodes; the bytes of a partial one stay buffered.
    /// Nothing is durable or visible before [`finish`](Self::finish).
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.check_open()?;
        self.state = WriterState::Broken;
        if self.pipe.task.is_some() {
            let (answer, answered) = oneshot::channel();
            if let Err(e) = self.pipe.submit(Job::Flush(answer)).await {
                return Err(self.pipe.failure(e).await);
            }
            if answered.await.is_err() {
                return Err(self.pipe.failure(ClientError::Closed).await);
            }
        }
        self.state = WriterState::Open;
        Ok(())
    }

    /// Flushes the last stripe, commits every block file durably on its
    /// datanodes, and returns the groups for the caller to commit in meta.
    pub async fn finish(mut self) -> Result<WrittenKey, ClientError> {
        self.check_open()?;
        self.state = WriterState::Broken;
        let result = self.finish_inner().await;
        self.state = WriterState::Done;
        result
    }

    /// Gives up: deletes what was written (best effort; meta's cleaner gets
    /// the rest) and returns every buffer to the client's pool.
    pub async fn abort(mut self) {
        self.state = WriterState::Done;
        if let Some(FlushTask { jobs, done, cancel }) = self.pipe.task.take() {
            drop(jobs);
            drop(cancel);
            // The task throws the blocks away before it ends.
            if let Err(e) = done.await {
                tracing::warn!(error = %e, "key writer flush task failed");
            }
        }
    }

    /// Bytes accepted so far.
    pub fn len(&self) -> u64 {
        self.accepted
    }

    /// True before any byte was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_open(&self) -> Result<(), ClientError> {
        if let Input::Invalid(reason) = &self.input {
            return Err(MetaError::InvalidRequest(reason.clone()).into());
        }
        match self.state {
            WriterState::Open => Ok(()),
            _ => Err(ClientError::Closed),
        }
    }

    async fn write_inner(&mut self, mut data: Bytes) -> Result<(), ClientError> {
        while !data.is_empty() {
            match &mut self.input {
                Input::Inline { buf, limit, .. } if buf.len() + data.len() <= *limit => {
                    buf.extend_from_slice(&data);
                    data.clear();
                }
                Input::Inline { .. } => {
                    // Too long for a record: the bytes held go first, copied
                    // once in front of this call's.
                    let held = self.input.spill();
                    if !held.is_empty() {
                        let mut joined = BytesMut::from(held);
                        joined.extend_from_slice(&data);
                        data = joined.freeze();
                    }
                }
                Input::Ec { codec, filling } => {
                    let stripe = match filling {
                        Some(stripe) => stripe,
                        None => filling.insert(self.pipe.next_stripe().await?),
                    };
                    stripe.fill(&mut data);
                    if stripe.is_full() {
                        if let Some(stripe) = filling.take() {
                            let codec = codec.clone();
                            self.pipe.submit(Job::Stripe { stripe, codec }).await?;
                        }
                    }
                }
                Input::Replicated { buf, piece } => {
                    if buf.is_empty() && data.len() >= *piece {
                        // Whole pieces of the caller's buffer go out without a copy.
                        let whole = data.split_to(*piece);
                        self.pipe.submit(Job::Piece(whole)).await?;
                    } else {
                        let take = (*piece - buf.len()).min(data.len());
                        buf.extend_from_slice(&data[..take]);
                        data.advance(take);
                        if buf.len() == *piece {
                            let whole = buf.split().freeze();
                            self.pipe.submit(Job::Piece(whole)).await?;
                        }
                    }
                }
                Input::Invalid(reason) => {
                    return Err(MetaError::InvalidRequest(reason.clone()).into())
                }
            }
        }
        Ok(())
    }

    async fn finish_inner(&mut self) -> Result<WrittenKey, ClientError> {
        let last = match &mut self.input {
            Input::Inline { buf, .. } => {
                let held = buf.split().freeze();
                if !held.is_empty() {
                    metrics::counter!(crate::telemetry::INLINE_KEYS.name).increment(1);
                    metrics::counter!(crate::telemetry::INLINE_KEY_BYTES.name)
                        .increment(held.len() as u64);
                }
                return Ok(WrittenKey {
                    size: held.len() as u64,
                    replication: self.pipe.replication,
                    groups: Vec::new(),
                    inline: (!held.is_empty()).then_some(held),
                });
            }
            Input::Ec { codec, filling } => {
                filling
                    .take()
                    .filter(|stripe| stripe.len() > 0)
                    .map(|stripe| Job::Stripe {
                        stripe,
                        codec: codec.clone(),
                    })
            }
            Input::Replicated { buf, .. } => {
                (!buf.is_empty()).then(|| Job::Piece(buf.split().freeze()))
            }
            Input::Invalid(reason) => return Err(MetaError::InvalidRequest(reason.clone()).into()),
        };
        if let Some(job) = last {
            if let Err(e) = self.pipe.submit(job).await {
                return Err(self.pipe.failure(e).await);
            }
        }
        let Some(FlushTask { jobs, done, cancel }) = self.pipe.task.take() else {
            return Ok(WrittenKey {
                size: 0,
                replication: self.pipe.replication,
                groups: Vec::new(),
                inline: None,
            });
        };
        // A refused Finish means the task ended; its result says why.
        let _ = jobs.send(Job::Finish).await;
        drop(jobs);
        // Cancelling this call drops `cancel`, and the task then discards the key.
        let outcome = done.await;
        let _finished = cancel.disarm();
        let written = outcome
            .map_err(|e| ClientError::Unavailable(format!("key writer flush task: {e}")))??;
        debug_assert_eq!(written.size, self.accepted);
        Ok(written)
    }
}

impl Input {
    /// The block input of an inline one that outgrew its limit, which it
    /// becomes; the bytes it held.
    fn spill(&mut self) -> Bytes {
        match std::mem::replace(self, Input::Invalid(String::new())) {
            Input::Inline { buf, blocks, .. } => {
                *self = *blocks;
                buf.freeze()
            }
            other => {
                *self = other;
                Bytes::new()
            }
        }
    }

    /// Gives the stripe being filled back to the pool (the write failed).
    fn release_buffers(&mut self) {
        if let Self::Ec { filling, .. } = self {
            *filling = None;
        }
    }
}

/// The codec of an EC layout this writer can encode.
fn ec_codec(codecs: &CodecTable, layout: EcLayout) -> Result<Arc<Codec>, CodecError> {
    if layout.cell_size == 0 {
        return Err(CodecError::Unsupported {
            data: layout.data as usize,
            parity: layout.parity as usize,
        });
    }
    codecs.get(layout.data as usize, layout.parity as usize)
}

impl Pipe {
    /// An empty stripe from the stream's free list (EC writers only).
    async fn next_stripe(&self) -> Result<Stripe, ClientError> {
        match &self.free {
            Some(free) => free.take().await,
            None => Err(ClientError::Unavailable(
                "replicated writer asked for a stripe".into(),
            )),
        }
    }

    /// Queues `job` for the flush task, starting the task first if needed;
    /// waits while the queue is full. `Closed` when the task has ended.
    async fn submit(&mut self, job: Job) -> Result<(), ClientError> {
        let task = match &mut self.task {
            Some(task) => task,
            None => self.task.insert(FlushTask::spawn(
                self.client.clone(),
                self.replication,
                self.free.clone(),
            )),
        };
        task.jobs.send(job).await.map_err(|_| ClientError::Closed)
    }

    /// The error to report for `e`: when the flush task has ended (`Closed`),
    /// the error it ended with, once it has cleaned up.
    async fn failure(&mut self, e: ClientError) -> ClientError {
        if !matches!(e, ClientError::Closed) {
            return e;
        }
        let Some(FlushTask { jobs, done, cancel }) = self.task.take() else {
            return e;
        };
        drop(jobs);
        let outcome = done.await;
        drop(cancel);
        match outcome {
            Ok(Err(e)) => e,
            Ok(Ok(_)) => ClientError::Closed,
            Err(join) => ClientError::Unavailable(format!("key writer flush task: {join}")),
        }
    }
}

impl FlushTask {
    fn spawn(
        client: StoreClient,
        replication: ReplicationConfig,
        free: Option<Arc<StripeFreeList>>,
    ) -> Self {
        let queue = client.config().stripe_queue.max(1);
        let (jobs, queued) = mpsc::channel(queue);
        let token = CancellationToken::new();
        let done = tokio::spawn(run_flush(client, replication, queued, token.clone(), free));
        Self {
            jobs,
            done,
            cancel: token.drop_guard(),
        }
    }
}

/// The flush task: sends every job's unit in order, then seals the groups.
/// On failure or cancellation it throws the key's blocks away, and in every
/// case it gives the stream's buffers back to the pool before it ends.
async fn run_flush(
    client: StoreClient,
    replication: ReplicationConfig,
    mut jobs: mpsc::Receiver<Job>,
    cancel: CancellationToken,
    free: Option<Arc<StripeFreeList>>,
) -> Result<WrittenKey, ClientError> {
    let mut sink = GroupSink::new(client.clone(), replication);
    let bpc = client.config().bytes_per_checksum;
    let mut ahead = None;
    let mut outcome = pipeline(
        &mut sink,
        &mut jobs,
        &mut ahead,
        &cancel,
        free.as_deref(),
        bpc,
    )
    .await;
    if let Some(Ahead::Encoding(encoding)) = ahead {
        // Wait for a stripe still on the encoder, so that its buffers are
        // back in the pool when this task's result is seen.
        drop(encoding.await);
    }
    if outcome.is_ok() && cancel.is_cancelled() {
        outcome = Err(ClientError::Closed);
    }
    // Queued stripes go back to the pool, and a writer waiting for a
    // stripe or for queue room wakes up to this task's result.
    drop(jobs);
    if let Some(free) = &free {
        free.close();
    }
    match outcome {
        Ok(()) => Ok(WrittenKey {
            size: sink.written(),
            replication,
            groups: sink.take_groups(),
            inline: None,
        }),
        Err(e) => {
            discard_groups(client, sink.take_all_groups()).await;
            Err(e)
        }
    }
}

/// A stripe back from the encoder: its buffers, its object bytes, and its
/// cells with their checksums.
type EncodedStripe = (Stripe, u64, Result<Vec<EncodedCell>, CodecError>);

/// A job taken off the queue, being made ready to send.
enum Ahead {
    /// A stripe being encoded on the blocking pool.
    Encoding(JoinHandle<EncodedStripe>),
    Piece(Bytes),
    Flush(oneshot::Sender<()>),
    Finish,
    /// The writer went away without finishing.
    Abandoned,
}

fn start(job: Job, bytes_per_checksum: u32) -> Ahead {
    match job {
        Job::Stripe { mut stripe, codec } => {
            Ahead::Encoding(tokio::task::spawn_blocking(move || {
                let len = stripe.len() as u64;
                let cells = stripe.encode_with_checksums(&codec, bytes_per_checksum);
                (stripe, len, cells)
            }))
        }
        Job::Piece(data) => Ahead::Piece(data),
        Job::Flush(answer) => Ahead::Flush(answer),
        Job::Finish => Ahead::Finish,
    }
}

/// Sends the jobs in order. While one unit is on the wire the next job is
/// already taken and its stripe encoded, so encoding overlaps sending.
async fn pipeline(
    sink: &mut GroupSink,
    jobs: &mut mpsc::Receiver<Job>,
    ahead: &mut Option<Ahead>,
    cancel: &CancellationToken,
    free: Option<&StripeFreeList>,
    bytes_per_checksum: u32,
) -> Result<(), ClientError> {
    loop {
        let next = match ahead.take() {
            Some(next) => next,
            None => tokio::select! {
                job = jobs.recv() => match job {
                    Some(job) => start(job, bytes_per_checksum),
                    None => Ahead::Abandoned,
                },
                () = cancel.cancelled() => return Err(ClientError::Closed),
            },
        };
        let (unit, stripe) = match next {
            Ahead::Encoding(encoding) => {
                let (stripe, len, cells) = encoding
                    .await
                    .map_err(|e| ClientError::Unavailable(format!("stripe encoder task: {e}")))?;
                let cells =
                    cells.map_err(|e| ClientError::Unavailable(format!("encoding stripe: {e}")))?;
                (Unit::Stripe { len, cells }, Some(stripe))
            }
            Ahead::Piece(data) => (Unit::Piece(data), None),
            Ahead::Flush(answer) => {
                // Every earlier unit was sent before this job was reached.
                let _ = answer.send(());
                continue;
            }
            Ahead::Finish => return sink.seal_open_groups().await,
            Ahead::Abandoned => return Err(ClientError::Closed),
        };
        let mut cancelled = false;
        {
            let send = sink.send(unit);
            tokio::pin!(send);
            loop {
                tokio::select! {
                    result = &mut send => {
                        result?;
                        break;
                    }
                    job = jobs.recv(), if ahead.is_none() => {
                        *ahead = Some(match job {
                            Some(job) => start(job, bytes_per_checksum),
                            None => Ahead::Abandoned,
                        });
                    }
                    // An abort lets the unit on the wire land, so that no
                    // write reaches a datanode after its block was deleted.
                    () = cancel.cancelled(), if !cancelled => cancelled = true,
                }
            }
        }
        if let Some(stripe) = stripe {
            metrics::counter!(crate::telemetry::STRIPES_WRITTEN.name).increment(1);
            if let Some(free) = free {
                // The unit's cells were dropped with the send, so the
                // buffers are this stripe's alone again.
                free.put(stripe);
            }
        }
        if cancelled {
            return Err(ClientError::Closed);
        }
    }
}
