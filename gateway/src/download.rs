//! GetObject bodies: a stream that reads the object in pieces with
//! `KeyReader::read_at` and yields them to the HTTP body, with at most a few
//! pieces in flight, so memory does not grow with the object's size.

use crate::error::S3Error;
use crate::range::ByteRange;
use crate::telemetry::count_bytes_out;
use axum::body::Body;
use blockstore::client::{ClientError, KeyReader};
use bytes::Bytes;
use futures::{stream, StreamExt, TryStreamExt};
use std::sync::Arc;

/// Bytes read per `read_at`: whole EC stripes of rs-3-2 and rs-6-3 at 1 MiB cells fit evenly.
pub const PIECE_BYTES: u64 = 3 * 1024 * 1024;
/// Reads running ahead of the client.
const PIECES_IN_FLIGHT: usize = 2;

/// The pieces `(offset, len)` covering `start..end`.
fn pieces(start: u64, end: u64) -> impl Iterator<Item = (u64, usize)> {
    (start..end)
        .step_by(PIECE_BYTES as usize)
        .map(move |offset| (offset, (end - offset).min(PIECE_BYTES) as usize))
}

async fn read_piece(reader: &KeyReader, offset: u64, len: usize) -> Result<Bytes, ClientError> {
    let data = reader.read_at(offset, len).await?;
    if data.len() != len {
        return Err(ClientError::Unavailable(format!(
            "short read at {offset}: {} of {len} bytes",
            data.len()
        )));
    }
    Ok(data)
}

/// The body for `range` of an object. The first piece is read before the
/// response starts, so an unreadable object still gets an S3 error; a failure
/// later aborts the connection, which the client sees as a short body.
pub async fn object_body(reader: KeyReader, range: ByteRange) -> Result<Body, S3Error> {
    if range.is_empty() {
        return Ok(Body::empty());
    }
    let mut all = pieces(range.start, range.end);
    let Some((offset, len)) = all.next() else {
        return Ok(Body::empty());
    };
    let first = read_piece(&reader, offset, len).await?;
    let reader = Arc::new(reader);
    let rest = stream::iter(all)
        .map(move |(offset, len)| {
            let reader = Arc::clone(&reader);
            async move { read_piece(&reader, offset, len).await }
        })
        .buffered(PIECES_IN_FLIGHT);
    let body = stream::once(async move { Ok(first) })
        .chain(rest)
        .inspect_ok(|piece| count_bytes_out(piece.len()))
        .map_err(|e| {
            tracing::warn!(error = %e, "object read failed mid-stream");
            std::io::Error::other(e)
        });
    Ok(Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_range_exactly() {
        let p: Vec<_> = pieces(5, 5 + 2 * PIECE_BYTES + 7).collect();
        assert_eq!(
            p,
            vec![
                (5, PIECE_BYTES as usize),
                (5 + PIECE_BYTES, PIECE_BYTES as usize),
                (5 + 2 * PIECE_BYTES, 7)
            ]
        );
        assert_eq!(pieces(0, 1).collect::<Vec<_>>(), vec![(0, 1)]);
        assert_eq!(pieces(3, 3).count(), 0);
    }
}
