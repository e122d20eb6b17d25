//! Recycled, aligned buffers for the payloads of block writes.
//!
//! Every `WriteChunks` of a cell brings up to 1 MiB that goes to disk with
//! O_DIRECT, so it is received into a buffer aligned for that. A new buffer
//! per payload is new memory, which the kernel faults in and zeroes: with 16
//! concurrent EC writers that zeroing (here and in the receive into it) took
//! 18% of the machine's CPU. So payloads are received into buffers of the
//! server's [`BufferRecycler`], which get them back when the last `Bytes`
//! of them is dropped (the disk write done). A longer payload gets a buffer
//! that grows as its bytes arrive: the announced length is the peer's claim,
//! not yet memory owed to it.

use bytes::Bytes;
use proto::recycled::BufferRecycler;
use proto::wire::{self, ProtocolError};
use std::io::ErrorKind;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::store::direct::{aligned_buffer, DIRECT_IO_ALIGN};

/// Payloads up to this long are received into recycled buffers.
pub const RECYCLED_PAYLOAD_MAX: usize = 1024 * 1024;

/// Idle buffers a server keeps at most (64 MiB).
pub const MAX_IDLE: usize = 64;

/// Reads a write's payload of exactly `len` bytes from `r` into a buffer of
/// `buffers`, its first byte aligned for direct writes.
pub async fn read_payload<R: AsyncRead + Unpin>(
    buffers: &BufferRecycler,
    r: &mut R,
    len: u32,
) -> Result<Bytes, ProtocolError> {
    let len = len as usize;
    if len > RECYCLED_PAYLOAD_MAX {
        let mut data = aligned_buffer(RECYCLED_PAYLOAD_MAX);
        wire::read_payload_into(r, len as u32, &mut data).await?;
        return Ok(data.freeze());
    }
    // Initialised once, when the buffer is made.
    let mut payload = buffers.take(|| vec![0u8; RECYCLED_PAYLOAD_MAX + DIRECT_IO_ALIGN]);
    let start = payload.vec_mut().as_ptr().align_offset(DIRECT_IO_ALIGN);
    payload.set_window(start, len);
    r.read_exact(payload.window_mut())
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => ProtocolError::Truncated("payload"),
            _ => ProtocolError::Io(e),
        })?;
    Ok(payload.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn payloads_are_exact_aligned_and_their_buffers_reused() {
        let buffers = BufferRecycler::new(MAX_IDLE);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut source = &data[..];
        let first = read_payload(&buffers, &mut source, 100_000).await.unwrap();
        assert_eq!(&first[..], &data[..100_000]);
        assert_eq!(first.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        let address = first.as_ptr();
        let slice = first.slice(..10);
        drop(first);
        assert_eq!(buffers.idle(), 0, "a slice keeps the buffer in use");
        drop(slice);
        assert_eq!(buffers.idle(), 1, "the dropped buffer is idle again");
        // Whatever an earlier payload left in a buffer, a new one reads exact.
        let second = read_payload(&buffers, &mut source, 150_000).await.unwrap();
        assert_eq!(second.as_ptr(), address, "the idle buffer is reused");
        assert_eq!(&second[..], &data[100_000..250_000]);
        // The rest of the source is shorter than the payload claimed.
        let err = read_payload(&buffers, &mut source, 60_000)
            .await
            .unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated(_)), "{err:?}");
    }

    #[tokio::test]
    async fn a_payload_longer_than_a_recycled_buffer_is_read_whole_and_aligned() {
        let len = RECYCLED_PAYLOAD_MAX + 12_345;
        let data: Vec<u8> = (0..len as u32).map(|i| (i % 253) as u8).collect();
        let buffers = BufferRecycler::new(MAX_IDLE);
        let got = read_payload(&buffers, &mut &data[..], len as u32)
            .await
            .unwrap();
        assert!(got[..] == data[..]);
        assert_eq!(got.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        let err = read_payload(&buffers, &mut &data[..len - 1], len as u32)
            .await
            .unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated(_)), "{err:?}");
    }
}
