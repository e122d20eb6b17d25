//! Recycled, aligned buffers for the payloads of block writes.
//!
//! Every `WriteChunks` of a cell brings up to 1 MiB that goes to disk with
//! O_DIRECT, so it is received into a buffer aligned for that. A new buffer
//! per payload is new memory, which the kernel faults in and zeroes: with 16
//! concurrent EC writers that zeroing (here and in the receive into it) took
//! 18% of the machine's CPU. The buffer goes back to a lock-free queue when
//! the last `Bytes` of it is dropped (the disk write done) and the next
//! payload is received into it.

use blockstore::protocol::ProtocolError;
use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use std::io::ErrorKind;
use std::sync::LazyLock;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::store::direct::DIRECT_IO_ALIGN;

/// Payloads up to this long are received into recycled buffers.
pub const RECYCLED_PAYLOAD_MAX: usize = 1024 * 1024;

/// Idle buffers kept at most, for the whole process (64 MiB).
const MAX_IDLE: usize = 64;

static IDLE: LazyLock<ArrayQueue<Vec<u8>>> = LazyLock::new(|| ArrayQueue::new(MAX_IDLE));

/// A received payload in a recycled buffer: `len` bytes from `start`, an
/// address aligned for direct writes.
struct Payload {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        // A full queue drops the buffer instead.
        let _ = IDLE.push(std::mem::take(&mut self.buf));
    }
}

/// Reads a payload of exactly `len <= RECYCLED_PAYLOAD_MAX` bytes from `r`
/// into a recycled buffer, its first byte aligned for direct writes.
pub async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
) -> Result<Bytes, ProtocolError> {
    debug_assert!(len <= RECYCLED_PAYLOAD_MAX);
    let buf = IDLE
        .pop()
        // Initialised once, when the buffer is made.
        .unwrap_or_else(|| vec![0u8; RECYCLED_PAYLOAD_MAX + DIRECT_IO_ALIGN]);
    let start = buf.as_ptr().align_offset(DIRECT_IO_ALIGN);
    let mut payload = Payload { buf, start, len };
    r.read_exact(&mut payload.buf[start..start + len])
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => ProtocolError::Truncated("payload"),
            _ => ProtocolError::Io(e),
        })?;
    Ok(Bytes::from_owner(payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn payloads_are_exact_aligned_and_their_buffers_reused() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut source = &data[..];
        let first = read_payload(&mut source, 100_000).await.unwrap();
        assert_eq!(&first[..], &data[..100_000]);
        assert_eq!(first.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        let address = first.as_ptr();
        drop(first);
        // The next payload lands in a recycled buffer (this one, unless a
        // concurrent test took it), whatever the earlier one left there.
        let second = read_payload(&mut source, 150_000).await.unwrap();
        assert_eq!(&second[..], &data[100_000..250_000]);
        assert_eq!(second.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        let reused = second.as_ptr() == address;
        drop(second);
        assert!(reused || !IDLE.is_empty());
        // The rest of the source is shorter than the payload claimed.
        let err = read_payload(&mut source, 60_000).await.unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated(_)), "{err:?}");
    }
}
