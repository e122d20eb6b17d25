//! GetObject bodies from a shared [`KeyReader`].
//!
//! A small range is read with one `read_chunks_at` and its segments' buffers
//! go to the body as they are (no join). A larger range streams from a
//! [`SequentialReader`](block_client::SequentialReader), which keeps a
//! window of reads in flight and yields the segments' buffers in order, so
//! memory stays bounded by the window and nothing is copied on the way.
//!
//! Across GETs, [`GetMemory`] bounds what all bodies hold at once: a body
//! reserves its bytes in flight (the range, or the read window of a
//! stream) before it reads, and gives them back when it is dropped, sent or
//! not. Many slow readers thus wait, or get SlowDown, instead of growing the
//! gateway's memory with their number.

use crate::encryption::{open_all, open_stream, BodyKey};
use crate::error::S3Error;
use crate::range::ByteRange;
use crate::telemetry::count_bytes_out;
use axum::body::Body;
use block_client::{ClientError, KeyReader};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{stream, StreamExt, TryStreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default [`GetMemory`] bound.
pub const DEFAULT_GET_MEMORY: u64 = 1024 * 1024 * 1024;

/// Reservations are counted in KiB, so that any bound fits the semaphore.
const UNIT: u64 = 1024;

/// The bytes every GET body may hold at once, together.
pub struct GetMemory {
    permits: Arc<Semaphore>,
    units: u64,
    wait: Duration,
}

impl GetMemory {
    /// A bound of `bytes` (at least one read window's worth is sensible);
    /// a body waits at most `wait` for room before SlowDown.
    pub fn new(bytes: u64, wait: Duration) -> Self {
        let units = (bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS as u64);
        Self {
            permits: Arc::new(Semaphore::new(units as usize)),
            units,
            wait,
        }
    }

    /// Room for `bytes` (all of the bound when they exceed it).
    async fn reserve(&self, bytes: u64) -> Result<OwnedSemaphorePermit, S3Error> {
        let units = bytes.div_ceil(UNIT).clamp(1, self.units) as u32;
        let acquire = self.permits.clone().acquire_many_owned(units);
        match tokio::time::timeout(self.wait, acquire).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) | Err(_) => {
                metrics::counter!(crate::telemetry::GET_MEMORY_WAITS_EXCEEDED.name).increment(1);
                Err(S3Error::new(crate::error::S3Code::SlowDown))
            }
        }
    }

    /// Bytes free now.
    pub fn available(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }
}

/// A body stream that holds its memory reservation until it is dropped.
struct Reserved<S> {
    inner: S,
    _room: OwnedSemaphorePermit,
}

impl<S: futures::Stream + Unpin> futures::Stream for Reserved<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// Ranges up to this size are read at once with `read_chunks_at`; longer
/// ones stream. 3 MiB: one whole stripe of rs-3-2 at 1 MiB cells.
pub const SMALL_RANGE_BYTES: u64 = 3 * 1024 * 1024;

fn short_read(offset: u64, got: u64, want: u64) -> ClientError {
    ClientError::Unavailable(format!("short read at {offset}: {got} of {want} bytes"))
}

/// The body for `range` of an object, opened with `key` when the object is
/// encrypted (only the packages the range touches are read). The first
/// bytes are read before the response starts, so an unreadable object still
/// gets an S3 error; a failure later aborts the connection, which the client
/// sees as a short body.
pub async fn object_body(
    reader: Arc<KeyReader>,
    range: ByteRange,
    memory: &GetMemory,
    key: Option<&BodyKey>,
) -> Result<Body, S3Error> {
    if range.is_empty() {
        return Ok(Body::empty());
    }
    let (stored, opener) = match key {
        None => (range, None),
        Some(key) => {
            let (sealed, opener) = key.sealed_range(range.start..range.end);
            let stored = ByteRange {
                start: sealed.start,
                end: sealed.end,
            };
            (stored, Some(opener))
        }
    };
    let len = stored.end - stored.start;
    let room = memory
        .reserve(len.min(reader.read_window().max(SMALL_RANGE_BYTES)))
        .await?;
    if len <= SMALL_RANGE_BYTES {
        let chunks = reader.read_chunks_at(stored.start, len as usize).await?;
        let got: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if got != len {
            return Err(short_read(stored.start, got, len).into());
        }
        let chunks = match opener {
            None => chunks,
            Some(opener) => open_all(opener, chunks)?,
        };
        let body = stream::iter(chunks).map(|chunk| {
            count_bytes_out(chunk.len());
            Ok::<Bytes, std::io::Error>(chunk)
        });
        return Ok(Body::from_stream(Reserved {
            inner: body,
            _room: room,
        }));
    }
    let mut sequential = reader.sequential(stored.start, stored.end);
    let first = match sequential.next().await {
        Some(first) => first?,
        None => return Err(short_read(stored.start, 0, len).into()),
    };
    let pieces = stream::once(async move { Ok(first) })
        .chain(sequential)
        .map_err(|e| {
            tracing::warn!(error = %e, "object read failed mid-stream");
            std::io::Error::other(e)
        });
    let body: BoxStream<'static, Result<Bytes, std::io::Error>> = match opener {
        None => Box::pin(pieces),
        Some(opener) => Box::pin(open_stream(Box::pin(pieces), opener)),
    };
    Ok(Body::from_stream(Reserved {
        inner: body.inspect_ok(|piece| count_bytes_out(piece.len())),
        _room: room,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::S3Code;

    #[tokio::test]
    async fn get_memory_is_lent_until_given_back_and_refused_past_the_wait() {
        let memory = GetMemory::new(8 * 1024 * 1024, Duration::from_millis(100));
        let a = memory.reserve(5 * 1024 * 1024).await.unwrap();
        assert_eq!(memory.available(), 3 * 1024 * 1024);
        // More than is left waits, then is refused with SlowDown.
        let refused = memory.reserve(4 * 1024 * 1024).await.unwrap_err();
        assert_eq!(refused.code(), S3Code::SlowDown);
        // A reservation over the whole bound takes all of it once free.
        drop(a);
        let all = memory.reserve(64 * 1024 * 1024).await.unwrap();
        assert_eq!(memory.available(), 0);
        drop(all);
        // A waiting body gets its room when another gives it back.
        let held = memory.reserve(6 * 1024 * 1024).await.unwrap();
        let release = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(held);
        };
        let (got, ()) = tokio::join!(memory.reserve(6 * 1024 * 1024), release);
        assert!(got.is_ok());
    }
}
