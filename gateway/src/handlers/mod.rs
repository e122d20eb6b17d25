//! The S3 handlers, one file per family of operations, and the single entry
//! point that routes, authenticates, checks access and dispatches.

pub mod acl;
pub mod attributes;
pub mod bucket;
pub mod copy;
pub mod cors;
pub mod list;
pub mod multipart;
pub mod object;
pub mod post_object;
pub mod tagging;
pub mod versions;

use crate::auth::{self, Identity, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::router::{self, Access, Endpoint};
use crate::state::AppState;
use crate::telemetry::{OperationLabel, RequestId};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{Method, StatusCode};
use meta_api::{BucketRecord, BucketRight};
use std::sync::Arc;

/// One authenticated request on its way through a handler.
pub struct RequestContext<'a> {
    /// Shared gateway state.
    pub state: &'a AppState,
    /// The HTTP request head.
    pub parts: &'a Parts,
    /// The verified signature and how to read the body.
    pub request: VerifiedRequest,
}

impl RequestContext<'_> {
    /// Who is calling.
    pub fn identity(&self) -> &Identity {
        &self.request.identity
    }

    /// The bucket, when it exists and the caller may use it for `endpoint`:
    /// the root user reaches every bucket, another user the buckets it owns,
    /// within its access key's limits; anyone may read a public-read bucket.
    async fn authorize_bucket(
        &self,
        name: &str,
        endpoint: &Endpoint,
    ) -> Result<Arc<BucketRecord>, S3Error> {
        let bucket = self.existing_bucket(name).await?;
        let identity = self.identity();
        let owns = !identity.anonymous && (identity.is_root || bucket.owner == identity.user);
        let key_allows = match identity.right_in(name) {
            Some(BucketRight::ReadWrite) => true,
            Some(BucketRight::Read) => endpoint.is_read_only(),
            None => false,
        };
        let public = bucket.public_read && endpoint.is_public_read();
        if (owns && key_allows) || public {
            Ok(bucket)
        } else {
            Err(S3Error::new(S3Code::AccessDenied))
        }
    }

    /// The bucket `name`, or NoSuchBucket.
    async fn existing_bucket(&self, name: &str) -> Result<Arc<BucketRecord>, S3Error> {
        self.state
            .meta
            .call(meta_api::GetBucket {
                name: name.to_string(),
            })
            .await?
            .ok_or_else(|| S3Error::no_such_bucket(name))
    }
}

/// A 200 response with an S3 XML document.
pub fn xml_response(document: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(document));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
    response
}

/// A response with `status` and no body.
pub fn empty_response(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
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
    let endpoint = router::parse(&parts.method, &parts.uri, &parts.headers, domain);
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
    let anonymous_allowed = endpoint
        .as_ref()
        .is_ok_and(|e| e.is_public_read() || matches!(e.access(), Access::Unsigned(_)));
    let request = if anonymous_allowed && auth::is_unsigned(parts) {
        VerifiedRequest::anonymous()
    } else {
        auth::authenticate(parts, &state.credentials, &state.config.region).await?
    };
    let endpoint = endpoint?;
    let ctx = RequestContext {
        state,
        parts,
        request,
    };
    let bucket = match endpoint.access() {
        Access::BucketOwner(name) => Some(ctx.authorize_bucket(name, &endpoint).await?),
        Access::Unsigned(name) => Some(ctx.existing_bucket(name).await?),
        // A key limited to some buckets creates none.
        Access::CreateBucket if ctx.identity().bucket_grants.is_some() => {
            return Err(S3Error::new(S3Code::AccessDenied));
        }
        Access::AnyUser | Access::CreateBucket => None,
    };
    let origin = cors::request_origin(parts);
    let result = dispatch(&ctx, endpoint, bucket.clone(), body).await;
    let (Some(origin), Some(bucket)) = (origin, &bucket) else {
        return result;
    };
    match result {
        Ok(mut response) => {
            cors::decorate(&mut response, bucket, &parts.method, &origin);
            Ok(response)
        }
        Err(error) => Err(cors::decorate_error(error, bucket, &parts.method, &origin)),
    }
}

async fn dispatch(
    ctx: &RequestContext<'_>,
    endpoint: Endpoint,
    bucket: Option<Arc<BucketRecord>>,
    body: Body,
) -> Result<Response, S3Error> {
    // Access::BucketOwner endpoints always carry the authorized bucket.
    let owned = || {
        bucket
            .clone()
            .ok_or_else(|| S3Error::internal("bucket not authorized"))
    };
    match endpoint {
        Endpoint::ListBuckets => bucket::list_buckets(ctx).await,
        Endpoint::CreateBucket { bucket } => {
            // A new bucket's ACL is its owner's: only canned `private` is accepted.
            acl::check_acl_headers(&ctx.parts.headers)?;
            bucket::create_bucket(ctx, &bucket, body).await
        }
        Endpoint::HeadBucket { .. } => bucket::head_bucket(ctx, &*owned()?),
        Endpoint::DeleteBucket { .. } => bucket::delete_bucket(ctx, &*owned()?).await,
        Endpoint::GetBucketLocation { .. } => Ok(bucket::get_bucket_location(ctx)),
        Endpoint::ListObjects { params, .. } => {
            list::list_objects_v1(ctx, &*owned()?, params).await
        }
        Endpoint::ListObjectsV2 { params, .. } => {
            list::list_objects_v2(ctx, &*owned()?, params).await
        }
        Endpoint::GetBucketCors { .. } => cors::get_bucket_cors(&*owned()?),
        Endpoint::PutBucketCors { .. } => cors::put_bucket_cors(ctx, &*owned()?, body).await,
        Endpoint::DeleteBucketCors { .. } => cors::delete_bucket_cors(ctx, &*owned()?).await,
        Endpoint::CorsPreflight { .. } => cors::preflight(ctx, &*owned()?),
        Endpoint::PostObject { .. } => post_object::post_object(ctx, &*owned()?, body).await,
        Endpoint::ListMultipartUploads { params, .. } => {
            multipart::list_uploads(ctx, &*owned()?, params).await
        }
        Endpoint::DeleteObjects { .. } => object::delete_objects(ctx, &*owned()?, body).await,
        Endpoint::PutObject { key, .. } => object::put_object(ctx, &*owned()?, key, body).await,
        Endpoint::GetObject { key, params, .. } => {
            object::get_object(ctx, &*owned()?, &key, params, false).await
        }
        Endpoint::HeadObject { key, params, .. } => {
            object::get_object(ctx, &*owned()?, &key, params, true).await
        }
        Endpoint::DeleteObject { key, .. } => object::delete_object(ctx, &*owned()?, &key).await,
        Endpoint::CreateMultipartUpload { key, .. } => {
            multipart::create_upload(ctx, &*owned()?, key).await
        }
        Endpoint::UploadPart {
            key,
            upload_id,
            part_number,
            ..
        } => multipart::upload_part(ctx, &*owned()?, &key, &upload_id, part_number, body).await,
        Endpoint::CompleteMultipartUpload { key, upload_id, .. } => {
            multipart::complete_upload(ctx, &*owned()?, &key, &upload_id, body).await
        }
        Endpoint::AbortMultipartUpload { key, upload_id, .. } => {
            multipart::abort_upload(ctx, &*owned()?, &key, &upload_id).await
        }
        Endpoint::ListParts {
            key,
            upload_id,
            params,
            ..
        } => multipart::list_parts(ctx, &*owned()?, &key, &upload_id, params).await,
        Endpoint::CopyObject { key, .. } => copy::copy_object(ctx, &*owned()?, &key).await,
        Endpoint::UploadPartCopy {
            key,
            upload_id,
            part_number,
            ..
        } => copy::upload_part_copy(ctx, &*owned()?, &key, &upload_id, part_number).await,
        Endpoint::GetObjectTagging { key, .. } => {
            tagging::get_object_tagging(ctx, &*owned()?, &key).await
        }
        Endpoint::PutObjectTagging { key, .. } => {
            tagging::put_object_tagging(ctx, &*owned()?, &key, body).await
        }
        Endpoint::DeleteObjectTagging { key, .. } => {
            tagging::delete_object_tagging(ctx, &*owned()?, &key).await
        }
        Endpoint::GetBucketTagging { .. } => tagging::get_bucket_tagging(&*owned()?),
        Endpoint::PutBucketTagging { .. } => {
            tagging::put_bucket_tagging(ctx, &*owned()?, body).await
        }
        Endpoint::DeleteBucketTagging { .. } => {
            tagging::delete_bucket_tagging(ctx, &*owned()?).await
        }
        Endpoint::GetBucketVersioning { .. } => Ok(versions::get_bucket_versioning()),
        Endpoint::PutBucketVersioning { .. } => versions::put_bucket_versioning(),
        Endpoint::ListObjectVersions { params, .. } => {
            versions::list_object_versions(ctx, &*owned()?, params).await
        }
        Endpoint::GetBucketAcl { .. } => acl::get_acl(ctx, &*owned()?, None).await,
        Endpoint::PutBucketAcl { .. } => acl::put_acl(ctx, &*owned()?, None, body).await,
        Endpoint::GetObjectAcl { key, .. } => acl::get_acl(ctx, &*owned()?, Some(&key)).await,
        Endpoint::PutObjectAcl { key, .. } => acl::put_acl(ctx, &*owned()?, Some(&key), body).await,
        Endpoint::GetObjectAttributes { key, .. } => {
            attributes::get_object_attributes(ctx, &*owned()?, &key).await
        }
    }
}
