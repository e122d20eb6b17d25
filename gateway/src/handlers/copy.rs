//! CopyObject and UploadPartCopy. The source is read with `KeyReader` in
//! pieces (a few in flight) and fed to a `KeyWriter`, so memory does not grow
//! with the object; only a copy of an object onto itself, which must replace
//! its metadata, re-commits the same blocks without moving data.

use super::acl::{canned_acl, written_access};
use super::lifecycle::insert_expiration;
use super::object::{chosen_replication, requested_write_condition, BodyLayout};
use super::object_lock::requested_lock;
use super::versions::insert_version_id;
use super::{xml_response, AuthorizedBucket, RequestContext};
use crate::auth::{ChecksumAlgorithm, Checksummer};
use crate::conditional::{evaluate_copy_source, Precondition};
use crate::encryption::{self, read_plain_at, BodyKey, KeyFor, NewEncryption, Requested};
use crate::error::{S3Code, S3Error};
use crate::headers::ObjectMetadata;
use crate::object_checksum::object_checksum;
use crate::range::ByteRange;
use crate::request_body::{commit_or_discard, MAX_OBJECT_UPLOAD};
use crate::tags::tags_from_header;
use crate::xml::object_documents;
use axum::response::Response;
use block_client::WrittenKey;
use futures::{stream, StreamExt};
use http::HeaderMap;
use md5::{Digest, Md5};
use meta_api::naming::{parse_version_id, VersionRef};
use meta_api::{now_millis, MetaError};
use meta_api::{ObjectAttributes, ObjectRecord, PartRecord, StoredChecksum, WriteCondition};
use percent_encoding::percent_decode_str;
use proto::ObjectId;
use sse::Sealer;
use std::sync::Arc;

/// The header naming the source object.
pub const COPY_SOURCE_HEADER: &str = "x-amz-copy-source";
/// Reads running ahead of the writer.
const PIECES_IN_FLIGHT: usize = 2;
/// Bytes read per `read_at`: whole EC stripes of rs-3-2 and rs-6-3 at 1 MiB cells.
const PIECE_BYTES: u64 = 3 * 1024 * 1024;

/// The object a copy reads, from `x-amz-copy-source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopySource {
    /// Source bucket.
    pub bucket: String,
    /// Source key, decoded.
    pub key: String,
    /// The source version, when one is named.
    pub version: Option<VersionRef>,
}

fn invalid_source(message: &'static str) -> S3Error {
    S3Error::invalid_argument(message).detail("ArgumentName", COPY_SOURCE_HEADER)
}

/// Parses `[/]bucket/key[?versionId=ID]` with a URL-encoded key.
pub fn parse_copy_source(value: &str) -> Result<CopySource, S3Error> {
    let (path, query) = match value.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (value, None),
    };
    let mut version = None;
    if let Some(query) = query {
        for item in query.split('&').filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some(("versionId", id)) if version.is_none() => {
                    version = Some(parse_version_id(id).map_err(invalid_source)?);
                }
                _ => return Err(invalid_source("Invalid copy source object key")),
            }
        }
    }
    let decoded = percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| invalid_source("Invalid copy source encoding"))?;
    let trimmed = decoded.strip_prefix('/').unwrap_or(&decoded);
    match trimmed.split_once('/') {
        Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => Ok(CopySource {
            bucket: bucket.to_string(),
            key: key.to_string(),
            version,
        }),
        _ => Err(invalid_source(
            "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
        )),
    }
}

/// The `x-amz-copy-source-range` of UploadPartCopy, checked against the
/// source size.
pub fn copy_source_range(value: &str, size: u64) -> Result<ByteRange, S3Error> {
    let malformed = || {
        S3Error::invalid_argument(
            "The x-amz-copy-source-range value must be of the form bytes=first-last where \
             first and last are the zero-based offsets of the first and last bytes to copy",
        )
        .detail("ArgumentName", "x-amz-copy-source-range")
        .detail("ArgumentValue", value.to_string())
    };
    let spec = value.trim().strip_prefix("bytes=").ok_or_else(malformed)?;
    let (first, last) = spec.split_once('-').ok_or_else(malformed)?;
    let first: u64 = first.trim().parse().map_err(|_| malformed())?;
    let last: u64 = last.trim().parse().map_err(|_| malformed())?;
    if last < first {
        return Err(malformed());
    }
    if last >= size {
        // S3's answer, seen from aws-cli: InvalidArgument, not InvalidRange.
        return Err(S3Error::with_message(
            S3Code::InvalidArgument,
            format!("Range specified is not valid for source object of size: {size}"),
        ));
    }
    Ok(ByteRange {
        start: first,
        end: last + 1,
    })
}

/// A metadata or tagging directive: COPY (the default) or REPLACE.
fn directive(headers: &HeaderMap, name: &'static str) -> Result<bool, S3Error> {
    match headers.get(name).map(|v| v.to_str().unwrap_or("")) {
        None | Some("COPY") => Ok(false),
        Some("REPLACE") => Ok(true),
        Some(other) => Err(
            S3Error::invalid_argument(format!("Unknown {name} value {other}"))
                .detail("ArgumentName", name),
        ),
    }
}

/// A copy's source: where the request named it, its record, and the key
/// that opens its body when it is encrypted.
struct Source {
    at: CopySource,
    record: ObjectRecord,
    key: Option<BodyKey>,
}

/// Finds, authorizes and checks the source object, and its key (an SSE-C
/// source opens only with the key in the copy-source headers): every copy
/// path checks them here, the in-place one that reads nothing too.
async fn source_object(ctx: &RequestContext<'_>) -> Result<Source, S3Error> {
    let headers = &ctx.parts.headers;
    let raw = headers
        .get(COPY_SOURCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| invalid_source("Invalid copy source"))?;
    let source = parse_copy_source(raw)?;
    // Reading the source needs what a GetObject of it needs.
    let read_action = match source.version {
        Some(_) => access::Action::GetObjectVersion,
        None => access::Action::GetObject,
    };
    let bucket = ctx
        .authorize_bucket_at(&source.bucket, read_action, Some(&source.key))
        .await?;
    let record = ctx
        .authorized_object(&bucket, &source.key, source.version.as_ref())
        .await?;
    if evaluate_copy_source(headers, &record.etag, record.created) != Precondition::Proceed {
        return Err(S3Error::new(S3Code::PreconditionFailed));
    }
    let key = BodyKey::of(&record, headers, KeyFor::CopySource)?;
    Ok(Source {
        at: source,
        record: Arc::unwrap_or_clone(record),
        key,
    })
}

/// What a copied range left behind: durable blocks, not yet visible.
struct Copied {
    etag: String,
    /// Bytes copied (stored longer when sealed).
    size: u64,
    written: WrittenKey,
    checksum: Option<StoredChecksum>,
}

/// Streams `range` of `source` (opened, when it is encrypted) into a new key
/// laid out as `layout` says, sealed when `encryption` is given, computing the MD5
/// (and the checksum of `algorithm`) of the plaintext as bytes pass.
async fn copy_range(
    ctx: &RequestContext<'_>,
    source: &Source,
    range: ByteRange,
    layout: BodyLayout,
    algorithm: Option<ChecksumAlgorithm>,
    encryption: Option<&NewEncryption>,
) -> Result<Copied, S3Error> {
    let reader = Arc::new(ctx.state.store.reader(&source.record));
    let source_key = Arc::new(source.key.clone());
    let mut writer = layout.writer(ctx, range.len(), encryption.is_some());
    let mut sealer = encryption.map(NewEncryption::sealer);
    let mut md5 = Md5::new();
    let mut checksummer = algorithm.map(Checksummer::new);
    let offsets = (range.start..range.end).step_by(PIECE_BYTES as usize);
    let mut pieces = stream::iter(offsets)
        .map(|offset| {
            let reader = Arc::clone(&reader);
            let source_key = Arc::clone(&source_key);
            let len = (range.end - offset).min(PIECE_BYTES) as usize;
            async move {
                let data =
                    read_plain_at(&reader, source_key.as_ref().as_ref(), offset, len).await?;
                if data.len() != len {
                    return Err(S3Error::internal(format!(
                        "short read at {offset}: {} of {len} bytes",
                        data.len()
                    )));
                }
                Ok::<_, S3Error>(data)
            }
        })
        .buffered(PIECES_IN_FLIGHT);
    let result = async {
        while let Some(piece) = pieces.next().await {
            let piece = piece?;
            md5.update(&piece);
            if let Some(c) = &mut checksummer {
                c.update(&piece);
            }
            match sealer.as_mut() {
                None => writer.write(piece).await?,
                Some(sealer) => {
                    for package in sealer.push(&piece) {
                        writer.write(package).await?;
                    }
                }
            }
        }
        if let Some(last) = sealer.take().and_then(Sealer::finish) {
            writer.write(last).await?;
        }
        Ok::<(), S3Error>(())
    }
    .await;
    drop(pieces);
    if let Err(e) = result {
        writer.abort().await;
        return Err(e);
    }
    let written = writer.finish().await?;
    Ok(Copied {
        etag: {
            let md5 = hex::encode(md5.finalize());
            match encryption {
                Some(encryption) => encryption.etag(&md5),
                None => md5,
            }
        },
        size: range.len(),
        written,
        checksum: checksummer.map(|c| StoredChecksum {
            algorithm: c.algorithm().as_str().to_string(),
            value: c.finalize_base64(),
        }),
    })
}

/// The algorithm of the copy's checksum: the one asked for, else the source's.
fn copy_checksum_algorithm(
    headers: &HeaderMap,
    source: &ObjectRecord,
) -> Result<Option<ChecksumAlgorithm>, S3Error> {
    if let Some(value) = headers.get("x-amz-checksum-algorithm") {
        let name = value.to_str().unwrap_or("");
        return ChecksumAlgorithm::from_name(name).map(Some).ok_or_else(|| {
            S3Error::invalid_argument("Invalid checksum algorithm")
                .detail("ArgumentName", "x-amz-checksum-algorithm")
        });
    }
    Ok(object_checksum(source).and_then(|(c, _)| ChecksumAlgorithm::from_name(&c.algorithm)))
}

/// CopyObject: within or across buckets; metadata and tags copied or
/// replaced by their directives.
pub async fn copy_object(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    let written = written_access(ctx, bucket, canned_acl(headers))?;
    let replace_metadata = directive(headers, "x-amz-metadata-directive")?;
    let replace_tags = directive(headers, "x-amz-tagging-directive")?;
    let condition = requested_write_condition(headers)?;
    // The copy gets the lock its request asks for, never the source's.
    let (retention, legal_hold) = requested_lock(ctx, bucket, key)?;
    // Nor its encryption: the copy is encrypted as its request asks.
    let requested_encryption = encryption::requested(headers)?;
    let copy_encryption = encryption::for_write(headers, bucket)?;
    let source = source_object(ctx).await?;
    let (at, record) = (&source.at, &source.record);
    let onto_itself = at.bucket == bucket.name && at.key == key;
    // Copying a named version onto its key restores it, as S3 allows.
    if onto_itself && at.version.is_none() && !replace_metadata && requested_encryption.is_none() {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "This copy request is illegal because it is trying to copy an object to itself \
             without changing the object's metadata, storage class, website redirect location \
             or encryption attributes.",
        ));
    }
    if record.size > MAX_OBJECT_UPLOAD {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            format!(
                "The specified copy source is larger than the maximum allowable size for a copy \
                 source: {MAX_OBJECT_UPLOAD}"
            ),
        ));
    }
    let metadata = if replace_metadata {
        ObjectMetadata::from_request(headers)?
    } else {
        ObjectMetadata {
            content_type: record.content_type.clone(),
            headers: record.headers.clone(),
            user_metadata: record.user_metadata.clone(),
        }
    };
    let tags = if replace_tags {
        tags_from_header(headers)?.unwrap_or_default()
    } else {
        record.attributes.tags.clone()
    };
    let now = now_millis();
    let meta = &ctx.state.meta;
    // An SSE-C or SSE-KMS copy is always sealed anew: its key may differ
    // from the source's.
    let same_encryption = match &copy_encryption {
        Some(Requested::Customer(_) | Requested::Kms { .. }) => false,
        wanted => {
            wanted.as_ref().map(Requested::mode)
                == record.attributes.encryption.as_ref().map(|e| e.mode)
        }
    };
    if onto_itself && bucket.versioning.is_none() && same_encryption {
        // Same bytes, new metadata: commit the same blocks again, only while
        // the key still holds the source. (With versioning the copy is a
        // new version, which must not share the old one's blocks.)
        let mut updated = record.clone();
        updated.content_type = metadata.content_type;
        updated.headers = metadata.headers;
        updated.user_metadata = metadata.user_metadata;
        updated.attributes.tags = tags;
        updated.created = now;
        let condition = WriteCondition::SameObject(record.id);
        let commit = meta.call(meta_api::CommitObject {
            record: updated,
            condition: Some(condition),
        });
        commit.await.map_err(|e| match e {
            // Replaced meanwhile, or versioning enabled meanwhile (a version
            // must not share the blocks of the one before it).
            MetaError::PreconditionFailed => S3Error::with_message(
                S3Code::ServiceUnavailable,
                "The object changed while it was being updated; try again.",
            ),
            e => e.into(),
        })?;
        let checksum = object_checksum(record).map(|(c, _)| c);
        let mut response = xml_response(object_documents::copy_object_result(
            &record.etag,
            now,
            checksum.as_ref(),
        ));
        encryption::insert_headers(response.headers_mut(), &record.attributes);
        return Ok(response);
    }
    let replication = chosen_replication(ctx, bucket).await?;
    let algorithm = copy_checksum_algorithm(headers, record)?;
    let new_encryption =
        NewEncryption::prepare(copy_encryption, &ctx.state.meta, &ctx.state.config.region).await?;
    let copied = copy_range(
        ctx,
        &source,
        ByteRange::whole(record.size),
        BodyLayout::Object(replication),
        algorithm,
        new_encryption.as_ref(),
    )
    .await?;
    let groups = copied.written.groups.clone();
    let new_record = ObjectRecord {
        id: ObjectId::random(),
        bucket: bucket.name.clone(),
        key: key.to_string(),
        size: copied.size,
        etag: copied.etag.clone(),
        content_type: metadata.content_type,
        headers: metadata.headers,
        user_metadata: metadata.user_metadata,
        created: now,
        replication: copied.written.replication,
        groups: copied.written.groups,
        inline: copied.written.inline.map(meta_api::InlineBody),
        parts: vec![],
        attributes: ObjectAttributes {
            tags,
            checksum: copied.checksum.clone(),
            owner: written.owner,
            acl: written.acl,
            retention,
            legal_hold,
            encryption: new_encryption.as_ref().map(NewEncryption::for_commit),
            ..Default::default()
        },
        version: Default::default(),
    };
    let mut expiration = http::HeaderMap::new();
    insert_expiration(&mut expiration, bucket, &new_record);
    encryption::insert_headers(&mut expiration, &new_record.attributes);
    let stamp = commit_or_discard(
        meta,
        groups,
        meta.call(meta_api::CommitObject {
            record: new_record,
            condition,
        }),
    )
    .await?;
    let mut response = xml_response(object_documents::copy_object_result(
        &copied.etag,
        now,
        copied.checksum.as_ref(),
    ));
    insert_version_id(response.headers_mut(), bucket, &stamp);
    response.headers_mut().extend(expiration);
    if let Some(source_version) = record.version.id.as_deref() {
        if let Ok(value) = http::HeaderValue::from_str(source_version) {
            response
                .headers_mut()
                .insert("x-amz-copy-source-version-id", value);
        }
    }
    Ok(response)
}

/// UploadPartCopy: a part made of a source object, or of the bytes of its
/// `x-amz-copy-source-range`.
pub async fn upload_part_copy(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    upload_id: &str,
    part_number: u32,
) -> Result<Response, S3Error> {
    encryption::refuse_on_read(&ctx.parts.headers)?;
    let upload = ctx
        .state
        .meta
        .call(meta_api::GetUpload {
            bucket: bucket.name.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
        })
        .await?
        .ok_or_else(|| S3Error::no_such_upload(upload_id))?;
    let source = source_object(ctx).await?;
    let record = &source.record;
    let range = match ctx
        .parts
        .headers
        .get("x-amz-copy-source-range")
        .map(|v| v.to_str().unwrap_or(""))
    {
        Some(value) => copy_source_range(value, record.size)?,
        None => ByteRange::whole(record.size),
    };
    if range.len() > MAX_OBJECT_UPLOAD {
        return Err(S3Error::new(S3Code::EntityTooLarge));
    }
    let algorithm = upload
        .attributes
        .checksum_algorithm
        .as_deref()
        .and_then(ChecksumAlgorithm::from_name);
    let part_encryption = NewEncryption::for_part(&upload.attributes, &ctx.parts.headers)?;
    let copied = copy_range(
        ctx,
        &source,
        range,
        BodyLayout::Part(upload.replication),
        algorithm,
        part_encryption.as_ref(),
    )
    .await?;
    let now = now_millis();
    let groups = copied.written.groups.clone();
    let part = PartRecord {
        upload_id: upload.upload_id,
        number: part_number,
        size: copied.size,
        etag: copied.etag.clone(),
        created: now,
        groups: copied.written.groups,
        checksum: copied.checksum.clone(),
        key_salt: part_encryption.as_ref().and_then(NewEncryption::key_salt),
    };
    let meta = &ctx.state.meta;
    commit_or_discard(meta, groups, meta.call(meta_api::CommitPart { part })).await?;
    let mut response = xml_response(object_documents::copy_part_result(
        &copied.etag,
        now,
        copied.checksum.as_ref(),
    ));
    encryption::insert_headers(response.headers_mut(), &upload.attributes);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_source_forms() {
        let expect = |bucket: &str, key: &str| CopySource {
            bucket: bucket.into(),
            key: key.into(),
            version: None,
        };
        assert_eq!(parse_copy_source("b/k").unwrap(), expect("b", "k"));
        assert_eq!(parse_copy_source("/b/a/b c").unwrap(), expect("b", "a/b c"));
        assert_eq!(
            parse_copy_source("/b/dir%2Fx%20y%3F.txt?versionId=null").unwrap(),
            CopySource {
                version: Some(VersionRef::Null),
                ..expect("b", "dir/x y?.txt")
            }
        );
        for bad in ["b", "/b/", "b/k?versionId=abc", "b/k?foo=bar", "/"] {
            assert_eq!(
                parse_copy_source(bad).unwrap_err().code(),
                S3Code::InvalidArgument,
                "{bad}"
            );
        }
    }

    #[test]
    fn copy_source_range_is_inclusive_and_bounded() {
        assert_eq!(
            copy_source_range("bytes=0-9", 10).unwrap(),
            ByteRange { start: 0, end: 10 }
        );
        assert_eq!(
            copy_source_range("bytes=5-5", 10).unwrap(),
            ByteRange { start: 5, end: 6 }
        );
        let past_the_end = copy_source_range("bytes=0-10", 10).unwrap_err();
        assert_eq!(past_the_end.code(), S3Code::InvalidArgument);
        assert!(past_the_end.message().contains("source object of size: 10"));
        for bad in ["0-1", "bytes=3-1", "bytes=-5", "bytes=a-b", "bytes=1-"] {
            assert_eq!(
                copy_source_range(bad, 10).unwrap_err().code(),
                S3Code::InvalidArgument,
                "{bad}"
            );
        }
    }

    #[test]
    fn directives_are_copy_or_replace() {
        let mut headers = HeaderMap::new();
        assert!(!directive(&headers, "x-amz-metadata-directive").unwrap());
        headers.insert(
            "x-amz-metadata-directive",
            http::HeaderValue::from_static("REPLACE"),
        );
        assert!(directive(&headers, "x-amz-metadata-directive").unwrap());
        headers.insert(
            "x-amz-metadata-directive",
            http::HeaderValue::from_static("MOVE"),
        );
        assert!(directive(&headers, "x-amz-metadata-directive").is_err());
    }
}
