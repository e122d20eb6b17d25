//! CRC32C chunk checksums: a block's bytes are cut into chunks of
//! `bytes_per_checksum` bytes (the last one may be shorter), each with its own
//! CRC32C, so that any chunk-aligned range can be verified on its own.
//!
//! The chunk size is chosen per block by its writer and travels with the data
//! (in write requests, in the block's sidecar file and in read replies).

/// Chunk size used unless a block says otherwise (as Ozone since HDDS-10465).
pub const DEFAULT_BYTES_PER_CHECKSUM: u32 = 16 * 1024;
/// Smallest chunk size accepted: keeps the checksums of a frame's largest
/// payload well inside the largest frame header.
pub const MIN_BYTES_PER_CHECKSUM: u32 = 512;
/// Largest chunk size accepted.
pub const MAX_BYTES_PER_CHECKSUM: u32 = 16 * 1024 * 1024;

/// Why data failed its checksums, or the checksums themselves make no sense.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumError {
    /// The chunk starting at `offset` (in the block) does not match its CRC.
    #[error("checksum mismatch in the chunk at offset {offset}: expected {expected:08x}, computed {actual:08x}")]
    Mismatch {
        /// Block offset of the failing chunk.
        offset: u64,
        /// CRC that came with the chunk.
        expected: u32,
        /// CRC computed over the chunk's data.
        actual: u32,
    },
    /// The number of CRCs does not cover the data exactly.
    #[error("{actual} checksums given for data needing {expected}")]
    CountMismatch {
        /// CRCs the data needs.
        expected: u64,
        /// CRCs given.
        actual: usize,
    },
    /// The data does not start on a chunk boundary.
    #[error("start offset {start} is not a multiple of the chunk size {bytes_per_checksum}")]
    Misaligned {
        /// Block offset the data starts at.
        start: u64,
        /// The chunk size it should be a multiple of.
        bytes_per_checksum: u32,
    },
    /// The chunk size is outside the accepted bounds.
    #[error("bytes per checksum {0} outside {MIN_BYTES_PER_CHECKSUM}..={MAX_BYTES_PER_CHECKSUM}")]
    InvalidBytesPerChecksum(u32),
}

/// Checks that `bytes_per_checksum` is a chunk size this code accepts.
pub fn validate_bytes_per_checksum(bytes_per_checksum: u32) -> Result<(), ChecksumError> {
    if (MIN_BYTES_PER_CHECKSUM..=MAX_BYTES_PER_CHECKSUM).contains(&bytes_per_checksum) {
        Ok(())
    } else {
        Err(ChecksumError::InvalidBytesPerChecksum(bytes_per_checksum))
    }
}

/// Number of chunks (so of CRCs) covering `len` bytes.
pub fn chunk_count(len: u64, bytes_per_checksum: u32) -> u64 {
    len.div_ceil(u64::from(bytes_per_checksum.max(1)))
}

/// `offset` rounded down to a chunk boundary.
pub fn align_down(offset: u64, bytes_per_checksum: u32) -> u64 {
    offset - offset % u64::from(bytes_per_checksum.max(1))
}

/// `offset` rounded up to a chunk boundary (saturating at `u64::MAX`).
pub fn align_up(offset: u64, bytes_per_checksum: u32) -> u64 {
    let bpc = u64::from(bytes_per_checksum.max(1));
    match offset % bpc {
        0 => offset,
        rem => offset.saturating_add(bpc - rem),
    }
}

/// The chunk-aligned range `[start, end)` covering `[offset, offset + len)`
/// in a block of `block_len` bytes: the start rounded down, the end rounded
/// up and clamped to the block's end. The caller checks that the range lies
/// inside the block.
pub fn aligned_span(offset: u64, len: u64, block_len: u64, bytes_per_checksum: u32) -> (u64, u64) {
    let start = align_down(offset, bytes_per_checksum);
    let end = align_up(offset.saturating_add(len), bytes_per_checksum).min(block_len);
    (start, end.max(start))
}

/// The CRC32C of each `bytes_per_checksum` chunk of `data`.
pub fn compute(data: &[u8], bytes_per_checksum: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(chunk_count(data.len() as u64, bytes_per_checksum) as usize);
    compute_into(data, bytes_per_checksum, &mut out);
    out
}

/// Appends the CRC32C of each `bytes_per_checksum` chunk of `data` to `out`.
pub fn compute_into(data: &[u8], bytes_per_checksum: u32, out: &mut Vec<u32>) {
    let bpc = bytes_per_checksum.max(1) as usize;
    out.extend(data.chunks(bpc).map(crc32c::crc32c));
}

/// Verifies `data`, which starts at the chunk-aligned block offset `start`,
/// against `crcs` (one per `bytes_per_checksum` chunk, the last chunk possibly
/// short). Fails on the first bad chunk, naming its block offset.
pub fn verify(
    data: &[u8],
    start: u64,
    bytes_per_checksum: u32,
    crcs: &[u32],
) -> Result<(), ChecksumError> {
    validate_bytes_per_checksum(bytes_per_checksum)?;
    if !start.is_multiple_of(u64::from(bytes_per_checksum)) {
        return Err(ChecksumError::Misaligned {
            start,
            bytes_per_checksum,
        });
    }
    let expected_count = chunk_count(data.len() as u64, bytes_per_checksum);
    if expected_count != crcs.len() as u64 {
        return Err(ChecksumError::CountMismatch {
            expected: expected_count,
            actual: crcs.len(),
        });
    }
    let bpc = bytes_per_checksum as usize;
    for (i, (chunk, &expected)) in data.chunks(bpc).zip(crcs).enumerate() {
        let actual = crc32c::crc32c(chunk);
        if actual != expected {
            return Err(ChecksumError::Mismatch {
                offset: start + (i as u64) * u64::from(bytes_per_checksum),
                expected,
                actual,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    /// The chunk sizes the sidecar format and Ozone's default rely on.
    #[test]
    fn chunk_size_bounds() {
        assert_eq!(DEFAULT_BYTES_PER_CHECKSUM, 16 << 10);
        assert_eq!(MIN_BYTES_PER_CHECKSUM, 512);
        assert_eq!(MAX_BYTES_PER_CHECKSUM, 16 << 20);
    }

    #[test]
    fn known_crc32c_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(compute(&[0u8; 32], 512), vec![0x8a91_36aa]);
        assert_eq!(compute(b"123456789", 512), vec![0xe306_9283]);
    }

    #[test]
    fn chunk_counts() {
        assert_eq!(chunk_count(0, 512), 0);
        assert_eq!(chunk_count(1, 512), 1);
        assert_eq!(chunk_count(512, 512), 1);
        assert_eq!(chunk_count(513, 512), 2);
        assert_eq!(compute(&pattern(1025), 512).len(), 3);
        assert!(compute(&[], 512).is_empty());
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(1000, 512), 512);
        assert_eq!(align_up(1000, 512), 1024);
        assert_eq!(align_up(1024, 512), 1024);
        assert_eq!(align_up(u64::MAX, 512), u64::MAX);
        assert_eq!(aligned_span(600, 10, 5000, 512), (512, 1024));
        assert_eq!(aligned_span(600, 10, 700, 512), (512, 700));
        assert_eq!(aligned_span(0, 0, 0, 512), (0, 0));
        assert_eq!(aligned_span(10, 0, 20, 512), (0, 20));
    }

    #[test]
    fn verify_accepts_good_data_at_any_aligned_start() {
        let data = pattern(5000);
        let crcs = compute(&data, 1024);
        verify(&data, 0, 1024, &crcs).unwrap();
        verify(&data, 1024 * 7, 1024, &crcs).unwrap();
        verify(&data[1024..], 1024, 1024, &crcs[1..]).unwrap();
        verify(&[], 0, 1024, &[]).unwrap();
    }

    #[test]
    fn verify_names_the_first_bad_chunk() {
        let mut data = pattern(5000);
        let crcs = compute(&data, 1024);
        data[2100] ^= 1;
        data[4999] ^= 1;
        let err = verify(&data, 4096, 1024, &crcs).unwrap_err();
        match err {
            ChecksumError::Mismatch { offset, .. } => assert_eq!(offset, 4096 + 2048),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn verify_detects_a_bad_last_short_chunk() {
        let mut data = pattern(1500);
        let crcs = compute(&data, 1024);
        data[1499] ^= 0x80;
        assert!(matches!(
            verify(&data, 0, 1024, &crcs),
            Err(ChecksumError::Mismatch { offset: 1024, .. })
        ));
    }

    #[test]
    fn verify_rejects_wrong_count_alignment_and_size() {
        let data = pattern(3000);
        let crcs = compute(&data, 1024);
        assert!(matches!(
            verify(&data, 0, 1024, &crcs[..2]),
            Err(ChecksumError::CountMismatch {
                expected: 3,
                actual: 2
            })
        ));
        assert!(matches!(
            verify(&data, 100, 1024, &crcs),
            Err(ChecksumError::Misaligned { .. })
        ));
        assert!(matches!(
            verify(&data, 0, 0, &crcs),
            Err(ChecksumError::InvalidBytesPerChecksum(0))
        ));
        assert!(validate_bytes_per_checksum(DEFAULT_BYTES_PER_CHECKSUM).is_ok());
        assert!(validate_bytes_per_checksum(MAX_BYTES_PER_CHECKSUM + 1).is_err());
    }
}
