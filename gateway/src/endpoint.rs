//! The S3 service's one table of endpoints, and the entry point every
//! request goes through: route to an endpoint, authenticate, check access,
//! dispatch to the handler.
//!
//! Each row gives an operation, its fields, the rules that route a request
//! to it, the right it needs, and the call of its handler (see
//! [`crate::router::s3_endpoints`] for the shape of a row); its name in
//! metrics, its access check and its dispatch all follow from the row. A row
//! with a more specific rule comes before one with a more general rule.

use crate::auth::{self, VerifiedRequest};
use crate::error::S3Error;
use crate::handlers::cors::with_cors;
use crate::handlers::{
    access_settings, acl, attributes, bucket, bucket_encryption, copy, cors, lifecycle, list,
    multipart, object, object_lock, policy, post_object, tagging, versions, RequestContext,
};
use crate::params::{
    ListBucketsParams, ListPartsParams, ListUploadsParams, ListV1Params, ListV2Params,
    ListVersionsParams, ReadParams,
};
use crate::router::rules::{form_upload, header, no_query, query, query_is};
use crate::router::{
    self, s3_endpoints, ObjectKey, PartNumber, RouteInput, UploadId, VersionParam,
};
use crate::state::AppState;
use crate::telemetry::{OperationLabel, RequestId};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, Method, Uri};
use std::sync::Arc;

s3_endpoints! {
    dispatch(ctx, body, bucket);
    bucket {
        /// GET /bucket?tagging.
        GetBucketTagging {} [(GET, Bucket, query("tagging"))] GetBucketTagging
            => tagging::get_bucket_tagging(&bucket);
        /// PUT /bucket?tagging.
        PutBucketTagging {} [(PUT, Bucket, query("tagging"))] PutBucketTagging
            => tagging::put_bucket_tagging(ctx, &bucket, body).await;
        /// DELETE /bucket?tagging.
        DeleteBucketTagging {} [(DELETE, Bucket, query("tagging"))] PutBucketTagging
            => tagging::delete_bucket_tagging(ctx, &bucket).await;
        /// GET /bucket?versioning.
        GetBucketVersioning {} [(GET, Bucket, query("versioning"))] GetBucketVersioning
            => Ok(versions::get_bucket_versioning(&bucket));
        /// PUT /bucket?versioning.
        PutBucketVersioning {} [(PUT, Bucket, query("versioning"))] PutBucketVersioning
            => versions::put_bucket_versioning(ctx, &bucket, body).await;
        /// GET /bucket?versions.
        ListObjectVersions { params: ListVersionsParams } [(GET, Bucket, query("versions"))] ListBucketVersions
            => versions::list_object_versions(ctx, &bucket, params).await;
        /// GET /bucket?object-lock.
        GetObjectLockConfiguration {} [(GET, Bucket, query("object-lock"))] GetBucketObjectLockConfiguration
            => object_lock::get_object_lock_configuration(&bucket);
        /// PUT /bucket?object-lock.
        PutObjectLockConfiguration {} [(PUT, Bucket, query("object-lock"))] PutBucketObjectLockConfiguration
            => object_lock::put_object_lock_configuration(ctx, &bucket, body).await;
        /// GET /bucket?acl.
        GetBucketAcl {} [(GET, Bucket, query("acl"))] GetBucketAcl
            => acl::get_acl(ctx, &bucket, None, None).await;
        /// PUT /bucket?acl.
        PutBucketAcl {} [(PUT, Bucket, query("acl"))] PutBucketAcl
            => acl::put_acl(ctx, &bucket, None, None, body).await;
        /// GET /bucket?policy.
        GetBucketPolicy {} [(GET, Bucket, query("policy"))] GetBucketPolicy
            => policy::get_bucket_policy(&bucket);
        /// PUT /bucket?policy.
        PutBucketPolicy {} [(PUT, Bucket, query("policy"))] PutBucketPolicy
            => policy::put_bucket_policy(ctx, &bucket, body).await;
        /// DELETE /bucket?policy.
        DeleteBucketPolicy {} [(DELETE, Bucket, query("policy"))] DeleteBucketPolicy
            => policy::delete_bucket_policy(ctx, &bucket).await;
        /// GET /bucket?policyStatus.
        GetBucketPolicyStatus {} [(GET, Bucket, query("policyStatus"))] GetBucketPolicyStatus
            => policy::get_bucket_policy_status(ctx, &bucket);
        /// GET /bucket?ownershipControls.
        GetBucketOwnershipControls {} [(GET, Bucket, query("ownershipControls"))] GetBucketOwnershipControls
            => access_settings::get_ownership_controls(&bucket);
        /// PUT /bucket?ownershipControls.
        PutBucketOwnershipControls {} [(PUT, Bucket, query("ownershipControls"))] PutBucketOwnershipControls
            => access_settings::put_ownership_controls(ctx, &bucket, body).await;
        /// DELETE /bucket?ownershipControls.
        DeleteBucketOwnershipControls {} [(DELETE, Bucket, query("ownershipControls"))] PutBucketOwnershipControls
            => access_settings::delete_ownership_controls(ctx, &bucket).await;
        /// GET /bucket?publicAccessBlock.
        GetPublicAccessBlock {} [(GET, Bucket, query("publicAccessBlock"))] GetBucketPublicAccessBlock
            => access_settings::get_public_access_block(&bucket);
        /// PUT /bucket?publicAccessBlock.
        PutPublicAccessBlock {} [(PUT, Bucket, query("publicAccessBlock"))] PutBucketPublicAccessBlock
            => access_settings::put_public_access_block(ctx, &bucket, body).await;
        /// DELETE /bucket?publicAccessBlock.
        DeletePublicAccessBlock {} [(DELETE, Bucket, query("publicAccessBlock"))] PutBucketPublicAccessBlock
            => access_settings::delete_public_access_block(ctx, &bucket).await;
        /// GET /bucket?cors.
        GetBucketCors {} [(GET, Bucket, query("cors"))] GetBucketCors
            => cors::get_bucket_cors(&bucket);
        /// PUT /bucket?cors.
        PutBucketCors {} [(PUT, Bucket, query("cors"))] PutBucketCors
            => cors::put_bucket_cors(ctx, &bucket, body).await;
        /// DELETE /bucket?cors.
        DeleteBucketCors {} [(DELETE, Bucket, query("cors"))] PutBucketCors
            => cors::delete_bucket_cors(ctx, &bucket).await;
        /// GET /bucket?encryption.
        GetBucketEncryption {} [(GET, Bucket, query("encryption"))] GetEncryptionConfiguration
            => bucket_encryption::get_bucket_encryption(&bucket);
        /// PUT /bucket?encryption.
        PutBucketEncryption {} [(PUT, Bucket, query("encryption"))] PutEncryptionConfiguration
            => bucket_encryption::put_bucket_encryption(ctx, &bucket, body).await;
        /// DELETE /bucket?encryption.
        DeleteBucketEncryption {} [(DELETE, Bucket, query("encryption"))] PutEncryptionConfiguration
            => bucket_encryption::delete_bucket_encryption(ctx, &bucket).await;
        /// GET /bucket?lifecycle.
        GetBucketLifecycleConfiguration {} [(GET, Bucket, query("lifecycle"))] GetLifecycleConfiguration
            => lifecycle::get_bucket_lifecycle(&bucket);
        /// PUT /bucket?lifecycle.
        PutBucketLifecycleConfiguration {} [(PUT, Bucket, query("lifecycle"))] PutLifecycleConfiguration
            => lifecycle::put_bucket_lifecycle(ctx, &bucket, body).await;
        /// DELETE /bucket?lifecycle.
        DeleteBucketLifecycle {} [(DELETE, Bucket, query("lifecycle"))] PutLifecycleConfiguration
            => lifecycle::delete_bucket_lifecycle(ctx, &bucket).await;
        /// GET /bucket?location.
        GetBucketLocation {} [(GET, Bucket, query("location"))] GetBucketLocation
            => Ok(bucket::get_bucket_location(ctx));
        /// GET /bucket?uploads.
        ListMultipartUploads { params: ListUploadsParams } [(GET, Bucket, query("uploads"))] ListBucketMultipartUploads
            => multipart::list_uploads(ctx, &bucket, params).await;
        /// GET /bucket?list-type=2.
        ListObjectsV2 { params: ListV2Params } [(GET, Bucket, query_is("list-type", "2"))] ListBucket
            => list::list_objects_v2(ctx, &bucket, params).await;
        /// GET /bucket (v1 listing).
        ListObjects { params: ListV1Params } [(GET, Bucket, no_query("list-type"))] ListBucket
            => list::list_objects_v1(ctx, &bucket, params).await;
        /// HEAD /bucket.
        HeadBucket {} [(HEAD, Bucket)] ListBucket
            => bucket::head_bucket(ctx, &bucket);
        /// DELETE /bucket.
        DeleteBucket {} [(DELETE, Bucket)] DeleteBucket
            => bucket::delete_bucket(ctx, &bucket).await;
        /// POST /bucket?delete.
        DeleteObjects {} [(POST, Bucket, query("delete"))] DeleteObject
            => object::delete_objects(ctx, &bucket, body).await;
        /// GET /bucket/key?tagging.
        GetObjectTagging { key: ObjectKey, version: VersionParam } [(GET, Object, query("tagging"))] GetObjectTagging
            => tagging::get_object_tagging(ctx, &bucket, &key, version.0).await;
        /// PUT /bucket/key?tagging.
        PutObjectTagging { key: ObjectKey, version: VersionParam } [(PUT, Object, query("tagging"))] PutObjectTagging
            => tagging::put_object_tagging(ctx, &bucket, &key, version.0, body).await;
        /// DELETE /bucket/key?tagging.
        DeleteObjectTagging { key: ObjectKey, version: VersionParam } [(DELETE, Object, query("tagging"))] DeleteObjectTagging
            => tagging::delete_object_tagging(ctx, &bucket, &key, version.0).await;
        /// GET /bucket/key?retention.
        GetObjectRetention { key: ObjectKey, version: VersionParam } [(GET, Object, query("retention"))] GetObjectRetention
            => object_lock::get_object_retention(ctx, &bucket, &key, version.0).await;
        /// PUT /bucket/key?retention.
        PutObjectRetention { key: ObjectKey, version: VersionParam } [(PUT, Object, query("retention"))] PutObjectRetention
            => object_lock::put_object_retention(ctx, &bucket, &key, version.0, body).await;
        /// GET /bucket/key?legal-hold.
        GetObjectLegalHold { key: ObjectKey, version: VersionParam } [(GET, Object, query("legal-hold"))] GetObjectLegalHold
            => object_lock::get_object_legal_hold(ctx, &bucket, &key, version.0).await;
        /// PUT /bucket/key?legal-hold.
        PutObjectLegalHold { key: ObjectKey, version: VersionParam } [(PUT, Object, query("legal-hold"))] PutObjectLegalHold
            => object_lock::put_object_legal_hold(ctx, &bucket, &key, version.0, body).await;
        /// GET /bucket/key?acl.
        GetObjectAcl { key: ObjectKey, version: VersionParam } [(GET, Object, query("acl"))] GetObjectAcl
            => acl::get_acl(ctx, &bucket, Some(&key), version.0).await;
        /// PUT /bucket/key?acl.
        PutObjectAcl { key: ObjectKey, version: VersionParam } [(PUT, Object, query("acl"))] PutObjectAcl
            => acl::put_acl(ctx, &bucket, Some(&key), version.0, body).await;
        /// GET /bucket/key?attributes.
        GetObjectAttributes { key: ObjectKey, version: VersionParam } [(GET, Object, query("attributes"))] GetObjectAttributes
            => attributes::get_object_attributes(ctx, &bucket, &key, version.0).await;
        /// PUT /bucket/key?partNumber&uploadId with x-amz-copy-source.
        UploadPartCopy { key: ObjectKey, upload_id: UploadId, part_number: PartNumber }
            [(PUT, Object, header("x-amz-copy-source"), query("uploadId"))] PutObject
            => copy::upload_part_copy(ctx, &bucket, &key, &upload_id, part_number.0).await;
        /// PUT /bucket/key with x-amz-copy-source.
        CopyObject { key: ObjectKey } [(PUT, Object, header("x-amz-copy-source"))] PutObject
            => copy::copy_object(ctx, &bucket, &key).await;
        /// PUT /bucket/key?partNumber&uploadId.
        UploadPart { key: ObjectKey, upload_id: UploadId, part_number: PartNumber }
            [(PUT, Object, query("uploadId")) | (PUT, Object, query("partNumber"))] PutObject
            => multipart::upload_part(ctx, &bucket, &key, &upload_id, part_number.0, body).await;
        /// PUT /bucket/key.
        PutObject { key: ObjectKey } [(PUT, Object)] PutObject
            => object::put_object(ctx, &bucket, key.0, body).await;
        /// POST /bucket/key?uploads.
        CreateMultipartUpload { key: ObjectKey } [(POST, Object, query("uploads"))] PutObject
            => multipart::create_upload(ctx, &bucket, key.0).await;
        /// POST /bucket/key?uploadId.
        CompleteMultipartUpload { key: ObjectKey, upload_id: UploadId }
            [(POST, Object, query("uploadId"))] PutObject
            => multipart::complete_upload(ctx, &bucket, &key, &upload_id, body).await;
        /// DELETE /bucket/key?uploadId.
        AbortMultipartUpload { key: ObjectKey, upload_id: UploadId }
            [(DELETE, Object, query("uploadId"))] AbortMultipartUpload
            => multipart::abort_upload(ctx, &bucket, &key, &upload_id).await;
        /// DELETE /bucket/key.
        DeleteObject { key: ObjectKey, version: VersionParam } [(DELETE, Object)] DeleteObject
            => object::delete_object(ctx, &bucket, &key, version.0).await;
        /// GET /bucket/key?uploadId.
        ListParts { key: ObjectKey, upload_id: UploadId, params: ListPartsParams }
            [(GET, Object, query("uploadId"))] ListMultipartUploadParts
            => multipart::list_parts(ctx, &bucket, &key, &upload_id, params).await;
        /// GET /bucket/key.
        GetObject { key: ObjectKey, version: VersionParam, params: ReadParams } [(GET, Object)] GetObject
            => object::get_object(ctx, &bucket, &key, version.0, params, false).await;
        /// HEAD /bucket/key.
        HeadObject { key: ObjectKey, version: VersionParam, params: ReadParams } [(HEAD, Object)] GetObject
            => object::get_object(ctx, &bucket, &key, version.0, params, true).await;
    }
    unsigned {
        /// OPTIONS /bucket[/key]: a browser's CORS preflight, answered from the
        /// bucket's rules without a signature.
        CorsPreflight as "PreflightRequest" {} [(OPTIONS, Bucket) | (OPTIONS, Object)] GetBucketCors
            => cors::preflight(ctx, &bucket);
        /// POST /bucket with multipart/form-data: a browser form upload whose
        /// policy document carries the signature.
        PostObject {} [(POST, Bucket, form_upload)] PutObject
            => post_object::post_object(ctx, &bucket, body).await;
    }
    new_bucket {
        /// PUT /bucket.
        CreateBucket {} [(PUT, Bucket)]
            => bucket::create_bucket(ctx, &bucket, body).await;
    }
    service {
        /// GET /: the caller's buckets.
        ListBuckets { params: ListBucketsParams } [(GET, Service)] ListAllMyBuckets
            => bucket::list_buckets(ctx, params).await;
    }
}

impl Endpoint {
    /// The IAM action a request that names a version needs instead of its
    /// row's, as S3 judges them (`s3:GetObjectVersion` for a GetObject with
    /// `versionId`...).
    fn version_action(&self) -> Option<access::Action> {
        use access::Action;
        let (version, action) = match self {
            Self::GetObject { version, .. } | Self::HeadObject { version, .. } => {
                (version, Action::GetObjectVersion)
            }
            Self::GetObjectAttributes { version, .. } => {
                (version, Action::GetObjectVersionAttributes)
            }
            Self::DeleteObject { version, .. } => (version, Action::DeleteObjectVersion),
            Self::GetObjectAcl { version, .. } => (version, Action::GetObjectVersionAcl),
            Self::PutObjectAcl { version, .. } => (version, Action::PutObjectVersionAcl),
            Self::GetObjectTagging { version, .. } => (version, Action::GetObjectVersionTagging),
            Self::PutObjectTagging { version, .. } => (version, Action::PutObjectVersionTagging),
            Self::DeleteObjectTagging { version, .. } => {
                (version, Action::DeleteObjectVersionTagging)
            }
            _ => return None,
        };
        version.0.as_ref().map(|_| action)
    }
}

/// Parses the request into its endpoint.
pub fn parse(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    domain: Option<&str>,
) -> Result<Endpoint, S3Error> {
    let input = RouteInput::new(method, uri, headers, domain)?;
    route(&input).unwrap_or_else(|| Err(input.unmatched()))
}

/// Serves every S3 request (the router's fallback handler).
pub async fn serve(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .cloned()
        .unwrap_or_else(RequestId::random);
    let (parts, body) = request.into_parts();
    let domain = state.config.domain.as_deref();
    let endpoint = parse(&parts.method, &parts.uri, &parts.headers, domain);
    let op = endpoint.as_ref().map_or("Unsupported", Endpoint::name);
    let mut response = match run(&state, &parts, body, endpoint).await {
        Ok(response) => response,
        Err(err) => {
            let resource = router::target(&parts.uri, &parts.headers, domain)
                .map(|t| t.resource())
                .unwrap_or_else(|_| parts.uri.path().to_string());
            err.into_response(&resource, &request_id, parts.method == Method::HEAD)
        }
    };
    response.extensions_mut().insert(OperationLabel(op));
    response
}

/// Authenticates first, so that an unsigned request learns nothing about
/// which operations or parameters exist; then the endpoint's error, if any.
async fn run(
    state: &AppState,
    parts: &Parts,
    body: Body,
    endpoint: Result<Endpoint, S3Error>,
) -> Result<Response, S3Error> {
    // An unsigned request may go on only where anonymous access can be
    // granted (public-read buckets, CORS preflights, form uploads); the body
    // is not touched before this point, so `Expect: 100-continue` is only
    // answered once the request is authorised.
    crate::headers::check_header_section(&parts.headers)?;
    crate::encryption::refuse_keys_in_clear(
        &parts.headers,
        &parts.extensions,
        state.config.sse_c_over_http,
    )?;
    let anonymous_allowed = endpoint
        .as_ref()
        .is_ok_and(|e| e.access().allows_anonymous());
    let request = if anonymous_allowed && auth::is_unsigned(parts) {
        VerifiedRequest::anonymous()
    } else {
        auth::authenticate(parts, &state.credentials, &state.config.realm()).await?
    };
    let endpoint = endpoint?;
    let ctx = RequestContext {
        state,
        parts,
        request,
    };
    dispatch(&ctx, endpoint, body).await
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
