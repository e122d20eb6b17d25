//! A bucket's object ownership controls and public access block:
//! Get/Put/DeleteBucketOwnershipControls and Get/Put/DeletePublicAccessBlock.

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::xml::access_documents::{
    ownership_controls, parse_ownership_controls, parse_public_access_block, public_access_block,
    ACCESS_BODY_LIMIT,
};
use access::{canonical_user_id, Grantee, ObjectOwnership, Permission};
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use meta_api::{BucketAccessChange, SetBucketAccess};

/// The request's settings document.
async fn read_document(ctx: &RequestContext<'_>, body: Body) -> Result<bytes::Bytes, S3Error> {
    read_small_body(&ctx.request, &ctx.parts.headers, body, ACCESS_BODY_LIMIT).await
}

/// Makes `change` and answers `status` with no body.
async fn set(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    change: BucketAccessChange,
    status: StatusCode,
) -> Result<Response, S3Error> {
    let request = SetBucketAccess {
        bucket: bucket.name.clone(),
        change,
    };
    ctx.state.meta.call(request).await?;
    Ok(empty_response(status))
}

/// GetBucketOwnershipControls: OwnershipControlsNotFoundError when none is set.
pub fn get_ownership_controls(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    let ownership = bucket
        .ownership
        .ok_or_else(|| S3Error::new(S3Code::OwnershipControlsNotFoundError))?;
    Ok(xml_response(ownership_controls(ownership)))
}

/// PutBucketOwnershipControls: BucketOwnerEnforced only while the bucket's
/// ACL grants nobody but the owner (InvalidBucketAclWithObjectOwnership).
pub async fn put_ownership_controls(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let ownership = parse_ownership_controls(&read_document(ctx, body).await?)?;
    let owner_id = canonical_user_id(&bucket.owner);
    let grants_others = bucket.acl.iter().flatten().any(|grant| {
        grant.permission != Permission::FullControl
            || !matches!(&grant.grantee, Grantee::User(id) if *id == owner_id)
    });
    if ownership == ObjectOwnership::BucketOwnerEnforced && grants_others {
        return Err(S3Error::new(S3Code::InvalidBucketAclWithObjectOwnership));
    }
    let change = BucketAccessChange::Ownership(Some(ownership));
    set(ctx, bucket, change, StatusCode::OK).await
}

/// DeleteBucketOwnershipControls: 204; the bucket then behaves as ObjectWriter.
pub async fn delete_ownership_controls(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    let change = BucketAccessChange::Ownership(None);
    set(ctx, bucket, change, StatusCode::NO_CONTENT).await
}

/// GetPublicAccessBlock: NoSuchPublicAccessBlockConfiguration when none is set.
pub fn get_public_access_block(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    let block = bucket
        .public_access_block
        .ok_or_else(|| S3Error::new(S3Code::NoSuchPublicAccessBlockConfiguration))?;
    Ok(xml_response(public_access_block(&block)))
}

/// PutPublicAccessBlock: replaces all four flags.
pub async fn put_public_access_block(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let block = parse_public_access_block(&read_document(ctx, body).await?)?;
    let change = BucketAccessChange::PublicAccessBlock(Some(block));
    set(ctx, bucket, change, StatusCode::OK).await
}

/// DeletePublicAccessBlock: 204.
pub async fn delete_public_access_block(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    let change = BucketAccessChange::PublicAccessBlock(None);
    set(ctx, bucket, change, StatusCode::NO_CONTENT).await
}
