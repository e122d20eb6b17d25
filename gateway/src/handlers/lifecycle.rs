//! Bucket lifecycle: Get/Put/DeleteBucketLifecycleConfiguration, and the
//! headers that tell a client when a rule will expire its object
//! (`x-amz-expiration`) or abort its upload (`x-amz-abort-date`). Meta's
//! lifecycle worker applies the rules; the dates here come from the same
//! functions (`meta_api::lifecycle`), in real days.

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::dates::http_date;
use crate::error::{S3Code, S3Error};
use crate::xml::lifecycle_documents::{
    lifecycle_configuration, parse_lifecycle_configuration, LifecycleError,
};
use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode};
use meta_api::lifecycle::{current_expiry, upload_abort, LifecycleDay};
use meta_api::{BucketRecord, ObjectRecord, UnixMillis};

/// Largest LifecycleConfiguration accepted (1,000 rules with long IDs,
/// prefixes and tags fit).
const LIFECYCLE_BODY_LIMIT: u64 = 2 * 1024 * 1024;

/// When a rule expires the object, and which rule.
pub const EXPIRATION_HEADER: &str = "x-amz-expiration";
/// When a rule aborts a multipart upload.
pub const ABORT_DATE_HEADER: &str = "x-amz-abort-date";
/// The rule that aborts it.
pub const ABORT_RULE_HEADER: &str = "x-amz-abort-rule-id";
/// S3's answer about the smallest object a transition moves; Tessera has no
/// transitions, and says what S3 says by default.
const TRANSITION_MINIMUM_HEADER: &str = "x-amz-transition-default-minimum-object-size";
const TRANSITION_MINIMUM: &str = "all_storage_classes_128K";

fn refusal(error: LifecycleError) -> S3Error {
    match error {
        LifecycleError::Malformed => S3Error::new(S3Code::MalformedXML),
        LifecycleError::InvalidArgument {
            message,
            name,
            value,
        } => {
            let mut error = S3Error::invalid_argument(message);
            if let Some(name) = name {
                error = error.detail("ArgumentName", name);
            }
            if let Some(value) = value {
                error = error.detail("ArgumentValue", value);
            }
            error
        }
        LifecycleError::InvalidRequest(message) => {
            S3Error::with_message(S3Code::InvalidRequest, message)
        }
        LifecycleError::Transition => {
            S3Error::not_implemented("lifecycle Transition (storage classes)")
        }
    }
}

fn with_transition_minimum(mut response: Response) -> Response {
    response.headers_mut().insert(
        TRANSITION_MINIMUM_HEADER,
        HeaderValue::from_static(TRANSITION_MINIMUM),
    );
    response
}

/// GetBucketLifecycleConfiguration: the rules, or NoSuchLifecycleConfiguration.
pub fn get_bucket_lifecycle(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    if bucket.lifecycle.is_empty() {
        return Err(S3Error::new(S3Code::NoSuchLifecycleConfiguration)
            .detail("BucketName", bucket.name.clone()));
    }
    Ok(with_transition_minimum(xml_response(
        lifecycle_configuration(&bucket.lifecycle),
    )))
}

/// PutBucketLifecycleConfiguration: replaces the bucket's rules whole. S3
/// wants the body vouched for by Content-MD5 or a checksum.
pub async fn put_bucket_lifecycle(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let document = ctx
        .vouched_configuration(body, LIFECYCLE_BODY_LIMIT)
        .await?;
    let rules = parse_lifecycle_configuration(&document).map_err(refusal)?;
    ctx.state
        .meta
        .call(meta_api::SetBucketLifecycle {
            bucket: bucket.name.to_string(),
            rules,
        })
        .await?;
    Ok(with_transition_minimum(empty_response(StatusCode::OK)))
}

/// DeleteBucketLifecycle: 204, whether or not the bucket had rules.
pub async fn delete_bucket_lifecycle(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .call(meta_api::SetBucketLifecycle {
            bucket: bucket.name.to_string(),
            rules: Vec::new(),
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// Adds `x-amz-expiration` when a rule of `bucket` expires `record` as its
/// key's current version (S3 sends it only when no version was named).
pub fn insert_expiration(headers: &mut HeaderMap, bucket: &BucketRecord, record: &ObjectRecord) {
    let Some((at, rule)) = current_expiry(
        &bucket.lifecycle,
        record.lifecycle_subject(),
        LifecycleDay::REAL,
    ) else {
        return;
    };
    let value = format!(
        "expiry-date=\"{}\", rule-id=\"{}\"",
        http_date(at),
        rule.replace('"', "%22")
    );
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(EXPIRATION_HEADER, value);
    }
}

/// Adds `x-amz-abort-date` and `x-amz-abort-rule-id` when a rule of
/// `bucket` aborts an upload of `key` begun at `created`.
pub fn insert_abort_date(
    headers: &mut HeaderMap,
    bucket: &BucketRecord,
    key: &str,
    created: UnixMillis,
) {
    let Some((at, rule)) = upload_abort(&bucket.lifecycle, key, created, LifecycleDay::REAL) else {
        return;
    };
    if let (Ok(date), Ok(rule)) = (
        HeaderValue::from_str(&http_date(at)),
        HeaderValue::from_str(rule),
    ) {
        headers.insert(ABORT_DATE_HEADER, date);
        headers.insert(ABORT_RULE_HEADER, rule);
    }
}
