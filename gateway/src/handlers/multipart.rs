//! Multipart uploads: CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload, AbortMultipartUpload, ListParts,
//! ListMultipartUploads.

use super::acl::{canned_acl, written_access};
use super::lifecycle::{insert_abort_date, insert_expiration};
use super::object::{
    chosen_replication, requested_write_condition, store_request_body, stored_checksum, BodyLayout,
};
use super::object_lock::requested_lock;
use super::versions::insert_new_version_id;
use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::auth::ChecksumAlgorithm;
use crate::encryption::{self, NewEncryption};
use crate::error::S3Code;
use crate::error::S3Error;
use crate::headers::{etag_value, ObjectMetadata};
use crate::object_checksum::{COMPOSITE, FULL_OBJECT};
use crate::params::{ListPartsParams, ListUploadsParams};
use crate::request_body::{commit_or_discard, read_small_body};
use crate::tags::tags_from_header;
use crate::xml::documents::{self, ListPartsDoc, ListUploadsDoc};
use crate::xml::object_documents;
use crate::xml::parse::{parse_complete_upload, COMPLETE_UPLOAD_BODY_LIMIT};
use axum::body::Body;
use axum::response::Response;
use http::header::HeaderValue;
use http::header::{ETAG, HOST};
use http::StatusCode;
use meta_api::now_millis;
use meta_api::ObjectAttributes;
use meta_api::{BucketRecord, PartRecord, PartsPage, UploadQuery, UploadRecord};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// A fresh upload id: 32 letters and digits (190 bits), unguessable. Never
/// `-` or `_`: an id beginning with `-` reads as an option to aws-cli
/// (`--upload-id -x...` fails before any request is sent).
fn new_upload_id() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), 32)
}

/// The checksum algorithm and type an upload asks for
/// (`x-amz-checksum-algorithm`, `x-amz-checksum-type`), checked as S3 does:
/// FULL_OBJECT only for CRCs, COMPOSITE not for CRC64NVME.
pub fn upload_checksum_settings(
    headers: &http::HeaderMap,
) -> Result<(Option<ChecksumAlgorithm>, Option<&'static str>), S3Error> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or(""));
    let algorithm = match text("x-amz-checksum-algorithm") {
        None => None,
        Some(name) => Some(ChecksumAlgorithm::from_name(name).ok_or_else(|| {
            S3Error::invalid_argument("Checksum algorithm provided is unsupported.")
                .detail("ArgumentName", "x-amz-checksum-algorithm")
        })?),
    };
    let kind = match text("x-amz-checksum-type") {
        None => None,
        Some(t) if t.eq_ignore_ascii_case(FULL_OBJECT) => Some(FULL_OBJECT),
        Some(t) if t.eq_ignore_ascii_case(COMPOSITE) => Some(COMPOSITE),
        Some(_) => {
            return Err(S3Error::invalid_argument(
                "Value for x-amz-checksum-type header is invalid.",
            )
            .detail("ArgumentName", "x-amz-checksum-type"))
        }
    };
    let refuse = |message: String| Err(S3Error::with_message(S3Code::InvalidRequest, message));
    match (algorithm, kind) {
        (None, Some(_)) => refuse(
            "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header."
                .into(),
        ),
        (Some(a @ (ChecksumAlgorithm::Sha1 | ChecksumAlgorithm::Sha256)), Some(FULL_OBJECT)) => {
            refuse(format!(
                "The FULL_OBJECT checksum type cannot be used with the {} checksum algorithm.",
                a.as_str().to_ascii_lowercase()
            ))
        }
        (Some(ChecksumAlgorithm::Crc64Nvme), Some(COMPOSITE)) => refuse(
            "The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm."
                .into(),
        ),
        (algorithm, kind) => Ok((
            algorithm,
            kind.or(algorithm.map(crate::object_checksum::default_type)),
        )),
    }
}

/// CreateMultipartUpload: records the upload with the object's future
/// metadata, tags, checksum settings and replication.
pub async fn create_upload(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: String,
) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    let encryption = NewEncryption::prepare(
        encryption::for_write(headers, bucket)?,
        &ctx.state.meta,
        &ctx.state.config.region,
    )
    .await?;
    let metadata = ObjectMetadata::from_request(headers)?;
    let written = written_access(ctx, bucket, canned_acl(headers))?;
    let tags = tags_from_header(headers)?.unwrap_or_default();
    let (algorithm, kind) = upload_checksum_settings(headers)?;
    let replication = chosen_replication(ctx, bucket).await?;
    let (retention, legal_hold) = requested_lock(ctx, bucket, &key)?;
    let record = UploadRecord {
        upload_id: new_upload_id(),
        bucket: bucket.name.clone(),
        key,
        owner: ctx.identity().user.clone(),
        created: now_millis(),
        content_type: metadata.content_type,
        headers: metadata.headers,
        user_metadata: metadata.user_metadata,
        replication,
        attributes: ObjectAttributes {
            tags,
            checksum: None,
            checksum_algorithm: algorithm.map(|a| a.as_str().to_string()),
            checksum_type: kind.map(str::to_string),
            upload_id: None,
            owner: written.owner,
            acl: written.acl,
            retention,
            legal_hold,
            encryption: encryption.as_ref().map(NewEncryption::for_commit),
        },
    };
    let document = documents::initiate_upload(&record.bucket, &record.key, &record.upload_id);
    let mut response = xml_response(document);
    insert_abort_date(response.headers_mut(), bucket, &record.key, record.created);
    encryption::insert_headers(response.headers_mut(), &record.attributes);
    ctx.state
        .meta
        .call(meta_api::CreateUpload { record })
        .await?;
    if let (Some(algorithm), Some(kind)) = (algorithm, kind) {
        let out = response.headers_mut();
        out.insert(
            "x-amz-checksum-algorithm",
            HeaderValue::from_static(algorithm.as_str()),
        );
        out.insert("x-amz-checksum-type", HeaderValue::from_static(kind));
    }
    Ok(response)
}

async fn existing_upload(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
    upload_id: &str,
) -> Result<UploadRecord, S3Error> {
    ctx.state
        .meta
        .call(meta_api::GetUpload {
            bucket: bucket.name.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
        })
        .await?
        .ok_or_else(|| S3Error::no_such_upload(upload_id))
}

/// UploadPart: stores the part with the upload's replication; a re-upload of
/// the same number replaces it.
pub async fn upload_part(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    upload_id: &str,
    part_number: u32,
    body: Body,
) -> Result<Response, S3Error> {
    encryption::refuse_on_read(&ctx.parts.headers)?;
    let upload = existing_upload(ctx, bucket, key, upload_id).await?;
    let part_encryption = NewEncryption::for_part(&upload.attributes, &ctx.parts.headers)?;
    let layout = BodyLayout::Part(upload.replication);
    let stored = store_request_body(ctx, layout, body, part_encryption.as_ref()).await?;
    let checksum = stored_checksum(&stored);
    let groups = stored.written.groups.clone();
    let etag = etag_value(&stored.etag);
    let part = PartRecord {
        upload_id: upload.upload_id,
        number: part_number,
        size: stored.size,
        etag: stored.etag,
        created: now_millis(),
        groups: stored.written.groups,
        checksum: checksum.clone(),
        key_salt: part_encryption.as_ref().and_then(NewEncryption::key_salt),
    };
    let meta = &ctx.state.meta;
    commit_or_discard(meta, groups, meta.call(meta_api::CommitPart { part })).await?;
    let mut response = empty_response(StatusCode::OK);
    response.headers_mut().insert(ETAG, etag);
    encryption::insert_headers(response.headers_mut(), &upload.attributes);
    if let Some(checksum) = &checksum {
        crate::headers::insert_checksum(response.headers_mut(), checksum, None);
    }
    Ok(response)
}

/// Characters escaped in the key of the Location URL.
const LOCATION_KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// CompleteMultipartUpload: meta checks the parts (InvalidPart,
/// InvalidPartOrder, EntityTooSmall) and commits the object.
pub async fn complete_upload(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    upload_id: &str,
    body: Body,
) -> Result<Response, S3Error> {
    // On CompleteMultipartUpload an `x-amz-checksum-*` header is the
    // object's checksum, not the XML body's.
    let claimed = claimed_object_checksum(&ctx.parts.headers);
    let mut body_headers = ctx.parts.headers.clone();
    for algorithm in ChecksumAlgorithm::ALL {
        body_headers.remove(algorithm.header_name());
    }
    let document = read_small_body(
        &ctx.request,
        &body_headers,
        body,
        COMPLETE_UPLOAD_BODY_LIMIT,
    )
    .await?;
    let parts = parse_complete_upload(&document)?;
    if let Some((algorithm, value)) = &claimed {
        check_claimed_checksum(ctx, &bucket.name, key, upload_id, &parts, *algorithm, value)
            .await?;
    }
    let condition = requested_write_condition(&ctx.parts.headers)?;
    let object = ctx
        .state
        .meta
        .call(meta_api::CompleteUpload {
            bucket: bucket.name.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
            parts,
            condition,
        })
        .await?;
    let host = ctx
        .parts
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let location = format!(
        "http://{host}/{}/{}",
        bucket.name,
        utf8_percent_encode(key, LOCATION_KEY)
    );
    let document = match crate::object_checksum::object_checksum(&object) {
        Some((checksum, kind)) => object_documents::complete_upload_with_checksum(
            &location,
            &bucket.name,
            key,
            &object.etag,
            &checksum,
            kind,
        ),
        None => documents::complete_upload(&location, &bucket.name, key, &object.etag),
    };
    let mut response = xml_response(document);
    insert_new_version_id(response.headers_mut(), &object.version);
    insert_expiration(response.headers_mut(), bucket, &object);
    encryption::insert_headers(response.headers_mut(), &object.attributes);
    Ok(response)
}

/// The object checksum a CompleteMultipartUpload names in an
/// `x-amz-checksum-<alg>` header, if it names one.
fn claimed_object_checksum(headers: &http::HeaderMap) -> Option<(ChecksumAlgorithm, String)> {
    ChecksumAlgorithm::ALL.into_iter().find_map(|algorithm| {
        let value = headers.get(algorithm.header_name())?;
        Some((algorithm, value.to_str().unwrap_or_default().to_string()))
    })
}

/// Checks the object checksum a client claims for the completion of
/// `upload_id` from `parts` against the one the parts make, before
/// anything is committed: BadDigest when they differ, as S3 answers.
/// Parts meta will refuse anyway (unknown, another ETag) are left to it.
async fn check_claimed_checksum(
    ctx: &RequestContext<'_>,
    bucket: &str,
    key: &str,
    upload_id: &str,
    parts: &[meta_api::CompletedPart],
    algorithm: ChecksumAlgorithm,
    claimed: &str,
) -> Result<(), S3Error> {
    let meta = &ctx.state.meta;
    let Some(upload) = meta
        .call(meta_api::GetUpload {
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
        })
        .await?
    else {
        return Ok(());
    };
    let mut stored: Vec<PartRecord> = Vec::new();
    loop {
        let page: PartsPage = meta
            .call(meta_api::ListParts {
                upload_id: upload_id.to_string(),
                after_part: stored.last().map_or(0, |p| p.number),
                max_parts: 1000,
            })
            .await?;
        stored.extend(page.parts);
        if !page.is_truncated {
            break;
        }
    }
    // ListParts answers in part-number order: up to 10,000 parts are found
    // by halving, not by a scan each.
    let mut chosen = Vec::with_capacity(parts.len());
    for part in parts {
        let etag = part.etag.trim_matches('"');
        match stored.binary_search_by_key(&part.number, |p| p.number) {
            Ok(i) if stored[i].etag.eq_ignore_ascii_case(etag) => chosen.push(&stored[i]),
            _ => return Ok(()),
        }
    }
    let computed = crate::object_checksum::parts_checksum(
        upload.attributes.checksum_type.as_deref(),
        chosen.iter().map(|p| (p.checksum.as_ref(), p.size)),
    );
    match computed {
        Some((checksum, kind))
            if ChecksumAlgorithm::from_name(&checksum.algorithm) == Some(algorithm)
                && crate::object_checksum::names_checksum(claimed, &checksum.value, kind) =>
        {
            Ok(())
        }
        _ => Err(S3Error::with_message(
            S3Code::BadDigest,
            algorithm.mismatch_message(),
        )),
    }
}

/// AbortMultipartUpload: 204; the parts' blocks are freed by meta.
pub async fn abort_upload(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    upload_id: &str,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .call(meta_api::AbortUpload {
            bucket: bucket.name.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// ListParts: pages by part-number-marker and max-parts.
pub async fn list_parts(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    upload_id: &str,
    params: ListPartsParams,
) -> Result<Response, S3Error> {
    let upload = existing_upload(ctx, bucket, key, upload_id).await?;
    let page = if params.max_parts == 0 {
        PartsPage::default()
    } else {
        let request = meta_api::ListParts {
            upload_id: upload_id.to_string(),
            after_part: params.part_number_marker,
            max_parts: params.max_parts,
        };
        ctx.state.meta.call(request).await?
    };
    let mut response = xml_response(documents::list_parts(&ListPartsDoc {
        upload: &upload,
        part_number_marker: params.part_number_marker,
        max_parts: params.max_parts,
        is_truncated: page.is_truncated,
        parts: &page.parts,
    }));
    insert_abort_date(response.headers_mut(), bucket, key, upload.created);
    Ok(response)
}

/// ListMultipartUploads: one page of the uploads in progress in the bucket,
/// with prefix, markers and delimiter roll-up done by meta.
pub async fn list_uploads(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    params: ListUploadsParams,
) -> Result<Response, S3Error> {
    let query = UploadQuery {
        prefix: params.prefix.clone(),
        key_marker: params.key_marker.clone(),
        upload_id_marker: params.upload_id_marker.clone(),
        delimiter: params.delimiter.clone(),
        max_uploads: params.max_uploads,
    };
    let page = ctx
        .state
        .meta
        .call(meta_api::ListUploads {
            bucket: bucket.name.to_string(),
            query,
        })
        .await?;
    Ok(xml_response(documents::list_uploads(&ListUploadsDoc {
        bucket: &bucket.name,
        prefix: &params.prefix,
        delimiter: params.delimiter.as_deref(),
        key_marker: params.key_marker.as_deref().unwrap_or(""),
        upload_id_marker: params.upload_id_marker.as_deref().unwrap_or(""),
        max_uploads: params.max_uploads,
        url_encode: params.url_encode,
        page: &page,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_checksum_settings_follow_s3_rules() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut map = http::HeaderMap::new();
            for (n, v) in pairs {
                map.insert(*n, HeaderValue::from_static(v));
            }
            upload_checksum_settings(&map)
        };
        assert_eq!(with(&[]).unwrap(), (None, None));
        assert_eq!(
            with(&[("x-amz-checksum-algorithm", "CRC64NVME")]).unwrap(),
            (Some(ChecksumAlgorithm::Crc64Nvme), Some(FULL_OBJECT))
        );
        assert_eq!(
            with(&[("x-amz-checksum-algorithm", "crc32c")]).unwrap(),
            (Some(ChecksumAlgorithm::Crc32c), Some(COMPOSITE))
        );
        assert_eq!(
            with(&[
                ("x-amz-checksum-algorithm", "CRC32"),
                ("x-amz-checksum-type", "FULL_OBJECT")
            ])
            .unwrap(),
            (Some(ChecksumAlgorithm::Crc32), Some(FULL_OBJECT))
        );
        for bad in [
            &[("x-amz-checksum-type", "COMPOSITE")][..],
            &[
                ("x-amz-checksum-algorithm", "SHA256"),
                ("x-amz-checksum-type", "FULL_OBJECT"),
            ],
            &[
                ("x-amz-checksum-algorithm", "CRC64NVME"),
                ("x-amz-checksum-type", "COMPOSITE"),
            ],
        ] {
            assert_eq!(
                with(bad).unwrap_err().code(),
                S3Code::InvalidRequest,
                "{bad:?}"
            );
        }
        for bad in [
            &[("x-amz-checksum-algorithm", "MD5")][..],
            &[
                ("x-amz-checksum-algorithm", "CRC32"),
                ("x-amz-checksum-type", "PARTIAL"),
            ],
        ] {
            assert_eq!(
                with(bad).unwrap_err().code(),
                S3Code::InvalidArgument,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn upload_ids_are_random_letters_and_digits() {
        let ids: Vec<String> = (0..2000).map(|_| new_upload_id()).collect();
        for id in &ids {
            assert_eq!(id.len(), 32);
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        }
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
    }
}
