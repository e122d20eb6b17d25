//! Buffers recycled through a lock-free queue: a buffer handed out as
//! `Bytes` goes back to its recycler when the last `Bytes` of it (and of its
//! slices) is dropped, and the next take reuses it, already allocated and
//! initialised. Fresh memory is what costs here: the kernel faults it in and
//! zeroes it, which took a measurable share of the CPU on both the client's
//! short-circuit reads and the datanode's write payloads.

use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// Idle buffers, owned by whoever hands them out (the short-circuit reader,
/// a datanode's server).
#[derive(Clone)]
pub struct BufferRecycler {
    idle: Arc<ArrayQueue<Vec<u8>>>,
}

impl BufferRecycler {
    /// A recycler keeping at most `max_idle` idle buffers.
    pub fn new(max_idle: usize) -> Self {
        Self {
            idle: Arc::new(ArrayQueue::new(max_idle.max(1))),
        }
    }

    /// An idle buffer, or `make()` when none is idle. Its contents are
    /// whatever the last user left.
    pub fn take(&self, make: impl FnOnce() -> Vec<u8>) -> RecycledBuffer {
        RecycledBuffer {
            buf: self.idle.pop().unwrap_or_else(make),
            start: 0,
            len: 0,
            home: self.idle.clone(),
        }
    }

    /// Buffers idle now.
    pub fn idle(&self) -> usize {
        self.idle.len()
    }
}

/// A buffer of a [`BufferRecycler`], and the window of it that holds data.
pub struct RecycledBuffer {
    buf: Vec<u8>,
    start: usize,
    len: usize,
    home: Arc<ArrayQueue<Vec<u8>>>,
}

impl RecycledBuffer {
    /// The whole buffer (to resize it, or to find an aligned start).
    pub fn vec_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Sets the window of data: `len` bytes from `start`, which must lie in
    /// the buffer.
    pub fn set_window(&mut self, start: usize, len: usize) {
        assert!(start + len <= self.buf.len(), "window past the buffer");
        self.start = start;
        self.len = len;
    }

    /// The window, to read into.
    pub fn window_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    /// The window as `Bytes`; the buffer goes home when the last of them
    /// is dropped.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for RecycledBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl Drop for RecycledBuffer {
    fn drop(&mut self) {
        // A full queue drops the buffer instead.
        let _ = self.home.push(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_goes_home_only_when_its_last_slice_is_dropped() {
        let recycler = BufferRecycler::new(4);
        let mut first = recycler.take(|| vec![0u8; 100]);
        first.set_window(10, 50);
        first.window_mut().fill(7);
        let pointer = first.vec_mut().as_ptr();
        let bytes = first.into_bytes();
        assert_eq!(bytes.len(), 50);
        let slice = bytes.slice(5..15);
        drop(bytes);
        assert_eq!(recycler.idle(), 0, "a slice keeps the buffer in use");
        assert_eq!(&slice[..], &[7; 10]);
        drop(slice);
        assert_eq!(recycler.idle(), 1);
        let mut again = recycler.take(|| panic!("an idle buffer is there"));
        assert_eq!(again.vec_mut().as_ptr(), pointer);
        assert_eq!(&again.vec_mut()[10..60], &[7; 50][..], "left as it was");
    }

    #[test]
    fn a_full_recycler_drops_the_surplus() {
        let recycler = BufferRecycler::new(1);
        let a = recycler.take(|| vec![1; 8]);
        let b = recycler.take(|| vec![2; 8]);
        drop(a);
        drop(b);
        assert_eq!(recycler.idle(), 1);
    }

    #[test]
    #[should_panic(expected = "window past the buffer")]
    fn a_window_past_the_buffer_is_refused() {
        BufferRecycler::new(1).take(|| vec![0; 8]).set_window(4, 5);
    }
}
