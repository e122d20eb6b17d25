//! The S3 handlers, one file per family of operations, and the single entry
//! point that routes, authenticates, checks access and dispatches.

pub mod bucket;
pub mod list;
pub mod multipart;
pub mod object;

use crate::auth::{self, Identity, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::router::{self, Access, Endpoint};
use crate::state::AppState;
use crate::telemetry::{OperationLabel, RequestId};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use blockstore::meta::BucketRecord;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{Method, StatusCode};
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

    /// The bucket, when it exists and the caller may use it: the root user
    /// reaches every bucket, another user only the buckets it owns.
    async fn authorize_bucket(&self, name: &str) -> Result<BucketRecord, S3Error> {
        let bucket = self
            .state
            .meta
            .get_bucket(name)
            .await?
            .ok_or_else(|| S3Error::no_such_bucket(name))?;
        let identity = self.identity();
        if identity.is_root || bucket.owner == identity.user {
            Ok(bucket)
        } else {
            Err(S3Error::new(S3Code::AccessDenied))
        }
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
    tracing::Span::current().record("op", op);
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
    let request = auth::authenticate(parts, &state.meta, &state.config.region).await?;
    let endpoint = endpoint?;
    let ctx = RequestContext {
        state,
        parts,
        request,
    };
    let bucket = match endpoint.access() {
        Access::BucketOwner(name) => Some(ctx.authorize_bucket(name).await?),
        Access::AnyUser | Access::CreateBucket => None,
    };
    dispatch(&ctx, endpoint, bucket, body).await
}

async fn dispatch(
    ctx: &RequestContext<'_>,
    endpoint: Endpoint,
    bucket: Option<BucketRecord>,
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
        Endpoint::CreateBucket { bucket } => bucket::create_bucket(ctx, &bucket, body).await,
        Endpoint::HeadBucket { .. } => bucket::head_bucket(ctx, &owned()?),
        Endpoint::DeleteBucket { .. } => bucket::delete_bucket(ctx, &owned()?).await,
        Endpoint::GetBucketLocation { .. } => Ok(bucket::get_bucket_location(ctx)),
        Endpoint::ListObjects { params, .. } => list::list_objects_v1(ctx, &owned()?, params).await,
        Endpoint::ListObjectsV2 { params, .. } => {
            list::list_objects_v2(ctx, &owned()?, params).await
        }
        Endpoint::ListMultipartUploads { params, .. } => {
            multipart::list_uploads(ctx, &owned()?, params).await
        }
        Endpoint::DeleteObjects { .. } => object::delete_objects(ctx, &owned()?, body).await,
        Endpoint::PutObject { key, .. } => object::put_object(ctx, &owned()?, key, body).await,
        Endpoint::GetObject { key, params, .. } => {
            object::get_object(ctx, &owned()?, &key, params, false).await
        }
        Endpoint::HeadObject { key, params, .. } => {
            object::get_object(ctx, &owned()?, &key, params, true).await
        }
        Endpoint::DeleteObject { key, .. } => object::delete_object(ctx, &owned()?, &key).await,
        Endpoint::CreateMultipartUpload { key, .. } => {
            multipart::create_upload(ctx, &owned()?, key).await
        }
        Endpoint::UploadPart {
            key,
            upload_id,
            part_number,
            ..
        } => multipart::upload_part(ctx, &owned()?, &key, &upload_id, part_number, body).await,
        Endpoint::CompleteMultipartUpload { key, upload_id, .. } => {
            multipart::complete_upload(ctx, &owned()?, &key, &upload_id, body).await
        }
        Endpoint::AbortMultipartUpload { key, upload_id, .. } => {
            multipart::abort_upload(ctx, &owned()?, &key, &upload_id).await
        }
        Endpoint::ListParts {
            key,
            upload_id,
            params,
            ..
        } => multipart::list_parts(ctx, &owned()?, &key, &upload_id, params).await,
    }
}
