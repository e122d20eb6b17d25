//! The checksum sidecar file kept beside each block's data file.
//!
//! ```text
//! offset size field
//!      0    4 magic "TSCK"
//!      4    1 format version (1)
//!      5    3 reserved, zero
//!      8    4 bytes per checksum
//!     12    8 block length
//!     20  4*n CRC32C of each chunk, n = ceil(length / bytes per checksum)
//! ```
//! Big-endian. Keeping checksums out of the data file lets any data range go
//! out with one sendfile call.

use proto::checksum;
use std::fs::File;
use std::os::unix::fs::FileExt;

const MAGIC: [u8; 4] = *b"TSCK";
const VERSION: u8 = 1;
/// Bytes before the first CRC.
pub(crate) const HEADER_LEN: u64 = 20;

/// The fixed part of a sidecar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SidecarHeader {
    /// Chunk size each CRC covers.
    pub bytes_per_checksum: u32,
    /// Block length in bytes.
    pub length: u64,
}

impl SidecarHeader {
    /// Number of CRCs the sidecar holds.
    pub fn chunk_count(&self) -> u64 {
        checksum::chunk_count(self.length, self.bytes_per_checksum)
    }

    /// Exact size of a well-formed sidecar with this header.
    pub fn file_len(&self) -> u64 {
        HEADER_LEN + 4 * self.chunk_count()
    }

    /// The whole sidecar file for a block with these `crcs`.
    pub fn encode_with(&self, crcs: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN as usize + 4 * crcs.len());
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.bytes_per_checksum.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
        for crc in crcs {
            out.extend_from_slice(&crc.to_be_bytes());
        }
        out
    }

    /// Parses and checks the fixed part; the error says what is wrong.
    pub fn decode(buf: &[u8; HEADER_LEN as usize]) -> Result<Self, String> {
        if buf[0..4] != MAGIC {
            return Err(format!("bad sidecar magic {:02x?}", &buf[0..4]));
        }
        if buf[4] != VERSION {
            return Err(format!("unsupported sidecar version {}", buf[4]));
        }
        if buf[5..8] != [0; 3] {
            return Err("reserved sidecar bytes are not zero".into());
        }
        let bytes_per_checksum = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
        checksum::validate_bytes_per_checksum(bytes_per_checksum).map_err(|e| e.to_string())?;
        let mut length = [0u8; 8];
        length.copy_from_slice(&buf[12..20]);
        Ok(Self {
            bytes_per_checksum,
            length: u64::from_be_bytes(length),
        })
    }

    /// Reads and checks the header of an open sidecar, and that the file has
    /// exactly the size the header implies.
    pub fn read(file: &File) -> Result<Self, String> {
        let mut buf = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut buf, 0)
            .map_err(|e| format!("reading the sidecar header: {e}"))?;
        let header = Self::decode(&buf)?;
        let actual = file
            .metadata()
            .map_err(|e| format!("stat of the sidecar: {e}"))?
            .len();
        if actual != header.file_len() {
            return Err(format!(
                "sidecar is {actual} bytes, its header implies {}",
                header.file_len()
            ));
        }
        Ok(header)
    }
}

/// Reads `count` CRCs starting with the one of chunk number `first`.
pub(crate) fn read_crcs(file: &File, first: u64, count: u64) -> std::io::Result<Vec<u32>> {
    let mut raw = vec![0u8; (count * 4) as usize];
    file.read_exact_at(&mut raw, HEADER_LEN + first * 4)?;
    Ok(raw
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn round_trip_through_a_file() {
        let header = SidecarHeader {
            bytes_per_checksum: 1024,
            length: 2500,
        };
        let crcs = [7, 8, 0xdead_beef];
        let bytes = header.encode_with(&crcs);
        assert_eq!(bytes.len() as u64, header.file_len());
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        assert_eq!(SidecarHeader::read(&file).unwrap(), header);
        assert_eq!(read_crcs(&file, 1, 2).unwrap(), vec![8, 0xdead_beef]);
        assert!(read_crcs(&file, 2, 2).is_err());
    }

    #[test]
    fn corrupt_headers_and_sizes_are_refused() {
        let header = SidecarHeader {
            bytes_per_checksum: 1024,
            length: 10,
        };
        let good: [u8; 20] = header.encode_with(&[])[..20].try_into().unwrap();
        for (at, value) in [(0, b'X'), (4, 2), (6, 1), (8, 0xff)] {
            let mut bad = good;
            bad[at] = value;
            assert!(SidecarHeader::decode(&bad).is_err(), "byte {at}");
        }
        // One CRC missing for the 10 bytes the header announces.
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&good).unwrap();
        assert!(SidecarHeader::read(&file).is_err());
    }
}
