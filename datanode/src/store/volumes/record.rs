//! The three kinds of entry a volume is made of, and their bytes.
//!
//! ```text
//! cell record, appended to <n>.vol (big-endian)
//! offset size field
//!      0    4 magic "TSVR"
//!      4    1 format version (1)
//!      5    3 reserved, zero
//!      8    8 block id
//!     16    1 cell index
//!     17    3 reserved, zero
//!     20    4 bytes per checksum
//!     24    8 length
//!     32    8 generation (unique per record in the store, rising)
//!     40    8 committed at, Unix milliseconds
//!     48  4*n CRC32C of each chunk, n = ceil(length / bytes per checksum)
//!  48+4n    4 CRC32C of the bytes before it
//!  52+4n    length bytes of cell data
//!
//! index entry, appended to <n>.idx after the record is durable (52 bytes)
//!      0    8 record offset in the volume
//!      8    8 block id
//!     16    1 cell index, 3 reserved
//!     20    4 bytes per checksum
//!     24    8 length
//!     32    8 generation
//!     40    8 committed at
//!     48    4 CRC32C of the bytes before it
//!
//! tombstone, appended to <n>.del of the record's volume (24 bytes)
//!      0    8 block id
//!      8    1 cell index, 3 reserved
//!     12    8 generation of the record it deletes
//!     20    4 CRC32C of the bytes before it
//! ```
//! A record describes itself: the index is only a cache of record headers
//! and can be rebuilt from the volume. The CRC of the header and the CRCs of
//! the data make a torn record recognisable as such.

use proto::{checksum, BlockId, BlockKey};

const MAGIC: [u8; 4] = *b"TSVR";
const VERSION: u8 = 1;
/// Bytes of a record header before its chunk CRCs.
pub(crate) const FIXED_LEN: u64 = 48;
/// Bytes of an index entry.
pub(crate) const INDEX_ENTRY_LEN: usize = 52;
/// Bytes of a tombstone.
pub(crate) const TOMBSTONE_LEN: usize = 24;

/// What a record header says about its cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHead {
    pub key: BlockKey,
    pub bytes_per_checksum: u32,
    pub length: u64,
    pub generation: u64,
    pub committed_ms: u64,
}

impl RecordHead {
    /// CRCs the record carries.
    pub fn chunk_count(&self) -> u64 {
        checksum::chunk_count(self.length, self.bytes_per_checksum)
    }

    /// Bytes from the record's start to its first data byte.
    pub fn header_len(&self) -> u64 {
        FIXED_LEN + 4 * self.chunk_count() + 4
    }

    /// Bytes of the whole record.
    pub fn record_len(&self) -> u64 {
        self.header_len() + self.length
    }

    /// Appends the header (with `crcs`) to `out`; the data follows it.
    pub fn encode(&self, crcs: &[u32], out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.key.block.0.to_be_bytes());
        out.push(self.key.index);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.bytes_per_checksum.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.generation.to_be_bytes());
        out.extend_from_slice(&self.committed_ms.to_be_bytes());
        for crc in crcs {
            out.extend_from_slice(&crc.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }

    /// Parses the fixed part of a header; None if it is not one (wrong
    /// magic, version or reserved bytes, impossible sizes). The header's own
    /// CRC is checked by [`check_header`] once the CRCs are read.
    pub fn decode_fixed(buf: &[u8]) -> Option<Self> {
        let buf: &[u8; FIXED_LEN as usize] = buf.get(..FIXED_LEN as usize)?.try_into().ok()?;
        if buf[0..4] != MAGIC || buf[4] != VERSION || buf[5..8] != [0; 3] || buf[17..20] != [0; 3] {
            return None;
        }
        let bytes_per_checksum = be32(&buf[20..24]);
        checksum::validate_bytes_per_checksum(bytes_per_checksum).ok()?;
        Some(Self {
            key: BlockKey::new(BlockId(be64(&buf[8..16])), buf[16]),
            bytes_per_checksum,
            length: be64(&buf[24..32]),
            generation: be64(&buf[32..40]),
            committed_ms: be64(&buf[40..48]),
        })
    }

    /// The index entry of this record, which starts at `offset`.
    pub fn index_entry(&self, offset: u64) -> [u8; INDEX_ENTRY_LEN] {
        let mut out = [0u8; INDEX_ENTRY_LEN];
        out[0..8].copy_from_slice(&offset.to_be_bytes());
        out[8..16].copy_from_slice(&self.key.block.0.to_be_bytes());
        out[16] = self.key.index;
        out[20..24].copy_from_slice(&self.bytes_per_checksum.to_be_bytes());
        out[24..32].copy_from_slice(&self.length.to_be_bytes());
        out[32..40].copy_from_slice(&self.generation.to_be_bytes());
        out[40..48].copy_from_slice(&self.committed_ms.to_be_bytes());
        let crc = crc32c::crc32c(&out[..48]);
        out[48..].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Parses an index entry: the record's offset and head, None if the
    /// entry is damaged (a torn write of the unsynced index).
    pub fn decode_index_entry(buf: &[u8; INDEX_ENTRY_LEN]) -> Option<(u64, Self)> {
        if crc32c::crc32c(&buf[..48]) != be32(&buf[48..52]) || buf[17..20] != [0; 3] {
            return None;
        }
        let bytes_per_checksum = be32(&buf[20..24]);
        checksum::validate_bytes_per_checksum(bytes_per_checksum).ok()?;
        Some((
            be64(&buf[0..8]),
            Self {
                key: BlockKey::new(BlockId(be64(&buf[8..16])), buf[16]),
                bytes_per_checksum,
                length: be64(&buf[24..32]),
                generation: be64(&buf[32..40]),
                committed_ms: be64(&buf[40..48]),
            },
        ))
    }
}

/// Checks a whole header (fixed part, CRCs, header CRC) read into `buf`;
/// answers the chunk CRCs.
pub(crate) fn check_header(head: &RecordHead, buf: &[u8]) -> Option<Vec<u32>> {
    let crcs_end = (head.header_len() - 4) as usize;
    let stored = buf.get(crcs_end..crcs_end + 4)?;
    if crc32c::crc32c(&buf[..crcs_end]) != be32(stored) {
        return None;
    }
    Some(
        buf[FIXED_LEN as usize..crcs_end]
            .chunks_exact(4)
            .map(be32)
            .collect(),
    )
}

/// A tombstone for the record of `key` at `generation`.
pub(crate) fn tombstone(key: BlockKey, generation: u64) -> [u8; TOMBSTONE_LEN] {
    let mut out = [0u8; TOMBSTONE_LEN];
    out[0..8].copy_from_slice(&key.block.0.to_be_bytes());
    out[8] = key.index;
    out[12..20].copy_from_slice(&generation.to_be_bytes());
    let crc = crc32c::crc32c(&out[..20]);
    out[20..].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Parses a tombstone; None if damaged (a torn, never acknowledged delete).
pub(crate) fn decode_tombstone(buf: &[u8; TOMBSTONE_LEN]) -> Option<(BlockKey, u64)> {
    if crc32c::crc32c(&buf[..20]) != be32(&buf[20..24]) || buf[9..12] != [0; 3] {
        return None;
    }
    Some((
        BlockKey::new(BlockId(be64(&buf[0..8])), buf[8]),
        be64(&buf[12..20]),
    ))
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut out = [0u8; 8];
    out.copy_from_slice(&b[..8]);
    u64::from_be_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> RecordHead {
        RecordHead {
            key: BlockKey::new(BlockId(0x0102_0304_0506_0708), 4),
            bytes_per_checksum: 512,
            length: 1100,
            generation: 9,
            committed_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn headers_index_entries_and_tombstones_round_trip() {
        let head = head();
        let crcs = [1, 2, 3];
        let mut buf = Vec::new();
        head.encode(&crcs, &mut buf);
        assert_eq!(buf.len() as u64, head.header_len());
        assert_eq!(RecordHead::decode_fixed(&buf), Some(head));
        assert_eq!(check_header(&head, &buf), Some(crcs.to_vec()));
        let entry = head.index_entry(4096);
        assert_eq!(RecordHead::decode_index_entry(&entry), Some((4096, head)));
        let stone = tombstone(head.key, 9);
        assert_eq!(decode_tombstone(&stone), Some((head.key, 9)));
    }

    #[test]
    fn any_flipped_byte_is_noticed() {
        let head = head();
        let mut buf = Vec::new();
        head.encode(&[1, 2, 3], &mut buf);
        for at in 0..buf.len() {
            let mut bad = buf.clone();
            bad[at] ^= 0x10;
            let whole = RecordHead::decode_fixed(&bad)
                .filter(|h| h.header_len() == head.header_len())
                .and_then(|h| check_header(&h, &bad));
            assert_eq!(whole, None, "byte {at}");
        }
        let entry = head.index_entry(7);
        for at in 0..INDEX_ENTRY_LEN {
            let mut bad = entry;
            bad[at] ^= 1;
            assert_eq!(RecordHead::decode_index_entry(&bad), None, "byte {at}");
        }
        let stone = tombstone(head.key, 3);
        for at in 0..TOMBSTONE_LEN {
            let mut bad = stone;
            bad[at] ^= 1;
            assert_eq!(decode_tombstone(&bad), None, "byte {at}");
        }
    }
}
