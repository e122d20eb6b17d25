//! Request routing: every request becomes one [`Endpoint`] (from method, host,
//! path, query keywords and headers) before auth or any handler runs, with
//! the access each endpoint needs next to it. Operations Tessera does not
//! offer fall to NotImplemented here, in one place.

use crate::error::{S3Code, S3Error};
use crate::params::{
    part_number, ListPartsParams, ListUploadsParams, ListV1Params, ListV2Params,
    ListVersionsParams, Query, ReadParams,
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
    /// GET /bucket?cors.
    GetBucketCors {
        /// Bucket name.
        bucket: String,
    },
    /// PUT /bucket?cors.
    PutBucketCors {
        /// Bucket name.
        bucket: String,
    },
    /// DELETE /bucket?cors.
    DeleteBucketCors {
        /// Bucket name.
        bucket: String,
    },
    /// OPTIONS /bucket[/key]: a browser's CORS preflight, answered from the
    /// bucket's rules without a signature.
    CorsPreflight {
        /// Bucket name.
        bucket: String,
    },
    /// POST /bucket with multipart/form-data: a browser form upload whose
    /// policy document carries the signature.
    PostObject {
        /// Bucket name.
        bucket: String,
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
    /// PUT /bucket/key with x-amz-copy-source.
    CopyObject {
        /// Destination bucket.
        bucket: String,
        /// Destination key.
        key: String,
    },
    /// PUT /bucket/key?partNumber&uploadId with x-amz-copy-source.
    UploadPartCopy {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
        /// Upload id.
        upload_id: String,
        /// Part number, 1..=10000.
        part_number: u32,
    },
    /// GET /bucket/key?tagging.
    GetObjectTagging {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// PUT /bucket/key?tagging.
    PutObjectTagging {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// DELETE /bucket/key?tagging.
    DeleteObjectTagging {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// GET /bucket?tagging.
    GetBucketTagging {
        /// Bucket name.
        bucket: String,
    },
    /// PUT /bucket?tagging.
    PutBucketTagging {
        /// Bucket name.
        bucket: String,
    },
    /// DELETE /bucket?tagging.
    DeleteBucketTagging {
        /// Bucket name.
        bucket: String,
    },
    /// GET /bucket?versioning.
    GetBucketVersioning {
        /// Bucket name.
        bucket: String,
    },
    /// PUT /bucket?versioning.
    PutBucketVersioning {
        /// Bucket name.
        bucket: String,
    },
    /// GET /bucket?versions.
    ListObjectVersions {
        /// Bucket name.
        bucket: String,
        /// Listing parameters.
        params: ListVersionsParams,
    },
    /// GET /bucket?acl.
    GetBucketAcl {
        /// Bucket name.
        bucket: String,
    },
    /// PUT /bucket?acl.
    PutBucketAcl {
        /// Bucket name.
        bucket: String,
    },
    /// GET /bucket/key?acl.
    GetObjectAcl {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// PUT /bucket/key?acl.
    PutObjectAcl {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
    },
    /// GET /bucket/key?attributes.
    GetObjectAttributes {
        /// Bucket name.
        bucket: String,
        /// Object key.
        key: String,
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
    /// Anyone, signed or not: the handler decides from the bucket (CORS
    /// preflight, form upload with its own signed policy).
    Unsigned(&'a str),
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
            Self::GetBucketCors { .. } => "GetBucketCors",
            Self::PutBucketCors { .. } => "PutBucketCors",
            Self::DeleteBucketCors { .. } => "DeleteBucketCors",
            Self::CorsPreflight { .. } => "PreflightRequest",
            Self::PostObject { .. } => "PostObject",
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
            Self::CopyObject { .. } => "CopyObject",
            Self::UploadPartCopy { .. } => "UploadPartCopy",
            Self::GetObjectTagging { .. } => "GetObjectTagging",
            Self::PutObjectTagging { .. } => "PutObjectTagging",
            Self::DeleteObjectTagging { .. } => "DeleteObjectTagging",
            Self::GetBucketTagging { .. } => "GetBucketTagging",
            Self::PutBucketTagging { .. } => "PutBucketTagging",
            Self::DeleteBucketTagging { .. } => "DeleteBucketTagging",
            Self::GetBucketVersioning { .. } => "GetBucketVersioning",
            Self::PutBucketVersioning { .. } => "PutBucketVersioning",
            Self::ListObjectVersions { .. } => "ListObjectVersions",
            Self::GetBucketAcl { .. } => "GetBucketAcl",
            Self::PutBucketAcl { .. } => "PutBucketAcl",
            Self::GetObjectAcl { .. } => "GetObjectAcl",
            Self::PutObjectAcl { .. } => "PutObjectAcl",
            Self::GetObjectAttributes { .. } => "GetObjectAttributes",
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
            | Self::GetBucketCors { bucket }
            | Self::PutBucketCors { bucket }
            | Self::DeleteBucketCors { bucket }
            | Self::DeleteObjects { bucket }
            | Self::PutObject { bucket, .. }
            | Self::GetObject { bucket, .. }
            | Self::HeadObject { bucket, .. }
            | Self::DeleteObject { bucket, .. }
            | Self::CreateMultipartUpload { bucket, .. }
            | Self::UploadPart { bucket, .. }
            | Self::CompleteMultipartUpload { bucket, .. }
            | Self::AbortMultipartUpload { bucket, .. }
            | Self::ListParts { bucket, .. }
            | Self::CopyObject { bucket, .. }
            | Self::UploadPartCopy { bucket, .. }
            | Self::GetObjectTagging { bucket, .. }
            | Self::PutObjectTagging { bucket, .. }
            | Self::DeleteObjectTagging { bucket, .. }
            | Self::GetBucketTagging { bucket }
            | Self::PutBucketTagging { bucket }
            | Self::DeleteBucketTagging { bucket }
            | Self::GetBucketVersioning { bucket }
            | Self::PutBucketVersioning { bucket }
            | Self::ListObjectVersions { bucket, .. }
            | Self::GetBucketAcl { bucket }
            | Self::PutBucketAcl { bucket }
            | Self::GetObjectAcl { bucket, .. }
            | Self::PutObjectAcl { bucket, .. }
            | Self::GetObjectAttributes { bucket, .. } => Access::BucketOwner(bucket),
            Self::CorsPreflight { bucket } | Self::PostObject { bucket } => {
                Access::Unsigned(bucket)
            }
        }
    }

    /// Whether the endpoint only reads: a key limited to read rights on a
    /// bucket may call it.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            Self::ListBuckets
                | Self::HeadBucket { .. }
                | Self::GetBucketLocation { .. }
                | Self::GetBucketCors { .. }
                | Self::ListObjects { .. }
                | Self::ListObjectsV2 { .. }
                | Self::ListMultipartUploads { .. }
                | Self::GetObject { .. }
                | Self::HeadObject { .. }
                | Self::ListParts { .. }
                | Self::CorsPreflight { .. }
                | Self::GetObjectTagging { .. }
                | Self::GetBucketTagging { .. }
                | Self::GetBucketVersioning { .. }
                | Self::ListObjectVersions { .. }
                | Self::GetBucketAcl { .. }
                | Self::GetObjectAcl { .. }
                | Self::GetObjectAttributes { .. }
        )
    }

    /// Whether anonymous callers may use the endpoint on a public-read bucket.
    pub fn is_public_read(&self) -> bool {
        matches!(
            self,
            Self::ListObjects { .. }
                | Self::ListObjectsV2 { .. }
                | Self::GetObject { .. }
                | Self::HeadObject { .. }
                | Self::HeadBucket { .. }
        )
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
    ("analytics", "AnalyticsConfiguration"),
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
    ("torrent", "Torrent"),
    ("website", "Website"),
];

/// The error for a version id other than `null` (Tessera keeps one version
/// per key): 404 NoSuchVersion when it has the form of an S3 version id (32
/// URL-safe characters), else 400 InvalidArgument, as S3 answers.
pub fn unknown_version(id: &str) -> S3Error {
    let well_formed = id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
    if well_formed {
        S3Error::new(S3Code::NoSuchVersion).detail("VersionId", id.to_string())
    } else {
        S3Error::invalid_argument("Invalid version id specified")
            .detail("ArgumentName", "versionId")
            .detail("ArgumentValue", id.to_string())
    }
}

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
    // `versionId=null` names the only version of an object in an unversioned
    // bucket; no other id names one.
    if let Some(id) = query.get("versionId").filter(|v| *v != "null") {
        return Some(unknown_version(id));
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
        (Some(bucket), _) if *method == Method::OPTIONS => Ok(Endpoint::CorsPreflight { bucket }),
        (Some(bucket), None) => bucket_endpoint(method, &query, headers, bucket),
        (Some(bucket), Some(key)) => object_endpoint(method, &query, headers, bucket, key),
    }
}

fn bucket_endpoint(
    method: &Method,
    query: &Query,
    headers: &HeaderMap,
    bucket: String,
) -> Result<Endpoint, S3Error> {
    if let Some(err) = unsupported_subresource(method, query, false) {
        return Err(err);
    }
    if let Some(endpoint) = bucket_subresource_endpoint(method, query, &bucket)? {
        return Ok(endpoint);
    }
    match *method {
        Method::GET if query.has("cors") => Ok(Endpoint::GetBucketCors { bucket }),
        Method::PUT if query.has("cors") => Ok(Endpoint::PutBucketCors { bucket }),
        Method::DELETE if query.has("cors") => Ok(Endpoint::DeleteBucketCors { bucket }),
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
        Method::POST if is_form_upload(headers) => Ok(Endpoint::PostObject { bucket }),
        Method::POST => Err(S3Error::new(S3Code::PreconditionFailed).detail(
            "Condition",
            "Bucket POST must be of the enclosure-type multipart/form-data",
        )),
        _ => Err(method_not_served(method, "a bucket")),
    }
}

/// A POST whose body is an HTML form (`multipart/form-data`).
fn is_form_upload(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
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
    if let Some(endpoint) = object_subresource_endpoint(method, query, &bucket, &key) {
        return Ok(endpoint);
    }
    match *method {
        Method::PUT if headers.contains_key("x-amz-copy-source") => match upload_id {
            Some(_) => Ok(Endpoint::UploadPartCopy {
                upload_id: required(query, "uploadId")?.to_string(),
                part_number: part_number(required(query, "partNumber")?)?,
                bucket,
                key,
            }),
            None => Ok(Endpoint::CopyObject { bucket, key }),
        },
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

/// Bucket sub-resources served for tags, versions and ACLs.
fn bucket_subresource_endpoint(
    method: &Method,
    query: &Query,
    bucket: &str,
) -> Result<Option<Endpoint>, S3Error> {
    let bucket = bucket.to_string();
    Ok(Some(match *method {
        Method::GET if query.has("tagging") => Endpoint::GetBucketTagging { bucket },
        Method::PUT if query.has("tagging") => Endpoint::PutBucketTagging { bucket },
        Method::DELETE if query.has("tagging") => Endpoint::DeleteBucketTagging { bucket },
        Method::GET if query.has("versioning") => Endpoint::GetBucketVersioning { bucket },
        Method::PUT if query.has("versioning") => Endpoint::PutBucketVersioning { bucket },
        Method::GET if query.has("versions") => Endpoint::ListObjectVersions {
            params: ListVersionsParams::from_query(query)?,
            bucket,
        },
        Method::GET if query.has("acl") => Endpoint::GetBucketAcl { bucket },
        Method::PUT if query.has("acl") => Endpoint::PutBucketAcl { bucket },
        _ => return Ok(None),
    }))
}

/// Object sub-resources served for tags, ACLs and attributes.
fn object_subresource_endpoint(
    method: &Method,
    query: &Query,
    bucket: &str,
    key: &str,
) -> Option<Endpoint> {
    let (bucket, key) = (bucket.to_string(), key.to_string());
    Some(match *method {
        Method::GET if query.has("tagging") => Endpoint::GetObjectTagging { bucket, key },
        Method::PUT if query.has("tagging") => Endpoint::PutObjectTagging { bucket, key },
        Method::DELETE if query.has("tagging") => Endpoint::DeleteObjectTagging { bucket, key },
        Method::GET if query.has("acl") => Endpoint::GetObjectAcl { bucket, key },
        Method::PUT if query.has("acl") => Endpoint::PutObjectAcl { bucket, key },
        Method::GET if query.has("attributes") => Endpoint::GetObjectAttributes { bucket, key },
        _ => return None,
    })
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
