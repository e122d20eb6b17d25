//! An object's additional checksum as S3 reports it: the stored one of a
//! single PUT, or for a multipart object one derived from its parts' CRCs
//! without reading data: FULL_OBJECT by combining the part CRCs (zlib's
//! crc32_combine over GF(2), for CRC32, CRC32C and CRC64NVME), or COMPOSITE,
//! the checksum of the part checksums followed by `-N`.

use crate::auth::{ChecksumAlgorithm, Checksummer};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use meta_api::{ObjectRecord, StoredChecksum};

/// `x-amz-checksum-type` of a checksum over the whole object's bytes.
pub const FULL_OBJECT: &str = "FULL_OBJECT";
/// `x-amz-checksum-type` of a checksum of the parts' checksums.
pub const COMPOSITE: &str = "COMPOSITE";

/// A reflected CRC: its polynomial (bit-reversed) and width.
#[derive(Clone, Copy)]
struct Crc {
    poly: u64,
    width: u32,
}

impl Crc {
    fn of(algorithm: ChecksumAlgorithm) -> Option<Self> {
        match algorithm {
            ChecksumAlgorithm::Crc32 => Some(Self {
                poly: 0xEDB8_8320,
                width: 32,
            }),
            ChecksumAlgorithm::Crc32c => Some(Self {
                poly: 0x82F6_3B78,
                width: 32,
            }),
            ChecksumAlgorithm::Crc64Nvme => Some(Self {
                poly: 0x9A6C_9329_AC4B_C9B5,
                width: 64,
            }),
            ChecksumAlgorithm::Sha1 | ChecksumAlgorithm::Sha256 => None,
        }
    }

    /// The polynomial `1` (x^0) in reflected order: the top bit.
    fn one(self) -> u64 {
        1u64 << (self.width - 1)
    }

    /// a(x) * b(x) modulo the CRC polynomial (both reflected).
    fn multiply(self, a: u64, mut b: u64) -> u64 {
        let mut m = self.one();
        let mut product = 0;
        while m != 0 {
            if a & m != 0 {
                product ^= b;
            }
            m >>= 1;
            b = if b & 1 != 0 {
                (b >> 1) ^ self.poly
            } else {
                b >> 1
            };
        }
        product
    }

    /// x^(8 * bytes) modulo the polynomial: the shift of `bytes` zero bytes.
    fn shift_bytes(self, bytes: u64) -> u64 {
        // square = x^(2^k), starting at x^8 (one byte).
        let mut square = self.one() >> 1; // x^1
        for _ in 0..3 {
            square = self.multiply(square, square);
        }
        let mut result = self.one();
        let mut n = bytes;
        while n != 0 {
            if n & 1 != 0 {
                result = self.multiply(square, result);
            }
            square = self.multiply(square, square);
            n >>= 1;
        }
        result
    }

    /// The CRC of A followed by B, from crc(A), crc(B) and B's length.
    fn combine(self, crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
        self.multiply(self.shift_bytes(len_b), crc_a) ^ crc_b
    }
}

fn digest_to_u64(bytes: &[u8]) -> Option<u64> {
    match bytes.len() {
        4 => Some(u64::from(u32::from_be_bytes(bytes.try_into().ok()?))),
        8 => Some(u64::from_be_bytes(bytes.try_into().ok()?)),
        _ => None,
    }
}

/// The CRC of the concatenation of parts, each given as (CRC digest bytes,
/// length); None for a non-CRC algorithm or a malformed digest.
pub fn combine_parts(algorithm: ChecksumAlgorithm, parts: &[(Vec<u8>, u64)]) -> Option<Vec<u8>> {
    let crc = Crc::of(algorithm)?;
    let mut total: Option<u64> = None;
    for (digest, len) in parts {
        let value = digest_to_u64(digest)?;
        total = Some(match total {
            None => value,
            Some(acc) => crc.combine(acc, value, *len),
        });
    }
    let total = total?;
    Some(if crc.width == 32 {
        (total as u32).to_be_bytes().to_vec()
    } else {
        total.to_be_bytes().to_vec()
    })
}

/// The COMPOSITE form: base64 of the checksum of the parts' digests, `-N`.
pub fn composite(algorithm: ChecksumAlgorithm, digests: &[Vec<u8>]) -> String {
    let mut hasher = Checksummer::new(algorithm);
    for digest in digests {
        hasher.update(digest);
    }
    format!("{}-{}", hasher.finalize_base64(), digests.len())
}

/// The checksum type a multipart upload gets when it names none: S3 makes
/// CRC64NVME full-object and the others composite.
pub fn default_type(algorithm: ChecksumAlgorithm) -> &'static str {
    match algorithm {
        ChecksumAlgorithm::Crc64Nvme => FULL_OBJECT,
        _ => COMPOSITE,
    }
}

/// The object's checksum and its type, as GetObject (with checksum mode),
/// HeadObject and GetObjectAttributes report it; None when the object was
/// stored without one (or a part lacks one).
pub fn object_checksum(record: &ObjectRecord) -> Option<(StoredChecksum, &'static str)> {
    if record.parts.is_empty() {
        return record
            .attributes
            .checksum
            .clone()
            .map(|checksum| (checksum, FULL_OBJECT));
    }
    parts_checksum(
        record.attributes.checksum_type.as_deref(),
        record.parts.iter().map(|p| (p.checksum.as_ref(), p.size)),
    )
}

/// The checksum of an object made of `parts` (each its checksum and size,
/// in order) of an upload that asked for checksums of type `kind`; None
/// when a part has none or parts disagree on the algorithm.
pub fn parts_checksum<'a>(
    kind: Option<&str>,
    parts: impl IntoIterator<Item = (Option<&'a StoredChecksum>, u64)>,
) -> Option<(StoredChecksum, &'static str)> {
    let mut algorithm = None;
    let mut digests = Vec::new();
    for (checksum, size) in parts {
        let checksum = checksum?;
        let this = ChecksumAlgorithm::from_name(&checksum.algorithm)?;
        if *algorithm.get_or_insert(this) != this {
            return None;
        }
        digests.push((this.decode_value(&checksum.value)?, size));
    }
    let algorithm = algorithm?;
    let wanted = match kind {
        Some(t) if t.eq_ignore_ascii_case(FULL_OBJECT) => FULL_OBJECT,
        Some(_) => COMPOSITE,
        None => default_type(algorithm),
    };
    let value = match (wanted, combine_parts(algorithm, &digests)) {
        (FULL_OBJECT, Some(full)) => {
            return Some((stored(algorithm, STANDARD.encode(full)), FULL_OBJECT))
        }
        _ => {
            let digests: Vec<Vec<u8>> = digests.into_iter().map(|(d, _)| d).collect();
            composite(algorithm, &digests)
        }
    };
    Some((stored(algorithm, value), COMPOSITE))
}

/// Whether `claimed`, the value a client sent for an object's checksum,
/// names `computed`: equal, or for a composite checksum equal without its
/// `-N` part count (which clients may leave out).
pub fn names_checksum(claimed: &str, computed: &str, kind: &str) -> bool {
    let claimed = claimed.trim();
    claimed == computed
        || (kind == COMPOSITE
            && computed
                .rsplit_once('-')
                .is_some_and(|(base, _)| base == claimed))
}

fn stored(algorithm: ChecksumAlgorithm, value: String) -> StoredChecksum {
    StoredChecksum {
        algorithm: algorithm.as_str().to_string(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(algorithm: ChecksumAlgorithm, data: &[u8]) -> Vec<u8> {
        let mut h = Checksummer::new(algorithm);
        h.update(data);
        h.finalize()
    }

    #[test]
    fn combined_crcs_equal_the_crc_of_the_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for algorithm in [
            ChecksumAlgorithm::Crc32,
            ChecksumAlgorithm::Crc32c,
            ChecksumAlgorithm::Crc64Nvme,
        ] {
            for cuts in [
                &[0usize][..],
                &[1],
                &[40_000, 40_001],
                &[99_999],
                &[5, 50_000, 77_777],
            ] {
                let mut parts = Vec::new();
                let mut start = 0;
                for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
                    let piece = &data[start..cut];
                    parts.push((digest(algorithm, piece), piece.len() as u64));
                    start = cut;
                }
                assert_eq!(
                    combine_parts(algorithm, &parts),
                    Some(digest(algorithm, &data)),
                    "{algorithm} {cuts:?}"
                );
            }
        }
        assert_eq!(combine_parts(ChecksumAlgorithm::Sha256, &[]), None);
    }

    #[test]
    fn composite_is_checksum_of_checksums_with_count() {
        let a = digest(ChecksumAlgorithm::Crc32c, b"part one");
        let b = digest(ChecksumAlgorithm::Crc32c, b"part two");
        let mut joined = a.clone();
        joined.extend_from_slice(&b);
        let expected = STANDARD.encode(digest(ChecksumAlgorithm::Crc32c, &joined));
        assert_eq!(
            composite(ChecksumAlgorithm::Crc32c, &[a, b]),
            format!("{expected}-2")
        );
    }
}
