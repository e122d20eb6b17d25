//! Object lock: Get/PutObjectLockConfiguration, Get/PutObjectRetention,
//! Get/PutObjectLegalHold, the lock headers of writes and reads, and the
//! GOVERNANCE bypass of deletes. Meta checks every change and delete against
//! the version's lock inside its transaction; this module reads what the
//! client asked for and what it may ask.

use super::versions::insert_version_id;
use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::dates::{iso8601, parse_iso8601};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::xml::lock_documents::{
    self, legal_hold_status, parse_legal_hold, parse_object_lock_configuration, parse_retention,
    LockConfigurationError,
};
use access::Action;
use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode};
use meta_api::naming::VersionRef;
use meta_api::{now_millis, BucketRecord, LockChange, LockMode, ObjectAttributes, Retention};

/// The retention mode of a write, or of a version read.
pub const LOCK_MODE_HEADER: &str = "x-amz-object-lock-mode";
/// The end of that retention.
pub const RETAIN_UNTIL_HEADER: &str = "x-amz-object-lock-retain-until-date";
/// The legal hold of a write, or of a version read.
pub const LEGAL_HOLD_HEADER: &str = "x-amz-object-lock-legal-hold";
/// CreateBucket with object lock.
pub const BUCKET_LOCK_HEADER: &str = "x-amz-bucket-object-lock-enabled";
/// Asks that a GOVERNANCE retention not stop a delete or a change.
const BYPASS_HEADER: &str = "x-amz-bypass-governance-retention";

/// Largest object lock document accepted.
const LOCK_BODY_LIMIT: u64 = 4 * 1024;

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).map(|v| v.to_str().unwrap_or(""))
}

fn invalid_argument(message: &'static str, name: &'static str) -> S3Error {
    S3Error::invalid_argument(message).detail("ArgumentName", name)
}

/// Whether a header is the boolean `true`.
pub fn header_is_true(headers: &HeaderMap, name: &str) -> bool {
    header(headers, name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Whether the caller asked to bypass GOVERNANCE retention and may. The
/// header is refused on a bucket without object lock, as S3 refuses it.
pub fn bypass_governance(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
) -> Result<bool, S3Error> {
    let headers = &ctx.parts.headers;
    if headers.contains_key(BYPASS_HEADER) && bucket.object_lock.is_none() {
        return Err(invalid_argument(
            "x-amz-bypass-governance-retention is only applicable to Object Lock enabled buckets.",
            BYPASS_HEADER,
        ));
    }
    if !header_is_true(headers, BYPASS_HEADER) {
        return Ok(false);
    }
    ctx.allowed(Action::BypassGovernanceRetention, bucket, None, Some(key))
}

/// The retention and legal hold a write asks for in its headers (both
/// absent: none asked, and the bucket's default retention applies in meta).
pub fn requested_lock(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
) -> Result<(Option<Retention>, Option<bool>), S3Error> {
    let headers = &ctx.parts.headers;
    let (mode, until, hold) = (
        header(headers, LOCK_MODE_HEADER),
        header(headers, RETAIN_UNTIL_HEADER),
        header(headers, LEGAL_HOLD_HEADER),
    );
    if (mode, until, hold) == (None, None, None) {
        return Ok((None, None));
    }
    if bucket.object_lock.is_none() {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "Bucket is missing ObjectLockConfiguration",
        ));
    }
    let both =
        "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied";
    let retention = match (mode, until) {
        (None, None) => None,
        (Some(_), None) => return Err(invalid_argument(both, RETAIN_UNTIL_HEADER)),
        (None, Some(_)) => return Err(invalid_argument(both, LOCK_MODE_HEADER)),
        (Some(mode), Some(until)) => {
            let mode = LockMode::parse(mode).ok_or_else(|| {
                invalid_argument("Unknown wormMode directive.", LOCK_MODE_HEADER)
                    .detail("ArgumentValue", mode.to_string())
            })?;
            Some(Retention {
                mode,
                until: future_date(until, RETAIN_UNTIL_HEADER)?,
            })
        }
    };
    let legal_hold = match hold {
        None => None,
        Some("ON") => Some(true),
        Some("OFF") => Some(false),
        Some(_) => {
            return Err(invalid_argument(
                "Legal Hold must be either of 'ON' or 'OFF'",
                LEGAL_HOLD_HEADER,
            ))
        }
    };
    let needs = [
        (retention.is_some(), Action::PutObjectRetention),
        (legal_hold.is_some(), Action::PutObjectLegalHold),
    ];
    for (asked, action) in needs {
        if asked && !ctx.allowed(action, bucket, None, Some(key))? {
            return Err(S3Error::new(S3Code::AccessDenied));
        }
    }
    Ok((retention, legal_hold))
}

/// A retain-until date, which must be ISO 8601 and in the future.
fn future_date(text: &str, name: &'static str) -> Result<i64, S3Error> {
    let until = parse_iso8601(text).ok_or_else(|| {
        invalid_argument(
            "The retain until date must be provided in ISO 8601 format",
            name,
        )
    })?;
    if until <= now_millis() {
        return Err(
            invalid_argument("The retain until date must be in the future!", name)
                .detail("ArgumentValue", text.to_string()),
        );
    }
    Ok(until)
}

/// The lock headers of a GET or HEAD of a version.
pub fn insert_lock_headers(headers: &mut HeaderMap, attributes: &ObjectAttributes) {
    if let Some(retention) = &attributes.retention {
        headers.insert(
            LOCK_MODE_HEADER,
            HeaderValue::from_static(retention.mode.as_str()),
        );
        if let Ok(until) = HeaderValue::from_str(&iso8601(retention.until)) {
            headers.insert(RETAIN_UNTIL_HEADER, until);
        }
    }
    if let Some(on) = attributes.legal_hold {
        headers.insert(
            LEGAL_HOLD_HEADER,
            HeaderValue::from_static(legal_hold_status(on)),
        );
    }
}

/// GetObjectLockConfiguration.
pub fn get_object_lock_configuration(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    let lock = bucket.object_lock.as_ref().ok_or_else(|| {
        S3Error::new(S3Code::ObjectLockConfigurationNotFoundError)
            .detail("BucketName", bucket.name.clone())
    })?;
    Ok(xml_response(lock_documents::object_lock_configuration(
        lock,
    )))
}

async fn read_document(ctx: &RequestContext<'_>, body: Body) -> Result<bytes::Bytes, S3Error> {
    read_small_body(&ctx.request, &ctx.parts.headers, body, LOCK_BODY_LIMIT).await
}

/// PutObjectLockConfiguration: enables object lock (versioning must be
/// enabled) and sets or clears the default retention.
pub async fn put_object_lock_configuration(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let document = read_document(ctx, body).await?;
    let lock = parse_object_lock_configuration(&document).map_err(|e| match e {
        LockConfigurationError::Malformed => S3Error::new(S3Code::MalformedXML),
        LockConfigurationError::InvalidPeriod => S3Error::new(S3Code::InvalidRetentionPeriod),
    })?;
    let request = meta_api::SetObjectLockConfiguration {
        bucket: bucket.name.clone(),
        lock,
    };
    ctx.state.meta.call(request).await?;
    Ok(empty_response(StatusCode::OK))
}

/// InvalidRequest unless the bucket has object lock.
fn require_lock(bucket: &BucketRecord) -> Result<(), S3Error> {
    match bucket.object_lock {
        Some(_) => Ok(()),
        None => Err(meta_api::MetaError::NoObjectLock.into()),
    }
}

/// Answers a GET of one lock setting of the version: `document` of it, or
/// NoSuchObjectLockConfiguration when it was never set.
async fn get_lock_setting(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
    document: impl FnOnce(&ObjectAttributes) -> Option<Vec<u8>>,
) -> Result<Response, S3Error> {
    require_lock(bucket)?;
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    let document = document(&record.attributes)
        .ok_or_else(|| S3Error::new(S3Code::NoSuchObjectLockConfiguration))?;
    let mut response = xml_response(document);
    insert_version_id(response.headers_mut(), bucket, &record.version);
    Ok(response)
}

/// GetObjectRetention.
pub async fn get_object_retention(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    get_lock_setting(ctx, bucket, key, version, |attributes| {
        attributes.retention.as_ref().map(lock_documents::retention)
    })
    .await
}

/// GetObjectLegalHold.
pub async fn get_object_legal_hold(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    get_lock_setting(ctx, bucket, key, version, |attributes| {
        attributes.legal_hold.map(lock_documents::legal_hold)
    })
    .await
}

/// Changes the lock of the version after checking the caller may act on it.
async fn change_lock(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
    change: LockChange,
) -> Result<Response, S3Error> {
    require_lock(bucket)?;
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    // The version judged, even if another became the latest meanwhile.
    let judged = VersionRef::of(&record.version);
    let request = meta_api::SetObjectLock {
        bucket: bucket.name.clone(),
        key: key.to_string(),
        version: Some(judged),
        change,
        bypass_governance: bypass_governance(ctx, bucket, key)?,
    };
    ctx.state.meta.call(request).await?;
    let mut response = empty_response(StatusCode::OK);
    insert_version_id(response.headers_mut(), bucket, &record.version);
    Ok(response)
}

/// PutObjectRetention: lengthens a retention, or (GOVERNANCE, with the
/// bypass header and permission) shortens or removes it.
pub async fn put_object_retention(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
    body: Body,
) -> Result<Response, S3Error> {
    let document = read_document(ctx, body).await?;
    let retention = match parse_retention(&document)? {
        None => None,
        Some((mode, until)) => {
            if until <= now_millis() {
                return Err(invalid_argument(
                    "The retain until date must be in the future!",
                    "RetainUntilDate",
                ));
            }
            Some(Retention { mode, until })
        }
    };
    change_lock(ctx, bucket, key, version, LockChange::Retention(retention)).await
}

/// PutObjectLegalHold.
pub async fn put_object_legal_hold(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
    body: Body,
) -> Result<Response, S3Error> {
    let on = parse_legal_hold(&read_document(ctx, body).await?)?;
    change_lock(ctx, bucket, key, version, LockChange::LegalHold(on)).await
}
