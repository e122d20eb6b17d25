//! Direct writes of block data: O_DIRECT moves an upload's bytes from the
//! receive buffer to the disk without going through the page cache.
//!
//! Why: a buffered write copies every byte into freshly allocated page-cache
//! pages, which the commit then has to write out anyway before it may
//! acknowledge anything (fsync). On the 2-core machines this project is
//! measured on, allocating and filling those pages cost the datanodes more
//! CPU than everything else in a PUT together (36% of both cores during one
//! 1 GiB PUT stream, `docs/benchmarks.md`), and it doubled the disk work into
//! a burst at commit. Written straight through, the bytes reach the disk as
//! they arrive, the commit's fsync has little left to do, and the page cache
//! stays with data that is read. The cost: a block just written is read from
//! the disk the first time (the kernel caches it then).
//!
//! O_DIRECT needs the file offset, the length and the buffer's address
//! aligned to [`DIRECT_IO_ALIGN`]. Writes of whole cells are (the server
//! receives payloads into aligned buffers, see [`aligned_buffer`]); a write
//! that is not — the short last piece of a block, or a file system without
//! O_DIRECT (tmpfs) — goes through the page cache as before. Both kinds may
//! mix in one file: the kernel keeps them coherent, and the commit's fsync
//! covers both.

use bytes::BytesMut;
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Alignment O_DIRECT asks of offsets, lengths and buffers: the largest
/// logical block size of common disks.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// Largest piece copied through the bounce buffer at a time.
const BOUNCE_PIECE: usize = 1024 * 1024;

thread_local! {
    /// An aligned buffer per blocking thread, for data that arrived in an
    /// unaligned buffer; kept, so the copy never allocates.
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Opens `path` (already created) for direct writes; None where the file
/// system refuses O_DIRECT.
pub fn open(path: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(e) if refuses_direct(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether opening with O_DIRECT failed because the file system does not
/// do direct I/O (EINVAL), rather than for any other reason.
fn refuses_direct(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
}

/// Whether a write of `len` bytes at `offset` can go direct.
pub fn is_aligned(offset: u64, len: usize) -> bool {
    offset.is_multiple_of(DIRECT_IO_ALIGN as u64) && len.is_multiple_of(DIRECT_IO_ALIGN)
}

/// Writes `data` at `offset` (both aligned, see [`is_aligned`]) through the
/// O_DIRECT descriptor `file`, copying through an aligned buffer when `data`
/// itself is not aligned in memory.
pub fn write_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    debug_assert!(is_aligned(offset, data.len()));
    if data.as_ptr().align_offset(DIRECT_IO_ALIGN) == 0 {
        return file.write_all_at(data, offset);
    }
    BOUNCE.with(|bounce| {
        let mut bounce = bounce.borrow_mut();
        if bounce.len() < BOUNCE_PIECE + DIRECT_IO_ALIGN {
            bounce.resize(BOUNCE_PIECE + DIRECT_IO_ALIGN, 0);
        }
        let start = bounce.as_ptr().align_offset(DIRECT_IO_ALIGN);
        let mut at = offset;
        for piece in data.chunks(BOUNCE_PIECE) {
            let aligned = &mut bounce[start..start + piece.len()];
            aligned.copy_from_slice(piece);
            file.write_all_at(aligned, at)?;
            at += piece.len() as u64;
        }
        Ok(())
    })
}

/// An empty buffer of at least `capacity` bytes whose first byte is aligned
/// for direct writes, so that a payload read into it goes to disk as it is.
pub fn aligned_buffer(capacity: usize) -> BytesMut {
    let mut buf = BytesMut::with_capacity(capacity + DIRECT_IO_ALIGN);
    let pad = buf.as_ptr().align_offset(DIRECT_IO_ALIGN);
    buf.resize(pad, 0);
    // The rest of the allocation, starting at the aligned address.
    let _padding = buf.split_to(pad);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_start_aligned_and_hold_their_capacity() {
        for capacity in [0, 1, 4096, 1 << 20] {
            let buf = aligned_buffer(capacity);
            assert_eq!(buf.as_ptr().align_offset(DIRECT_IO_ALIGN), 0);
            assert!(buf.capacity() >= capacity);
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn direct_writes_of_aligned_and_unaligned_buffers_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("block");
        File::create(&path).unwrap();
        // A file system without O_DIRECT (tmpfs) would leave nothing to
        // test: the suite is meant to run where the datanodes store blocks.
        let file = open(&path).unwrap().unwrap_or_else(|| {
            panic!(
                "{} refuses O_DIRECT: point TMPDIR at a disk file system to run this test",
                dir.path().display()
            )
        });
        let data: Vec<u8> = (0..3 * BOUNCE_PIECE + 8192)
            .map(|i| (i % 253) as u8)
            .collect();
        // Aligned in memory: written as it is.
        let mut aligned = aligned_buffer(8192);
        aligned.extend_from_slice(&data[..8192]);
        write_at(&file, &aligned, 0).unwrap();
        // One byte off in memory: through the bounce buffer, in pieces.
        let mut shifted = vec![0u8; data.len() - 8192 + 1];
        shifted[1..].copy_from_slice(&data[8192..]);
        write_at(&file, &shifted[1..], 8192).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }

    /// EINVAL on open means no direct I/O on that file system (older tmpfs,
    /// some FUSE file systems): writes go through the page cache. Any other
    /// failure is an error.
    #[test]
    fn only_einval_means_no_direct_io() {
        let einval = io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error());
        assert!(refuses_direct(&einval));
        for other in [
            rustix::io::Errno::NOENT,
            rustix::io::Errno::ACCESS,
            rustix::io::Errno::IO,
        ] {
            assert!(!refuses_direct(&io::Error::from_raw_os_error(
                other.raw_os_error()
            )));
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            open(&dir.path().join("missing")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // procfs refuses O_DIRECT with EINVAL: no direct descriptor, no error.
        assert!(matches!(open(Path::new("/proc/self/comm")), Ok(None)));
    }

    #[test]
    fn alignment_rule() {
        assert!(is_aligned(0, 0));
        assert!(is_aligned(1 << 20, 4096));
        assert!(!is_aligned(512, 4096));
        assert!(!is_aligned(4096, 100));
    }
}
