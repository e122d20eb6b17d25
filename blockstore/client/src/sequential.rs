//! Sequential reads of a key: a stream of its bytes in order, with a window
//! of reads in flight ahead of the consumer.
//!
//! The stream owns its cursor and runs its reads as tasks over the shared
//! [`KeyReader`]'s positioned reads, which take no lock; so however long one
//! of its reads waits on a slow datanode, positioned readers of the same
//! reader are not held up (the HDDS-17399 problem). It yields the segments'
//! own buffers, so nothing is copied on the healthy path.
//!
//! Fairness: a full window of read-ahead in flight keeps the datanodes and
//! the client's cores busy with the stream, and positioned readers of the
//! same object queue behind it. So while positioned reads of the object are
//! in flight (through any `KeyReader` of the client: a gateway opens one per
//! request), or were within `positioned::CONTENDED_FOR`, the stream keeps only
//! `ClientConfig::contended_read_window` in flight (at least one piece),
//! and after each piece pauses long enough that its reads take only
//! `ClientConfig::contended_read_share` percent of the time (never longer
//! than [`MAX_PAUSE`]); alone it grows back to the full window at once.

use super::{ClientError, KeyReader};
use bytes::Bytes;
use futures::stream::FuturesOrdered;
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Longest pause between a contended stream's pieces.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// A stream of the bytes `start..end` of one key, in order. Dropping it
/// cancels the reads it has in flight.
pub struct SequentialReader {
    reader: Arc<KeyReader>,
    /// Next offset to ask for.
    next: u64,
    end: u64,
    /// Reads are cut at multiples of this (one EC stripe or replicated piece).
    piece: u64,
    window: u64,
    /// The window while positioned reads share the reader.
    contended_window: u64,
    /// Percent of the time a contended stream spends reading (1..=100).
    contended_share: u32,
    /// No new piece starts before this timer fires (contended streams only).
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Bytes asked for and not yet yielded.
    outstanding: u64,
    in_flight: FuturesOrdered<PieceRead>,
    ready: VecDeque<Bytes>,
    done: bool,
}

/// One piece read running as a task; aborted when dropped.
struct PieceRead {
    asked: u64,
    started: Instant,
    task: JoinHandle<Result<Vec<Bytes>, ClientError>>,
}

impl Future for PieceRead {
    type Output = (u64, Instant, Result<Vec<Bytes>, ClientError>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (asked, started) = (self.asked, self.started);
        Pin::new(&mut self.task).poll(cx).map(|joined| {
            let result = joined.unwrap_or_else(|e| {
                Err(ClientError::Unavailable(format!(
                    "sequential read task: {e}"
                )))
            });
            (asked, started, result)
        })
    }
}

impl Drop for PieceRead {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KeyReader {
    /// A sequential stream of bytes `start..end` (clamped to the object's
    /// end), keeping up to `ClientConfig::read_window` bytes of reads in
    /// flight. Must be polled within a Tokio runtime.
    pub fn sequential(self: &Arc<Self>, start: u64, end: u64) -> SequentialReader {
        let end = end.min(self.len());
        SequentialReader {
            reader: Arc::clone(self),
            next: start.min(end),
            end,
            piece: self.natural_piece().max(1),
            window: self.read_window(),
            contended_window: self.contended_read_window(),
            contended_share: self.contended_read_share().clamp(1, 100),
            pause: None,
            outstanding: 0,
            in_flight: FuturesOrdered::new(),
            ready: VecDeque::new(),
            done: false,
        }
    }
}

impl SequentialReader {
    /// Offset of the next byte the stream will ask a datanode for.
    pub fn cursor(&self) -> u64 {
        self.next
    }

    /// After a piece that started at `started`, pauses the stream if
    /// positioned reads share the reader, so that its reads take only its
    /// share of the time.
    fn pace(&mut self, started: Instant) {
        if self.contended_share >= 100 || !self.reader.positioned.contended() {
            return;
        }
        let took = started.elapsed();
        let pause = (took * (100 - self.contended_share) / self.contended_share).min(MAX_PAUSE);
        let until = tokio::time::Instant::now() + pause;
        match &mut self.pause {
            Some(sleep) if sleep.deadline() >= until => {}
            Some(sleep) => sleep.as_mut().reset(until),
            None => self.pause = Some(Box::pin(tokio::time::sleep_until(until))),
        }
    }

    /// Starts piece reads while the window has room (always at least one)
    /// and the stream is not paused.
    fn fill_window(&mut self, cx: &mut Context<'_>) {
        if let Some(pause) = &mut self.pause {
            if pause.as_mut().poll(cx).is_pending() && self.reader.positioned.contended() {
                return;
            }
            self.pause = None;
        }
        let mut window = None;
        while self.next < self.end {
            let boundary = (self.next / self.piece + 1) * self.piece;
            let len = boundary.min(self.end) - self.next;
            let window = *window.get_or_insert_with(|| {
                if self.reader.positioned.contended() {
                    self.contended_window.min(self.window)
                } else {
                    self.window
                }
            });
            if self.outstanding > 0 && self.outstanding + len > window {
                return;
            }
            let reader = Arc::clone(&self.reader);
            let offset = self.next;
            let task =
                tokio::spawn(async move { reader.read_ahead_chunks(offset, len as usize).await });
            self.in_flight.push_back(PieceRead {
                asked: len,
                started: Instant::now(),
                task,
            });
            self.outstanding += len;
            self.next += len;
        }
    }
}

impl Stream for SequentialReader {
    type Item = Result<Bytes, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(chunk) = this.ready.pop_front() {
                this.outstanding -= chunk.len() as u64;
                return Poll::Ready(Some(Ok(chunk)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            this.fill_window(cx);
            if this.in_flight.is_empty() && this.pause.is_some() && this.next < this.end {
                // Paused for positioned readers: the timer wakes us.
                return Poll::Pending;
            }
            match this.in_flight.poll_next_unpin(cx) {
                Poll::Ready(Some((asked, started, Ok(chunks)))) => {
                    this.pace(started);
                    let got: u64 = chunks.iter().map(|c| c.len() as u64).sum();
                    if got != asked {
                        this.done = true;
                        this.in_flight = FuturesOrdered::new();
                        return Poll::Ready(Some(Err(ClientError::Unavailable(format!(
                            "short sequential read: {got} of {asked} bytes"
                        )))));
                    }
                    this.ready
                        .extend(chunks.into_iter().filter(|c| !c.is_empty()));
                }
                Poll::Ready(Some((_, _, Err(e)))) => {
                    this.done = true;
                    this.in_flight = FuturesOrdered::new();
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
