//! S3 request authentication: AWS Signature Version 4 or 2 in the Authorization header or in a
//! presigned URL, and the request body as the signature says to read it (aws-chunked de-framing
//! with the chunk signature chain, declared length, payload SHA-256 and `x-amz-checksum-*`).
//!
//! [`authenticate`] looks the access key up in meta and calls the pure [`verify_request`], which
//! tests drive with a secret directly.

mod body;
pub mod cache;
mod canonical;
mod checksum;
mod chunked;
pub mod fuzzing;
mod payload;
mod post_policy;
mod presign;
mod sigv2;
mod sigv4;

#[cfg(test)]
mod roundtrip_tests;
#[cfg(test)]
mod testing;

use std::time::SystemTime;

use cache::{Credentials, SigningKeyCache};
use http::request::Parts;
use meta_api::{AccessKeyRecord, BucketGrant, BucketRight, MetaError, UserRecord};

pub use body::{body_stream, BodyStream};
pub use checksum::{ChecksumAlgorithm, Checksummer};
pub use payload::ContentSha256;
pub use post_policy::{verify_post_form, PolicyCondition, PostPolicy};

use canonical::query_pairs;
use chunked::SignatureChain;

/// Headers whose values are secrets though they are signed: SSE-C keys.
const SECRET_HEADERS: [&str; 2] = [
    "x-amz-server-side-encryption-customer-key:",
    "x-amz-copy-source-server-side-encryption-customer-key:",
];

/// `signed` (a canonical request or a string to sign) as it may be logged:
/// the values of secret headers replaced.
pub(crate) fn loggable(signed: &[u8]) -> String {
    String::from_utf8_lossy(signed)
        .split('\n')
        .map(|line| {
            match SECRET_HEADERS
                .iter()
                .find(|name| line.to_ascii_lowercase().starts_with(*name))
            {
                Some(name) => format!("{name}<redacted>"),
                None => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a signature is checked against besides the secret: the gateway's
/// region (SigV4 scopes name it), its domain (a virtual-hosted SigV2 request
/// signs `/bucket` that only the Host names) and whether SigV2 is accepted.
#[derive(Clone, Copy, Debug)]
pub struct Realm<'a> {
    /// The region SigV4 credential scopes must name.
    pub region: &'a str,
    /// The domain of virtual-hosted-style requests, if any.
    pub domain: Option<&'a str>,
    /// Whether SigV2 (header and query forms) is accepted.
    pub sigv2: bool,
}

impl<'a> Realm<'a> {
    /// `region`, path style only, SigV2 accepted.
    pub const fn new(region: &'a str) -> Self {
        Self {
            region,
            domain: None,
            sigv2: true,
        }
    }
}

/// Who made the request, once its signature checked out.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The access key that signed the request.
    pub access_key: String,
    /// The user owning that key.
    pub user: String,
    /// The root user may reach every bucket.
    pub is_root: bool,
    /// The buckets a limited access key may reach, with their rights; None
    /// when the key is not limited.
    pub bucket_grants: Option<Vec<BucketGrant>>,
    /// An unsigned request: reaches only public-read buckets, and browser
    /// form uploads whose policy carries their own signature.
    pub anonymous: bool,
    /// The user's own policy (JSON), when an operator gave it one.
    pub user_policy: Option<String>,
}

impl Identity {
    /// What the caller's access key may do in `bucket` (None: nothing), before
    /// bucket ownership is considered.
    pub fn right_in(&self, bucket: &str) -> Option<BucketRight> {
        meta_api::key_right(self.bucket_grants.as_deref(), bucket)
    }

    /// The caller signing with `key`, which belongs to `user`.
    pub fn of_key(key: AccessKeyRecord, user: UserRecord) -> Self {
        Self {
            access_key: key.access_key,
            user: user.name,
            is_root: user.is_root,
            bucket_grants: key.bucket_grants,
            anonymous: false,
            user_policy: user.policy,
        }
    }

    /// The caller of an unsigned request.
    pub fn anonymous() -> Self {
        Self {
            access_key: String::new(),
            user: String::new(),
            is_root: false,
            bucket_grants: Some(Vec::new()),
            anonymous: true,
            user_policy: None,
        }
    }
}

/// How a request was signed (bucket policies test it as
/// `s3:signatureversion` and `s3:authType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignedBy {
    /// SigV4 in the Authorization header.
    V4Header,
    /// SigV4 in the query (a presigned URL).
    V4Query,
    /// SigV2 in the Authorization header.
    V2Header,
    /// SigV2 in the query.
    V2Query,
}

impl SignedBy {
    /// `s3:signatureversion`: `AWS` or `AWS4-HMAC-SHA256`.
    pub fn version(self) -> &'static str {
        match self {
            Self::V4Header | Self::V4Query => "AWS4-HMAC-SHA256",
            Self::V2Header | Self::V2Query => "AWS",
        }
    }

    /// `s3:authType`: `REST-HEADER` or `REST-QUERY-STRING`.
    pub fn auth_type(self) -> &'static str {
        match self {
            Self::V4Header | Self::V2Header => "REST-HEADER",
            Self::V4Query | Self::V2Query => "REST-QUERY-STRING",
        }
    }
}

/// A request whose signature is verified; says how to decode and check its body.
#[derive(Debug)]
pub struct VerifiedRequest {
    /// Who signed the request.
    pub identity: Identity,
    /// How; None when unsigned.
    pub signed_by: Option<SignedBy>,
    payload: ContentSha256,
    /// Seed signature, key and scope from which the chunk signatures of a signed aws-chunked
    /// body are chained.
    chain: SignatureChain,
}

impl VerifiedRequest {
    /// Checks `signed` with the key derived from `secret` (header and presigned
    /// forms alike); the verified signature seeds the aws-chunked chain.
    fn check(
        parts: &Parts,
        signed: &canonical::SignedParts<'_>,
        secret: &str,
        identity: Identity,
        payload: ContentSha256,
        keys: &SigningKeyCache,
    ) -> Result<Self, AuthError> {
        let key = keys.key(secret, signed.amz_date.time, &signed.scope.region);
        let seed = canonical::verify_signature(parts, signed, &key)?;
        refuse_unsigned_amz_headers(parts, signed.signed_headers)?;
        let chain = SignatureChain::new(
            key,
            signed.amz_date.text.clone(),
            signed.scope.scope(),
            seed,
        );
        Ok(Self {
            identity,
            signed_by: None,
            payload,
            chain,
        })
    }

    /// An unsigned request: its body is read as it comes, checked only
    /// against Content-Length (and Content-MD5 / checksums where sent).
    pub fn anonymous() -> Self {
        Self::unsigned_body(Identity::anonymous())
    }

    /// A form upload by `identity`, who signed the form's policy (or no
    /// one): the body is the form's and no signature covers it.
    pub fn of_form(identity: Identity) -> Self {
        Self::unsigned_body(identity)
    }

    /// A request of `identity` whose body the signature does not cover
    /// (SigV2, anonymous).
    fn unsigned_body(identity: Identity) -> Self {
        let key = canonical::SigningKey::derive("", SystemTime::UNIX_EPOCH, "");
        Self {
            identity,
            signed_by: None,
            payload: ContentSha256::UnsignedPayload,
            chain: SignatureChain::new(key, String::new(), String::new(), String::new()),
        }
    }

    /// The request's `x-amz-content-sha256` (`UNSIGNED-PAYLOAD` for a presigned URL without it).
    pub fn content_sha256(&self) -> ContentSha256 {
        self.payload
    }
}

/// S3 acts on every `x-amz-*` header, so each must be covered by the
/// signature: otherwise the holder of a presigned URL could add
/// `x-amz-copy-source` or `x-amz-tagging` that the signer never approved.
/// Like S3, an unsigned `x-amz-content-sha256` is let through: it only says
/// how the body is hashed, and the body is checked against it.
fn refuse_unsigned_amz_headers(parts: &Parts, signed: &[String]) -> Result<(), AuthError> {
    let unsigned: Vec<String> = parts
        .headers
        .keys()
        .map(|name| name.as_str())
        .filter(|name| name.starts_with("x-amz-") && *name != "x-amz-content-sha256")
        .filter(|name| !signed.iter().any(|s| s == name))
        .map(str::to_string)
        .collect();
    if unsigned.is_empty() {
        Ok(())
    } else {
        Err(AuthError::HeadersNotSigned(unsigned))
    }
}

/// Why a request is not authenticated. Each `String` is S3's complete message for the case.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// 403 AccessDenied: anonymous request, expired presigned URL ("Request has expired"), no
    /// usable date.
    #[error("access denied: {0}")]
    AccessDenied(String),
    /// 403 AccessDenied: these `x-amz-*` headers are not covered by the signature.
    #[error("there were headers present in the request which were not signed: {}", .0.join(", "))]
    HeadersNotSigned(Vec<String>),
    /// 403: the access key is unknown.
    #[error("the AWS access key Id you provided does not exist in our records")]
    InvalidAccessKeyId,
    /// 403: the signature is not the one we compute.
    #[error("the request signature we calculated does not match the signature you provided")]
    SignatureDoesNotMatch,
    /// 400: the Authorization header does not parse, or its scope is not ours.
    #[error("{0}")]
    AuthorizationHeaderMalformed(String),
    /// 400: the Authorization header's scope names another region than
    /// this endpoint's: AuthorizationHeaderMalformed with the `Region` it
    /// expects, which clients (s3cmd) read to sign again for it.
    #[error("{message}")]
    WrongRegion {
        /// S3's message.
        message: String,
        /// This endpoint's region.
        expected: String,
    },
    /// 400: the X-Amz-* query parameters of a presigned URL do not parse.
    #[error("{0}")]
    AuthorizationQueryParametersError(String),
    /// 403: the request time is more than 15 minutes from ours.
    #[error("the difference between the request time and the current time is too large")]
    RequestTimeTooSkewed,
    /// 400: a header required for security is missing.
    #[error("{0}")]
    MissingSecurityHeader(String),
    /// 400 InvalidArgument.
    #[error("{0}")]
    InvalidArgument(String),
    /// 400 InvalidRequest.
    #[error("{0}")]
    InvalidRequest(String),
    /// 411: an aws-chunked body without x-amz-decoded-content-length.
    #[error("you must provide the Content-Length HTTP header")]
    MissingContentLength,
    /// Meta could not be asked; the S3 layer maps it.
    #[error("meta: {0}")]
    Meta(#[from] MetaError),
}

/// Why a request body is rejected. It is the last item of a [`BodyStream`], after all data items;
/// the consumer must then discard what it wrote.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// 403: a chunk signature or the trailer signature is wrong.
    #[error("a chunk signature does not match")]
    SignatureDoesNotMatch,
    /// 400 XAmzContentSHA256Mismatch: the body's SHA-256 is not x-amz-content-sha256.
    #[error("the provided 'x-amz-content-sha256' header does not match what was computed")]
    ContentSha256Mismatch,
    /// 400 BadDigest, with S3's message naming the algorithm.
    #[error("{0}")]
    BadDigest(String),
    /// 400 InvalidDigest: a checksum value that is not base64 of the right size.
    #[error("{0}")]
    InvalidDigest(String),
    /// 400 IncompleteBody: fewer (or more) bytes than declared.
    #[error("you did not provide the number of bytes specified by the Content-Length HTTP header")]
    IncompleteBody,
    /// 400: bad aws-chunked framing.
    #[error("malformed aws-chunked body: {0}")]
    MalformedChunk(String),
    /// 400 RequestTimeout: the body arrived slower than the gateway's floor.
    #[error("{0}")]
    TooSlow(String),
    /// The client went away, or the connection failed.
    #[error("reading the request body: {0}")]
    Io(String),
}

/// Checks SigV4 (Authorization header, or presigned query X-Amz-*) or SigV2 (`AWS AK:sig`, or
/// the query's AWSAccessKeyId / Expires / Signature), looking up the secret with
/// `meta.get_access_key` and the user with `meta.get_user`. `parts.uri` is the original request URI
/// (path + raw query, percent-encoded as sent). A SigV4 credential scope with another region than
/// the realm's gives AuthorizationHeaderMalformed as S3 does.
/// Requests with no Authorization header and no X-Amz-Signature query -> AuthError::AccessDenied
/// ("anonymous access is not allowed").
pub async fn authenticate(
    parts: &Parts,
    credentials: &Credentials,
    realm: &Realm<'_>,
) -> Result<VerifiedRequest, AuthError> {
    let result = authenticate_inner(parts, credentials, realm).await;
    if let Err(err) = &result {
        metrics::counter!(crate::telemetry::AUTH_FAILURES.name, "reason" => err.metric_label())
            .increment(1);
    }
    result
}

async fn authenticate_inner(
    parts: &Parts,
    credentials: &Credentials,
    realm: &Realm<'_>,
) -> Result<VerifiedRequest, AuthError> {
    let request = SignedRequest::parse(parts, realm)?;
    let (key, user) = credentials
        .lookups
        .lookup(request.access_key())
        .await?
        .ok_or(AuthError::InvalidAccessKeyId)?;
    let secret = key.secret_key.clone();
    request.verify(
        parts,
        SystemTime::now(),
        realm,
        &secret,
        Identity::of_key(key, user),
        &credentials.signing_keys,
    )
}

/// The pure form of [`authenticate`]: `lookup` maps an access key to its secret and identity
/// (`None` when unknown); `now` is the clock the request time is checked against.
pub fn verify_request(
    parts: &Parts,
    now: SystemTime,
    realm: &Realm<'_>,
    lookup: impl FnOnce(&str) -> Option<(String, Identity)>,
) -> Result<VerifiedRequest, AuthError> {
    let request = SignedRequest::parse(parts, realm)?;
    let (secret, identity) = lookup(request.access_key()).ok_or(AuthError::InvalidAccessKeyId)?;
    request.verify(
        parts,
        now,
        realm,
        &secret,
        identity,
        &SigningKeyCache::default(),
    )
}

/// Whether the request carries no signature at all (no Authorization header,
/// no presigned query): S3 treats it as anonymous.
pub fn is_unsigned(parts: &Parts) -> bool {
    if parts.headers.contains_key(http::header::AUTHORIZATION) {
        return false;
    }
    let pairs = query_pairs(parts.uri.query());
    !presign::is_presigned(&pairs) && !sigv2::is_query_signed(&pairs)
}

/// A parsed, not yet verified, signed request.
enum SignedRequest {
    Header(sigv4::HeaderAuth),
    Presigned(presign::PresignedAuth),
    V2(sigv2::V2Auth),
}

impl SignedRequest {
    /// Presigned query first, then the Authorization header; neither is anonymous.
    fn parse(parts: &Parts, realm: &Realm<'_>) -> Result<Self, AuthError> {
        let authorization = parts.headers.get(http::header::AUTHORIZATION);
        let pairs = query_pairs(parts.uri.query());
        let v4_query = presign::is_presigned(&pairs);
        let v2_query = sigv2::is_query_signed(&pairs);
        if (v4_query || v2_query) && authorization.is_some() || v4_query && v2_query {
            return Err(AuthError::InvalidArgument(
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, \
                 Signature query string parameter or the Authorization header should be \
                 specified"
                    .to_string(),
            ));
        }
        if v4_query {
            return presign::PresignedAuth::parse(parts, &pairs, realm.region).map(Self::Presigned);
        }
        let v2_header = authorization.is_some_and(sigv2::is_header_signed);
        if (v2_query || v2_header) && !realm.sigv2 {
            return Err(unsupported_mechanism());
        }
        match authorization {
            Some(value) if v2_header => sigv2::V2Auth::parse_header(value).map(Self::V2),
            Some(value) => sigv4::HeaderAuth::parse(parts, value, realm.region).map(Self::Header),
            None if v2_query => sigv2::V2Auth::parse_query(&pairs).map(Self::V2),
            None => Err(AuthError::AccessDenied(
                "anonymous access is not allowed".to_string(),
            )),
        }
    }

    fn access_key(&self) -> &str {
        match self {
            Self::Header(auth) => auth.access_key(),
            Self::Presigned(auth) => auth.access_key(),
            Self::V2(auth) => auth.access_key(),
        }
    }

    fn verify(
        &self,
        parts: &Parts,
        now: SystemTime,
        realm: &Realm<'_>,
        secret: &str,
        identity: Identity,
        keys: &SigningKeyCache,
    ) -> Result<VerifiedRequest, AuthError> {
        let mut verified = match self {
            Self::Header(auth) => auth.verify(parts, now, secret, identity, keys),
            Self::Presigned(auth) => auth.verify(parts, now, secret, identity, keys),
            Self::V2(auth) => auth.verify(parts, now, realm, secret, identity),
        }?;
        verified.signed_by = Some(match self {
            Self::Header(_) => SignedBy::V4Header,
            Self::Presigned(_) => SignedBy::V4Query,
            Self::V2(auth) if auth.is_query() => SignedBy::V2Query,
            Self::V2(_) => SignedBy::V2Header,
        });
        Ok(verified)
    }
}

/// S3's answer to an algorithm it does not know (and to SigV2 where it is turned off).
fn unsupported_mechanism() -> AuthError {
    AuthError::InvalidRequest(
        "The authorization mechanism you have provided is not supported. \
         Please use AWS4-HMAC-SHA256."
            .to_string(),
    )
}

impl AuthError {
    fn metric_label(&self) -> &'static str {
        match self {
            Self::AccessDenied(_) => "access_denied",
            Self::HeadersNotSigned(_) => "headers_not_signed",
            Self::InvalidAccessKeyId => "invalid_access_key_id",
            Self::SignatureDoesNotMatch => "signature_does_not_match",
            Self::AuthorizationHeaderMalformed(_) => "authorization_header_malformed",
            Self::WrongRegion { .. } => "wrong_region",
            Self::AuthorizationQueryParametersError(_) => "authorization_query_parameters_error",
            Self::RequestTimeTooSkewed => "request_time_too_skewed",
            Self::MissingSecurityHeader(_) => "missing_security_header",
            Self::InvalidArgument(_) => "invalid_argument",
            Self::InvalidRequest(_) => "invalid_request",
            Self::MissingContentLength => "missing_content_length",
            Self::Meta(_) => "meta",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::request;
    use super::*;

    #[test]
    fn logged_signing_texts_hide_customer_keys() {
        let canonical = b"PUT\n/b/k\n\nhost:h\nx-amz-server-side-encryption-customer-key:S2V5\n\
            X-Amz-Copy-Source-Server-Side-Encryption-Customer-Key:T3RoZXI=\n\
            x-amz-server-side-encryption-customer-key-md5:TUQ1\n";
        let logged = loggable(canonical);
        assert!(
            !logged.contains("S2V5") && !logged.contains("T3RoZXI="),
            "{logged}"
        );
        assert!(logged.contains("host:h") && logged.contains("customer-key-md5:TUQ1"));
        assert_eq!(logged.matches("<redacted>").count(), 2);
    }

    #[test]
    fn only_requests_without_any_signature_are_unsigned() {
        assert!(is_unsigned(&request("GET", "/b/k", &[])));
        assert!(is_unsigned(&request(
            "GET",
            "/b/k?versionId=3&x=Signature",
            &[]
        )));
        let signed = [
            request("GET", "/b/k", &[("authorization", "AWS4-HMAC-SHA256 x")]),
            request(
                "GET",
                "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab",
                &[],
            ),
            request("GET", "/b/k?AWSAccessKeyId=AK&Expires=1", &[]),
            request("GET", "/b/k?Expires=1&Signature=x", &[]),
        ];
        for parts in &signed {
            assert!(!is_unsigned(parts), "{}", parts.uri);
        }
    }

    /// Each failure is counted under a label of its own.
    #[test]
    fn every_auth_error_has_its_own_metric_label() {
        let text = || "x".to_string();
        let errors = [
            AuthError::AccessDenied(text()),
            AuthError::HeadersNotSigned(vec![text()]),
            AuthError::InvalidAccessKeyId,
            AuthError::SignatureDoesNotMatch,
            AuthError::AuthorizationHeaderMalformed(text()),
            AuthError::WrongRegion {
                message: text(),
                expected: text(),
            },
            AuthError::AuthorizationQueryParametersError(text()),
            AuthError::RequestTimeTooSkewed,
            AuthError::MissingSecurityHeader(text()),
            AuthError::InvalidArgument(text()),
            AuthError::InvalidRequest(text()),
            AuthError::MissingContentLength,
            AuthError::Meta(MetaError::Store(text())),
        ];
        let labels: std::collections::HashSet<_> =
            errors.iter().map(AuthError::metric_label).collect();
        assert_eq!(labels.len(), errors.len());
        assert!(labels
            .iter()
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    }

    /// Authorization headers and presigned queries built from the pieces of
    /// real ones, in any order and number: verification answers, never panics.
    fn signature_pieces() -> impl proptest::strategy::Strategy<Value = String> {
        let pieces = vec![
            "AWS4-HMAC-SHA256 ",
            "Credential=",
            "AKIAIOSFODNN7EXAMPLE",
            "/20130524",
            "/us-east-1",
            "/s3",
            "/aws4_request",
            ", ",
            ",",
            "SignedHeaders=",
            "host",
            ";",
            "x-amz-date",
            "Signature=",
            "aa",
            "0",
            " ",
            "=",
            "/",
            "AWS ",
            "\u{e9}",
        ];
        use proptest::strategy::Strategy;
        proptest::collection::vec(proptest::sample::select(pieces), 0..24).prop_map(|p| p.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        #[test]
        fn any_authorization_header_is_answered(value in signature_pieces(), date in "[0-9TZ]{0,17}") {
            let mut parts = request("GET", "/b/k", &[("x-amz-date", date.as_str())]);
            if let Ok(value) = http::HeaderValue::from_bytes(value.as_bytes()) {
                parts.headers.insert(http::header::AUTHORIZATION, value);
            }
            let _ = verify_request(&parts, SystemTime::now(), &Realm::new("us-east-1"), super::testing::example_lookup);
        }

        #[test]
        fn any_presigned_query_is_answered(
            pairs in proptest::collection::vec(
                (proptest::sample::select(vec![
                    "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                    "X-Amz-SignedHeaders", "X-Amz-Signature", "AWSAccessKeyId", "Signature",
                    "Expires", "x-id",
                ]), signature_pieces()),
                0..8,
            ),
        ) {
            let query: Vec<String> = pairs
                .iter()
                .map(|(name, value)| {
                    let value = percent_encoding::utf8_percent_encode(
                        value,
                        percent_encoding::NON_ALPHANUMERIC,
                    );
                    format!("{name}={value}")
                })
                .collect();
            let parts = request("GET", &format!("/b/k?{}", query.join("&")), &[]);
            let _ = verify_request(&parts, SystemTime::now(), &Realm::new("us-east-1"), super::testing::example_lookup);
            let _ = is_unsigned(&parts);
        }
    }

    #[test]
    fn a_limited_key_has_rights_only_in_its_buckets() {
        let grant = |bucket: &str, right| meta_api::BucketGrant {
            bucket: bucket.into(),
            right,
        };
        let mut identity = Identity {
            access_key: "AK".into(),
            user: "u".into(),
            is_root: false,
            bucket_grants: Some(vec![
                grant("logs", BucketRight::Read),
                grant("uploads", BucketRight::ReadWrite),
            ]),
            anonymous: false,
            user_policy: None,
        };
        assert_eq!(identity.right_in("logs"), Some(BucketRight::Read));
        assert_eq!(identity.right_in("uploads"), Some(BucketRight::ReadWrite));
        assert_eq!(identity.right_in("other"), None);
        identity.bucket_grants = None;
        assert_eq!(identity.right_in("other"), Some(BucketRight::ReadWrite));
    }

    /// A SigV2 presigned link is parsed as SigV2, not mistaken for an
    /// anonymous request; two mechanisms at once are refused.
    #[test]
    fn each_mechanism_is_recognised() {
        let realm = Realm::new("us-east-1");
        let sigv2 = request("GET", "/b/k?AWSAccessKeyId=AK&Expires=1&Signature=x", &[]);
        assert!(matches!(
            SignedRequest::parse(&sigv2, &realm),
            Ok(SignedRequest::V2(_))
        ));
        let header = request("GET", "/b/k", &[("authorization", "AWS AK:x")]);
        assert!(matches!(
            SignedRequest::parse(&header, &realm),
            Ok(SignedRequest::V2(_))
        ));
        let both = [
            request(
                "GET",
                "/b/k?AWSAccessKeyId=AK&Expires=1&Signature=x",
                &[("authorization", "AWS AK:x")],
            ),
            request(
                "GET",
                "/b/k?AWSAccessKeyId=AK&Expires=1&Signature=x&X-Amz-Signature=ab",
                &[],
            ),
        ];
        for parts in &both {
            assert!(matches!(
                SignedRequest::parse(parts, &realm),
                Err(AuthError::InvalidArgument(_))
            ));
        }
        match SignedRequest::parse(&request("GET", "/b/k", &[]), &realm) {
            Err(AuthError::AccessDenied(_)) => {}
            Err(other) => panic!("anonymous request gave {other:?}"),
            Ok(_) => panic!("anonymous request parsed as signed"),
        }
    }
}
