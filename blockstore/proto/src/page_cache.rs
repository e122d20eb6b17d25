//! Reads that never wait for the disk: `preadv2(RWF_NOWAIT)` copies what the
//! page cache holds and stops at the first page it does not.
//!
//! A small read of a cached block file costs a few microseconds; sending it
//! to the blocking pool instead costs two thread hand-offs, more than the
//! read. Both the datanode's replies and the client's short-circuit reads
//! try this first on the executor and take the blocking path only for the
//! rest.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};

/// Reads up to this long are worth trying on the executor.
pub const INLINE_READ_MAX: u64 = 256 * 1024;

/// Set once the file system refused RWF_NOWAIT: no more inline attempts.
static NOWAIT_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// False once the file system has shown it cannot do non-blocking reads.
pub fn nowait_supported() -> bool {
    !NOWAIT_UNSUPPORTED.load(Ordering::Relaxed)
}

/// Reads `buf.len()` bytes of `file` from `offset` as far as the page cache
/// holds them, never waiting for the disk; returns how many were read. The
/// caller reads the rest the slow way (which also reports errors).
pub fn read_cached(file: &File, buf: &mut [u8], offset: u64) -> usize {
    let mut done = 0;
    while done < buf.len() && nowait_supported() {
        let mut slices = [std::io::IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(
            file,
            &mut slices,
            offset + done as u64,
            rustix::io::ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(
                rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS,
            ) => {
                NOWAIT_UNSUPPORTED.store(true, Ordering::Relaxed);
                break;
            }
            // EAGAIN (not cached) and real errors alike: the slow path.
            Err(_) => break,
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_a_cached_file_and_stops_at_its_end() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        file.flush().unwrap();
        let file = File::open(file.path()).unwrap();
        // Just written: its pages are in the cache.
        let mut buf = vec![0u8; 4096];
        let got = read_cached(&file, &mut buf, 1000);
        if nowait_supported() {
            assert_eq!(got, 4096);
            assert_eq!(buf, data[1000..5096]);
        }
        let mut tail = vec![0u8; 4096];
        let got = read_cached(&file, &mut tail, 99_000);
        assert!(got <= 1000, "past the end: {got}");
    }
}
