//! Recycled buffers for the short-circuit reads of cached pages.
//!
//! A ranged GET served from the page cache reads its chunk-aligned span into
//! a fresh buffer, verifies it and hands a slice of it to the HTTP body. A
//! fresh buffer is zeroed first (the read wants initialised memory), and
//! that memset plus the allocation cost 3-4% of the gateway's CPU on 64 KiB
//! ranges. Here a buffer goes back to a lock-free queue when the last `Bytes`
//! of it is dropped and the next read reuses it, already initialised.

use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use std::sync::LazyLock;

/// The largest read served from here; longer ones allocate their own.
pub(crate) const MAX_RECYCLED_LEN: usize = proto::page_cache::INLINE_READ_MAX as usize;

/// Idle buffers kept at most (each up to `MAX_RECYCLED_LEN`: 32 MiB).
const MAX_IDLE: usize = 128;

static IDLE: LazyLock<ArrayQueue<Vec<u8>>> = LazyLock::new(|| ArrayQueue::new(MAX_IDLE));

/// A buffer of `len` initialised bytes, reused when one is idle; its
/// contents are whatever the last read left (the caller overwrites them).
pub(crate) struct ReadBuffer {
    buf: Vec<u8>,
    len: usize,
}

impl ReadBuffer {
    /// A buffer for a read of `len <= MAX_RECYCLED_LEN` bytes.
    pub(crate) fn take(len: usize) -> Self {
        debug_assert!(len <= MAX_RECYCLED_LEN);
        let mut buf = IDLE
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_RECYCLED_LEN));
        if buf.len() < len {
            // Only what no earlier read initialised is zeroed.
            buf.resize(len, 0);
        }
        Self { buf, len }
    }

    /// The `len` bytes to read into.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }

    /// The buffer as `Bytes`, returned to the idle queue when the last of
    /// them (and of their slices) is dropped.
    pub(crate) fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for ReadBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        // A full queue drops the buffer instead.
        let _ = IDLE.push(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_is_reused_with_its_bytes_initialised() {
        let mut first = ReadBuffer::take(1000);
        first.as_mut_slice().fill(7);
        let pointer = first.buf.as_ptr();
        let bytes = first.into_bytes();
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(&slice[..], &[7; 10], "a slice keeps the buffer alive");
        drop(slice);
        // Other tests may take buffers concurrently: look for this one.
        let mut taken = Vec::new();
        let mut found = false;
        for _ in 0..MAX_IDLE {
            let buffer = ReadBuffer::take(2000);
            assert_eq!(buffer.as_ref().len(), 2000);
            if buffer.buf.as_ptr() == pointer {
                assert_eq!(&buffer.as_ref()[..1000], &[7; 1000][..]);
                assert_eq!(
                    &buffer.as_ref()[1000..],
                    &[0; 1000][..],
                    "the new part is zeroed"
                );
                found = true;
                break;
            }
            taken.push(buffer);
        }
        assert!(found, "the dropped buffer was not reused");
    }
}
