//! A small S3 client for the bench and the consistency checker: path-style requests signed with SigV4
//! (aws-sigv4) over a pooled hyper HTTP/1 client. Bodies are counted as they
//! arrive, never joined, so the client costs little next to the server.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use clap::Args;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use proto::ReplicationConfig;
use std::time::SystemTime;

/// Asks for SSE-S3.
const SSE_HEADER: &str = "x-amz-server-side-encryption";
/// Header naming the replication of a new object (the gateway's own).
const REPLICATION_HEADER: &str = "x-tessera-replication";

/// Why an S3 request failed.
#[derive(Debug, thiserror::Error)]
pub enum S3ClientError {
    /// The endpoint is not an http://host:port URL.
    #[error("bad S3 endpoint {0:?}: expected http://host:port")]
    BadEndpoint(String),
    /// The request could not be signed.
    #[error("signing: {0}")]
    Sign(String),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
    /// Connecting or sending failed.
    #[error("HTTP: {0}")]
    Http(#[from] hyper_util::client::legacy::Error),
    /// Reading the answer's body failed.
    #[error("reading the body: {0}")]
    Body(#[from] hyper::Error),
    /// The server answered with an unexpected status.
    #[error("{method} {path}: status {status}: {body}")]
    Status {
        /// Request method.
        method: Method,
        /// Request path.
        path: String,
        /// Answer status.
        status: StatusCode,
        /// Start of the answer's body.
        body: String,
    },
    /// The body differs from the bytes the caller expected.
    #[error("{path}: content differs from what was written at byte {offset}")]
    Mismatch {
        /// Request path.
        path: String,
        /// Offset in the object of the first wrong byte.
        offset: u64,
    },
    /// The body was not as long as asked for.
    #[error("{path}: expected {expected} bytes, got {got}")]
    ShortBody {
        /// Request path.
        path: String,
        /// Bytes asked for.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
}

/// S3 endpoint and credentials.
#[derive(Args, Clone, Debug)]
pub struct S3Args {
    /// S3 endpoint URL, e.g. http://127.0.0.1:9878.
    #[arg(long)]
    pub endpoint: String,
    /// S3 access key.
    #[arg(long, env = "AWS_ACCESS_KEY_ID", hide_env_values = true)]
    pub access_key: String,
    /// S3 secret key.
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub secret_key: String,
    /// Region in the SigV4 credential scope.
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
}

impl S3Args {
    /// A client for these settings.
    pub fn client(&self) -> Result<S3Client, S3ClientError> {
        S3Client::new(
            &self.endpoint,
            &self.access_key,
            &self.secret_key,
            &self.region,
        )
    }
}

/// Signed S3 requests to one endpoint, sharing a connection pool.
#[derive(Clone)]
pub struct S3Client {
    http: Client<HttpConnector, Full<Bytes>>,
    endpoint: String,
    identity: Identity,
    region: String,
}

/// An answer with its whole body.
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its body.
    pub body: Bytes,
}

/// An answer whose body was counted, not kept.
struct Counted {
    status: StatusCode,
    headers: http::HeaderMap,
    bytes: u64,
    start: Bytes,
}

impl S3Client {
    /// A client for `endpoint` (http://host:port) with these credentials.
    pub fn new(
        endpoint: &str,
        access_key: &str,
        secret_key: &str,
        region: &str,
    ) -> Result<Self, S3ClientError> {
        let endpoint = endpoint.trim_end_matches('/').to_string();
        let authority = endpoint
            .strip_prefix("http://")
            .filter(|a| !a.is_empty() && !a.contains('/'))
            .ok_or_else(|| S3ClientError::BadEndpoint(endpoint.clone()))?;
        if authority.parse::<http::uri::Authority>().is_err() {
            return Err(S3ClientError::BadEndpoint(endpoint));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new()).build(connector);
        let identity = Credentials::new(access_key, secret_key, None, None, "bench").into();
        Ok(Self {
            http,
            endpoint,
            identity,
            region: region.to_string(),
        })
    }

    /// Signs and sends one request, counting the answer's body.
    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Counted, S3ClientError> {
        self.send_expecting(method, path, headers, body, None).await
    }

    /// [`Self::send`], checking a successful answer's body against
    /// `expected`: the object's bytes and the offset the body starts at.
    async fn send_expecting(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
        expected: Option<(&Bytes, u64)>,
    ) -> Result<Counted, S3ClientError> {
        let response = self
            .http
            .request(self.signed(method, path, headers, body)?)
            .await?;
        let (parts, mut body) = response.into_parts();
        let mut bytes = 0u64;
        let mut start = Bytes::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                if let Some((object, offset)) = expected.filter(|_| parts.status.is_success()) {
                    let at = offset + bytes;
                    if let Some(offset) = first_difference(object, at, &data) {
                        let path = path.to_string();
                        return Err(S3ClientError::Mismatch { path, offset });
                    }
                }
                bytes += data.len() as u64;
                if start.is_empty() && !parts.status.is_success() {
                    start = data;
                }
            }
        }
        let counted = Counted {
            status: parts.status,
            headers: parts.headers,
            bytes,
            start,
        };
        Ok(counted)
    }

    /// A request for `path` with `headers` and `body`, signed.
    fn signed(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, S3ClientError> {
        let uri = format!("{}{path}", self.endpoint);
        let mut builder = Request::builder().method(method.clone()).uri(&uri);
        for (name, value) in headers {
            builder = builder.header(*name, value.as_str());
        }
        if method == Method::PUT {
            builder = builder.header(http::header::CONTENT_LENGTH, body.len());
        }
        let mut request = builder.body(())?;
        self.sign(&mut request, headers)?;
        Ok(request.map(|()| Full::new(body)))
    }

    /// Sends one signed request and returns the answer with its whole body
    /// (for small bodies: the consistency checker's).
    pub async fn exchange(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Answer, S3ClientError> {
        let response = self
            .http
            .request(self.signed(method, path, headers, body)?)
            .await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Answer {
            status: parts.status,
            body,
        })
    }

    fn sign(
        &self,
        request: &mut Request<()>,
        headers: &[(&str, String)],
    ) -> Result<(), S3ClientError> {
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| S3ClientError::Sign(e.to_string()))?
            .into();
        // The body is not hashed: a bench measures the server, not SHA-256 here.
        let signable = SignableRequest::new(
            request.method().as_str(),
            request.uri().to_string(),
            headers.iter().map(|(k, v)| (*k, v.as_str())),
            SignableBody::UnsignedPayload,
        )
        .map_err(|e| S3ClientError::Sign(e.to_string()))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| S3ClientError::Sign(e.to_string()))?
            .into_parts();
        instructions.apply_to_request_http1x(request);
        Ok(())
    }

    fn check(method: Method, path: &str, answer: &Counted) -> Result<(), S3ClientError> {
        if answer.status.is_success() {
            return Ok(());
        }
        Err(S3ClientError::Status {
            method,
            path: path.to_string(),
            status: answer.status,
            body: String::from_utf8_lossy(&answer.start[..answer.start.len().min(300)])
                .into_owned(),
        })
    }

    /// Creates `bucket`; one the caller already owns is fine.
    pub async fn create_bucket(&self, bucket: &str) -> Result<(), S3ClientError> {
        let path = format!("/{bucket}");
        let answer = self.send(Method::PUT, &path, &[], Bytes::new()).await?;
        let owned = answer.status == StatusCode::CONFLICT
            && String::from_utf8_lossy(&answer.start).contains("BucketAlreadyOwnedByYou");
        if owned {
            return Ok(());
        }
        Self::check(Method::PUT, &path, &answer)
    }

    /// The size of an object, or None when it does not exist.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<Option<u64>, S3ClientError> {
        let path = format!("/{bucket}/{key}");
        let answer = self.send(Method::HEAD, &path, &[], Bytes::new()).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        Self::check(Method::HEAD, &path, &answer)?;
        let size = answer
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        Ok(Some(size))
    }

    /// Stores `body` at `key`, encrypted as `sse` names (`AES256`,
    /// `aws:kms`) when given.
    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        replication: Option<ReplicationConfig>,
        sse: Option<&str>,
    ) -> Result<(), S3ClientError> {
        let path = format!("/{bucket}/{key}");
        let headers: Vec<(&str, String)> = replication
            .map(|r| (REPLICATION_HEADER, r.to_string()))
            .into_iter()
            .chain(sse.map(|method| (SSE_HEADER, method.to_string())))
            .collect();
        let answer = self.send(Method::PUT, &path, &headers, body).await?;
        Self::check(Method::PUT, &path, &answer)
    }

    /// GETs `len` bytes of `key` from `offset` (the whole object when None)
    /// and returns how many arrived; fewer than asked is an error, and so is
    /// a byte that differs from `contents` (the whole object) when given.
    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
        range: Option<(u64, u64)>,
        expected: u64,
        contents: Option<&Bytes>,
    ) -> Result<u64, S3ClientError> {
        let path = format!("/{bucket}/{key}");
        let headers: Vec<(&str, String)> = range
            .map(|(offset, len)| ("range", format!("bytes={offset}-{}", offset + len - 1)))
            .into_iter()
            .collect();
        let start = range.map_or(0, |(offset, _)| offset);
        let contents = contents.map(|c| (c, start));
        let answer = self
            .send_expecting(Method::GET, &path, &headers, Bytes::new(), contents)
            .await?;
        Self::check(Method::GET, &path, &answer)?;
        if answer.bytes != expected {
            return Err(S3ClientError::ShortBody {
                path,
                expected,
                got: answer.bytes,
            });
        }
        Ok(answer.bytes)
    }
}

/// Where `got`, read at `offset` of a key that holds `expected`, differs
/// from it: the offset of its first wrong byte, or of its end when it runs
/// past `expected`.
pub fn first_difference(expected: &[u8], offset: u64, got: &[u8]) -> Option<u64> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(expected.len());
    let wanted = &expected[start..];
    let at = got.iter().zip(wanted).position(|(g, w)| g != w);
    match at {
        Some(at) => Some(offset + at as u64),
        None if got.len() > wanted.len() => Some(offset + wanted.len() as u64),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_plain_http() {
        assert!(S3Client::new("http://127.0.0.1:9878", "a", "b", "us-east-1").is_ok());
        assert!(S3Client::new("http://127.0.0.1:9878/", "a", "b", "us-east-1").is_ok());
        assert!(S3Client::new("https://x:1", "a", "b", "us-east-1").is_err());
        assert!(S3Client::new("http://x:1/path", "a", "b", "us-east-1").is_err());
        assert!(S3Client::new("http://", "a", "b", "us-east-1").is_err());
    }
}
