//! Bucket versioning: Get/PutBucketVersioning and ListObjectVersions, and
//! the `x-amz-version-id` header every answer about a version carries.

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error, VERSION_ID_HEADER};
use crate::params::ListVersionsParams;
use crate::request_body::read_small_body;
use crate::xml::object_documents::{
    self, parse_versioning_configuration, ListVersionsDoc, VersioningDocumentError,
};
use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode};
use meta_api::naming::VersionRef;
use meta_api::NULL_VERSION;
use meta_api::{BucketRecord, VersionStamp};

/// Largest VersioningConfiguration body accepted.
const VERSIONING_BODY_LIMIT: u64 = 4 * 1024;

/// Adds `x-amz-version-id` for `stamp` when `bucket` has had versioning
/// (S3 names no version in a bucket that never had it); `null` for the
/// null version.
pub fn insert_version_id(headers: &mut HeaderMap, bucket: &BucketRecord, stamp: &VersionStamp) {
    if bucket.versioning.is_some() {
        insert_id(headers, stamp.id_or_null());
    }
}

/// Adds `x-amz-version-id: id`.
pub fn insert_id(headers: &mut HeaderMap, id: &str) {
    if let Ok(value) = HeaderValue::from_str(id) {
        headers.insert(VERSION_ID_HEADER, value);
    }
}

/// Adds `x-amz-version-id` for a new version: only when it has an id (a
/// write to a suspended bucket makes the null version, which PutObject and
/// CompleteMultipartUpload do not name).
pub fn insert_new_version_id(headers: &mut HeaderMap, stamp: &VersionStamp) {
    if let Some(id) = &stamp.id {
        insert_id(headers, id);
    }
}

/// The id S3 shows for a version a request named.
pub fn named_id(version: &VersionRef) -> &str {
    match version {
        VersionRef::Null => NULL_VERSION,
        VersionRef::Id { id, .. } => id,
    }
}

/// GetBucketVersioning: no Status until versioning was first enabled.
pub fn get_bucket_versioning(bucket: &AuthorizedBucket) -> Response {
    xml_response(object_documents::versioning_configuration(
        bucket.versioning,
    ))
}

/// PutBucketVersioning: Enabled or Suspended (a bucket never returns to
/// unversioned, as in S3).
pub async fn put_bucket_versioning(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    let document = read_small_body(&ctx.request, headers, body, VERSIONING_BODY_LIMIT).await?;
    let versioning = parse_versioning_configuration(&document).map_err(|e| match e {
        VersioningDocumentError::Malformed => S3Error::new(S3Code::MalformedXML),
        VersioningDocumentError::MfaDelete => S3Error::with_message(
            S3Code::InvalidRequest,
            "MFA delete cannot be enabled on this server.",
        ),
    })?;
    let request = meta_api::SetBucketVersioning {
        bucket: bucket.name.clone(),
        versioning,
    };
    ctx.state.meta.call(request).await?;
    Ok(empty_response(StatusCode::OK))
}

/// ListObjectVersions: versions and delete markers, newest first per key.
pub async fn list_object_versions(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    params: ListVersionsParams,
) -> Result<Response, S3Error> {
    let request = meta_api::ListObjectVersions {
        bucket: bucket.name.clone(),
        prefix: params.prefix.clone(),
        key_marker: params.key_marker.clone(),
        version_marker: params.version_id_marker.clone(),
        delimiter: params.delimiter.clone(),
        max_keys: params.max_keys,
    };
    let page = ctx.state.meta.call(request).await?;
    Ok(xml_response(object_documents::list_versions(
        &ListVersionsDoc {
            bucket: &bucket.name,
            prefix: &params.prefix,
            key_marker: params.key_marker.as_deref().unwrap_or(""),
            version_id_marker: params.version_id_marker.as_ref().map_or("", named_id),
            delimiter: params.delimiter.as_deref(),
            max_keys: params.max_keys,
            url_encode: params.url_encode,
            owner: &bucket.owner,
            page: &page,
        },
    )))
}
