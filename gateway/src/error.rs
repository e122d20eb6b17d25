//! The one map from every error the gateway meets (meta, client streams, auth,
//! request bodies, the gateway's own checks) to an S3 error code, HTTP status
//! and AWS's message text, and the S3 XML error body.

use crate::auth::{AuthError, BodyError};
use crate::telemetry::{ErrorCodeLabel, RequestId};
use crate::xml::XmlWriter;
use axum::body::Body;
use axum::response::Response;
use block_client::ClientError;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::StatusCode;
use meta_api::MetaError;
use std::borrow::Cow;

/// The S3 error codes Tessera answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum S3Code {
    /// The caller may not do this (403).
    AccessDenied,
    /// A CORS preflight that no rule of the bucket allows (403).
    AccessForbidden,
    /// A form upload whose body is not well-formed multipart/form-data (400).
    MalformedPOSTRequest,
    /// The bucket has no CORS configuration (404).
    NoSuchCORSConfiguration,
    /// The Authorization header cannot be parsed (400).
    AuthorizationHeaderMalformed,
    /// Presigned URL query parameters are missing or malformed (400).
    AuthorizationQueryParametersError,
    /// The body does not match its Content-MD5 (400).
    BadDigest,
    /// The bucket name is taken by another user (409).
    BucketAlreadyExists,
    /// The caller already owns this bucket (409).
    BucketAlreadyOwnedByYou,
    /// The bucket still holds objects or uploads (409).
    BucketNotEmpty,
    /// The body exceeds the largest size accepted (400).
    EntityTooLarge,
    /// A part other than the last is below the minimum size (400).
    EntityTooSmall,
    /// The body ended before its declared length (400).
    IncompleteBody,
    /// The server failed (500).
    InternalError,
    /// The access key does not exist (403).
    InvalidAccessKeyId,
    /// A parameter or header value is invalid (400).
    InvalidArgument,
    /// The bucket name breaks the naming rules (400).
    InvalidBucketName,
    /// Content-MD5 is not valid base64 of 16 bytes (400).
    InvalidDigest,
    /// A named part is missing or its ETag differs (400).
    InvalidPart,
    /// The requested part number is not satisfiable (416).
    InvalidPartNumber,
    /// Parts are not listed in ascending order (400).
    InvalidPartOrder,
    /// The range starts past the end of the object (416).
    InvalidRange,
    /// The request is malformed in some other way (400).
    InvalidRequest,
    /// A tag key or value breaks S3's rules.
    InvalidTag,
    /// The object has no tag set (GetBucketTagging on an untagged bucket).
    NoSuchTagSet,
    /// The version id names no version of the object.
    NoSuchVersion,
    /// The URI cannot be decoded (400).
    InvalidURI,
    /// The object key is too long (400).
    KeyTooLongError,
    /// The XML body is malformed or not what was expected (400).
    MalformedXML,
    /// The request body is larger than allowed (400).
    MaxMessageLengthExceeded,
    /// User metadata headers exceed their size limit (400).
    MetadataTooLarge,
    /// A body was sent without a declared length (411).
    MissingContentLength,
    /// A required security header is missing (400).
    MissingSecurityHeader,
    /// The bucket does not exist (404).
    NoSuchBucket,
    /// The object does not exist (404).
    NoSuchKey,
    /// The upload does not exist (404).
    NoSuchUpload,
    /// The operation or feature is not supported (501).
    NotImplemented,
    /// A conditional header did not hold (412).
    PreconditionFailed,
    /// The request time is too far from the server's clock (403).
    RequestTimeTooSkewed,
    /// The back end cannot serve the request now (503).
    ServiceUnavailable,
    /// The signature does not match the request (403).
    SignatureDoesNotMatch,
    /// The body does not match x-amz-content-sha256 (400).
    XAmzContentSHA256Mismatch,
}

impl S3Code {
    /// The code as it appears in `<Code>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AccessDenied => "AccessDenied",
            Self::AccessForbidden => "AccessForbidden",
            Self::MalformedPOSTRequest => "MalformedPOSTRequest",
            Self::NoSuchCORSConfiguration => "NoSuchCORSConfiguration",
            Self::AuthorizationHeaderMalformed => "AuthorizationHeaderMalformed",
            Self::AuthorizationQueryParametersError => "AuthorizationQueryParametersError",
            Self::BadDigest => "BadDigest",
            Self::BucketAlreadyExists => "BucketAlreadyExists",
            Self::BucketAlreadyOwnedByYou => "BucketAlreadyOwnedByYou",
            Self::BucketNotEmpty => "BucketNotEmpty",
            Self::EntityTooLarge => "EntityTooLarge",
            Self::EntityTooSmall => "EntityTooSmall",
            Self::IncompleteBody => "IncompleteBody",
            Self::InternalError => "InternalError",
            Self::InvalidAccessKeyId => "InvalidAccessKeyId",
            Self::InvalidArgument => "InvalidArgument",
            Self::InvalidBucketName => "InvalidBucketName",
            Self::InvalidDigest => "InvalidDigest",
            Self::InvalidPart => "InvalidPart",
            Self::InvalidPartNumber => "InvalidPartNumber",
            Self::InvalidPartOrder => "InvalidPartOrder",
            Self::InvalidRange => "InvalidRange",
            Self::InvalidRequest => "InvalidRequest",
            Self::InvalidTag => "InvalidTag",
            Self::NoSuchTagSet => "NoSuchTagSet",
            Self::NoSuchVersion => "NoSuchVersion",
            Self::InvalidURI => "InvalidURI",
            Self::KeyTooLongError => "KeyTooLongError",
            Self::MalformedXML => "MalformedXML",
            Self::MaxMessageLengthExceeded => "MaxMessageLengthExceeded",
            Self::MetadataTooLarge => "MetadataTooLarge",
            Self::MissingContentLength => "MissingContentLength",
            Self::MissingSecurityHeader => "MissingSecurityHeader",
            Self::NoSuchBucket => "NoSuchBucket",
            Self::NoSuchKey => "NoSuchKey",
            Self::NoSuchUpload => "NoSuchUpload",
            Self::NotImplemented => "NotImplemented",
            Self::PreconditionFailed => "PreconditionFailed",
            Self::RequestTimeTooSkewed => "RequestTimeTooSkewed",
            Self::ServiceUnavailable => "ServiceUnavailable",
            Self::SignatureDoesNotMatch => "SignatureDoesNotMatch",
            Self::XAmzContentSHA256Mismatch => "XAmzContentSHA256Mismatch",
        }
    }

    /// The HTTP status S3 answers this code with.
    pub fn status(self) -> StatusCode {
        match self {
            Self::NoSuchCORSConfiguration => StatusCode::NOT_FOUND,
            Self::AccessDenied
            | Self::AccessForbidden
            | Self::InvalidAccessKeyId
            | Self::RequestTimeTooSkewed
            | Self::SignatureDoesNotMatch => StatusCode::FORBIDDEN,
            Self::BucketAlreadyExists | Self::BucketAlreadyOwnedByYou | Self::BucketNotEmpty => {
                StatusCode::CONFLICT
            }
            Self::NoSuchBucket
            | Self::NoSuchKey
            | Self::NoSuchUpload
            | Self::NoSuchTagSet
            | Self::NoSuchVersion => StatusCode::NOT_FOUND,
            Self::InvalidRange | Self::InvalidPartNumber => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::MissingContentLength => StatusCode::LENGTH_REQUIRED,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            Self::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::AuthorizationHeaderMalformed
            | Self::AuthorizationQueryParametersError
            | Self::BadDigest
            | Self::EntityTooLarge
            | Self::EntityTooSmall
            | Self::IncompleteBody
            | Self::InvalidArgument
            | Self::InvalidBucketName
            | Self::InvalidDigest
            | Self::InvalidPart
            | Self::InvalidPartOrder
            | Self::InvalidRequest
            | Self::InvalidTag
            | Self::MalformedPOSTRequest
            | Self::InvalidURI
            | Self::KeyTooLongError
            | Self::MalformedXML
            | Self::MaxMessageLengthExceeded
            | Self::MetadataTooLarge
            | Self::MissingSecurityHeader
            | Self::XAmzContentSHA256Mismatch => StatusCode::BAD_REQUEST,
        }
    }

    /// AWS's message text for this code.
    pub fn default_message(self) -> &'static str {
        match self {
            Self::AccessDenied => "Access Denied",
            Self::AccessForbidden => {
                "CORSResponse: This CORS request is not allowed. This is usually because the \
                 evalution of Origin, request method / Access-Control-Request-Method or \
                 Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."
            }
            Self::NoSuchCORSConfiguration => "The CORS configuration does not exist",
            Self::MalformedPOSTRequest => {
                "The body of your POST request is not well-formed multipart/form-data."
            }
            Self::AuthorizationHeaderMalformed => "The authorization header is malformed.",
            Self::AuthorizationQueryParametersError => {
                "Error parsing the X-Amz-Credential parameter."
            }
            Self::BadDigest => "The Content-MD5 you specified did not match what we received.",
            Self::BucketAlreadyExists => {
                "The requested bucket name is not available. The bucket namespace is shared by \
                 all users of the system. Please select a different name and try again."
            }
            Self::BucketAlreadyOwnedByYou => {
                "Your previous request to create the named bucket succeeded and you already own it."
            }
            Self::BucketNotEmpty => "The bucket you tried to delete is not empty",
            Self::EntityTooLarge => "Your proposed upload exceeds the maximum allowed object size.",
            Self::EntityTooSmall => {
                "Your proposed upload is smaller than the minimum allowed object size."
            }
            Self::IncompleteBody => {
                "You did not provide the number of bytes specified by the Content-Length HTTP header"
            }
            Self::InternalError => "We encountered an internal error. Please try again.",
            Self::InvalidAccessKeyId => {
                "The AWS Access Key Id you provided does not exist in our records."
            }
            Self::InvalidArgument => "Invalid Argument",
            Self::InvalidBucketName => "The specified bucket is not valid.",
            Self::InvalidDigest => "The Content-MD5 you specified was invalid.",
            Self::InvalidPart => {
                "One or more of the specified parts could not be found.  The part may not have \
                 been uploaded, or the specified entity tag may not match the part's entity tag."
            }
            Self::InvalidPartNumber => "The requested partnumber is not satisfiable",
            Self::InvalidPartOrder => {
                "The list of parts was not in ascending order. Parts must be ordered by part number."
            }
            Self::InvalidRange => "The requested range is not satisfiable",
            Self::InvalidRequest => "Invalid Request",
            Self::InvalidTag => "The TagValue you have provided is invalid",
            Self::NoSuchTagSet => "The TagSet does not exist",
            Self::NoSuchVersion => {
                "The specified version does not exist."
            }
            Self::InvalidURI => "Couldn't parse the specified URI.",
            Self::KeyTooLongError => "Your key is too long",
            Self::MalformedXML => {
                "The XML you provided was not well-formed or did not validate against our \
                 published schema"
            }
            Self::MaxMessageLengthExceeded => "Your request was too big.",
            Self::MetadataTooLarge => {
                "Your metadata headers exceed the maximum allowed metadata size."
            }
            Self::MissingContentLength => "You must provide the Content-Length HTTP header.",
            Self::MissingSecurityHeader => "Your request was missing a required header",
            Self::NoSuchBucket => "The specified bucket does not exist",
            Self::NoSuchKey => "The specified key does not exist.",
            Self::NoSuchUpload => {
                "The specified upload does not exist. The upload ID may be invalid, or the \
                 upload may have been aborted or completed."
            }
            Self::NotImplemented => {
                "A header you provided implies functionality that is not implemented"
            }
            Self::PreconditionFailed => {
                "At least one of the pre-conditions you specified did not hold"
            }
            Self::RequestTimeTooSkewed => {
                "The difference between the request time and the current time is too large."
            }
            Self::ServiceUnavailable => "Please reduce your request rate.",
            Self::SignatureDoesNotMatch => {
                "The request signature we calculated does not match the signature you provided. \
                 Check your key and signing method."
            }
            Self::XAmzContentSHA256Mismatch => {
                "The provided 'x-amz-content-sha256' header does not match what was computed."
            }
        }
    }
}

/// An S3 error on its way to the client: code, message, extra XML elements
/// (`BucketName`, `Key`, `UploadId`, ...) and extra response headers.
#[derive(Clone, Debug)]
pub struct S3Error {
    code: S3Code,
    message: Cow<'static, str>,
    details: Vec<(&'static str, String)>,
    headers: Vec<(HeaderName, String)>,
}

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for S3Error {}

impl S3Error {
    /// An error with AWS's standard message for `code`.
    pub fn new(code: S3Code) -> Self {
        Self {
            code,
            message: Cow::Borrowed(code.default_message()),
            details: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// An error with a specific message.
    pub fn with_message(code: S3Code, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            message: message.into(),
            ..Self::new(code)
        }
    }

    /// Adds an element to the XML body after `RequestId` (e.g. `BucketName`).
    pub fn detail(mut self, element: &'static str, value: impl Into<String>) -> Self {
        self.details.push((element, value.into()));
        self
    }

    /// Adds a response header (e.g. `Content-Range` on InvalidRange).
    pub fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The S3 code.
    pub fn code(&self) -> S3Code {
        self.code
    }

    /// The message text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// InvalidArgument with a message and the offending argument.
    pub fn invalid_argument(message: impl Into<Cow<'static, str>>) -> Self {
        Self::with_message(S3Code::InvalidArgument, message)
    }

    /// NoSuchBucket naming the bucket.
    pub fn no_such_bucket(bucket: &str) -> Self {
        Self::new(S3Code::NoSuchBucket).detail("BucketName", bucket)
    }

    /// NoSuchKey naming the key.
    pub fn no_such_key(key: &str) -> Self {
        Self::new(S3Code::NoSuchKey).detail("Key", key)
    }

    /// NoSuchUpload naming the upload.
    pub fn no_such_upload(upload_id: &str) -> Self {
        Self::new(S3Code::NoSuchUpload).detail("UploadId", upload_id)
    }

    /// NotImplemented naming the S3 operation Tessera does not offer.
    pub fn not_implemented(operation: &str) -> Self {
        Self::with_message(
            S3Code::NotImplemented,
            format!("The {operation} operation is not implemented by this server."),
        )
    }

    /// InternalError with the standard message; the cause goes to the log only.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(S3Code::InternalError)
    }

    /// The XML body: Code, Message, Resource, RequestId, then the details.
    pub fn to_xml(&self, resource: &str, request_id: &str) -> Vec<u8> {
        let mut w = XmlWriter::new();
        w.open("Error");
        w.element("Code", self.code.as_str());
        w.element("Message", &self.message);
        w.element("Resource", resource);
        w.element("RequestId", request_id);
        for (name, value) in &self.details {
            w.element(name, value);
        }
        w.close("Error");
        w.finish()
    }

    /// The HTTP response: the XML body, or no body at all for HEAD.
    pub fn into_response(self, resource: &str, request_id: &RequestId, head: bool) -> Response {
        let status = self.code.status();
        if status.is_server_error() {
            tracing::warn!(code = self.code.as_str(), message = %self.message, "request failed");
        } else {
            tracing::debug!(code = self.code.as_str(), message = %self.message, "request refused");
        }
        let body = if head {
            Body::empty()
        } else {
            Body::from(self.to_xml(resource, request_id.as_str()))
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        if !head {
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
        }
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
            .extensions_mut()
            .insert(ErrorCodeLabel(self.code.as_str()));
        response
    }
}

impl From<MetaError> for S3Error {
    fn from(e: MetaError) -> Self {
        match e {
            MetaError::NoSuchBucket(b) => Self::no_such_bucket(&b),
            MetaError::BucketAlreadyExists(b) => {
                Self::new(S3Code::BucketAlreadyExists).detail("BucketName", b)
            }
            MetaError::BucketAlreadyOwnedByYou(b) => {
                Self::new(S3Code::BucketAlreadyOwnedByYou).detail("BucketName", b)
            }
            MetaError::BucketNotEmpty(b) => {
                Self::new(S3Code::BucketNotEmpty).detail("BucketName", b)
            }
            MetaError::NoSuchKey(k) => Self::no_such_key(&k),
            MetaError::NoSuchUpload(u) => Self::no_such_upload(&u),
            MetaError::InvalidPart(n) => {
                Self::new(S3Code::InvalidPart).detail("PartNumber", n.to_string())
            }
            MetaError::InvalidPartOrder => Self::new(S3Code::InvalidPartOrder),
            MetaError::PreconditionFailed => Self::new(S3Code::PreconditionFailed),
            MetaError::EntityTooSmall(n) => Self::new(S3Code::EntityTooSmall)
                .detail("PartNumber", n.to_string())
                .detail("MinSizeAllowed", "5242880"),
            e @ MetaError::NotEnoughDatanodes { .. } => {
                Self::with_message(S3Code::ServiceUnavailable, e.to_string())
            }
            MetaError::NoSuchAccessKey(_) => Self::new(S3Code::InvalidAccessKeyId),
            MetaError::Unauthorized => Self::new(S3Code::AccessDenied),
            MetaError::InvalidRequest(m) => Self::with_message(S3Code::InvalidRequest, m),
            e @ MetaError::Transport(_) => {
                tracing::warn!(error = %e, "meta unreachable");
                Self::with_message(
                    S3Code::ServiceUnavailable,
                    "The metadata service is unavailable.",
                )
            }
            e @ (MetaError::NoSuchUser(_)
            | MetaError::UserExists(_)
            | MetaError::UserHasBuckets(_)
            | MetaError::Store(_)
            | MetaError::Unauthenticated(_)
            | MetaError::Protocol(_)) => Self::internal(e),
        }
    }
}

impl From<ClientError> for S3Error {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Meta(m) => m.into(),
            e @ (ClientError::Io { .. }
            | ClientError::Timeout { .. }
            | ClientError::Unavailable(_)) => {
                tracing::warn!(error = %e, "datanodes unavailable");
                Self::with_message(
                    S3Code::ServiceUnavailable,
                    "Not enough datanodes answered to serve the request; please retry.",
                )
            }
            e @ (ClientError::Protocol { .. }
            | ClientError::Checksum { .. }
            | ClientError::Remote { .. }
            | ClientError::Closed) => Self::internal(e),
        }
    }
}

impl From<AuthError> for S3Error {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::AccessDenied(m) => Self::with_message(S3Code::AccessDenied, m),
            AuthError::InvalidAccessKeyId => Self::new(S3Code::InvalidAccessKeyId),
            AuthError::SignatureDoesNotMatch => Self::new(S3Code::SignatureDoesNotMatch),
            AuthError::AuthorizationHeaderMalformed(m) => {
                Self::with_message(S3Code::AuthorizationHeaderMalformed, m)
            }
            AuthError::AuthorizationQueryParametersError(m) => {
                Self::with_message(S3Code::AuthorizationQueryParametersError, m)
            }
            AuthError::RequestTimeTooSkewed => Self::new(S3Code::RequestTimeTooSkewed),
            AuthError::MissingSecurityHeader(m) => {
                Self::with_message(S3Code::MissingSecurityHeader, m)
            }
            AuthError::InvalidArgument(m) => Self::with_message(S3Code::InvalidArgument, m),
            AuthError::InvalidRequest(m) => Self::with_message(S3Code::InvalidRequest, m),
            AuthError::MissingContentLength => Self::new(S3Code::MissingContentLength),
            AuthError::Meta(m) => m.into(),
        }
    }
}

impl From<BodyError> for S3Error {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::SignatureDoesNotMatch => Self::new(S3Code::SignatureDoesNotMatch),
            BodyError::ContentSha256Mismatch => Self::new(S3Code::XAmzContentSHA256Mismatch),
            BodyError::BadDigest(m) => Self::with_message(S3Code::BadDigest, m),
            BodyError::InvalidDigest(m) => Self::with_message(S3Code::InvalidDigest, m),
            BodyError::IncompleteBody => Self::new(S3Code::IncompleteBody),
            BodyError::MalformedChunk(m) => Self::with_message(S3Code::IncompleteBody, m),
            BodyError::Io(m) => {
                tracing::debug!(cause = %m, "request body read failed");
                Self::new(S3Code::IncompleteBody)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_s3_status() {
        let table: &[(S3Code, u16)] = &[
            (S3Code::AccessDenied, 403),
            (S3Code::AccessForbidden, 403),
            (S3Code::MalformedPOSTRequest, 400),
            (S3Code::NoSuchCORSConfiguration, 404),
            (S3Code::AuthorizationHeaderMalformed, 400),
            (S3Code::AuthorizationQueryParametersError, 400),
            (S3Code::BadDigest, 400),
            (S3Code::BucketAlreadyExists, 409),
            (S3Code::BucketAlreadyOwnedByYou, 409),
            (S3Code::BucketNotEmpty, 409),
            (S3Code::EntityTooLarge, 400),
            (S3Code::EntityTooSmall, 400),
            (S3Code::IncompleteBody, 400),
            (S3Code::InternalError, 500),
            (S3Code::InvalidAccessKeyId, 403),
            (S3Code::InvalidArgument, 400),
            (S3Code::InvalidBucketName, 400),
            (S3Code::InvalidDigest, 400),
            (S3Code::InvalidPart, 400),
            (S3Code::InvalidPartNumber, 416),
            (S3Code::InvalidPartOrder, 400),
            (S3Code::InvalidRange, 416),
            (S3Code::InvalidRequest, 400),
            (S3Code::InvalidURI, 400),
            (S3Code::KeyTooLongError, 400),
            (S3Code::MalformedXML, 400),
            (S3Code::MaxMessageLengthExceeded, 400),
            (S3Code::MetadataTooLarge, 400),
            (S3Code::MissingContentLength, 411),
            (S3Code::MissingSecurityHeader, 400),
            (S3Code::NoSuchBucket, 404),
            (S3Code::NoSuchKey, 404),
            (S3Code::NoSuchUpload, 404),
            (S3Code::NotImplemented, 501),
            (S3Code::PreconditionFailed, 412),
            (S3Code::RequestTimeTooSkewed, 403),
            (S3Code::ServiceUnavailable, 503),
            (S3Code::SignatureDoesNotMatch, 403),
            (S3Code::XAmzContentSHA256Mismatch, 400),
        ];
        for (code, status) in table {
            assert_eq!(code.status().as_u16(), *status, "{code:?}");
            assert!(!code.default_message().is_empty());
        }
    }

    #[test]
    fn meta_errors_map_to_s3_codes() {
        let table: Vec<(MetaError, S3Code)> = vec![
            (MetaError::NoSuchBucket("b".into()), S3Code::NoSuchBucket),
            (
                MetaError::BucketAlreadyExists("b".into()),
                S3Code::BucketAlreadyExists,
            ),
            (
                MetaError::BucketAlreadyOwnedByYou("b".into()),
                S3Code::BucketAlreadyOwnedByYou,
            ),
            (
                MetaError::BucketNotEmpty("b".into()),
                S3Code::BucketNotEmpty,
            ),
            (MetaError::NoSuchKey("k".into()), S3Code::NoSuchKey),
            (MetaError::NoSuchUpload("u".into()), S3Code::NoSuchUpload),
            (MetaError::InvalidPart(3), S3Code::InvalidPart),
            (MetaError::InvalidPartOrder, S3Code::InvalidPartOrder),
            (MetaError::EntityTooSmall(1), S3Code::EntityTooSmall),
            (
                MetaError::NotEnoughDatanodes {
                    needed: 5,
                    available: 2,
                },
                S3Code::ServiceUnavailable,
            ),
            (
                MetaError::NoSuchAccessKey("AK".into()),
                S3Code::InvalidAccessKeyId,
            ),
            (MetaError::Unauthorized, S3Code::AccessDenied),
            (
                MetaError::InvalidRequest("x".into()),
                S3Code::InvalidRequest,
            ),
            (MetaError::Store("disk".into()), S3Code::InternalError),
            (
                MetaError::Transport("down".into()),
                S3Code::ServiceUnavailable,
            ),
            (MetaError::Protocol("bad".into()), S3Code::InternalError),
        ];
        for (meta, code) in table {
            assert_eq!(S3Error::from(meta.clone()).code(), code, "{meta:?}");
        }
    }

    #[test]
    fn auth_and_body_errors_map_to_s3_codes() {
        let auth: Vec<(AuthError, S3Code)> = vec![
            (AuthError::AccessDenied("anon".into()), S3Code::AccessDenied),
            (AuthError::InvalidAccessKeyId, S3Code::InvalidAccessKeyId),
            (
                AuthError::SignatureDoesNotMatch,
                S3Code::SignatureDoesNotMatch,
            ),
            (
                AuthError::AuthorizationHeaderMalformed("x".into()),
                S3Code::AuthorizationHeaderMalformed,
            ),
            (
                AuthError::AuthorizationQueryParametersError("x".into()),
                S3Code::AuthorizationQueryParametersError,
            ),
            (
                AuthError::RequestTimeTooSkewed,
                S3Code::RequestTimeTooSkewed,
            ),
            (
                AuthError::MissingSecurityHeader("x".into()),
                S3Code::MissingSecurityHeader,
            ),
            (
                AuthError::InvalidArgument("x".into()),
                S3Code::InvalidArgument,
            ),
            (
                AuthError::InvalidRequest("x".into()),
                S3Code::InvalidRequest,
            ),
            (
                AuthError::MissingContentLength,
                S3Code::MissingContentLength,
            ),
            (
                AuthError::Meta(MetaError::Transport("x".into())),
                S3Code::ServiceUnavailable,
            ),
        ];
        for (e, code) in auth {
            let text = format!("{e:?}");
            assert_eq!(S3Error::from(e).code(), code, "{text}");
        }
        let body: Vec<(BodyError, S3Code)> = vec![
            (
                BodyError::SignatureDoesNotMatch,
                S3Code::SignatureDoesNotMatch,
            ),
            (
                BodyError::ContentSha256Mismatch,
                S3Code::XAmzContentSHA256Mismatch,
            ),
            (BodyError::BadDigest("crc".into()), S3Code::BadDigest),
            (
                BodyError::InvalidDigest("crc".into()),
                S3Code::InvalidDigest,
            ),
            (BodyError::IncompleteBody, S3Code::IncompleteBody),
            (
                BodyError::MalformedChunk("x".into()),
                S3Code::IncompleteBody,
            ),
            (BodyError::Io("reset".into()), S3Code::IncompleteBody),
        ];
        for (e, code) in body {
            let text = format!("{e:?}");
            assert_eq!(S3Error::from(e).code(), code, "{text}");
        }
        let bad = S3Error::from(BodyError::BadDigest(
            "The CRC32C you specified did not match".into(),
        ));
        assert_eq!(bad.message(), "The CRC32C you specified did not match");
    }

    #[test]
    fn client_errors_map_to_s3_codes() {
        let unavailable = ClientError::Unavailable("2 of 5 cells".into());
        assert_eq!(
            S3Error::from(unavailable).code(),
            S3Code::ServiceUnavailable
        );
        let meta = ClientError::Meta(MetaError::NoSuchKey("k".into()));
        assert_eq!(S3Error::from(meta).code(), S3Code::NoSuchKey);
        assert_eq!(
            S3Error::from(ClientError::Closed).code(),
            S3Code::InternalError
        );
    }

    /// The error body of AWS's "Error responses" documentation page.
    #[test]
    fn error_body_matches_aws_example() {
        let err = S3Error::with_message(
            S3Code::NoSuchKey,
            "The resource you requested does not exist",
        );
        let xml =
            String::from_utf8(err.to_xml("/mybucket/myfoto.jpg", "4442587FB7D0A2F9")).unwrap();
        assert_eq!(
            xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <Error><Code>NoSuchKey</Code>\
             <Message>The resource you requested does not exist</Message>\
             <Resource>/mybucket/myfoto.jpg</Resource>\
             <RequestId>4442587FB7D0A2F9</RequestId></Error>"
        );
    }

    #[test]
    fn head_errors_have_no_body_and_keep_headers() {
        let id = RequestId::random();
        let err =
            S3Error::new(S3Code::InvalidRange).header(http::header::CONTENT_RANGE, "bytes */10");
        let resp = err.into_response("/b/k", &id, true);
        assert_eq!(resp.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(resp.headers()["content-range"], "bytes */10");
        assert!(resp.headers().get(CONTENT_TYPE).is_none());
    }
}
