//! Object operations: PutObject, GetObject, HeadObject, DeleteObject,
//! DeleteObjects.

use super::acl::{canned_acl, written_access};
use super::lifecycle::insert_expiration;
use super::object_lock::{bypass_governance, insert_lock_headers, requested_lock};
use super::versions::{insert_id, insert_new_version_id, insert_version_id, named_id};
use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::conditional::WriteConditionError;
use crate::conditional::{self, Precondition};
use crate::download;
use crate::encryption::{self, BodyKey, KeyFor, NewEncryption};
use crate::error::{S3Code, S3Error, DELETE_MARKER_HEADER};
use crate::headers::{self, etag_value, object_headers, ObjectMetadata};
use crate::object_checksum::object_checksum;
use crate::params::ReadParams;
use crate::range::{self, ByteRange};
use crate::request_body::{
    commit_or_discard, open_object_body, read_checked_document, store_body, StoredBody,
};
use crate::router::MAX_KEY_LEN;
use crate::tags::{tags_from_header, TAG_COUNT_HEADER};
use crate::telemetry::{self, PutStage};
use crate::xml::documents::{self, DeleteOutcome};
use crate::xml::parse::{parse_delete_objects, DELETE_OBJECTS_BODY_LIMIT};
use axum::body::Body;
use axum::response::Response;
use block_client::KeyWriter;
use futures::{stream, StreamExt};
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_RANGE, ETAG, LAST_MODIFIED, RANGE};
use http::StatusCode;
use meta_api::naming::{parse_version_id, VersionRef};
use meta_api::now_millis;
use meta_api::{
    BucketRecord, InlineBody, ObjectAttributes, ObjectRecord, StoredChecksum, VersionStamp,
    WriteCondition,
};
use proto::{ObjectId, ReplicationConfig};
use std::time::Instant;

/// The replication of a new object: the request's header, else the bucket's
/// (or the cluster's) default.
pub(super) async fn chosen_replication(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
) -> Result<ReplicationConfig, S3Error> {
    match headers::replication(&ctx.parts.headers)? {
        Some(replication) => Ok(replication),
        None => Ok(ctx
            .state
            .meta
            .call(meta_api::DefaultReplication {
                bucket: bucket.name.to_string(),
            })
            .await?),
    }
}

/// How a stored body's bytes are laid out.
pub(super) enum BodyLayout {
    /// A whole object: one of at most `inline_max` bytes is kept for its
    /// record; an EC stripe wider than a longer body gets a cell fitted to
    /// it (see `ReplicationConfig::fitted_to`).
    Object(ReplicationConfig),
    /// A part: every part of an upload keeps the upload's layout, which the
    /// completed object records once for all of them.
    Part(ReplicationConfig),
}

impl BodyLayout {
    /// The writer of a body of `plain_len` bytes, sealed when `encrypted`.
    pub(super) fn writer(
        self,
        ctx: &RequestContext<'_>,
        plain_len: u64,
        encrypted: bool,
    ) -> KeyWriter {
        match self {
            BodyLayout::Object(replication) => {
                let stored = if encrypted {
                    sse::sealed_len(plain_len)
                } else {
                    plain_len
                };
                let inline_max = ctx.state.config.inline_max;
                if stored <= inline_max as u64 {
                    return ctx.state.store.small_object_writer(replication, inline_max);
                }
                let fitted = ctx.state.store.fitted(replication, stored);
                if fitted != replication {
                    crate::telemetry::count_fitted_object();
                }
                ctx.state.store.writer(fitted)
            }
            BodyLayout::Part(replication) => ctx.state.store.writer(replication),
        }
    }
}

/// Streams the request body into a new key laid out as `layout` says,
/// checking Content-MD5 before anything is committed; the ETag is the
/// body's MD5, except under a customer key (see [`NewEncryption::etag`]).
pub(super) async fn store_request_body(
    ctx: &RequestContext<'_>,
    layout: BodyLayout,
    body: Body,
    encryption: Option<&NewEncryption>,
) -> Result<StoredBody, S3Error> {
    let headers = &ctx.parts.headers;
    let expected_md5 = headers::content_md5(headers)?;
    let stream = open_object_body(&ctx.request, headers, body)?;
    // Declared and checked by open_object_body.
    let plain_len = stream.declared_length().unwrap_or(0);
    let writer = layout.writer(ctx, plain_len, encryption.is_some());
    // Held until the body is stored; nothing of it is read before.
    let waited = Instant::now();
    let _slot = ctx.state.uploads.acquire(stream.declared_length()).await?;
    telemetry::put_stage(PutStage::Slot, waited.elapsed());
    let sealer = encryption.map(NewEncryption::sealer);
    let streamed = Instant::now();
    let mut stored = store_body(stream, writer, expected_md5, sealer).await?;
    telemetry::put_stage(PutStage::Body, streamed.elapsed());
    if let Some(encryption) = encryption {
        stored.etag = encryption.etag(&stored.etag);
    }
    Ok(stored)
}

/// The condition of a conditional write (If-None-Match: *, If-Match), which
/// meta checks atomically with the commit.
pub(super) fn requested_write_condition(
    headers: &http::HeaderMap,
) -> Result<Option<WriteCondition>, S3Error> {
    crate::conditional::write_condition(headers).map_err(|e| match e {
        WriteConditionError::IfNoneMatchNotStar => {
            S3Error::not_implemented("If-None-Match with an ETag on a write (only * is supported)")
        }
        WriteConditionError::Both => {
            S3Error::not_implemented("If-Match together with If-None-Match on a write")
        }
    })
}

/// The checksum a stored body verified, as meta keeps it.
pub(super) fn stored_checksum(stored: &StoredBody) -> Option<StoredChecksum> {
    stored
        .checksum
        .as_ref()
        .map(|(algorithm, value)| StoredChecksum {
            algorithm: algorithm.as_str().to_string(),
            value: value.clone(),
        })
}

/// PutObject: stores the body, then makes it visible in meta (if the
/// request's write condition holds at that moment).
pub async fn put_object(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: String,
    body: Body,
) -> Result<Response, S3Error> {
    let request_headers = &ctx.parts.headers;
    let metadata = ObjectMetadata::from_request(request_headers)?;
    let written = written_access(ctx, bucket, canned_acl(request_headers))?;
    let tags = tags_from_header(request_headers)?.unwrap_or_default();
    let condition = requested_write_condition(request_headers)?;
    let (retention, legal_hold) = requested_lock(ctx, bucket, &key)?;
    let encryption = NewEncryption::prepare(
        encryption::for_write(request_headers, bucket)?,
        &ctx.state.meta,
        &ctx.state.config.region,
    )
    .await?;
    let replication = chosen_replication(ctx, bucket).await?;
    let layout = BodyLayout::Object(replication);
    let stored = store_request_body(ctx, layout, body, encryption.as_ref()).await?;
    let checksum = stored_checksum(&stored);
    let groups = stored.written.groups.clone();
    let record = ObjectRecord {
        id: ObjectId::random(),
        bucket: bucket.name.clone(),
        key,
        size: stored.size,
        etag: stored.etag,
        content_type: metadata.content_type,
        headers: metadata.headers,
        user_metadata: metadata.user_metadata,
        created: now_millis(),
        replication: stored.written.replication,
        groups: stored.written.groups,
        inline: stored.written.inline.map(InlineBody),
        parts: vec![],
        attributes: ObjectAttributes {
            tags,
            checksum: checksum.clone(),
            owner: written.owner,
            acl: written.acl,
            retention,
            legal_hold,
            encryption: encryption.as_ref().map(NewEncryption::for_commit),
            ..Default::default()
        },
        version: Default::default(),
    };
    let etag = etag_value(&record.etag);
    let mut response = empty_response(StatusCode::OK);
    insert_expiration(response.headers_mut(), bucket, &record);
    encryption::insert_headers(response.headers_mut(), &record.attributes);
    let meta = &ctx.state.meta;
    if crate::planted::early_ack() {
        let meta = meta.clone();
        tokio::spawn(async move {
            let commit = meta.call(meta_api::CommitObject { record, condition });
            let _ = commit_or_discard(&meta, groups, commit).await;
        });
        response.headers_mut().insert(ETAG, etag);
        return Ok(response);
    }
    let committing = Instant::now();
    let stamp = commit_or_discard(
        meta,
        groups,
        meta.call(meta_api::CommitObject { record, condition }),
    )
    .await?;
    telemetry::put_stage(PutStage::Commit, committing.elapsed());
    response.headers_mut().insert(ETAG, etag);
    insert_new_version_id(response.headers_mut(), &stamp);
    if let Some(checksum) = &checksum {
        headers::insert_checksum(response.headers_mut(), checksum, None);
    }
    Ok(response)
}

fn invalid_range(value: &str, size: u64) -> S3Error {
    S3Error::new(S3Code::InvalidRange)
        .header(CONTENT_RANGE, format!("bytes */{size}"))
        .detail("RangeRequested", value.to_string())
        .detail("ActualObjectSize", size.to_string())
}

/// The bytes to send and whether the answer is partial (206).
fn select_range(
    record: &ObjectRecord,
    params: &ReadParams,
    range_header: Option<&str>,
) -> Result<(ByteRange, bool), S3Error> {
    let size = record.size;
    if let Some(number) = params.part_number {
        if range_header.is_some() {
            return Err(S3Error::with_message(
                S3Code::InvalidRequest,
                "Cannot specify both Range header and partNumber query parameter",
            ));
        }
        if record.parts.is_empty() {
            // A single PUT is one part, as in S3.
            return match number {
                1 => Ok((ByteRange::whole(size), false)),
                _ => Err(S3Error::new(S3Code::InvalidPartNumber)),
            };
        }
        let index = (number - 1) as usize;
        let part = record
            .parts
            .get(index)
            .ok_or_else(|| S3Error::new(S3Code::InvalidPartNumber))?;
        let start: u64 = record.parts[..index].iter().map(|p| p.size).sum();
        let range = ByteRange {
            start,
            end: start + part.size,
        };
        return Ok((range, !range.is_empty()));
    }
    let Some(value) = range_header else {
        return Ok((ByteRange::whole(size), false));
    };
    match range::parse(value) {
        None => Ok((ByteRange::whole(size), false)),
        Some(spec) => spec
            .resolve(size)
            .map(|range| (range, true))
            .map_err(|_| invalid_range(value, size)),
    }
}

fn not_modified(record: &ObjectRecord) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = object_headers(record);
    for name in [ETAG, LAST_MODIFIED] {
        if let Some(value) = headers.get(&name) {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

/// The checksum headers of a read with checksum mode: the object's for a
/// whole-object read, a part's for `partNumber` (with the object's
/// checksum type, as S3 answers), none for a Range.
fn insert_read_checksum(
    headers: &mut http::HeaderMap,
    record: &ObjectRecord,
    params: &ReadParams,
    partial: bool,
) {
    match params.part_number {
        Some(number) if !record.parts.is_empty() => {
            let part = record.parts.iter().find(|p| p.number == number);
            if let Some(checksum) = part.and_then(|p| p.checksum.as_ref()) {
                let kind = object_checksum(record).map(|(_, kind)| kind);
                headers::insert_checksum(headers, checksum, kind);
            }
        }
        _ if partial => {}
        _ => {
            if let Some((checksum, kind)) = object_checksum(record) {
                headers::insert_checksum(headers, &checksum, Some(kind));
            }
        }
    }
}

/// GetObject and HeadObject: headers, Range / partNumber, conditional
/// requests, and for GET the streamed body.
pub async fn get_object(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
    params: ReadParams,
    head: bool,
) -> Result<Response, S3Error> {
    if ctx.request.identity.anonymous && !params.overrides.is_empty() {
        // As S3: a public object's link cannot be made to answer with
        // headers of a stranger's choosing.
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "Request specific response headers cannot be used for anonymous GET requests.",
        ));
    }
    encryption::refuse_on_read(&ctx.parts.headers)?;
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    let request_headers = &ctx.parts.headers;
    // HEAD too: an SSE-C object answers only to its key.
    let body_key = BodyKey::of(&record, request_headers, KeyFor::Object)?;
    match conditional::evaluate(request_headers, &record.etag, record.created) {
        Precondition::Proceed => {}
        Precondition::NotModified => return Ok(not_modified(&record)),
        Precondition::Failed => return Err(S3Error::new(S3Code::PreconditionFailed)),
    }
    let range_header = request_headers.get(RANGE).and_then(|v| v.to_str().ok());
    let (range, partial) = select_range(&record, &params, range_header)?;

    let mut headers = object_headers(&record);
    headers.insert(CONTENT_LENGTH, HeaderValue::from(range.len()));
    if partial {
        if let Ok(value) = HeaderValue::from_str(&range.content_range(record.size)) {
            headers.insert(CONTENT_RANGE, value);
        }
    }
    if params.part_number.is_some() && !record.parts.is_empty() {
        headers.insert(
            "x-amz-mp-parts-count",
            HeaderValue::from(record.parts.len()),
        );
    }
    for (name, value) in &params.overrides {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name.clone(), value);
        }
    }
    if !record.attributes.tags.is_empty() {
        headers.insert(
            TAG_COUNT_HEADER,
            HeaderValue::from(record.attributes.tags.len()),
        );
    }
    if headers::checksum_mode_enabled(request_headers) {
        insert_read_checksum(&mut headers, &record, &params, partial);
    }
    insert_version_id(&mut headers, bucket, &record.version);
    if version.is_none() {
        insert_expiration(&mut headers, bucket, &record);
    }
    insert_lock_headers(&mut headers, &record.attributes);
    encryption::insert_headers(&mut headers, &record.attributes);
    let body = if head {
        Body::empty()
    } else {
        download::object_body(
            ctx.state.readers.get_or_open(&ctx.state.store, &record),
            range,
            &ctx.state.get_memory,
            body_key.as_ref(),
        )
        .await?
    };
    let mut response = Response::new(body);
    *response.status_mut() = if partial {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    *response.headers_mut() = headers;
    Ok(response)
}

/// DeleteObject: 204 whether or not the key existed, as in S3; with
/// versioning, names the delete marker made or the version removed.
pub async fn delete_object(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    let deleted = ctx
        .state
        .meta
        .call(meta_api::DeleteObject {
            bucket: bucket.name.to_string(),
            key: key.to_string(),
            version: version.clone(),
            bypass_governance: bypass_governance(ctx, bucket, key)?,
            marker_owner: marker_owner(ctx, bucket),
        })
        .await?;
    let mut response = empty_response(StatusCode::NO_CONTENT);
    let headers = response.headers_mut();
    match (&deleted.version, &version) {
        (Some(stamp), _) => {
            insert_id(headers, stamp.id_or_null());
            if stamp.delete_marker {
                headers.insert(DELETE_MARKER_HEADER, HeaderValue::from_static("true"));
            }
        }
        // A version that was not there: S3 names it all the same.
        (None, Some(named)) => insert_id(headers, named_id(named)),
        (None, None) => {}
    }
    Ok(response)
}

/// Who owns a delete marker the caller makes: the caller, unless it is the
/// bucket owner (or anonymous, when the bucket owner owns it too).
fn marker_owner(ctx: &RequestContext<'_>, bucket: &BucketRecord) -> Option<String> {
    let identity = ctx.identity();
    (!identity.anonymous && identity.user != bucket.owner).then(|| identity.user.clone())
}

/// Deletes run concurrently per DeleteObjects request.
const DELETES_IN_FLIGHT: usize = 16;

/// DeleteObjects: deletes up to 1,000 keys, reporting each; a missing key
/// counts as deleted, as in S3. Content-MD5 is checked when sent.
pub async fn delete_objects(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    let document = read_checked_document(
        &ctx.request,
        headers,
        body,
        DELETE_OBJECTS_BODY_LIMIT,
        false,
    )
    .await?;
    let request = parse_delete_objects(&document)?;
    // A bypass header the bucket cannot honour refuses the whole request.
    bypass_governance(ctx, bucket, "")?;
    let results: Vec<Result<Option<VersionStamp>, S3Error>> = stream::iter(request.objects.clone())
        .map(|target| {
            let meta = ctx.state.meta.clone();
            let action = match target.version_id {
                Some(_) => access::Action::DeleteObjectVersion,
                None => access::Action::DeleteObject,
            };
            let bypass = bypass_governance(ctx, bucket, &target.key);
            let owner = marker_owner(ctx, bucket);
            let allowed = ctx.allowed(action, bucket, None, Some(&target.key));
            let bucket = bucket.name.clone();
            async move {
                if target.key.len() > MAX_KEY_LEN {
                    return Err(S3Error::new(S3Code::KeyTooLongError));
                }
                if !allowed? {
                    return Err(S3Error::new(S3Code::AccessDenied));
                }
                let version = match target.version_id.as_deref().map(parse_version_id) {
                    Some(Ok(version)) => Some(version),
                    // S3 reports a malformed id as a version it has not got.
                    Some(Err(_)) => return Err(S3Error::new(S3Code::NoSuchVersion)),
                    None => None,
                };
                let request = meta_api::DeleteObject {
                    bucket,
                    key: target.key,
                    version,
                    bypass_governance: bypass?,
                    marker_owner: owner,
                };
                Ok(meta.call(request).await?.version)
            }
        })
        .buffered(DELETES_IN_FLIGHT)
        .collect()
        .await;

    let outcomes: Vec<DeleteOutcome<'_>> = request
        .objects
        .iter()
        .zip(&results)
        .map(|(target, result)| {
            let key = target.key.as_str();
            let version_id = target.version_id.as_deref();
            match result {
                Ok(stamp) => DeleteOutcome::Deleted {
                    key,
                    version_id,
                    marker: stamp
                        .as_ref()
                        .filter(|s| s.delete_marker)
                        .map(VersionStamp::id_or_null),
                },
                Err(e) => {
                    // Answered inside the document, not as the response: logged here.
                    e.log(&format!("/{}/{key}", bucket.name));
                    DeleteOutcome::Failed {
                        key,
                        version_id,
                        code: e.code().as_str(),
                        message: e.message(),
                    }
                }
            }
        })
        .collect();
    Ok(xml_response(documents::delete_result(
        &outcomes,
        request.quiet,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::PartSummary;

    fn record(size: u64, parts: &[u64]) -> ObjectRecord {
        ObjectRecord {
            version: Default::default(),
            id: ObjectId::random(),
            bucket: "b".into(),
            key: "k".into(),
            size,
            etag: "e".into(),
            content_type: None,
            headers: Default::default(),
            user_metadata: Default::default(),
            created: 0,
            replication: ReplicationConfig::REPLICATED_1,
            groups: vec![],
            inline: None,
            parts: parts
                .iter()
                .enumerate()
                .map(|(i, &size)| PartSummary {
                    number: i as u32 + 1,
                    size,
                    etag: "p".into(),
                    checksum: None,
                    key_salt: None,
                })
                .collect(),
            attributes: Default::default(),
        }
    }

    fn select(
        rec: &ObjectRecord,
        part: Option<u32>,
        range: Option<&str>,
    ) -> Result<(u64, u64, bool), S3Code> {
        let params = ReadParams {
            part_number: part,
            overrides: vec![],
        };
        select_range(rec, &params, range)
            .map(|(r, partial)| (r.start, r.end, partial))
            .map_err(|e| e.code())
    }

    #[test]
    fn range_header_selects_bytes_as_s3_does() {
        let rec = record(10, &[]);
        assert_eq!(select(&rec, None, None), Ok((0, 10, false)));
        assert_eq!(select(&rec, None, Some("bytes=2-4")), Ok((2, 5, true)));
        assert_eq!(select(&rec, None, Some("bytes=-3")), Ok((7, 10, true)));
        assert_eq!(select(&rec, None, Some("bytes=8-")), Ok((8, 10, true)));
        // HDDS-16336: an inverted range is ignored, the whole object is sent with 200.
        assert_eq!(select(&rec, None, Some("bytes=5-2")), Ok((0, 10, false)));
        assert_eq!(
            select(&rec, None, Some("bytes=0-1,4-5")),
            Ok((0, 10, false))
        );
        assert_eq!(
            select(&rec, None, Some("bytes=10-")),
            Err(S3Code::InvalidRange)
        );
        assert_eq!(
            select(&rec, None, Some("bytes=-0")),
            Err(S3Code::InvalidRange)
        );
    }

    #[test]
    fn unsatisfiable_range_names_the_size() {
        let err = select_range(
            &record(10, &[]),
            &ReadParams::default(),
            Some("bytes=20-30"),
        )
        .unwrap_err();
        let resp = err.into_response("/b/k", &crate::telemetry::RequestId::random(), false);
        assert_eq!(resp.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(resp.headers()[CONTENT_RANGE], "bytes */10");
    }

    #[test]
    fn part_number_selects_a_part() {
        let rec = record(12, &[5, 5, 2]);
        assert_eq!(select(&rec, Some(1), None), Ok((0, 5, true)));
        assert_eq!(select(&rec, Some(3), None), Ok((10, 12, true)));
        assert_eq!(select(&rec, Some(4), None), Err(S3Code::InvalidPartNumber));
        let single = record(7, &[]);
        assert_eq!(select(&single, Some(1), None), Ok((0, 7, false)));
        assert_eq!(
            select(&single, Some(2), None),
            Err(S3Code::InvalidPartNumber)
        );
    }
}
