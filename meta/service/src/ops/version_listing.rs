//! ListObjectVersions: one page of a bucket's versions and delete markers,
//! keys in UTF-8 byte order and each key's versions newest first, with
//! prefix, delimiter roll-up and (key, version) markers. The latest objects
//! (`OBJECTS`) and the other versions (`VERSIONS`) are walked side by side;
//! like every listing, a page costs in proportion to its size.

use crate::state::MetaState;
use crate::store::db::{decode, prefix_end, StoreError};
use crate::store::scan::{common_prefix, utf8, MAX_PAGE};
use crate::store::tables::{
    bucket_prefix_len, object_key, require_bucket, BUCKETS, OBJECTS, VERSIONS,
};
use crate::store::versions::{
    after_versions_of, find_version, split_version_key, version_key, versions_prefix,
    versions_prefix_end, Place,
};
use meta_api::naming::VersionRef;
use meta_api::{
    Handle, ListObjectVersions, MetaError, ObjectRecord, UnixMillis, VersionSummary, VersionsPage,
};
use redb::ReadOnlyTable;
use std::ops::Bound;

type Bytes = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The next entry of one of the two tables.
struct Head {
    /// The object key.
    key: Vec<u8>,
    /// The stored record.
    value: Vec<u8>,
}

/// Where the scan resumes in each table.
struct Cursor {
    objects: Bound<Vec<u8>>,
    versions: Bound<Vec<u8>>,
}

/// The next entry of `entries`, with the object key `key_of` reads from
/// its stored key.
fn next_head(
    entries: &mut redb::Range<'_, &'static [u8], &'static [u8]>,
    key_of: impl Fn(&[u8]) -> Result<Vec<u8>, StoreError>,
) -> Result<Option<Head>, StoreError> {
    let Some(entry) = entries.next() else {
        return Ok(None);
    };
    let (stored, value) = entry?;
    Ok(Some(Head {
        key: key_of(stored.value())?,
        value: value.value().to_vec(),
    }))
}

fn range<'t>(
    table: &'t ReadOnlyTable<&'static [u8], &'static [u8]>,
    lower: &Bound<Vec<u8>>,
    upper: &[u8],
) -> Result<redb::Range<'t, &'static [u8], &'static [u8]>, StoreError> {
    let lower = match lower {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    };
    Ok(table.range::<&[u8]>((lower, Bound::Excluded(upper)))?)
}

/// Where a page starts: after the key marker (all of its versions), or
/// after the version marker of that key.
fn start(
    objects: &Bytes,
    versions: &Bytes,
    request: &ListObjectVersions,
) -> Result<Cursor, StoreError> {
    let bucket = request.bucket.as_str();
    let from_prefix = Cursor {
        objects: Bound::Included(object_key(bucket, request.prefix.as_bytes())),
        versions: Bound::Included(versions_prefix(bucket, request.prefix.as_bytes())),
    };
    let Some(marker) = request
        .key_marker
        .as_deref()
        .filter(|m| *m >= request.prefix.as_str())
    else {
        return Ok(from_prefix);
    };
    let after_key = Cursor {
        objects: Bound::Excluded(object_key(bucket, marker.as_bytes())),
        versions: Bound::Included(after_versions_of(bucket, marker.as_bytes())),
    };
    let seq = match &request.version_marker {
        None => return Ok(after_key),
        Some(VersionRef::Id { seq, .. }) => *seq,
        Some(null @ VersionRef::Null) => {
            match find_version(objects, versions, bucket, marker, null)? {
                Some((Place::Latest, record)) | Some((Place::Older(_), record)) => {
                    record.version.seq
                }
                None => return Ok(after_key),
            }
        }
    };
    Ok(Cursor {
        objects: Bound::Excluded(object_key(bucket, marker.as_bytes())),
        versions: Bound::Excluded(version_key(bucket, marker.as_bytes(), seq)),
    })
}

/// One page of versions.
pub(crate) fn list_versions(
    objects: &Bytes,
    versions: &Bytes,
    request: &ListObjectVersions,
) -> Result<VersionsPage, StoreError> {
    let bucket = request.bucket.as_str();
    let prefix = request.prefix.as_bytes();
    let upper_objects = prefix_end(&object_key(bucket, prefix))
        .ok_or_else(|| MetaError::Store("listing range has no upper bound".into()))?;
    let upper_versions = versions_prefix_end(bucket, prefix)?;
    let delimiter = request
        .delimiter
        .as_deref()
        .filter(|d| !d.is_empty())
        .map(str::as_bytes);
    let marker = request.key_marker.as_deref().map(str::as_bytes);
    let max = request.max_keys.min(MAX_PAGE) as usize;
    let mut cursor = start(objects, versions, request)?;
    // The key whose latest version was already listed (or passed).
    let mut seen: Option<Vec<u8>> = request
        .version_marker
        .as_ref()
        .and(marker.map(<[u8]>::to_vec));
    let mut page = VersionsPage::default();
    let mut emitted = 0usize;
    let mut last: Option<(String, Option<String>)> = None;
    'scan: loop {
        let mut latest = range(objects, &cursor.objects, &upper_objects)?;
        let mut older = range(versions, &cursor.versions, &upper_versions)?;
        let latest_key = |stored: &[u8]| Ok(stored[bucket_prefix_len(bucket)..].to_vec());
        let older_key = |stored: &[u8]| Ok(split_version_key(bucket, stored)?.0);
        let mut latest_head = next_head(&mut latest, latest_key)?;
        let mut older_head = next_head(&mut older, older_key)?;
        loop {
            let from_latest = match (&latest_head, &older_head) {
                (None, None) => break 'scan,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(l), Some(o)) => l.key <= o.key,
            };
            let head = if from_latest {
                latest_head.take()
            } else {
                older_head.take()
            }
            .ok_or_else(|| StoreError::Corrupt("listing lost its place".into()))?;
            if let Some(cp) = delimiter.and_then(|d| common_prefix(&head.key, prefix.len(), d)) {
                if marker.is_none_or(|m| cp > m) {
                    if emitted == max {
                        page.is_truncated = true;
                        break 'scan;
                    }
                    let cp = utf8(cp)?;
                    last = Some((cp.clone(), None));
                    page.common_prefixes.push(cp);
                    emitted += 1;
                }
                let past = |stored: Vec<u8>| {
                    prefix_end(&stored)
                        .ok_or_else(|| StoreError::Corrupt("common prefix has no end".into()))
                };
                cursor = Cursor {
                    objects: Bound::Included(past(object_key(bucket, cp))?),
                    versions: Bound::Included(past(versions_prefix(bucket, cp))?),
                };
                continue 'scan;
            }
            if emitted == max {
                page.is_truncated = true;
                break 'scan;
            }
            let record: ObjectRecord = decode(&head.value)?;
            let is_latest = seen.as_deref() != Some(head.key.as_slice());
            seen = Some(head.key);
            last = Some((
                record.key.clone(),
                Some(record.version.id_or_null().to_string()),
            ));
            page.versions.push(VersionSummary {
                key: record.key,
                is_latest,
                size: record.size,
                etag: record.etag,
                created: record.created,
                owner: record.attributes.owner,
                version: record.version,
            });
            emitted += 1;
            if from_latest {
                latest_head = next_head(&mut latest, latest_key)?;
            } else {
                older_head = next_head(&mut older, older_key)?;
            }
        }
    }
    if page.is_truncated {
        if let Some((key, version)) = last {
            page.next_key_marker = Some(key);
            page.next_version_id_marker = version;
        }
    }
    Ok(page)
}

impl Handle<ListObjectVersions> for MetaState {
    /// One page of the versions of `bucket`.
    fn handle(
        &self,
        request: ListObjectVersions,
        _now: UnixMillis,
    ) -> Result<VersionsPage, MetaError> {
        self.store.read(|txn| {
            require_bucket(&txn.open_table(BUCKETS)?, &request.bucket)?;
            list_versions(
                &txn.open_table(OBJECTS)?,
                &txn.open_table(VERSIONS)?,
                &request,
            )
        })
    }
}
