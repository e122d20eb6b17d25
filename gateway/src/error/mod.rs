//! The one map from every error the gateway meets (meta, client streams, auth,
//! request bodies, XML, the gateway's own checks) to an S3 error code (whose
//! status and message come from the table in [`codes`]), and the S3 XML error
//! body. An error keeps its cause, and is logged once, when it is answered.

mod codes;

pub use codes::S3Code;

use crate::auth::{AuthError, BodyError};
use crate::telemetry::{ErrorCodeLabel, RequestId};
use crate::xml::MalformedXml;
use crate::xml::XmlWriter;
use axum::body::Body;
use axum::response::Response;
use block_client::ClientError;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use meta_api::MetaError;
use meta_api::NULL_VERSION;
use std::borrow::Cow;
use std::error::Error;
use std::sync::Arc;

/// An S3 error on its way to the client: code, message, extra XML elements
/// (`BucketName`, `Key`, `UploadId`, ...) and extra response headers.
#[derive(Clone, Debug)]
pub struct S3Error {
    code: S3Code,
    message: Cow<'static, str>,
    details: Vec<(&'static str, String)>,
    headers: Vec<(HeaderName, String)>,
    /// What led to it, for the log (never sent to the client).
    cause: Option<Arc<dyn Error + Send + Sync>>,
}

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl Error for S3Error {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn Error + 'static))
    }
}

impl S3Error {
    /// An error with AWS's standard message for `code`.
    pub fn new(code: S3Code) -> Self {
        Self {
            code,
            message: Cow::Borrowed(code.default_message()),
            details: Vec::new(),
            headers: Vec::new(),
            cause: None,
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
    pub fn internal(cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(S3Code::InternalError).caused_by(cause)
    }

    /// Keeps `cause` with the error, for the log.
    pub fn caused_by(mut self, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        self.cause = Some(Arc::from(cause.into()));
        self
    }

    /// The error's cause and the causes of that, outermost first.
    fn cause_chain(&self) -> String {
        let mut chain = Vec::new();
        let mut next = self.source();
        while let Some(cause) = next {
            chain.push(cause.to_string());
            next = cause.source();
        }
        chain.join(": ")
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

    /// Logs the error and its cause, by how bad it is: an internal error or
    /// lost data at `error`, another server error at `warn`, a refusal at
    /// `debug`. Called once per error, where it is answered.
    pub fn log(&self, resource: &str) {
        let status = self.code.status();
        let (code, cause) = (self.code.as_str(), self.cause_chain());
        if matches!(
            self.code,
            S3Code::InternalError | S3Code::InvalidObjectState
        ) {
            tracing::error!(code, message = %self.message, cause, resource, "request failed");
        } else if status.is_server_error() {
            tracing::warn!(code, message = %self.message, cause, resource, "request failed");
        } else {
            tracing::debug!(code, message = %self.message, cause, resource, "request refused");
        }
    }

    /// The HTTP response: the XML body, or no body at all for HEAD.
    pub fn into_response(self, resource: &str, request_id: &RequestId, head: bool) -> Response {
        self.log(resource);
        let status = self.code.status();
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

/// The header naming the version a request read, wrote or deleted (answers
/// and errors alike).
pub const VERSION_ID_HEADER: &str = "x-amz-version-id";
/// The header saying the version is a delete marker.
pub const DELETE_MARKER_HEADER: &str = "x-amz-delete-marker";

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
            MetaError::NoSuchVersion(v) => Self::new(S3Code::NoSuchVersion).detail("VersionId", v),
            MetaError::DeleteMarker {
                key,
                version_id,
                named,
            } => {
                let version_id = version_id.unwrap_or_else(|| NULL_VERSION.to_string());
                let error = if named {
                    Self::new(S3Code::MethodNotAllowed)
                        .detail("Method", "GET")
                        .detail("ResourceType", "DeleteMarker")
                        .header(http::header::ALLOW, "DELETE")
                } else {
                    Self::no_such_key(&key)
                };
                error
                    .header(HeaderName::from_static(DELETE_MARKER_HEADER), "true")
                    .header(HeaderName::from_static(VERSION_ID_HEADER), version_id)
            }
            MetaError::ObjectLocked => Self::with_message(
                S3Code::AccessDenied,
                "Access Denied because object protected by object lock.",
            ),
            MetaError::InvalidBucketState(m) => Self::with_message(S3Code::InvalidBucketState, m),
            MetaError::NoObjectLock => Self::with_message(
                S3Code::InvalidRequest,
                "Bucket is missing Object Lock Configuration",
            ),
            MetaError::NoSuchObjectLockConfiguration => {
                Self::new(S3Code::NoSuchObjectLockConfiguration)
            }
            MetaError::NoSuchUpload(u) => Self::no_such_upload(&u),
            MetaError::KmsKeyNotFound(key) => {
                Self::with_message(S3Code::KmsNotFound, format!("Key '{key}' does not exist"))
            }
            MetaError::InvalidPart(n) => {
                Self::new(S3Code::InvalidPart).detail("PartNumber", n.to_string())
            }
            MetaError::InvalidPartOrder => Self::new(S3Code::InvalidPartOrder),
            MetaError::PreconditionFailed => Self::new(S3Code::PreconditionFailed),
            MetaError::EntityTooSmall(n) => Self::new(S3Code::EntityTooSmall)
                .detail("PartNumber", n.to_string())
                .detail("MinSizeAllowed", "5242880"),
            // Too few datanodes for even a short group: SDKs back off and
            // retry a SlowDown, which gives dead datanodes time to return.
            e @ MetaError::NotEnoughDatanodes { .. } => {
                Self::with_message(S3Code::SlowDown, e.to_string()).caused_by(e)
            }
            MetaError::NoSuchAccessKey(_) => Self::new(S3Code::InvalidAccessKeyId),
            MetaError::Unauthorized => Self::new(S3Code::AccessDenied),
            MetaError::InvalidRequest(m) => Self::with_message(S3Code::InvalidRequest, m),
            e @ (MetaError::Transport(_) | MetaError::NotLeader { .. }) => Self::with_message(
                S3Code::ServiceUnavailable,
                "The metadata service is unavailable.",
            )
            .caused_by(e),
            e @ MetaError::OutOfSpace(_) => Self::with_message(
                S3Code::ServiceUnavailable,
                "The metadata store is out of space; writes are refused until space is freed.",
            )
            .caused_by(e),
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
            | ClientError::Unavailable(_)) => Self::with_message(
                S3Code::ServiceUnavailable,
                "Not enough datanodes answered to serve the request; please retry.",
            )
            .caused_by(e),
            e @ ClientError::Lost(_) => Self::with_message(
                S3Code::InvalidObjectState,
                "The object's data is lost: too few of its block files are left to read it. \
                 Restore it from a copy, or delete it.",
            )
            .caused_by(e),
            e @ (ClientError::Protocol { .. }
            | ClientError::Checksum { .. }
            | ClientError::Missing { .. }
            | ClientError::Remote { .. }
            | ClientError::Closed) => Self::internal(e),
        }
    }
}

impl From<AuthError> for S3Error {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::AccessDenied(m) => Self::with_message(S3Code::AccessDenied, m),
            AuthError::HeadersNotSigned(names) => Self::with_message(
                S3Code::AccessDenied,
                "There were headers present in the request which were not signed",
            )
            .detail("HeadersNotSigned", names.join(", ")),
            AuthError::InvalidAccessKeyId => Self::new(S3Code::InvalidAccessKeyId),
            AuthError::SignatureDoesNotMatch => Self::new(S3Code::SignatureDoesNotMatch),
            AuthError::AuthorizationHeaderMalformed(m) => {
                Self::with_message(S3Code::AuthorizationHeaderMalformed, m)
            }
            AuthError::WrongRegion { message, expected } => {
                Self::with_message(S3Code::AuthorizationHeaderMalformed, message)
                    .detail("Region", expected)
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
            BodyError::Io(m) => Self::new(S3Code::IncompleteBody).caused_by(m),
            BodyError::TooSlow(m) => Self::new(S3Code::RequestTimeout).caused_by(m),
        }
    }
}

impl From<access::AclError> for S3Error {
    fn from(e: access::AclError) -> Self {
        use access::AclError;
        let argument = |message: &str, name: &str, value: &str| {
            Self::invalid_argument(message.to_string())
                .detail("ArgumentName", name.to_string())
                .detail("ArgumentValue", value.to_string())
        };
        match &e {
            AclError::InvalidCannedAcl(value) => argument("Invalid Argument", "x-amz-acl", value),
            AclError::GrantFormat { header, value } => {
                argument("Argument format not recognized", header, value)
            }
            AclError::InvalidGroupUri(uri) => argument("Invalid group uri", "uri", uri),
            AclError::InvalidId(id) => argument("Invalid id", "id", id),
            AclError::UnresolvableEmail(email) => {
                Self::new(S3Code::UnresolvableGrantByEmailAddress)
                    .detail("EmailAddress", email.clone())
            }
            AclError::CannedAndGrants => Self::with_message(
                S3Code::InvalidRequest,
                "Specifying both Canned ACLs and Header Grants is not allowed",
            ),
            AclError::TooManyGrants => Self::new(S3Code::MalformedACLError),
        }
    }
}

impl From<access::MalformedPolicy> for S3Error {
    fn from(e: access::MalformedPolicy) -> Self {
        Self::with_message(S3Code::MalformedPolicy, e.0)
    }
}

impl From<crate::xml::access_documents::AclDocumentError> for S3Error {
    fn from(e: crate::xml::access_documents::AclDocumentError) -> Self {
        use crate::xml::access_documents::AclDocumentError;
        match e {
            AclDocumentError::Malformed => Self::new(S3Code::MalformedACLError),
            AclDocumentError::Grantee(e) => e.into(),
        }
    }
}

impl From<MalformedXml> for S3Error {
    fn from(e: MalformedXml) -> Self {
        Self::new(S3Code::MalformedXML).caused_by(e)
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
            (S3Code::InvalidObjectState, 403),
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
        }
        for code in S3Code::ALL {
            assert!(!code.default_message().is_empty(), "{code:?}");
            assert!(!code.as_str().is_empty());
        }
        assert_eq!(S3Code::KmsNotFound.as_str(), "KMS.NotFoundException");
        assert_eq!(S3Code::AccessDenied.as_str(), "AccessDenied");
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
            (MetaError::KmsKeyNotFound("k".into()), S3Code::KmsNotFound),
            (MetaError::InvalidPart(3), S3Code::InvalidPart),
            (MetaError::InvalidPartOrder, S3Code::InvalidPartOrder),
            (MetaError::EntityTooSmall(1), S3Code::EntityTooSmall),
            (
                MetaError::NotEnoughDatanodes {
                    needed: 5,
                    available: 2,
                },
                S3Code::SlowDown,
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
                MetaError::OutOfSpace("full".into()),
                S3Code::ServiceUnavailable,
            ),
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
                AuthError::HeadersNotSigned(vec!["x-amz-copy-source".into()]),
                S3Code::AccessDenied,
            ),
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
            (BodyError::TooSlow("slow".into()), S3Code::RequestTimeout),
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
        // Lost data is no reason to retry: a 4xx SDKs give up on.
        let lost = S3Error::from(ClientError::Lost("1 of 3 cells".into()));
        assert_eq!(lost.code(), S3Code::InvalidObjectState);
        assert_eq!(lost.code().status(), http::StatusCode::FORBIDDEN);
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
    fn an_error_keeps_its_cause_but_never_sends_it() {
        let err = S3Error::from(MetaError::Transport("meta:9879: connection refused".into()));
        assert_eq!(err.code(), S3Code::ServiceUnavailable);
        let cause = err.source().expect("the cause is kept").to_string();
        assert!(cause.contains("connection refused"), "{cause}");
        let body = String::from_utf8(err.to_xml("/b", "id")).unwrap();
        assert!(!body.contains("connection refused"), "{body}");
        let internal = S3Error::internal("short read at 7");
        assert_eq!(internal.cause_chain(), "short read at 7");
    }

    #[test]
    fn head_errors_have_no_body_and_keep_headers() {
        use http::StatusCode;
        let id = RequestId::random();
        let err =
            S3Error::new(S3Code::InvalidRange).header(http::header::CONTENT_RANGE, "bytes */10");
        let resp = err.into_response("/b/k", &id, true);
        assert_eq!(resp.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(resp.headers()["content-range"], "bytes */10");
        assert!(resp.headers().get(CONTENT_TYPE).is_none());
    }
}
