//! Request routing: every request becomes one [`Endpoint`] (from method, host,
//! path, query keywords and headers) before auth or any handler runs, with
//! the access each endpoint needs next to it. Operations Tessera does not
//! offer fall to NotImplemented here, in one place.

use crate::error::{S3Code, S3Error};
use crate::params::{
    part_number, ListPartsParams, ListUploadsParams, ListV1Params, ListV2Params, Query, ReadParams,
};
use http::{HeaderMap, Method, Uri};
use percent_encoding::percent_decode_str;

/// Longest object key S3 accepts, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// Every S3 operation Tessera serves, with its validated parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// GET /: the caller's buckets.
    ListBuckets,
    /// PUT /bucket.
    CreateBucket {
        /// Bucket name.
        bucket: String,
    },
    /// HEAD /bucket.
    HeadBucket {
        /// Bucket name.
        bucket: String,
    },
    /// DELETE /bucket.
    DeleteBucket {
        /// Bucket name.
        bucket: String,
    },
    /// GET /bucket?location.
    GetBucketLocation {
        /// Bucket name.
        bucket: String,
    },
    /// GET /bucket (v1 listing).
    ListObjects {
        /// Bucket name.
        bucket: String,
        /// Listing parameters.
        params: ListV1Params,
    },
    /// GET /bucket?list-type=2.
    ListObjectsV2 {
        /// Bucket name.
        bucket: String,
        /// Listing parameters.
        params: ListV2Params,
    },
    /// GET /bucket?uploads.
    ListMultipartUploads {
        /// Bucket name.
        bucket: String,
        /// Listing parameters.
        params: ListUploadsParams,
    },
    /// POST /bucket?delete.
    DeleteObjects {
        /// Bucket name.
        bucket: String,
    },
    /// PUT /bucket/key.
    PutObject {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// GET /bucket/key.
    GetObject {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Range, part number and response-header overrides.
        params: ReadParams,
    },
    /// HEAD /bucket/key.
    HeadObject {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Range, part number and response-header overrides.
        params: ReadParams,
    },
    /// DELETE /bucket/key.
    DeleteObject {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// POST /bucket/key?uploads.
    CreateMultipartUpload {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// PUT /bucket/key?partNumber&uploadId.
    UploadPart {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
        /// Part number, 1..=10000.
        part_number: u32,
    },
    /// POST /bucket/key?uploadId.
    CompleteMultipartUpload {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
    },
    /// DELETE /bucket/key?uploadId.
    AbortMultipartUpload {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
    },
    /// GET /bucket/key?uploadId.
    ListParts {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
        /// Paging parameters.
        params: ListPartsParams,
    },
}

/// What a caller must be allowed to do for an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access<'a> {
    /// Any authenticated user (ListBuckets shows each their own buckets).
    AnyUser,
    /// Any authenticated user; the bucket becomes theirs.
    CreateBucket,
    /// The bucket's owner, or root.
    BucketOwner(&'a str),
}

impl Endpoint {
    /// The S3 operation name, for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ListBuckets => "ListBuckets",
            Self::CreateBucket { .. } => "CreateBucket",
            Self::HeadBucket { .. } => "HeadBucket",
            Self::DeleteBucket { .. } => "DeleteBucket",
            Self::GetBucketLocation { .. } => "GetBucketLocation",
            Self::ListObjects { .. } => "ListObjects",
            Self::ListObjectsV2 { .. } => "ListObjectsV2",
            Self::ListMultipartUploads { .. } => "ListMultipartUploads",
            Self::DeleteObjects { .. } => "DeleteObjects",
            Self::PutObject { .. } => "PutObject",
            Self::GetObject { .. } => "GetObject",
            Self::HeadObject { .. } => "HeadObject",
            Self::DeleteObject { .. } => "DeleteObject",
            Self::CreateMultipartUpload { .. } => "CreateMultipartUpload",
            Self::UploadPart { .. } => "UploadPart",
            Self::CompleteMultipartUpload { .. } => "CompleteMultipartUpload",
            Self::AbortMultipartUpload { .. } => "AbortMultipartUpload",
            Self::ListParts { .. } => "ListParts",
        }
    }

    /// The access this endpoint needs.
    pub fn access(&self) -> Access<'_> {
        match self {
            Self::ListBuckets => Access::AnyUser,
            Self::CreateBucket { .. } => Access::CreateBucket,
            Self::HeadBucket { bucket }
            | Self::DeleteBucket { bucket }
            | Self::GetBucketLocation { bucket }
            | Self::ListObjects { bucket, .. }
            | Self::ListObjectsV2 { bucket, .. }
            | Self::ListMultipartUploads { bucket, .. }
            | Self::DeleteObjects { bucket }
            | Self::PutObject { bucket, .. }
            | Self::GetObject { bucket, .. }
            | Self::HeadObject { bucket, .. }
            | Self::DeleteObject { bucket, .. }
            | Self::CreateMultipartUpload { bucket, .. }
            | Self::UploadPart { bucket, .. }
            | Self::CompleteMultipartUpload { bucket, .. }
            | Self::AbortMultipartUpload { bucket, .. }
            | Self::ListParts { bucket, .. } => Access::BucketOwner(bucket),
        }
    }
}

/// The bucket and key a request addresses, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Bucket name, if the path has one.
    pub bucket: Option<String>,
    /// Object key, if the path has one.
    pub key: Option<String>,
}

impl Target {
    /// `/bucket/key` as S3 shows it in an error's `Resource`.
    pub fn resource(&self) -> String {
        match (&self.bucket, &self.key) {
            (None, _) => "/".to_string(),
            (Some(b), None) => format!("/{b}"),
            (Some(b), Some(k)) => format!("/{b}/{k}"),
        }
    }
}

fn decode_path_part(raw: &str) -> Result<String, S3Error> {
    percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| S3Error::new(S3Code::InvalidURI))
}

/// The host name without port, lower-cased.
fn host_name(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(http::header::HOST)?.to_str().ok()?;
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    Some(name.to_ascii_lowercase())
}

/// Finds bucket and key: virtual-hosted style (`bucket.domain`) when a domain
/// is configured and the Host names a sub-domain of it, else path style.
/// Keys are plain names: `../x`, `a//b` and `.` are kept as they are.
pub fn target(uri: &Uri, headers: &HeaderMap, domain: Option<&str>) -> Result<Target, S3Error> {
    let path = uri.path();
    let Some(rest) = path.strip_prefix('/') else {
        return Err(S3Error::new(S3Code::InvalidURI));
    };
    let virtual_bucket = domain.and_then(|domain| {
        let host = host_name(headers)?;
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let bucket = host.strip_suffix(&domain)?.strip_suffix('.')?;
        (!bucket.is_empty()).then(|| bucket.to_string())
    });
    if let Some(bucket) = virtual_bucket {
        let key = (!rest.is_empty())
            .then(|| decode_path_part(rest))
            .transpose()?;
        return Ok(Target {
            bucket: Some(bucket),
            key,
        });
    }
    if rest.is_empty() {
        return Ok(Target {
            bucket: None,
            key: None,
        });
    }
    let (bucket, key) = match rest.split_once('/') {
        Some((bucket, key)) => (bucket, (!key.is_empty()).then_some(key)),
        None => (rest, None),
    };
    Ok(Target {
        bucket: Some(decode_path_part(bucket)?),
        key: key.map(decode_path_part).transpose()?,
    })
}

/// Sub-resources S3 defines that Tessera does not serve, with the name part
/// of their operations (`GET ?acl` on a bucket is GetBucketAcl).
const UNSUPPORTED_SUBRESOURCES: &[(&str, &str)] = &[
    ("accelerate", "AccelerateConfiguration"),
    ("acl", "Acl"),
    ("analytics", "AnalyticsConfiguration"),
    ("attributes", "Attributes"),
    ("cors", "Cors"),
    ("encryption", "Encryption"),
    ("intelligent-tiering", "IntelligentTieringConfiguration"),
    ("inventory", "InventoryConfiguration"),
    ("legal-hold", "LegalHold"),
    ("lifecycle", "LifecycleConfiguration"),
    ("logging", "Logging"),
    ("metadataTable", "MetadataTableConfiguration"),
    ("metrics", "MetricsConfiguration"),
    ("notification", "NotificationConfiguration"),
    ("object-lock", "ObjectLockConfiguration"),
    ("ownershipControls", "OwnershipControls"),
    ("policy", "Policy"),
    ("policyStatus", "PolicyStatus"),
    ("publicAccessBlock", "PublicAccessBlock"),
    ("replication", "Replication"),
    ("requestPayment", "RequestPayment"),
    ("restore", "Restore"),
    ("retention", "Retention"),
    ("select", "SelectContent"),
    ("session", "Session"),
    ("tagging", "Tagging"),
    ("torrent", "Torrent"),
    ("versioning", "Versioning"),
    ("website", "Website"),
];

fn verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "Get",
        Method::PUT => "Put",
        Method::DELETE => "Delete",
        Method::POST => "Post",
        _ => "Unknown",
    }
}

/// NotImplemented for a sub-resource keyword, naming its S3 operation.
fn unsupported_subresource(method: &Method, query: &Query, on_object: bool) -> Option<S3Error> {
    if query.has("versions") && !on_object {
        return Some(S3Error::not_implemented("ListObjectVersions"));
    }
    // `versionId=null` names the only version of an unversioned object.
    if query.get("versionId").is_some_and(|v| v != "null") {
        return Some(S3Error::not_implemented(
            "versioned object access (versionId)",
        ));
    }
    let (keyword, name) = UNSUPPORTED_SUBRESOURCES
        .iter()
        .find(|(keyword, _)| query.has(keyword))?;
    let level = if on_object { "Object" } else { "Bucket" };
    let op = format!("{}{level}{name} (?{keyword})", verb(method));
    Some(S3Error::not_implemented(&op))
}

fn method_not_served(method: &Method, what: &str) -> S3Error {
    S3Error::not_implemented(&format!("{method} on {what}"))
}

fn required<'q>(query: &'q Query, name: &str) -> Result<&'q str, S3Error> {
    query.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        S3Error::invalid_argument(format!("Missing required parameter {name}"))
            .detail("ArgumentName", name.to_string())
    })
}

/// Parses the request into its endpoint.
pub fn parse(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    domain: Option<&str>,
) -> Result<Endpoint, S3Error> {
    let target = target(uri, headers, domain)?;
    let query = Query::parse(uri.query())?;
    match (target.bucket, target.key) {
        (None, _) => match *method {
            Method::GET => Ok(Endpoint::ListBuckets),
            _ => Err(method_not_served(method, "the service")),
        },
        (Some(bucket), None) => bucket_endpoint(method, &query, bucket),
        (Some(bucket), Some(key)) => object_endpoint(method, &query, headers, bucket, key),
    }
}

fn bucket_endpoint(method: &Method, query: &Query, bucket: String) -> Result<Endpoint, S3Error> {
    if let Some(err) = unsupported_subresource(method, query, false) {
        return Err(err);
    }
    match *method {
        Method::GET if query.has("location") => Ok(Endpoint::GetBucketLocation { bucket }),
        Method::GET if query.has("uploads") => Ok(Endpoint::ListMultipartUploads {
            params: ListUploadsParams::from_query(query)?,
            bucket,
        }),
        Method::GET => match query.get("list-type") {
            Some("2") => Ok(Endpoint::ListObjectsV2 {
                params: ListV2Params::from_query(query)?,
                bucket,
            }),
            None => Ok(Endpoint::ListObjects {
                params: ListV1Params::from_query(query)?,
                bucket,
            }),
            Some(other) => Err(
                S3Error::invalid_argument(format!("Invalid list-type {other}"))
                    .detail("ArgumentName", "list-type"),
            ),
        },
        Method::PUT => Ok(Endpoint::CreateBucket { bucket }),
        Method::HEAD => Ok(Endpoint::HeadBucket { bucket }),
        Method::DELETE => Ok(Endpoint::DeleteBucket { bucket }),
        Method::POST if query.has("delete") => Ok(Endpoint::DeleteObjects { bucket }),
        Method::POST => Err(S3Error::not_implemented("PostObject (browser form upload)")),
        _ => Err(method_not_served(method, "a bucket")),
    }
}

fn object_endpoint(
    method: &Method,
    query: &Query,
    headers: &HeaderMap,
    bucket: String,
    key: String,
) -> Result<Endpoint, S3Error> {
    if let Some(err) = unsupported_subresource(method, query, true) {
        return Err(err);
    }
    if key.len() > MAX_KEY_LEN && matches!(*method, Method::PUT | Method::POST) {
        return Err(S3Error::new(S3Code::KeyTooLongError)
            .detail("Size", key.len().to_string())
            .detail("MaxSizeAllowed", MAX_KEY_LEN.to_string()));
    }
    let upload_id = query.get("uploadId");
    match *method {
        Method::PUT if headers.contains_key("x-amz-copy-source") => {
            let op = if upload_id.is_some() {
                "UploadPartCopy"
            } else {
                "CopyObject"
            };
            Err(S3Error::not_implemented(op))
        }
        Method::PUT if upload_id.is_some() || query.has("partNumber") => {
            let upload_id = required(query, "uploadId")?.to_string();
            let part_number = part_number(required(query, "partNumber")?)?;
            Ok(Endpoint::UploadPart {
                bucket,
                key,
                upload_id,
                part_number,
            })
        }
        Method::PUT => Ok(Endpoint::PutObject { bucket, key }),
        Method::POST if query.has("uploads") => Ok(Endpoint::CreateMultipartUpload { bucket, key }),
        Method::POST if upload_id.is_some() => Ok(Endpoint::CompleteMultipartUpload {
            upload_id: required(query, "uploadId")?.to_string(),
            bucket,
            key,
        }),
        Method::DELETE if upload_id.is_some() => Ok(Endpoint::AbortMultipartUpload {
            upload_id: required(query, "uploadId")?.to_string(),
            bucket,
            key,
        }),
        Method::DELETE => Ok(Endpoint::DeleteObject { bucket, key }),
        Method::GET if upload_id.is_some() => Ok(Endpoint::ListParts {
            upload_id: required(query, "uploadId")?.to_string(),
            params: ListPartsParams::from_query(query)?,
            bucket,
            key,
        }),
        Method::GET => Ok(Endpoint::GetObject {
            params: ReadParams::from_query(query)?,
            bucket,
            key,
        }),
        Method::HEAD => Ok(Endpoint::HeadObject {
            params: ReadParams::from_query(query)?,
            bucket,
            key,
        }),
        Method::POST => Err(method_not_served(
            method,
            "an object without ?uploads or ?uploadId",
        )),
        _ => Err(method_not_served(method, "an object")),
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
