//! Bodies stored as pieces sealed one after another: the parts of a
//! multipart object, each with its own data key and its own package
//! sequence, or a single PUT's body as one piece.

use crate::keys::DataKey;
use crate::packages::{sealed_len, OpenError, Opener, SealedRange};
use bytes::Bytes;
use std::collections::VecDeque;
use std::ops::Range;

/// The layout of a stored body: its pieces' plaintext sizes, in order, and
/// the key each is sealed under. Each piece's stored bytes follow the
/// previous piece's.
#[derive(Clone, Debug)]
pub struct SealedBody {
    /// The body's key, or for parts the upload's key they derive from.
    key: DataKey,
    /// Each piece's plaintext size, and its salt when its key is derived.
    pieces: Vec<(u64, Option<Vec<u8>>)>,
}

impl SealedBody {
    /// A body sealed as one piece of `size` plaintext bytes.
    pub fn single(size: u64, key: DataKey) -> Self {
        Self {
            key,
            pieces: vec![(size, None)],
        }
    }

    /// A multipart body: parts of these plaintext sizes, each sealed under
    /// `upload.derive(salt)`. Only the parts a range touches get their key
    /// derived.
    pub fn parts(upload: DataKey, parts: Vec<(u64, Vec<u8>)>) -> Self {
        Self {
            key: upload,
            pieces: parts
                .into_iter()
                .map(|(size, salt)| (size, Some(salt)))
                .collect(),
        }
    }

    /// Plaintext bytes of the whole body.
    pub fn plain_len(&self) -> u64 {
        self.pieces.iter().map(|(size, _)| size).sum()
    }

    /// The stored bytes `plain` (within the body) needs, and the opener of
    /// exactly those bytes: only the packages the range touches, of only
    /// the pieces it touches.
    pub fn range(&self, plain: Range<u64>) -> (Range<u64>, BodyOpener) {
        let mut segments = VecDeque::new();
        let mut sealed: Option<Range<u64>> = None;
        let (mut plain_start, mut sealed_start) = (0u64, 0u64);
        for (size, salt) in &self.pieces {
            let piece = plain_start..plain_start + size;
            let within = plain.start.max(piece.start)..plain.end.min(piece.end);
            if within.start < within.end {
                let range =
                    SealedRange::of(within.start - piece.start..within.end - piece.start, *size);
                let stored = sealed_start + range.sealed.start..sealed_start + range.sealed.end;
                sealed = Some(match sealed {
                    None => stored.clone(),
                    Some(so_far) => so_far.start..stored.end,
                });
                let opener = match salt {
                    None => range.opener(&self.key),
                    Some(salt) => range.opener(&self.key.derive(salt)),
                };
                segments.push_back(Segment {
                    stored: stored.end - stored.start,
                    opener,
                });
            }
            plain_start = piece.end;
            sealed_start += sealed_len(*size);
        }
        let sealed = sealed.unwrap_or(sealed_start..sealed_start);
        (sealed, BodyOpener { segments })
    }
}

/// The stored bytes of one piece that a range reads, and their opener.
struct Segment {
    /// Stored bytes still to come.
    stored: u64,
    opener: Opener,
}

/// Opens the stored bytes of a [`SealedBody::range`] as they stream,
/// handing each piece's bytes to that piece's opener.
pub struct BodyOpener {
    segments: VecDeque<Segment>,
}

impl BodyOpener {
    /// Takes the next stored bytes; answers the plaintext they complete.
    /// Bytes past the range are ignored.
    pub fn push_bytes(&mut self, mut sealed: Bytes) -> Result<Vec<Bytes>, OpenError> {
        let mut plain = Vec::new();
        while !sealed.is_empty() {
            let Some(segment) = self.segments.front_mut() else {
                break;
            };
            let take = segment.stored.min(sealed.len() as u64) as usize;
            plain.extend(segment.opener.push_bytes(sealed.split_to(take))?);
            segment.stored -= take as u64;
            if segment.stored == 0 {
                let done = self.segments.pop_front().expect("the front segment");
                plain.extend(done.opener.finish()?);
            }
        }
        Ok(plain)
    }

    /// The plaintext still held; Truncated when the stored bytes ended
    /// before the range did.
    pub fn finish(self) -> Result<Vec<Bytes>, OpenError> {
        let mut plain = Vec::new();
        for segment in self.segments {
            plain.extend(segment.opener.finish()?);
        }
        Ok(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packages::{Sealer, PACKAGE};

    fn sealed(key: &DataKey, plain: &[u8]) -> Vec<u8> {
        let mut sealer = Sealer::new(key);
        let mut out: Vec<u8> = sealer.push(plain).concat();
        out.extend(sealer.finish().unwrap_or_default());
        out
    }

    /// A body of parts of these sizes, its plaintext and its stored bytes.
    fn parted(sizes: &[usize]) -> (SealedBody, Vec<u8>, Vec<u8>) {
        let upload = DataKey::random().unwrap();
        let (mut plain, mut stored, mut pieces) = (Vec::new(), Vec::new(), Vec::new());
        for (n, size) in sizes.iter().enumerate() {
            let part: Vec<u8> = (0..*size).map(|i| (i * 13 + n * 101) as u8).collect();
            let salt = vec![n as u8; 16];
            stored.extend(sealed(&upload.derive(&salt), &part));
            plain.extend(part);
            pieces.push((*size as u64, salt));
        }
        (SealedBody::parts(upload, pieces), plain, stored)
    }

    fn open(body: &SealedBody, stored: &[u8], range: Range<u64>, piece: usize) -> Vec<u8> {
        let (sealed, mut opener) = body.range(range);
        let bytes = &stored[sealed.start as usize..sealed.end as usize];
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            out.extend(
                opener
                    .push_bytes(Bytes::copy_from_slice(chunk))
                    .unwrap()
                    .concat(),
            );
        }
        out.extend(opener.finish().unwrap().concat());
        out
    }

    #[test]
    fn ranges_across_parts_open_to_their_plaintext() {
        let p = PACKAGE;
        let (body, plain, stored) = parted(&[2 * p + 5, p, 0, 3, p + 1]);
        assert_eq!(body.plain_len(), plain.len() as u64);
        let n = plain.len() as u64;
        let first = (2 * p + 5) as u64;
        let ranges = [
            0..n,
            0..1,
            n - 1..n,
            first - 1..first + 1,
            first..first + p as u64,
            first - 10..n - 2,
            first + p as u64..first + p as u64 + 3,
            5..(3 * p) as u64,
        ];
        for range in ranges {
            for piece in [1, 999, 70_000, 1 << 20] {
                assert_eq!(
                    open(&body, &stored, range.clone(), piece),
                    &plain[range.start as usize..range.end as usize],
                    "range {range:?} piece {piece}"
                );
            }
        }
    }

    #[test]
    fn a_range_reads_only_the_packages_of_the_parts_it_touches() {
        let p = PACKAGE as u64;
        let (body, _, stored) = parted(&[p as usize, 3 * p as usize]);
        let (sealed, _) = body.range(p..p + 1);
        assert_eq!(
            sealed,
            sealed_len(p)..2 * sealed_len(p),
            "one package of part 2"
        );
        let (sealed, _) = body.range(p - 1..p + 1);
        assert_eq!(
            sealed,
            0..2 * sealed_len(p),
            "the last of part 1, the first of part 2"
        );
        let (sealed, _) = body.range(0..4 * p);
        assert_eq!(sealed, 0..stored.len() as u64);
        // A range starting where a part ends (mid-package) reads nothing
        // of that part.
        let (body, _, _) = parted(&[p as usize + 5, p as usize]);
        let (sealed, _) = body.range(p + 5..p + 6);
        let first = sealed_len(p + 5);
        assert_eq!(sealed, first..first + sealed_len(p));
    }

    #[test]
    fn parts_swapped_or_cut_short_do_not_open() {
        let p = PACKAGE;
        let (body, _, stored) = parted(&[p, p]);
        let half = stored.len() / 2;
        let mut swapped = stored[half..].to_vec();
        swapped.extend_from_slice(&stored[..half]);
        let (_, mut opener) = body.range(0..2 * p as u64);
        assert_eq!(
            opener.push_bytes(Bytes::from(swapped)).unwrap_err(),
            OpenError::Altered(0)
        );
        let (_, mut opener) = body.range(0..2 * p as u64);
        opener
            .push_bytes(Bytes::copy_from_slice(&stored[..half]))
            .unwrap();
        assert_eq!(opener.finish().unwrap_err(), OpenError::Truncated(p as u64));
    }
}
