//! The package format of encrypted bodies: plaintext in packages of
//! [`PACKAGE`] bytes, each sealed with AES-256-GCM under the body's data key
//! and its index as nonce, followed by its tag.

use crate::keys::DataKey;
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, NONCE_LEN};
use bytes::{Bytes, BytesMut};
use std::ops::Range;

/// Plaintext bytes per package (the last one may be shorter).
pub const PACKAGE: usize = 64 * 1024;
/// Bytes of each package's tag.
pub const TAG: usize = 16;
/// Stored bytes of a full package.
const SEALED_PACKAGE: usize = PACKAGE + TAG;

/// Stored bytes of a body of `plain` bytes.
pub fn sealed_len(plain: u64) -> u64 {
    plain + TAG as u64 * plain.div_ceil(PACKAGE as u64)
}

fn nonce(index: u64) -> Nonce {
    let mut bytes = [0u8; NONCE_LEN];
    bytes[NONCE_LEN - 8..].copy_from_slice(&index.to_be_bytes());
    Nonce::assume_unique_for_key(bytes)
}

/// Why sealed bytes did not open.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    /// A package's tag does not match: altered bytes, or another key.
    #[error("package {0} does not open: altered, or sealed under another key")]
    Altered(u64),
    /// The sealed bytes ended before the plaintext asked for.
    #[error("the sealed body ended {0} bytes short")]
    Truncated(u64),
}

/// Seals a body as it streams, package by package.
pub struct Sealer {
    key: LessSafeKey,
    next: u64,
    pending: BytesMut,
}

impl Sealer {
    /// A sealer of one body under `key` (which must seal nothing else).
    pub fn new(key: &DataKey) -> Self {
        Self {
            key: key.aead(),
            next: 0,
            pending: BytesMut::with_capacity(SEALED_PACKAGE),
        }
    }

    /// Takes the next plaintext bytes; answers the packages they complete.
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<Bytes> {
        let mut sealed = Vec::new();
        while !chunk.is_empty() {
            let take = (PACKAGE - self.pending.len()).min(chunk.len());
            self.pending.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.pending.len() == PACKAGE {
                sealed.push(self.seal_pending());
            }
        }
        sealed
    }

    /// The last, short package, if the body did not end on a boundary.
    pub fn finish(mut self) -> Option<Bytes> {
        (!self.pending.is_empty()).then(|| self.seal_pending())
    }

    fn seal_pending(&mut self) -> Bytes {
        let mut package =
            std::mem::replace(&mut self.pending, BytesMut::with_capacity(SEALED_PACKAGE));
        // Sealing fails only past GCM's length limit (64 GiB), far above
        // one package.
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(self.next), Aad::empty(), &mut package)
            .expect("a package is far below GCM's limit");
        package.extend_from_slice(tag.as_ref());
        self.next += 1;
        package.freeze()
    }
}

/// Which stored bytes a plaintext range needs, and what to keep of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedRange {
    /// Index of the first package read.
    pub first_package: u64,
    /// The stored bytes to read.
    pub sealed: Range<u64>,
    /// Plaintext bytes of the first package before the range.
    pub skip: usize,
    /// Plaintext bytes of the range.
    pub len: u64,
}

impl SealedRange {
    /// The stored bytes for `plain` of a body of `plain_size` bytes (the
    /// range must lie within it).
    pub fn of(plain: Range<u64>, plain_size: u64) -> Self {
        let package = PACKAGE as u64;
        let first = plain.start / package;
        let end_package = plain.end.div_ceil(package).max(first);
        Self {
            first_package: first,
            sealed: first * SEALED_PACKAGE as u64
                ..(end_package * SEALED_PACKAGE as u64).min(sealed_len(plain_size)),
            skip: (plain.start - first * package) as usize,
            len: plain.end.saturating_sub(plain.start),
        }
    }

    /// An opener of these stored bytes under `key`.
    pub fn opener(&self, key: &DataKey) -> Opener {
        Opener {
            key: key.aead(),
            next: self.first_package,
            pending: BytesMut::new(),
            skip: self.skip,
            remaining: self.len,
        }
    }
}

/// Opens stored bytes as they stream, yielding the plaintext of a range.
pub struct Opener {
    key: LessSafeKey,
    next: u64,
    pending: BytesMut,
    skip: usize,
    remaining: u64,
}

impl Opener {
    /// Takes the next stored bytes; answers the plaintext they complete.
    pub fn push(&mut self, sealed: &[u8]) -> Result<Vec<Bytes>, OpenError> {
        self.pending.extend_from_slice(sealed);
        self.open_pending()
    }

    /// Takes the next stored bytes as a buffer: the packages it holds whole
    /// are opened where they are when nothing else shares it, without a
    /// copy; answers the plaintext they complete.
    pub fn push_bytes(&mut self, mut sealed: Bytes) -> Result<Vec<Bytes>, OpenError> {
        let mut plain = Vec::new();
        if !self.pending.is_empty() {
            // Complete the package begun in an earlier buffer first.
            let take = (SEALED_PACKAGE - self.pending.len()).min(sealed.len());
            self.pending.extend_from_slice(&sealed[..take]);
            sealed = sealed.slice(take..);
            plain = self.open_pending()?;
            if !self.pending.is_empty() || sealed.is_empty() {
                self.pending.extend_from_slice(&sealed);
                plain.extend(self.open_pending()?);
                return Ok(plain);
            }
        }
        match sealed.try_into_mut() {
            Ok(unshared) => self.pending = unshared,
            Err(shared) => self.pending.extend_from_slice(&shared),
        }
        plain.extend(self.open_pending()?);
        Ok(plain)
    }

    fn open_pending(&mut self) -> Result<Vec<Bytes>, OpenError> {
        let mut plain = Vec::new();
        while self.pending.len() >= SEALED_PACKAGE && self.remaining > 0 {
            let package = self.pending.split_to(SEALED_PACKAGE);
            plain.extend(self.open(package)?);
        }
        Ok(plain)
    }

    /// The plaintext of the last, short package; Truncated when the stored
    /// bytes ended before the range did.
    pub fn finish(mut self) -> Result<Option<Bytes>, OpenError> {
        let last = if self.pending.is_empty() || self.remaining == 0 {
            None
        } else {
            let package = std::mem::take(&mut self.pending);
            self.open(package)?
        };
        if self.remaining > 0 {
            return Err(OpenError::Truncated(self.remaining));
        }
        Ok(last)
    }

    fn open(&mut self, mut package: BytesMut) -> Result<Option<Bytes>, OpenError> {
        let index = self.next;
        let len = self
            .key
            .open_in_place(nonce(index), Aad::empty(), &mut package)
            .map_err(|_| OpenError::Altered(index))?
            .len();
        self.next += 1;
        package.truncate(len);
        let mut plain = package.freeze();
        let skip = self.skip.min(plain.len());
        plain = plain.slice(skip..);
        self.skip -= skip;
        let keep = (plain.len() as u64).min(self.remaining) as usize;
        plain.truncate(keep);
        self.remaining -= keep as u64;
        Ok((!plain.is_empty()).then_some(plain))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn seal(key: &DataKey, plain: &[u8], piece: usize) -> Vec<u8> {
        let mut sealer = Sealer::new(key);
        let mut out = Vec::new();
        for chunk in plain.chunks(piece.max(1)) {
            for package in sealer.push(chunk) {
                out.extend_from_slice(&package);
            }
        }
        if let Some(last) = sealer.finish() {
            out.extend_from_slice(&last);
        }
        out
    }

    fn open(
        key: &DataKey,
        stored: &[u8],
        plain: Range<u64>,
        size: u64,
        piece: usize,
    ) -> Result<Vec<u8>, OpenError> {
        let range = SealedRange::of(plain, size);
        let mut opener = range.opener(key);
        let mut out = Vec::new();
        let bytes = &stored[range.sealed.start as usize..range.sealed.end as usize];
        for (n, chunk) in bytes.chunks(piece.max(1)).enumerate() {
            // Alternate the two ways in: copied slices and owned buffers.
            let opened = if n % 2 == 0 {
                opener.push(chunk)?
            } else {
                opener.push_bytes(Bytes::copy_from_slice(chunk))?
            };
            for part in opened {
                out.extend_from_slice(&part);
            }
        }
        if let Some(last) = opener.finish()? {
            out.extend_from_slice(&last);
        }
        Ok(out)
    }

    #[test]
    fn every_range_of_every_size_opens_to_its_plaintext() {
        let key = DataKey::random().unwrap();
        for size in [0, 1, PACKAGE - 1, PACKAGE, PACKAGE + 1, 3 * PACKAGE + 17] {
            let plain = body(size);
            for piece in [1000, PACKAGE, 3 * PACKAGE + 5] {
                let stored = seal(&key, &plain, piece);
                assert_eq!(stored.len() as u64, sealed_len(size as u64), "size {size}");
                let n = size as u64;
                let mut ranges: Vec<Range<u64>> = Vec::new();
                ranges.push(0..n);
                if n > 0 {
                    ranges.extend([0..1, n - 1..n, n / 2..n, 0..n / 2 + 1]);
                }
                if n > PACKAGE as u64 + 2 {
                    let p = PACKAGE as u64;
                    ranges.extend([p - 1..p + 1, p..p + 1, p + 1..n, 1..n - 1]);
                }
                for range in ranges {
                    for read_piece in [7, SEALED_PACKAGE, 100_000] {
                        let got = open(&key, &stored, range.clone(), n, read_piece).unwrap();
                        assert_eq!(
                            got,
                            &plain[range.start as usize..range.end as usize],
                            "size {size} range {range:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn altered_swapped_short_or_foreign_bytes_do_not_open() {
        let key = DataKey::random().unwrap();
        let size = 2 * PACKAGE + 100;
        let plain = body(size);
        let stored = seal(&key, &plain, PACKAGE);
        let all = 0..size as u64;
        let mut altered = stored.clone();
        altered[PACKAGE + 20] ^= 1;
        assert_eq!(
            open(&key, &altered, all.clone(), size as u64, 4096),
            Err(OpenError::Altered(1))
        );
        let mut swapped = stored.clone();
        swapped[..SEALED_PACKAGE].copy_from_slice(&stored[SEALED_PACKAGE..2 * SEALED_PACKAGE]);
        assert_eq!(
            open(&key, &swapped, all.clone(), size as u64, 4096),
            Err(OpenError::Altered(0))
        );
        let other = DataKey::random().unwrap();
        assert_eq!(
            open(&other, &stored, all.clone(), size as u64, 4096),
            Err(OpenError::Altered(0))
        );
        // A body cut at a package boundary is short of its plaintext.
        let range = SealedRange::of(all, size as u64);
        let mut opener = range.opener(&key);
        opener.push(&stored[..2 * SEALED_PACKAGE]).unwrap();
        assert_eq!(opener.finish(), Err(OpenError::Truncated(100)));
        // Sealed bytes are not the plaintext.
        assert!(!stored.windows(64).any(|w| w == &plain[1000..1064]));
    }

    #[test]
    fn bytes_past_the_range_are_ignored_unopened() {
        let key = DataKey::random().unwrap();
        let plain = body(2 * PACKAGE);
        let stored = seal(&key, &plain, PACKAGE);
        let mut opener = SealedRange::of(0..10, 2 * PACKAGE as u64).opener(&key);
        // The first package, then bytes that are no package at all.
        let mut pushed = stored[..SEALED_PACKAGE].to_vec();
        pushed.extend(std::iter::repeat_n(0u8, SEALED_PACKAGE));
        let opened: Vec<u8> = opener.push_bytes(Bytes::from(pushed)).unwrap().concat();
        assert_eq!(opened, &plain[..10]);
        assert_eq!(opener.finish(), Ok(None));
    }

    #[test]
    fn ranges_read_only_the_packages_they_touch() {
        let p = PACKAGE as u64;
        let s = SEALED_PACKAGE as u64;
        let size = 10 * p + 5;
        assert_eq!(
            SealedRange::of(p + 3..2 * p + 1, size),
            SealedRange {
                first_package: 1,
                sealed: s..3 * s,
                skip: 3,
                len: p - 2
            }
        );
        assert_eq!(
            SealedRange::of(10 * p..size, size).sealed,
            10 * s..10 * s + 5 + TAG as u64
        );
        assert_eq!(SealedRange::of(0..0, 0).sealed, 0..0);
        assert_eq!(sealed_len(0), 0);
        // The stored format: bodies already stored are read with these.
        assert_eq!((PACKAGE, TAG, SEALED_PACKAGE), (65_536, 16, 65_552));
        assert_eq!(sealed_len(65_537), 65_552 + 1 + 16);
        assert_eq!(sealed_len(p), s);
        assert_eq!(sealed_len(p + 1), s + 1 + TAG as u64);
    }
}
