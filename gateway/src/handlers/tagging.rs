//! Tags: Put/Get/DeleteObjectTagging, Put/Get/DeleteBucketTagging, and the
//! `x-amz-tagging` header of PutObject, CreateMultipartUpload and CopyObject.
//! An object's tags change in place (no new version): meta stores them only
//! while the version still holds that object. Answers about an object's tags
//! name its version.

use super::versions::insert_version_id;
use super::{empty_response, recommit_object, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::tags::{validate_tags, MAX_BUCKET_TAGS, MAX_OBJECT_TAGS};
use crate::xml::object_documents::{self, parse_tagging, TAGGING_BODY_LIMIT};
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use meta_api::naming::VersionRef;

use std::collections::BTreeMap;
use std::sync::Arc;

/// GetObjectTagging.
pub async fn get_object_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    let mut response = xml_response(object_documents::tagging(&record.attributes.tags));
    insert_version_id(response.headers_mut(), bucket, &record.version);
    Ok(response)
}

async fn read_tagging_body(
    ctx: &RequestContext<'_>,
    body: Body,
    max_tags: usize,
) -> Result<BTreeMap<String, String>, S3Error> {
    let headers = &ctx.parts.headers;
    let document = read_small_body(&ctx.request, headers, body, TAGGING_BODY_LIMIT).await?;
    validate_tags(parse_tagging(&document)?, max_tags)
}

/// PutObjectTagging: replaces the object's whole tag set.
pub async fn put_object_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
    body: Body,
) -> Result<Response, S3Error> {
    let tags = read_tagging_body(ctx, body, MAX_OBJECT_TAGS).await?;
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    let mut record = Arc::unwrap_or_clone(record);
    record.attributes.tags = tags;
    let stamp = record.version.clone();
    recommit_object(ctx, record).await?;
    let mut response = empty_response(StatusCode::OK);
    insert_version_id(response.headers_mut(), bucket, &stamp);
    Ok(response)
}

/// DeleteObjectTagging: 204, the object keeps everything else.
pub async fn delete_object_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    let stamp = record.version.clone();
    if !record.attributes.tags.is_empty() {
        let mut record = Arc::unwrap_or_clone(record);
        record.attributes.tags = BTreeMap::new();
        recommit_object(ctx, record).await?;
    }
    let mut response = empty_response(StatusCode::NO_CONTENT);
    insert_version_id(response.headers_mut(), bucket, &stamp);
    Ok(response)
}

/// GetBucketTagging: NoSuchTagSet when the bucket has none, as in S3.
pub fn get_bucket_tagging(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    if bucket.tags.is_empty() {
        return Err(S3Error::new(S3Code::NoSuchTagSet).detail("BucketName", bucket.name.clone()));
    }
    Ok(xml_response(object_documents::tagging(&bucket.tags)))
}

/// PutBucketTagging: replaces the bucket's tag set (204, as S3 answers).
pub async fn put_bucket_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let tags = read_tagging_body(ctx, body, MAX_BUCKET_TAGS).await?;
    ctx.state
        .meta
        .call(meta_api::SetBucketTags {
            name: bucket.name.to_string(),
            tags,
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// DeleteBucketTagging: 204.
pub async fn delete_bucket_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .call(meta_api::SetBucketTags {
            name: bucket.name.to_string(),
            tags: BTreeMap::new(),
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}
