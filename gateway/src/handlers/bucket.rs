//! Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
//! GetBucketLocation.

use super::object_lock::{header_is_true, BUCKET_LOCK_HEADER};
use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::headers;
use crate::params::{continuation_token, ListBucketsParams, MAX_BUCKETS_PAGE};
use crate::request_body::read_small_body;
use crate::xml::documents;
use crate::xml::parse::{parse_create_bucket, CREATE_BUCKET_BODY_LIMIT};
use axum::body::Body;
use axum::response::Response;
use http::header::{HeaderValue, LOCATION};
use http::StatusCode;
use meta_api::naming::validate_bucket_name;

/// ListBuckets: the caller's own buckets (every bucket for root), within
/// its access key's limits; a page of them when any parameter is sent.
pub async fn list_buckets(
    ctx: &RequestContext<'_>,
    params: ListBucketsParams,
) -> Result<Response, S3Error> {
    let region = ctx.state.config.region.as_str();
    if params.bucket_region.as_deref().is_some_and(|r| r != region) {
        return Err(S3Error::invalid_argument(
            "Requests with bucket-region specified must be made to the corresponding regional \
             endpoint",
        )
        .detail("ArgumentName", "bucket-region"));
    }
    let identity = ctx.identity();
    let owner = (!identity.is_root).then_some(identity.user.as_str());
    let mut buckets = ctx
        .state
        .meta
        .call(meta_api::ListBuckets {
            owner: owner.map(str::to_string),
        })
        .await?;
    // A key limited to some buckets sees only those.
    buckets.retain(|b| identity.right_in(&b.name).is_some());
    buckets.retain(|b| {
        params
            .prefix
            .as_deref()
            .is_none_or(|p| b.name.starts_with(p))
            && params
                .resume_after
                .as_deref()
                .is_none_or(|after| b.name.as_str() > after)
    });
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    let mut page = documents::BucketsPage::default();
    if params.paginated() {
        let limit = params.max_buckets.unwrap_or(MAX_BUCKETS_PAGE) as usize;
        if buckets.len() > limit {
            buckets.truncate(limit);
            page.continuation_token = buckets.last().map(|b| continuation_token(&b.name));
        }
        page.region = Some(region);
        page.prefix = params.prefix.as_deref();
    }
    Ok(xml_response(documents::list_buckets(
        &identity.user,
        &buckets,
        &page,
    )))
}

/// CreateBucket: validates the name, accepts a CreateBucketConfiguration body,
/// takes the bucket's default replication from `x-tessera-replication`, and
/// enables object lock (and versioning) with `x-amz-bucket-object-lock-enabled`.
pub async fn create_bucket(
    ctx: &RequestContext<'_>,
    bucket: &str,
    body: Body,
) -> Result<Response, S3Error> {
    validate_bucket_name(bucket).map_err(|reason| {
        S3Error::with_message(
            S3Code::InvalidBucketName,
            "The specified bucket is not valid.",
        )
        .detail("BucketName", bucket)
        .detail("Reason", reason)
    })?;
    let replication = headers::replication(&ctx.parts.headers)?;
    let owner = ctx.identity().user.to_string();
    let access = super::acl::new_bucket_access(ctx, &owner)?;
    let document = read_small_body(
        &ctx.request,
        &ctx.parts.headers,
        body,
        CREATE_BUCKET_BODY_LIMIT,
    )
    .await?;
    // Any LocationConstraint is accepted: Tessera has one region.
    let constraint = parse_create_bucket(&document)?;
    tracing::debug!(bucket, ?constraint, "creating bucket");
    ctx.state
        .meta
        .call(meta_api::CreateBucket {
            name: bucket.to_string(),
            owner,
            replication,
            access,
            object_lock: header_is_true(&ctx.parts.headers, BUCKET_LOCK_HEADER),
        })
        .await?;
    let mut response = empty_response(StatusCode::OK);
    if let Ok(location) = HeaderValue::from_str(&format!("/{bucket}")) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

/// HeadBucket: 200 with the bucket's region once access is checked.
pub fn head_bucket(
    ctx: &RequestContext<'_>,
    _bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    let mut response = empty_response(StatusCode::OK);
    if let Ok(region) = HeaderValue::from_str(&ctx.state.config.region) {
        response.headers_mut().insert("x-amz-bucket-region", region);
    }
    Ok(response)
}

/// DeleteBucket: 204 (aborting uploads in progress), or BucketNotEmpty
/// while objects, versions or delete markers remain.
pub async fn delete_bucket(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .call(meta_api::DeleteBucket {
            name: bucket.name.to_string(),
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// GetBucketLocation: the gateway's region.
pub fn get_bucket_location(ctx: &RequestContext<'_>) -> Response {
    xml_response(documents::location_constraint(&ctx.state.config.region))
}
