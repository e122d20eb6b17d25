//! Recycled, aligned buffers for the payloads of block writes.
//!
//! Every `WriteChunks` of a cell brings up to 1 MiB that goes to disk with
//! O_DIRECT, so it is received into a buffer aligned for that. A new buffer
//! per payload is new memory, which the kernel faults in and zeroes: with 16
//! concurrent EC writers that zeroing (here and in the receive into it) took
//! 18% of the machine's CPU. The buffer goes back to a lock-free queue when
//! the last `Bytes` of it is dropped (the disk write done) and the next
//! payload is received into it. A longer payload gets a buffer that grows
//! as its bytes arrive: the announced length is the peer's claim, not yet
//! memory owed to it.

use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use proto::wire::{self, ProtocolError};
use std::io::ErrorKind;
use std::sync::LazyLock;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::store::direct::{aligned_buffer, DIRECT_IO_ALIGN};

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

/// Reads a write's payload of exactly `len` bytes from `r`, its first byte
/// aligned for direct writes.
pub async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    len: u32,
) -> Result<Bytes, ProtocolError> {
    let len = len as usize;
    if len > RECYCLED_PAYLOAD_MAX {
        let mut data = aligned_buffer(RECYCLED_PAYLOAD_MAX);
        wire::read_payload_into(r, len as u32, &mut data).await?;
        return Ok(data.freeze());
    }
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

    /// True when an idle buffer's aligned start is `address` (others, of
    /// tests running at the same time, are put back).
    fn idle_holds(address: *const u8) -> bool {
        let mut seen = Vec::new();
        let mut found = false;
        while let Some(buf) = IDLE.pop() {
            found |= buf
                .as_ptr()
                .wrapping_add(buf.as_ptr().align_offset(DIRECT_IO_ALIGN))
                == address;
            seen.push(buf);
        }
        for buf in seen {
            let _ = IDLE.push(buf);
        }
        found
    }

    #[tokio::test]
    async fn payloads_are_exact_aligned_and_their_buffers_reused() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut source = &data[..];
        let first = read_payload(&mut source, 100_000).await.unwrap();
        assert_eq!(&first[..], &data[..100_000]);
        assert_eq!(first.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        let address = first.as_ptr();
        let slice = first.slice(..10);
        drop(first);
        assert!(!idle_holds(address), "a slice keeps the buffer in use");
        drop(slice);
        assert!(idle_holds(address), "the dropped buffer is idle again");
        // Whatever an earlier payload left in a buffer, a new one reads exact.
        let second = read_payload(&mut source, 150_000).await.unwrap();
        assert_eq!(&second[..], &data[100_000..250_000]);
        assert_eq!(second.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        // The rest of the source is shorter than the payload claimed.
        let err = read_payload(&mut source, 60_000).await.unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated(_)), "{err:?}");
    }

    #[tokio::test]
    async fn a_payload_longer_than_a_recycled_buffer_is_read_whole_and_aligned() {
        let len = RECYCLED_PAYLOAD_MAX + 12_345;
        let data: Vec<u8> = (0..len as u32).map(|i| (i % 253) as u8).collect();
        let got = read_payload(&mut &data[..], len as u32).await.unwrap();
        assert!(got[..] == data[..]);
        assert_eq!(got.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
        let err = read_payload(&mut &data[..len - 1], len as u32)
            .await
            .unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated(_)), "{err:?}");
    }
}
