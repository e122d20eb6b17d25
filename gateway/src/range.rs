//! The `Range` header of GetObject, as S3 reads it: one `bytes=` range
//! (`a-b`, `a-`, `-n`); a header S3 cannot use (bad syntax, several ranges,
//! an inverted `b < a`) is ignored and the whole object is sent.

/// A range as the client wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeSpec {
    /// `bytes=first-last`, both inclusive.
    Bounded {
        /// First byte.
        first: u64,
        /// Last byte, inclusive.
        last: u64,
    },
    /// `bytes=first-`.
    From {
        /// First byte.
        first: u64,
    },
    /// `bytes=-len`: the last `len` bytes.
    Suffix {
        /// Bytes from the end.
        len: u64,
    },
}

/// The bytes `start..end` (end exclusive) of an object, never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte, inclusive.
    pub start: u64,
    /// End, exclusive.
    pub end: u64,
}

impl ByteRange {
    /// The whole object of `size` bytes.
    pub fn whole(size: u64) -> Self {
        Self {
            start: 0,
            end: size,
        }
    }

    /// Number of bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// True when no byte is selected (only for a whole empty object).
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// `bytes start-last/size` for Content-Range.
    pub fn content_range(&self, size: u64) -> String {
        format!(
            "bytes {}-{}/{}",
            self.start,
            self.end.saturating_sub(1),
            size
        )
    }
}

/// The range cannot be served: 416 InvalidRange with `Content-Range: bytes */size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsatisfiable;

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Reads a Range header value; None when S3 would ignore it.
pub fn parse(value: &str) -> Option<RangeSpec> {
    let value = value.trim();
    let (unit, set) = value.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return None;
    }
    let (first, last) = set.trim().split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    match (first.is_empty(), last.is_empty()) {
        (true, true) => None,
        (true, false) => digits(last).map(|len| RangeSpec::Suffix { len }),
        (false, true) => digits(first).map(|first| RangeSpec::From { first }),
        (false, false) => {
            let (first, last) = (digits(first)?, digits(last)?);
            // S3 ignores an inverted range (HDDS-16336) rather than refusing it.
            (last >= first).then_some(RangeSpec::Bounded { first, last })
        }
    }
}

impl RangeSpec {
    /// The bytes this range selects in an object of `size` bytes.
    pub fn resolve(self, size: u64) -> Result<ByteRange, Unsatisfiable> {
        match self {
            Self::Bounded { first, .. } | Self::From { first } if first >= size => {
                Err(Unsatisfiable)
            }
            Self::Bounded { first, last } => Ok(ByteRange {
                start: first,
                end: last.saturating_add(1).min(size),
            }),
            Self::From { first } => Ok(ByteRange {
                start: first,
                end: size,
            }),
            Self::Suffix { len } if len == 0 || size == 0 => Err(Unsatisfiable),
            Self::Suffix { len } => Ok(ByteRange {
                start: size.saturating_sub(len),
                end: size,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn any_header_parses_or_is_ignored(value in "\\PC{0,40}") {
            let _ = parse(&value);
        }

        /// A parsed range resolves inside the object, or is unsatisfiable
        /// exactly when it starts at or past the end.
        #[test]
        fn ranges_resolve_inside_the_object(
            first in 0u64..2000,
            len in 0u64..2000,
            size in 0u64..3000,
            form in 0u8..3,
        ) {
            let value = match form {
                0 => format!("bytes={first}-{}", first + len),
                1 => format!("bytes={first}-"),
                _ => format!("bytes=-{len}"),
            };
            let spec = parse(&value).expect("a valid range");
            match spec.resolve(size) {
                Ok(range) => {
                    proptest::prop_assert!(range.start < range.end && range.end <= size, "{value} of {size}: {range:?}");
                }
                Err(Unsatisfiable) => proptest::prop_assert!(
                    size == 0 || (form < 2 && first >= size) || (form == 2 && len == 0),
                    "{value} of {size} refused"
                ),
            }
        }
    }

    #[test]
    fn parses_every_form() {
        let table = [
            ("bytes=0-9", Some(RangeSpec::Bounded { first: 0, last: 9 })),
            ("bytes=5-5", Some(RangeSpec::Bounded { first: 5, last: 5 })),
            ("bytes=10-", Some(RangeSpec::From { first: 10 })),
            ("bytes=-3", Some(RangeSpec::Suffix { len: 3 })),
            ("bytes=-0", Some(RangeSpec::Suffix { len: 0 })),
            ("Bytes=1-2", Some(RangeSpec::Bounded { first: 1, last: 2 })),
            (
                " bytes = 1 - 2 ",
                Some(RangeSpec::Bounded { first: 1, last: 2 }),
            ),
            // Ignored as S3 does: the whole object is sent with 200.
            ("bytes=5-2", None),
            ("bytes=0-1,3-4", None),
            ("bytes=-", None),
            ("bytes=", None),
            ("bytes=abc", None),
            ("bytes=a-b", None),
            ("bytes=1-b", None),
            ("bytes=+1-2", None),
            ("bytes=--1", None),
            ("bytes=1", None),
            ("items=0-1", None),
            ("0-1", None),
            ("", None),
            ("bytes=99999999999999999999-", None),
        ];
        for (header, expected) in table {
            assert_eq!(parse(header), expected, "{header:?}");
        }
    }

    #[test]
    fn resolves_against_the_object_size() {
        let r = |s: &str, size: u64| parse(s).unwrap().resolve(size);
        let range = |start, end| Ok(ByteRange { start, end });
        assert_eq!(r("bytes=0-9", 100), range(0, 10));
        assert_eq!(r("bytes=0-0", 100), range(0, 1));
        assert_eq!(r("bytes=90-200", 100), range(90, 100));
        assert_eq!(r("bytes=99-", 100), range(99, 100));
        assert_eq!(r("bytes=-10", 100), range(90, 100));
        assert_eq!(r("bytes=-1000", 100), range(0, 100));
        assert_eq!(r("bytes=0-18446744073709551615", 100), range(0, 100));
        // Unsatisfiable: 416 InvalidRange.
        assert_eq!(r("bytes=100-", 100), Err(Unsatisfiable));
        assert_eq!(r("bytes=100-200", 100), Err(Unsatisfiable));
        assert_eq!(r("bytes=-0", 100), Err(Unsatisfiable));
        assert_eq!(r("bytes=0-", 0), Err(Unsatisfiable));
        assert_eq!(r("bytes=-5", 0), Err(Unsatisfiable));
    }

    #[test]
    fn content_range_is_inclusive() {
        let range = parse("bytes=2-5").unwrap().resolve(10).unwrap();
        assert_eq!(range.len(), 4);
        assert_eq!(range.content_range(10), "bytes 2-5/10");
        assert_eq!(ByteRange::whole(10).content_range(10), "bytes 0-9/10");
    }
}
