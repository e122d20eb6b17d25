//! Recycled buffers for the short-circuit reads of cached pages.
//!
//! A ranged GET served from the page cache reads its chunk-aligned span into
//! a buffer, verifies it and hands a slice of it to the HTTP body. A fresh
//! buffer is zeroed first (the read wants initialised memory), and that
//! memset plus the allocation cost 3-4% of the gateway's CPU on 64 KiB
//! ranges; so the buffers come from a [`BufferRecycler`] the short-circuit
//! reader owns, and a reused one is zeroed only where no earlier read
//! initialised it.

use proto::recycled::{BufferRecycler, RecycledBuffer};

/// The largest read served from here; longer ones allocate their own.
pub(crate) const MAX_RECYCLED_LEN: usize = proto::page_cache::INLINE_READ_MAX as usize;

/// Idle buffers kept at most (each up to `MAX_RECYCLED_LEN`: 32 MiB).
pub(crate) const MAX_IDLE: usize = 128;

/// A buffer of `len <= MAX_RECYCLED_LEN` initialised bytes from `recycler`;
/// its contents are whatever the last read left (the caller overwrites them).
pub(crate) fn take(recycler: &BufferRecycler, len: usize) -> RecycledBuffer {
    debug_assert!(len <= MAX_RECYCLED_LEN);
    let mut buffer = recycler.take(|| Vec::with_capacity(MAX_RECYCLED_LEN));
    let buf = buffer.vec_mut();
    if buf.len() < len {
        // Only what no earlier read initialised is zeroed.
        buf.resize(len, 0);
    }
    buffer.set_window(0, len);
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_buffer_zeroes_only_its_new_part() {
        let recycler = BufferRecycler::new(MAX_IDLE);
        let mut first = take(&recycler, 1000);
        first.window_mut().fill(7);
        drop(first.into_bytes());
        let second = take(&recycler, 2000);
        assert_eq!(second.as_ref().len(), 2000);
        assert_eq!(&second.as_ref()[..1000], &[7; 1000][..]);
        assert_eq!(
            &second.as_ref()[1000..],
            &[0; 1000][..],
            "the new part is zeroed"
        );
    }
}
