//! GetObject bodies from a shared [`KeyReader`].
//!
//! A small range is read with one `read_chunks_at` and its segments' buffers
//! go to the body as they are (no join). A larger range streams from a
//! [`SequentialReader`](block_client::SequentialReader), which keeps a
//! window of reads in flight and yields the segments' buffers in order, so
//! memory stays bounded by the window and nothing is copied on the way.

use crate::error::S3Error;
use crate::range::ByteRange;
use crate::telemetry::count_bytes_out;
use axum::body::Body;
use block_client::{ClientError, KeyReader};
use bytes::Bytes;
use futures::{stream, StreamExt, TryStreamExt};
use std::sync::Arc;

/// Ranges up to this size are read at once with `read_chunks_at`; longer
/// ones stream. 3 MiB: one whole stripe of rs-3-2 at 1 MiB cells.
pub const SMALL_RANGE_BYTES: u64 = 3 * 1024 * 1024;

fn short_read(offset: u64, got: u64, want: u64) -> ClientError {
    ClientError::Unavailable(format!("short read at {offset}: {got} of {want} bytes"))
}

/// The body for `range` of an object. The first bytes are read before the
/// response starts, so an unreadable object still gets an S3 error; a failure
/// later aborts the connection, which the client sees as a short body.
pub async fn object_body(reader: Arc<KeyReader>, range: ByteRange) -> Result<Body, S3Error> {
    if range.is_empty() {
        return Ok(Body::empty());
    }
    let len = range.end - range.start;
    if len <= SMALL_RANGE_BYTES {
        let chunks = reader.read_chunks_at(range.start, len as usize).await?;
        let got: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if got != len {
            return Err(short_read(range.start, got, len).into());
        }
        let body = stream::iter(chunks).map(|chunk| {
            count_bytes_out(chunk.len());
            Ok::<Bytes, std::io::Error>(chunk)
        });
        return Ok(Body::from_stream(body));
    }
    let mut sequential = reader.sequential(range.start, range.end);
    let first = match sequential.next().await {
        Some(first) => first?,
        None => return Err(short_read(range.start, 0, len).into()),
    };
    let body = stream::once(async move { Ok(first) })
        .chain(sequential)
        .inspect_ok(|piece| count_bytes_out(piece.len()))
        .map_err(|e| {
            tracing::warn!(error = %e, "object read failed mid-stream");
            std::io::Error::other(e)
        });
    Ok(Body::from_stream(body))
}
