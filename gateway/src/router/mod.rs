//! Request routing: what a request addresses (bucket and key, path- or
//! virtual-hosted-style), the checks every request passes before its
//! endpoint is looked up (sub-resources Tessera does not serve answer
//! NotImplemented here, in one place), the conditions and fields the table
//! of endpoints (`crate::endpoint`) is written with, and the access rules.

mod fields;
pub mod rules;
mod table;

pub use fields::{ObjectKey, PartNumber, RouteField, UploadId, VersionParam};
pub(crate) use table::s3_endpoints;

use crate::error::{S3Code, S3Error};
use crate::host_style::virtual_host_bucket;
use crate::params::Query;
use access::{Action, Right};
use http::{HeaderMap, Method, Uri};
use percent_encoding::percent_decode_str;

/// Longest object key S3 accepts, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

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

/// Finds bucket and key: virtual-hosted style (`bucket.domain`) when a domain
/// is configured and the Host names a sub-domain of it, else path style.
/// Keys are plain names: `../x`, `a//b` and `.` are kept as they are.
pub fn target(uri: &Uri, headers: &HeaderMap, domain: Option<&str>) -> Result<Target, S3Error> {
    let path = uri.path();
    let Some(rest) = path.strip_prefix('/') else {
        return Err(S3Error::new(S3Code::InvalidURI));
    };
    if let Some(bucket) = virtual_host_bucket(headers, domain) {
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
    ("intelligent-tiering", "IntelligentTieringConfiguration"),
    ("inventory", "InventoryConfiguration"),
    ("logging", "Logging"),
    ("metadataTable", "MetadataTableConfiguration"),
    ("metrics", "MetricsConfiguration"),
    ("notification", "NotificationConfiguration"),
    ("replication", "Replication"),
    ("requestPayment", "RequestPayment"),
    ("restore", "Restore"),
    ("select", "SelectContent"),
    ("session", "Session"),
    ("torrent", "Torrent"),
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

/// The value of query parameter `name`, or S3's error for a missing one.
pub(crate) fn required<'q>(query: &'q Query, name: &str) -> Result<&'q str, S3Error> {
    query.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        S3Error::invalid_argument(format!("Missing required parameter {name}"))
            .detail("ArgumentName", name.to_string())
    })
}

/// What a request addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// The service: no bucket in the path or host.
    Service,
    /// A bucket, no key.
    Bucket,
    /// An object: a bucket and a key.
    Object,
}

/// Who may call an endpoint, and the action it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access<'a> {
    /// Any authenticated user (ListBuckets shows each their own buckets).
    AnyUser {
        /// The action.
        action: Action,
    },
    /// Any authenticated user whose key is not limited; the bucket becomes theirs.
    CreateBucket,
    /// Whoever the bucket's settings grant the action (see `access::decide`),
    /// signed or not, with a key that allows its right there.
    Bucket {
        /// Bucket name.
        name: &'a str,
        /// The action.
        action: Action,
    },
    /// Anyone, signed or not: the handler decides from the bucket (CORS
    /// preflight, form upload with its own signed policy).
    Unsigned {
        /// Bucket name.
        name: &'a str,
        /// The action, whose right limited keys need.
        action: Action,
    },
}

impl Access<'_> {
    /// Whether a key limited to read rights may call it.
    pub fn is_read_only(&self) -> bool {
        match self {
            Self::AnyUser { action }
            | Self::Bucket { action, .. }
            | Self::Unsigned { action, .. } => action.right() == Right::Read,
            Self::CreateBucket => false,
        }
    }

    /// Whether an unsigned request may go on to the endpoint: to a bucket,
    /// whose settings may grant anyone (then judged like any other caller).
    pub fn allows_anonymous(&self) -> bool {
        matches!(self, Self::Bucket { .. } | Self::Unsigned { .. })
    }
}

/// One request as the routing rules see it: method, level, target, query
/// and headers, with the checks every request passes done.
pub struct RouteInput<'a> {
    /// The HTTP method.
    pub method: Method,
    /// What the request addresses.
    pub level: Level,
    /// The bucket and key.
    pub target: Target,
    /// The decoded query string.
    pub query: Query,
    /// The request headers.
    pub headers: &'a HeaderMap,
}

impl<'a> RouteInput<'a> {
    /// Reads the request's target and query, then refuses what no endpoint
    /// can serve: sub-resources Tessera does not offer (NotImplemented, in
    /// one place), version ids other than `null`, over-long keys on writes.
    pub fn new(
        method: &Method,
        uri: &Uri,
        headers: &'a HeaderMap,
        domain: Option<&str>,
    ) -> Result<Self, S3Error> {
        let target = target(uri, headers, domain)?;
        let query = Query::parse(uri.query())?;
        let level = match (&target.bucket, &target.key) {
            (None, _) => Level::Service,
            (Some(_), None) => Level::Bucket,
            (Some(_), Some(_)) => Level::Object,
        };
        if level != Level::Service && *method != Method::OPTIONS {
            if let Some(err) = unsupported_subresource(method, &query, level == Level::Object) {
                return Err(err);
            }
        }
        if let (Level::Object, Some(key)) = (level, &target.key) {
            if key.len() > MAX_KEY_LEN && matches!(*method, Method::PUT | Method::POST) {
                return Err(S3Error::new(S3Code::KeyTooLongError)
                    .detail("Size", key.len().to_string())
                    .detail("MaxSizeAllowed", MAX_KEY_LEN.to_string()));
            }
        }
        Ok(Self {
            method: method.clone(),
            level,
            target,
            query,
            headers,
        })
    }

    /// The bucket the request addresses (rules of bucket endpoints hold only
    /// for requests that address one).
    pub fn bucket_name(&self) -> Result<String, S3Error> {
        self.target.bucket.clone().ok_or_else(|| {
            S3Error::internal("a bucket endpoint matched a request without a bucket")
        })
    }

    /// S3's answer to a request that no endpoint's rule matched.
    pub fn unmatched(&self) -> S3Error {
        let method = &self.method;
        match self.level {
            Level::Service => method_not_served(method, "the service"),
            Level::Bucket if *method == Method::GET => match self.query.get("list-type") {
                Some(other) => S3Error::invalid_argument(format!("Invalid list-type {other}"))
                    .detail("ArgumentName", "list-type"),
                None => method_not_served(method, "a bucket"),
            },
            Level::Bucket if *method == Method::POST => S3Error::new(S3Code::PreconditionFailed)
                .detail(
                    "Condition",
                    "Bucket POST must be of the enclosure-type multipart/form-data",
                ),
            Level::Bucket => method_not_served(method, "a bucket"),
            Level::Object if *method == Method::POST => {
                method_not_served(method, "an object without ?uploads or ?uploadId")
            }
            Level::Object => method_not_served(method, "an object"),
        }
    }
}
