//! The additional checksums S3 accepts on uploads (`x-amz-checksum-<alg>`, as a header or as an
//! aws-chunked trailer): incremental hashers whose output is encoded the way S3 sends it, base64 of
//! the digest bytes (CRC values as big-endian integers).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha1::Digest as _;

/// One of the checksum algorithms of S3's `x-amz-checksum-*` headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChecksumAlgorithm {
    /// CRC-32 (ISO-HDLC, as zlib).
    Crc32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// CRC-64/NVME.
    Crc64Nvme,
    /// SHA-1.
    Sha1,
    /// SHA-256.
    Sha256,
}

impl ChecksumAlgorithm {
    /// Every algorithm, in the order S3 lists them.
    pub const ALL: [Self; 5] = [
        Self::Crc32,
        Self::Crc32c,
        Self::Crc64Nvme,
        Self::Sha1,
        Self::Sha256,
    ];

    /// The name S3 uses in XML and in `x-amz-sdk-checksum-algorithm` (`CRC32C`, `SHA256`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Crc32 => "CRC32",
            Self::Crc32c => "CRC32C",
            Self::Crc64Nvme => "CRC64NVME",
            Self::Sha1 => "SHA1",
            Self::Sha256 => "SHA256",
        }
    }

    /// Parses an S3 algorithm name, ignoring case (`crc32c`, `CRC32C`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|alg| alg.as_str().eq_ignore_ascii_case(name.trim()))
    }

    /// The header (or trailer) carrying this checksum, e.g. `x-amz-checksum-crc32c`.
    pub fn header_name(self) -> &'static str {
        match self {
            Self::Crc32 => "x-amz-checksum-crc32",
            Self::Crc32c => "x-amz-checksum-crc32c",
            Self::Crc64Nvme => "x-amz-checksum-crc64nvme",
            Self::Sha1 => "x-amz-checksum-sha1",
            Self::Sha256 => "x-amz-checksum-sha256",
        }
    }

    /// The algorithm whose header (or trailer) is `name`, ignoring case.
    pub fn from_header_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|alg| alg.header_name().eq_ignore_ascii_case(name.trim()))
    }

    /// Length in bytes of the digest.
    pub fn digest_len(self) -> usize {
        match self {
            Self::Crc32 | Self::Crc32c => 4,
            Self::Crc64Nvme => 8,
            Self::Sha1 => 20,
            Self::Sha256 => 32,
        }
    }

    /// Decodes a base64 checksum value as sent by a client; `None` when it is not valid base64 or
    /// not the digest length of this algorithm.
    pub fn decode_value(self, value: &str) -> Option<Vec<u8>> {
        let bytes = BASE64.decode(value.trim()).ok()?;
        (bytes.len() == self.digest_len()).then_some(bytes)
    }

    /// S3's message when a checksum the client sent does not match the body.
    pub fn mismatch_message(self) -> String {
        format!(
            "The {} you specified did not match the calculated checksum.",
            self.as_str()
        )
    }
}

impl std::fmt::Display for ChecksumAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An incremental hasher for one [`ChecksumAlgorithm`].
#[derive(Clone)]
pub struct Checksummer {
    state: ChecksumState,
}

#[derive(Clone)]
enum ChecksumState {
    Crc32(crc32fast::Hasher),
    Crc32c(u32),
    Crc64Nvme(crc64fast_nvme::Digest),
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Checksummer {
    /// A hasher over no bytes yet.
    pub fn new(algorithm: ChecksumAlgorithm) -> Self {
        let state = match algorithm {
            ChecksumAlgorithm::Crc32 => ChecksumState::Crc32(crc32fast::Hasher::new()),
            ChecksumAlgorithm::Crc32c => ChecksumState::Crc32c(0),
            ChecksumAlgorithm::Crc64Nvme => ChecksumState::Crc64Nvme(crc64fast_nvme::Digest::new()),
            ChecksumAlgorithm::Sha1 => ChecksumState::Sha1(sha1::Sha1::new()),
            ChecksumAlgorithm::Sha256 => ChecksumState::Sha256(sha2::Sha256::new()),
        };
        Self { state }
    }

    /// The algorithm this hasher computes.
    pub fn algorithm(&self) -> ChecksumAlgorithm {
        match self.state {
            ChecksumState::Crc32(_) => ChecksumAlgorithm::Crc32,
            ChecksumState::Crc32c(_) => ChecksumAlgorithm::Crc32c,
            ChecksumState::Crc64Nvme(_) => ChecksumAlgorithm::Crc64Nvme,
            ChecksumState::Sha1(_) => ChecksumAlgorithm::Sha1,
            ChecksumState::Sha256(_) => ChecksumAlgorithm::Sha256,
        }
    }

    /// Feeds the next bytes of the body.
    pub fn update(&mut self, data: &[u8]) {
        match &mut self.state {
            ChecksumState::Crc32(h) => h.update(data),
            ChecksumState::Crc32c(crc) => *crc = crc32c::crc32c_append(*crc, data),
            ChecksumState::Crc64Nvme(h) => h.write(data),
            ChecksumState::Sha1(h) => h.update(data),
            ChecksumState::Sha256(h) => h.update(data),
        }
    }

    /// The digest bytes (CRCs big-endian).
    pub fn finalize(self) -> Vec<u8> {
        match self.state {
            ChecksumState::Crc32(h) => h.finalize().to_be_bytes().to_vec(),
            ChecksumState::Crc32c(crc) => crc.to_be_bytes().to_vec(),
            ChecksumState::Crc64Nvme(h) => h.sum64().to_be_bytes().to_vec(),
            ChecksumState::Sha1(h) => h.finalize().to_vec(),
            ChecksumState::Sha256(h) => h.finalize().to_vec(),
        }
    }

    /// The digest as S3 sends it: base64 of [`Checksummer::finalize`].
    pub fn finalize_base64(self) -> String {
        BASE64.encode(self.finalize())
    }
}

impl std::fmt::Debug for Checksummer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checksummer")
            .field("algorithm", &self.algorithm())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Error messages and logs name the algorithm as S3 does.
    #[test]
    fn algorithms_show_their_s3_names() {
        assert_eq!(ChecksumAlgorithm::Crc64Nvme.to_string(), "CRC64NVME");
        assert_eq!(ChecksumAlgorithm::Sha1.to_string(), "SHA1");
        let debug = format!("{:?}", Checksummer::new(ChecksumAlgorithm::Crc32c));
        assert!(
            debug.starts_with("Checksummer") && debug.contains("Crc32c"),
            "{debug}"
        );
    }

    fn digest(alg: ChecksumAlgorithm, parts: &[&[u8]]) -> Vec<u8> {
        let mut hasher = Checksummer::new(alg);
        for part in parts {
            hasher.update(part);
        }
        hasher.finalize()
    }

    /// The catalogue check values of each CRC over "123456789" (reveng.sourceforge.io).
    #[test]
    fn crc_check_values_big_endian() {
        let check: &[&[u8]] = &[b"1234", b"", b"56789"];
        assert_eq!(
            digest(ChecksumAlgorithm::Crc32, check),
            0xCBF4_3926u32.to_be_bytes()
        );
        assert_eq!(
            digest(ChecksumAlgorithm::Crc32c, check),
            0xE306_9283u32.to_be_bytes()
        );
        assert_eq!(
            digest(ChecksumAlgorithm::Crc64Nvme, check),
            0xAE8B_1486_0A79_9888u64.to_be_bytes()
        );
    }

    /// FIPS 180 examples: SHA-1 and SHA-256 of "abc".
    #[test]
    fn sha_known_answers() {
        assert_eq!(
            hex::encode(digest(ChecksumAlgorithm::Sha1, &[b"a", b"bc"])),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex::encode(digest(ChecksumAlgorithm::Sha256, &[b"ab", b"c"])),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// The CRC32C trailer of the AWS "sigv4-streaming-trailers" example: 66,560 bytes of `a`.
    #[test]
    fn aws_trailer_example_crc32c() {
        let mut hasher = Checksummer::new(ChecksumAlgorithm::Crc32c);
        hasher.update(&[b'a'; 65536]);
        hasher.update(&[b'a'; 1024]);
        assert_eq!(hasher.finalize_base64(), "sOO8/Q==");
    }

    #[test]
    fn names_and_values() {
        for alg in ChecksumAlgorithm::ALL {
            assert_eq!(ChecksumAlgorithm::from_name(alg.as_str()), Some(alg));
            assert_eq!(
                ChecksumAlgorithm::from_header_name(&alg.header_name().to_uppercase()),
                Some(alg)
            );
            let value = Checksummer::new(alg).finalize_base64();
            assert_eq!(
                alg.decode_value(&value).map(|v| v.len()),
                Some(alg.digest_len())
            );
        }
        assert_eq!(
            ChecksumAlgorithm::from_name("crc64nvme"),
            Some(ChecksumAlgorithm::Crc64Nvme)
        );
        assert_eq!(ChecksumAlgorithm::from_name("md5"), None);
        assert_eq!(ChecksumAlgorithm::Crc32.decode_value("AAAAAAAAAAA="), None);
        assert_eq!(ChecksumAlgorithm::Crc32.decode_value("not base64!"), None);
        assert_eq!(
            ChecksumAlgorithm::Crc32c.mismatch_message(),
            "The CRC32C you specified did not match the calculated checksum."
        );
    }
}
