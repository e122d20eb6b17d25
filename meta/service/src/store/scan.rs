//! The scan behind every listing: walks an ordered table between two keys,
//! rolls keys up into common prefixes at a delimiter, and stops when a page
//! is full. A page costs in proportion to its size, not to the table: once a
//! common prefix is met the scan restarts just past its last possible key
//! instead of walking the keys under it.

use super::db::prefix_end;
use super::db::StoreError;
use redb::ReadableTable;
use std::borrow::Cow;
use std::ops::Bound;

/// Most entries one page may hold, whatever the caller asks.
pub(crate) const MAX_PAGE: u32 = 10_000;

/// Where `key` rolls up, if the delimiter occurs after the prefix.
pub(crate) fn common_prefix<'k>(
    key: &'k [u8],
    prefix_len: usize,
    delimiter: &[u8],
) -> Option<&'k [u8]> {
    let rest = key.get(prefix_len..)?;
    rest.windows(delimiter.len())
        .position(|w| w == delimiter)
        .map(|at| &key[..prefix_len + at + delimiter.len()])
}

/// `bytes` as a String; stored keys are always UTF-8.
pub(crate) fn utf8(bytes: &[u8]) -> Result<String, StoreError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| StoreError::Corrupt("object key is not UTF-8".into()))
}

/// How a scan rolls keys up into common prefixes and where a page ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RollUp<'a> {
    /// Bytes of the listing prefix (roll-up looks for the delimiter after it).
    pub(crate) prefix_len: usize,
    /// The delimiter, if any (never empty).
    pub(crate) delimiter: Option<&'a [u8]>,
    /// The marker the page starts after: a common prefix at or before it was
    /// returned on an earlier page.
    pub(crate) marker: Option<&'a [u8]>,
    /// Most entries (keys and common prefixes) on the page.
    pub(crate) max: usize,
}

/// The last entry a scan put on its page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LastEntry {
    /// A stored (index) key.
    Stored(Vec<u8>),
    /// A common prefix.
    Prefix(String),
}

/// What a scan found besides the keys it handed to its caller.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub(crate) common_prefixes: Vec<String>,
    /// Whether more entries follow the page.
    pub(crate) is_truncated: bool,
    /// The last entry on the page.
    pub(crate) last: Option<LastEntry>,
    /// Stored entries read.
    pub(crate) scanned: usize,
}

/// How a table stores the keys a listing shows.
pub(crate) trait KeyIndex {
    /// The listed key of a stored key.
    fn listed_key<'k>(&self, stored: &'k [u8]) -> Result<Cow<'k, [u8]>, StoreError>;
    /// The stored form of a listed-key prefix: every stored key whose listed
    /// key starts with `prefix` starts with it.
    fn stored_prefix(&self, prefix: &[u8]) -> Vec<u8>;
}

/// Walks `table` from `lower` up to `upper`, handing each key that does not
/// roll up to `on_key` (stored key and value) and collecting common prefixes,
/// until the page is full. Once a common prefix is met the scan restarts
/// just past its last possible key, so a page costs in proportion to its size.
pub(crate) fn scan_rolled_up<V: redb::Value + 'static>(
    table: &impl ReadableTable<&'static [u8], V>,
    index: &impl KeyIndex,
    mut lower: Bound<Vec<u8>>,
    upper: &[u8],
    roll: RollUp<'_>,
    mut on_key: impl FnMut(&[u8], redb::AccessGuard<'_, V>) -> Result<(), StoreError>,
) -> Result<Scanned, StoreError> {
    let mut out = Scanned::default();
    let mut emitted = 0usize;
    'scan: loop {
        let start = match &lower {
            Bound::Included(k) | Bound::Excluded(k) if k.as_slice() >= upper => break,
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut jump = None;
        for entry in table.range::<&[u8]>((start, Bound::Excluded(upper)))? {
            let (stored_key, value) = entry?;
            out.scanned += 1;
            let stored = stored_key.value();
            let key = index.listed_key(stored)?;
            let rolled = roll
                .delimiter
                .and_then(|d| common_prefix(&key, roll.prefix_len, d));
            if let Some(cp) = rolled {
                if roll.marker.is_none_or(|marker| cp > marker) {
                    if emitted == roll.max {
                        out.is_truncated = true;
                        break 'scan;
                    }
                    let cp = utf8(cp)?;
                    out.last = Some(LastEntry::Prefix(cp.clone()));
                    out.common_prefixes.push(cp);
                    emitted += 1;
                }
                jump = Some(
                    prefix_end(&index.stored_prefix(cp))
                        .ok_or_else(|| StoreError::Corrupt("common prefix has no end".into()))?,
                );
                break;
            }
            if emitted == roll.max {
                out.is_truncated = true;
                break 'scan;
            }
            out.last = Some(LastEntry::Stored(stored.to_vec()));
            on_key(stored, value)?;
            emitted += 1;
        }
        match jump {
            Some(next) => lower = Bound::Included(next),
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_starts_after_the_prefix() {
        assert_eq!(common_prefix(b"a/b/c", 0, b"/"), Some(&b"a/"[..]));
        assert_eq!(common_prefix(b"a/b/c", 2, b"/"), Some(&b"a/b/"[..]));
        assert_eq!(common_prefix(b"a/b", 2, b"/"), None);
        assert_eq!(common_prefix(b"x--y--z", 0, b"--"), Some(&b"x--"[..]));
        assert_eq!(common_prefix(b"ab", 3, b"/"), None);
    }
}
