//! The S3 handlers, one file per family of operations, and what they share:
//! the request context with its access checks (`access`) and the response
//! helpers. The table that routes requests to them is `crate::endpoint`.

mod access;
pub mod access_settings;
pub mod acl;
pub mod attributes;
pub mod bucket;
pub mod bucket_encryption;
mod conditions;
pub mod copy;
pub mod cors;
pub mod lifecycle;
pub mod list;
pub mod multipart;
pub mod object;
pub mod object_lock;
pub mod policy;
pub mod post_object;
pub mod tagging;
pub mod versions;

pub use access::{bucket_access, AuthorizedBucket, RequestContext};

use axum::body::Body;
use axum::response::Response;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::StatusCode;

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

/// Stores the changed tags and ACL of `record`, the version read, in place,
/// only if that version still exists as read.
pub(crate) async fn recommit_object(
    ctx: &RequestContext<'_>,
    record: meta_api::ObjectRecord,
) -> Result<(), crate::error::S3Error> {
    use crate::error::{S3Code, S3Error};
    let update = meta_api::UpdateObject {
        bucket: record.bucket,
        key: record.key,
        id: record.id,
        seq: record.version.seq,
        tags: record.attributes.tags,
        acl: record.attributes.acl,
    };
    match ctx.state.meta.call(update).await {
        Ok(()) => Ok(()),
        // The object was replaced meanwhile: S3 would have changed one of
        // them; the caller retries against the new one.
        Err(meta_api::MetaError::PreconditionFailed) => Err(S3Error::with_message(
            S3Code::ServiceUnavailable,
            "The object changed while it was being updated; try again.",
        )),
        Err(e) => Err(e.into()),
    }
}
