//! Bucket policies: Put/Get/DeleteBucketPolicy and GetBucketPolicyStatus.
//! A policy is checked as S3 checks it (MalformedPolicy) and kept as sent.

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::xml::access_documents::policy_status;
use access::policy::MAX_POLICY_BYTES;
use access::Policy;
use axum::body::Body;
use axum::response::Response;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::StatusCode;
use meta_api::{BucketAccessChange, SetBucketAccess};

fn no_policy() -> S3Error {
    S3Error::new(S3Code::NoSuchBucketPolicy)
}

async fn set(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    policy: Option<String>,
) -> Result<Response, S3Error> {
    let request = SetBucketAccess {
        bucket: bucket.name.clone(),
        change: BucketAccessChange::Policy(policy),
    };
    ctx.state.meta.call(request).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// PutBucketPolicy: 204; a public policy is refused (403) while the
/// bucket's public access block says BlockPublicPolicy.
pub async fn put_bucket_policy(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let limit = MAX_POLICY_BYTES as u64 + 1;
    let document = read_small_body(&ctx.request, &ctx.parts.headers, body, limit).await?;
    let text = String::from_utf8(document.to_vec()).map_err(|_| {
        S3Error::with_message(S3Code::MalformedPolicy, "Policies must be valid JSON")
    })?;
    let policy = Policy::parse(&text, &bucket.name)?;
    let blocks_public = bucket
        .public_access_block
        .is_some_and(|block| block.block_public_policy);
    if blocks_public && policy.is_public() {
        return Err(S3Error::new(S3Code::AccessDenied));
    }
    set(ctx, bucket, Some(text)).await
}

/// GetBucketPolicy: the policy as it was put; 404 NoSuchBucketPolicy without one.
pub fn get_bucket_policy(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    let text = bucket.policy.clone().ok_or_else(no_policy)?;
    let mut response = Response::new(Body::from(text));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

/// DeleteBucketPolicy: 204.
pub async fn delete_bucket_policy(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    set(ctx, bucket, None).await
}

/// GetBucketPolicyStatus: whether the policy makes the bucket public.
pub fn get_bucket_policy_status(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    let policy = ctx
        .state
        .bucket_policies
        .of_bucket(bucket)
        .map_err(S3Error::internal)?
        .ok_or_else(no_policy)?;
    Ok(xml_response(policy_status(policy.is_public())))
}
