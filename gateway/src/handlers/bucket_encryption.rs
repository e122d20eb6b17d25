//! Bucket default encryption: Get/Put/DeleteBucketEncryption. Writes that
//! ask for no encryption get the bucket's (`crate::encryption::for_write`).

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::xml::encryption_documents::{
    encryption_configuration, parse_encryption_configuration, EncryptionConfigurationError,
};
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;
use meta_api::{BucketEncryption, EncryptionMode};

/// Largest ServerSideEncryptionConfiguration accepted.
const ENCRYPTION_BODY_LIMIT: u64 = 64 * 1024;

/// GetBucketEncryption: the default, or
/// ServerSideEncryptionConfigurationNotFoundError.
pub fn get_bucket_encryption(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    let encryption = bucket.encryption.as_ref().ok_or_else(|| {
        S3Error::new(S3Code::ServerSideEncryptionConfigurationNotFoundError)
            .detail("BucketName", bucket.name.clone())
    })?;
    Ok(xml_response(encryption_configuration(encryption)))
}

/// PutBucketEncryption: replaces the default. S3 wants the body vouched for
/// by Content-MD5 or a checksum.
pub async fn put_bucket_encryption(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let document = ctx
        .vouched_configuration(body, ENCRYPTION_BODY_LIMIT)
        .await?;
    let encryption = parse_encryption_configuration(&document).map_err(|e| match e {
        EncryptionConfigurationError::Malformed => S3Error::new(S3Code::MalformedXML),
        EncryptionConfigurationError::KeyWithoutKms => S3Error::invalid_argument(
            "a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms \
             or aws:kms:dsse",
        ),
        EncryptionConfigurationError::NotOffered(what) => S3Error::not_implemented(what),
    })?;
    if encryption.mode == EncryptionMode::Kms {
        // The key must exist now (the default key is made at its first use).
        let key = encryption.kms_key_id.clone();
        ctx.state.meta.call(meta_api::ResolveKmsKey { key }).await?;
    }
    set(ctx, bucket, Some(encryption)).await?;
    Ok(empty_response(StatusCode::OK))
}

/// DeleteBucketEncryption: 204, whether or not the bucket had a default.
pub async fn delete_bucket_encryption(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    set(ctx, bucket, None).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

async fn set(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    encryption: Option<BucketEncryption>,
) -> Result<(), S3Error> {
    ctx.state
        .meta
        .call(meta_api::SetBucketEncryption {
            bucket: bucket.name.to_string(),
            encryption,
        })
        .await?;
    Ok(())
}
