//! The console's S3 client: path-style requests to the gateway signed with
//! SigV4 (aws-sigv4) under the signed-in user's keys, and presigned links.

use crate::error::ConsoleError;
use crate::xml;
use crate::ConsoleStartError;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
    SignatureLocation, SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use axum::body::Body;
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use md5::{Digest, Md5};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// What SigV4 leaves unencoded in a query component: the unreserved characters.
const QUERY_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// An object key in a path: the unreserved characters and `/`.
const KEY_PATH: &AsciiSet = &QUERY_COMPONENT.remove(b'/');

/// The longest a presigned link may live, as in S3 (seven days).
pub(crate) const MAX_LINK_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// A user's S3 keys. The secret never leaves this process.
#[derive(Clone)]
pub(crate) struct Keys {
    pub(crate) access_key: String,
    secret_key: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({}, secret redacted)", self.access_key)
    }
}

impl Keys {
    pub(crate) fn new(access_key: String, secret_key: String) -> Self {
        Self {
            access_key,
            secret_key,
        }
    }

    fn identity(&self) -> Identity {
        Credentials::new(&self.access_key, &self.secret_key, None, None, "console").into()
    }
}

/// The body of a request to the gateway.
pub(crate) enum Payload {
    /// No body.
    Empty,
    /// A small body, signed by its SHA-256.
    Bytes(Bytes),
    /// A browser's upload, passed on as it arrives (`UNSIGNED-PAYLOAD`).
    Stream {
        /// The bytes.
        body: Body,
        /// Their number, as the browser declared it.
        length: u64,
    },
}

/// One S3 request: a bucket, an object key, subresources and headers.
pub(crate) struct S3Request<'a> {
    method: Method,
    bucket: Option<&'a str>,
    key: Option<&'a str>,
    query: Vec<(&'a str, String)>,
    headers: Vec<(HeaderName, String)>,
    payload: Payload,
}

impl<'a> S3Request<'a> {
    /// A request on the service (ListBuckets).
    pub(crate) fn service(method: Method) -> Self {
        Self {
            method,
            bucket: None,
            key: None,
            query: Vec::new(),
            headers: Vec::new(),
            payload: Payload::Empty,
        }
    }

    /// A request on `bucket`.
    pub(crate) fn bucket(method: Method, bucket: &'a str) -> Self {
        Self {
            bucket: Some(bucket),
            ..Self::service(method)
        }
    }

    /// A request on the object `key` of `bucket`.
    pub(crate) fn object(method: Method, bucket: &'a str, key: &'a str) -> Self {
        Self {
            key: Some(key),
            ..Self::bucket(method, bucket)
        }
    }

    /// Adds a query parameter (`""` as value names a subresource alone).
    pub(crate) fn query(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    /// Adds a header.
    pub(crate) fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Sets the body.
    pub(crate) fn payload(mut self, payload: Payload) -> Self {
        self.payload = payload;
        self
    }

    /// Sets a configuration document as the body, with the Content-MD5
    /// that S3 requires of them.
    pub(crate) fn document(self, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let md5 = base64::engine::general_purpose::STANDARD.encode(Md5::digest(&body));
        self.header(HeaderName::from_static("content-md5"), md5)
            .payload(Payload::Bytes(body))
    }

    fn path_and_query(&self) -> String {
        let mut path = String::from("/");
        if let Some(bucket) = self.bucket {
            path.push_str(&utf8_percent_encode(bucket, QUERY_COMPONENT).to_string());
        }
        if let Some(key) = self.key {
            path.push('/');
            path.push_str(&utf8_percent_encode(key, KEY_PATH).to_string());
        }
        for (i, (name, value)) in self.query.iter().enumerate() {
            path.push(if i == 0 { '?' } else { '&' });
            path.push_str(&utf8_percent_encode(name, QUERY_COMPONENT).to_string());
            if !value.is_empty() {
                path.push('=');
                path.push_str(&utf8_percent_encode(value, QUERY_COMPONENT).to_string());
            }
        }
        path
    }
}

/// A successful answer, read whole (listings and documents are small).
pub(crate) struct Answer {
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// The gateway and how to reach it.
pub(crate) struct Gateway {
    http: Client<HttpsConnector<HttpConnector>, Body>,
    endpoint: String,
    public: String,
    region: String,
}

/// `url` without a trailing `/`, when it is `scheme://host[:port]` for one
/// of `schemes`.
fn endpoint(url: &str, schemes: &[&str]) -> Result<String, ConsoleStartError> {
    let url = url.trim_end_matches('/');
    let authority = schemes
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme)?.strip_prefix("://"))
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .ok_or_else(|| ConsoleStartError::BadEndpoint(url.to_string()))?;
    authority
        .parse::<http::uri::Authority>()
        .map_err(|_| ConsoleStartError::BadEndpoint(url.to_string()))?;
    Ok(url.to_string())
}

/// TLS settings that trust the certificates in `trust` (PEM) alone (as
/// roots, or pinned: see [`tls::trust`]), or nothing without it.
fn tls_config(trust: Option<&Path>) -> Result<rustls::ClientConfig, ConsoleStartError> {
    let config = match trust {
        Some(trust) => tls::trust::client_config_trusting(trust),
        None => rustls::ClientConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .map(|builder| {
                builder
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            })
            .map_err(tls::TlsError::from),
    };
    config.map_err(|e| ConsoleStartError::Tls(e.to_string()))
}

impl Gateway {
    /// A client of the gateway at `gateway` (`http://host:port`, or
    /// `https://` with the certificates to trust in `trust`); share links
    /// name `public` (http or https) when given.
    pub(crate) fn new(
        gateway: &str,
        trust: Option<&Path>,
        public: Option<&str>,
        region: &str,
    ) -> Result<Self, ConsoleStartError> {
        let private = endpoint(gateway, &["http", "https"])?;
        let public = match public {
            Some(public) => endpoint(public, &["http", "https"])?,
            None => private.clone(),
        };
        if private.starts_with("https://") && trust.is_none() {
            return Err(ConsoleStartError::Tls(
                "an https gateway needs the certificates to trust".into(),
            ));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(trust)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        Ok(Self {
            http: Client::builder(TokioExecutor::new()).build(connector),
            endpoint: private,
            public,
            region: region.to_string(),
        })
    }

    fn signing_settings() -> SigningSettings {
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings
    }

    fn sign<B>(
        &self,
        keys: &Keys,
        request: &mut Request<B>,
        body: SignableBody<'_>,
        settings: SigningSettings,
    ) -> Result<(), ConsoleError> {
        let identity = keys.identity();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| ConsoleError::Gateway(format!("signing: {e}")))?
            .into();
        let headers: Vec<(&str, &str)> = request
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect();
        let signable = SignableRequest::new(
            request.method().as_str(),
            request.uri().to_string(),
            headers.into_iter(),
            body,
        )
        .map_err(|e| ConsoleError::Gateway(format!("signing: {e}")))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| ConsoleError::Gateway(format!("signing: {e}")))?
            .into_parts();
        instructions.apply_to_request_http1x(request);
        Ok(())
    }

    /// Signs and sends `request`; the answer's body is left to the caller.
    pub(crate) async fn send(
        &self,
        keys: &Keys,
        request: S3Request<'_>,
    ) -> Result<Response<Incoming>, ConsoleError> {
        let uri = format!("{}{}", self.endpoint, request.path_and_query());
        let mut builder = Request::builder().method(request.method.clone()).uri(&uri);
        for (name, value) in &request.headers {
            builder = builder.header(name, value.as_str());
        }
        let length = match &request.payload {
            Payload::Empty => None,
            Payload::Bytes(bytes) => Some(bytes.len() as u64),
            Payload::Stream { length, .. } => Some(*length),
        };
        if let Some(length) = length {
            builder = builder.header(http::header::CONTENT_LENGTH, length);
        }
        let mut http_request = builder
            .body(())
            .map_err(|e| ConsoleError::BadInput(format!("cannot make this request: {e}")))?;
        let mut settings = Self::signing_settings();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let (signable, body) = match request.payload {
            Payload::Empty => (SignableBody::Bytes(&[]), Body::empty()),
            Payload::Bytes(ref bytes) => (SignableBody::Bytes(bytes), Body::from(bytes.clone())),
            Payload::Stream { body, .. } => (SignableBody::UnsignedPayload, body),
        };
        self.sign(keys, &mut http_request, signable, settings)?;
        self.http
            .request(http_request.map(|()| body))
            .await
            .map_err(|e| ConsoleError::Gateway(with_causes(&e)))
    }

    /// [`Self::call`], with None for an S3 error answer of status `absent`
    /// (a setting not set, a listing the user may not see), which the page
    /// shows as missing rather than as an error.
    pub(crate) async fn call_unless(
        &self,
        keys: &Keys,
        request: S3Request<'_>,
        absent: http::StatusCode,
    ) -> Result<Option<Answer>, ConsoleError> {
        match self.call(keys, request).await {
            Ok(answer) => Ok(Some(answer)),
            Err(ConsoleError::S3 { status, .. }) if status == absent => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Signs and sends `request` and reads the answer whole; an S3 error
    /// answer becomes [`ConsoleError::S3`].
    pub(crate) async fn call(
        &self,
        keys: &Keys,
        request: S3Request<'_>,
    ) -> Result<Answer, ConsoleError> {
        let response = self.send(keys, request).await?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| ConsoleError::Gateway(e.to_string()))?
            .to_bytes();
        if !parts.status.is_success() {
            return Err(s3_error(parts.status, &body));
        }
        Ok(Answer {
            headers: parts.headers,
            body,
        })
    }

    /// A link that GETs the object (that version, when given) for
    /// `lifetime`, signed with `keys`.
    pub(crate) fn presign(
        &self,
        keys: &Keys,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        lifetime: Duration,
    ) -> Result<String, ConsoleError> {
        let mut request = S3Request::object(Method::GET, bucket, key);
        if let Some(version) = version {
            request = request.query("versionId", version);
        }
        let uri = format!("{}{}", self.public, request.path_and_query());
        let mut http_request = Request::get(&uri)
            .body(())
            .map_err(|e| ConsoleError::BadInput(format!("cannot make this link: {e}")))?;
        let mut settings = Self::signing_settings();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(lifetime.min(MAX_LINK_LIFETIME));
        settings.payload_checksum_kind = PayloadChecksumKind::NoHeader;
        self.sign(
            keys,
            &mut http_request,
            SignableBody::UnsignedPayload,
            settings,
        )?;
        Ok(http_request.uri().to_string())
    }
}

/// An error and what caused it ("client error (Connect): ...: invalid
/// peer certificate"), since hyper's own text stops at the first.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The error an S3 answer carries (HEAD answers have no body: their status
/// names it).
pub(crate) fn s3_error(status: StatusCode, body: &[u8]) -> ConsoleError {
    let fields = xml::first(body, "Error").unwrap_or_default();
    let code = fields
        .get("Code")
        .cloned()
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("Error").to_string());
    let message = fields
        .get("Message")
        .cloned()
        .unwrap_or_else(|| format!("the gateway answered {status}"));
    ConsoleError::S3 {
        status,
        code,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_encode_keys_as_s3_does() {
        let request = S3Request::object(Method::GET, "b", "dir/a b+c&ü.txt")
            .query("versionId", "x/y=")
            .query("tagging", "");
        assert_eq!(
            request.path_and_query(),
            "/b/dir/a%20b%2Bc%26%C3%BC.txt?versionId=x%2Fy%3D&tagging"
        );
        assert_eq!(S3Request::service(Method::GET).path_and_query(), "/");
        assert_eq!(
            S3Request::bucket(Method::GET, "b")
                .query("list-type", "2")
                .query("prefix", "a/")
                .path_and_query(),
            "/b?list-type=2&prefix=a%2F"
        );
    }

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(
            endpoint("http://127.0.0.1:9878/", &["http"]).unwrap(),
            "http://127.0.0.1:9878"
        );
        assert!(endpoint("https://s3.example.com", &["http"]).is_err());
        assert!(Gateway::new("https://127.0.0.1:1", None, None, "r").is_err());
        assert!(Gateway::new("ftp://127.0.0.1:1", None, None, "r").is_err());
        assert!(endpoint("https://s3.example.com", &["http", "https"]).is_ok());
        assert!(endpoint("http://host/path", &["http"]).is_err());
        assert!(endpoint("http://", &["http"]).is_err());
        assert!(endpoint("host:1", &["http"]).is_err());
    }

    #[test]
    fn links_are_presigned_for_the_public_endpoint_and_capped_at_seven_days() {
        let gateway = Gateway::new(
            "http://127.0.0.1:1",
            None,
            Some("https://s3.example.com"),
            "eu-1",
        )
        .unwrap();
        let keys = Keys::new("AKID".into(), "secret".into());
        let week = MAX_LINK_LIFETIME.as_secs();
        let link = gateway
            .presign(&keys, "b", "a b", Some("v1"), MAX_LINK_LIFETIME * 2)
            .unwrap();
        assert!(
            link.starts_with("https://s3.example.com/b/a%20b?"),
            "{link}"
        );
        assert!(link.contains("versionId=v1"), "{link}");
        assert!(link.contains(&format!("X-Amz-Expires={week}")), "{link}");
        assert!(link.contains("X-Amz-Credential=AKID%2F"), "{link}");
        assert!(link.contains("%2Feu-1%2Fs3%2Faws4_request"), "{link}");
        assert!(link.contains("X-Amz-Signature="), "{link}");
        assert!(!link.contains("secret"), "{link}");
    }

    #[test]
    fn error_answers_keep_the_s3_code_and_message() {
        let body = b"<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
        match s3_error(StatusCode::NOT_FOUND, body) {
            ConsoleError::S3 {
                status,
                code,
                message,
            } => {
                assert_eq!(status, StatusCode::NOT_FOUND);
                assert_eq!(code, "NoSuchBucket");
                assert_eq!(message, "The specified bucket does not exist");
            }
            other => panic!("{other:?}"),
        }
        match s3_error(StatusCode::FORBIDDEN, b"") {
            ConsoleError::S3 { code, .. } => assert_eq!(code, "Forbidden"),
            other => panic!("{other:?}"),
        }
    }
}
