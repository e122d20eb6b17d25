//! Requests signed by aws-sigv4 (the AWS SDK for Rust's signer), verified by our code: header and
//! query authentication with awkward keys and query strings, and aws-chunked bodies whose chunk
//! and trailer signatures aws-sigv4 computes.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
    SignatureLocation, SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity as SdkIdentity;
use bytes::Bytes;
use futures::executor::block_on;
use futures::StreamExt as _;
use http::request::Parts;

use super::testing::{example_lookup, EXAMPLE_ACCESS_KEY, EXAMPLE_SECRET};
use super::{body_stream, verify_request, AuthError, BodyError, ChecksumAlgorithm, Checksummer};

const AUTHORITY: &str = "127.0.0.1:9878";

/// Percent-encodes a key as the SDKs put it in the path: everything but unreserved and `/`.
fn encode_key(key: &str) -> String {
    encode(key, false)
}

/// Percent-encodes a query component: everything but unreserved.
fn encode_query(value: &str) -> String {
    encode(value, true)
}

fn encode(value: &str, encode_slash: bool) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~')
            || (byte == b'/' && !encode_slash)
        {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn identity() -> SdkIdentity {
    Credentials::new(EXAMPLE_ACCESS_KEY, EXAMPLE_SECRET, None, None, "test").into()
}

fn settings(location: SignatureLocation) -> SigningSettings {
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.signature_location = location;
    if location == SignatureLocation::QueryParams {
        settings.expires_in = Some(Duration::from_secs(900));
    }
    settings
}

fn v4_params<'a>(
    identity: &'a SdkIdentity,
    time: SystemTime,
    location: SignatureLocation,
) -> v4::SigningParams<'a, SigningSettings> {
    v4::SigningParams::builder()
        .identity(identity)
        .region("us-east-1")
        .name("s3")
        .time(time)
        .settings(settings(location))
        .build()
        .expect("signing params")
}

/// Signs `method path_and_query` with aws-sigv4 and returns the head as our server sees it
/// (origin-form URI, Host header) and the signature.
fn signed(
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: SignableBody<'_>,
    location: SignatureLocation,
    time: SystemTime,
) -> (Parts, String) {
    let identity = identity();
    let params = v4_params(&identity, time, location).into();
    let uri = format!("http://{AUTHORITY}{path_and_query}");
    let signable =
        SignableRequest::new(method, uri.clone(), headers.iter().copied(), body).expect("signable");
    let (instructions, signature) = sign(signable, &params).expect("sign").into_parts();
    let mut builder = http::Request::builder().method(method).uri(&uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(()).expect("request");
    instructions.apply_to_request_http1x(&mut request);
    let (mut parts, ()) = request.into_parts();
    let origin = parts
        .uri
        .path_and_query()
        .expect("path")
        .as_str()
        .to_string();
    parts.uri = origin.parse().expect("origin-form uri");
    parts.headers.insert(
        http::header::HOST,
        http::HeaderValue::from_static(AUTHORITY),
    );
    (parts, signature)
}

fn verify(parts: &Parts, now: SystemTime) -> Result<super::VerifiedRequest, AuthError> {
    verify_request(
        parts,
        now,
        &crate::auth::Realm::new("us-east-1"),
        example_lookup,
    )
}

const AWKWARD_KEYS: &[&str] = &[
    "plain.txt",
    "dir/sub dir/file with spaces.txt",
    "plus+sign+key",
    "unicode/ключ/日本語/€uro.bin",
    "tilde~and*star(paren)!'",
    "percent%20literal%2Fslash",
    "semi;colon:equals=amp&hash#q?",
    "trailing/",
];

#[test]
fn header_auth_with_awkward_keys() {
    let now = SystemTime::now();
    for key in AWKWARD_KEYS {
        let path = format!("/bucket/{}", encode_key(key));
        let body = b"hello";
        let (parts, _) = signed(
            "PUT",
            &path,
            &[
                ("content-type", "text/plain"),
                ("x-amz-meta-note", "a   b  c"),
            ],
            SignableBody::Bytes(body),
            SignatureLocation::Headers,
            now,
        );
        let verified = verify(&parts, now).unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert!(matches!(
            verified.content_sha256(),
            super::ContentSha256::Sha256(_)
        ));
        let signed_by = verified.signed_by.expect("signed");
        assert_eq!(signed_by, super::SignedBy::V4Header);
        assert_eq!(
            (signed_by.version(), signed_by.auth_type()),
            ("AWS4-HMAC-SHA256", "REST-HEADER")
        );
        assert!(matches!(
            verify(&parts, now + Duration::from_secs(3600)),
            Err(AuthError::RequestTimeTooSkewed)
        ));
    }
}

/// aws-sigv4 signs the path exactly as given; a client that sends `$` or `!` unencoded signs
/// them so, and we accept that form too.
#[test]
fn header_auth_with_unencoded_path_characters() {
    let now = SystemTime::now();
    let (parts, _) = signed(
        "GET",
        "/bucket/test$file!(1).txt",
        &[],
        SignableBody::Bytes(b""),
        SignatureLocation::Headers,
        now,
    );
    verify(&parts, now).expect("raw path signature");
}

#[test]
fn header_auth_with_special_query_strings() {
    let now = SystemTime::now();
    let queries = [
        format!(
            "list-type=2&prefix={}&delimiter=%2F&start-after={}",
            encode_query("dir/ü ber+plus"),
            encode_query("a=b&c")
        ),
        "uploads".to_string(),
        "prefix=a+b&max-keys=10".to_string(),
        format!("versionId={}&tagging", encode_query("3/L4kqtJl+cF*~")),
        "prefix=&marker=z&marker=a".to_string(),
    ];
    for query in queries {
        let (parts, _) = signed(
            "GET",
            &format!("/bucket?{query}"),
            &[],
            SignableBody::Bytes(b""),
            SignatureLocation::Headers,
            now,
        );
        verify(&parts, now).unwrap_or_else(|e| panic!("{query}: {e:?}"));
        // Changing one value breaks it.
        let mut tampered = parts;
        let changed = format!("{}&extra=1", tampered.uri);
        tampered.uri = changed.parse().expect("uri");
        assert!(matches!(
            verify(&tampered, now),
            Err(AuthError::SignatureDoesNotMatch)
        ));
    }
}

#[test]
fn presigned_with_awkward_keys_and_queries() {
    let now = SystemTime::now();
    for key in AWKWARD_KEYS {
        let path = format!(
            "/bucket/{}?response-content-disposition={}",
            encode_key(key),
            encode_query("attachment; filename=\"ü b+c.txt\"")
        );
        let (parts, _) = signed(
            "GET",
            &path,
            &[],
            SignableBody::UnsignedPayload,
            SignatureLocation::QueryParams,
            now,
        );
        let query = parts.uri.query().unwrap_or_default();
        assert!(query.contains("X-Amz-Signature="), "{query}");
        let verified = verify(&parts, now + Duration::from_secs(899))
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert_eq!(
            verified.content_sha256(),
            super::ContentSha256::UnsignedPayload
        );
        let signed_by = verified.signed_by.expect("signed");
        assert_eq!(signed_by, super::SignedBy::V4Query);
        assert_eq!(
            (signed_by.version(), signed_by.auth_type()),
            ("AWS4-HMAC-SHA256", "REST-QUERY-STRING")
        );
        match verify(&parts, now + Duration::from_secs(901)) {
            Err(AuthError::AccessDenied(message)) => assert_eq!(message, "Request has expired"),
            other => panic!("{key}: unexpected {other:?}"),
        }
    }
}

/// A presigned URL is valid from 15 minutes before its X-Amz-Date (clock
/// skew) to X-Amz-Expires after it, both ends included.
#[test]
fn presigned_validity_window_includes_its_ends() {
    let whole_seconds = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let signed_at = SystemTime::UNIX_EPOCH + Duration::from_secs(whole_seconds);
    let (parts, _) = signed(
        "GET",
        "/bucket/k",
        &[],
        SignableBody::UnsignedPayload,
        SignatureLocation::QueryParams,
        signed_at,
    );
    let skew = Duration::from_secs(15 * 60);
    let second = Duration::from_secs(1);
    for at in [signed_at - skew, signed_at + Duration::from_secs(900)] {
        verify(&parts, at).expect("valid at the ends of its window");
    }
    match verify(&parts, signed_at - skew - second) {
        Err(AuthError::AccessDenied(message)) => assert_eq!(message, "Request is not valid yet"),
        other => panic!("unexpected {other:?}"),
    }
    match verify(&parts, signed_at + Duration::from_secs(901)) {
        Err(AuthError::AccessDenied(message)) => assert_eq!(message, "Request has expired"),
        other => panic!("unexpected {other:?}"),
    }
}

/// An `x-amz-*` header added after signing is refused, in a presigned URL
/// (where it would turn a PUT into a copy) as in a signed header; an
/// unsigned `x-amz-content-sha256` alone is let through, as S3 does.
#[test]
fn unsigned_amz_headers_are_refused() {
    let now = SystemTime::now();
    for location in [SignatureLocation::QueryParams, SignatureLocation::Headers] {
        let (mut parts, _) = signed(
            "PUT",
            "/bucket/key",
            &[("x-amz-meta-signed", "yes")],
            SignableBody::UnsignedPayload,
            location,
            now,
        );
        if location == SignatureLocation::QueryParams {
            verify(&parts, now).expect("the presigned URL as signed");
            parts.headers.insert(
                "x-amz-content-sha256",
                http::HeaderValue::from_static("UNSIGNED-PAYLOAD"),
            );
            verify(&parts, now).expect("an unsigned x-amz-content-sha256");
        } else {
            verify(&parts, now).expect("the request as signed");
        }
        parts.headers.insert(
            "x-amz-copy-source",
            http::HeaderValue::from_static("/other/secret"),
        );
        parts
            .headers
            .insert("x-amz-tagging", http::HeaderValue::from_static("a=b"));
        match verify(&parts, now) {
            Err(AuthError::HeadersNotSigned(names)) => {
                assert_eq!(
                    names,
                    ["x-amz-copy-source", "x-amz-tagging"],
                    "{location:?}"
                )
            }
            other => panic!("{location:?}: unexpected {other:?}"),
        }
    }
}

/// Builds a signed aws-chunked body with aws-sigv4's `sign_chunk` and `sign_trailer`.
fn signed_chunked_body(
    seed: &str,
    time: SystemTime,
    chunks: &[&[u8]],
    trailer: Option<(&str, &str)>,
) -> Vec<u8> {
    let identity = identity();
    let params = v4_params(&identity, time, SignatureLocation::Headers);
    let mut running = seed.to_string();
    let mut body = Vec::new();
    for chunk in chunks.iter().copied().chain([&b""[..]]) {
        let signature = v4::sign_chunk(&Bytes::copy_from_slice(chunk), &running, &params)
            .expect("sign chunk")
            .signature()
            .to_string();
        body.extend_from_slice(
            format!("{:x};chunk-signature={signature}\r\n", chunk.len()).as_bytes(),
        );
        if !chunk.is_empty() {
            body.extend_from_slice(chunk);
            body.extend_from_slice(b"\r\n");
        }
        running = signature;
    }
    if let Some((name, value)) = trailer {
        let mut headers = aws_smithy_runtime_api::http::Headers::new();
        headers.insert(name.to_string(), value.to_string());
        let signature = v4::sign_trailer(&headers, &running, &params)
            .expect("sign trailer")
            .signature()
            .to_string();
        body.extend_from_slice(
            format!("{name}:{value}\r\nx-amz-trailer-signature:{signature}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(b"\r\n");
    body
}

fn read_all(
    parts: &Parts,
    now: SystemTime,
    body: Vec<u8>,
) -> (
    Vec<u8>,
    Option<BodyError>,
    Option<(ChecksumAlgorithm, String)>,
) {
    let verified = verify(parts, now).expect("seed signature");
    let frames: Vec<Result<Bytes, std::io::Error>> = body
        .chunks(1500)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let body = axum::body::Body::from_stream(futures::stream::iter(frames));
    let mut stream = body_stream(&verified, &parts.headers, body).expect("body stream");
    let mut data = Vec::new();
    let mut error = None;
    while let Some(item) = block_on(stream.next()) {
        match item {
            Ok(bytes) => data.extend_from_slice(&bytes),
            Err(err) => error = Some(err),
        }
    }
    (data, error, stream.verified_checksum())
}

fn crc32c_base64(data: &[u8]) -> String {
    let mut hasher = Checksummer::new(ChecksumAlgorithm::Crc32c);
    hasher.update(data);
    hasher.finalize_base64()
}

#[test]
fn signed_streaming_with_trailer() {
    let now = SystemTime::now();
    let chunks: [&[u8]; 3] = [&[b'x'; 70_000], &[b'y'; 8192], b"tail"];
    let data = chunks.concat();
    let length = data.len().to_string();
    let headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", length.as_str()),
        ("x-amz-trailer", "x-amz-checksum-crc32c"),
    ];
    let (parts, seed) = signed(
        "PUT",
        "/bucket/stream%20key",
        &headers,
        SignableBody::StreamingSignedPayloadTrailer,
        SignatureLocation::Headers,
        now,
    );
    let good = crc32c_base64(&data);
    let body = signed_chunked_body(&seed, now, &chunks, Some(("x-amz-checksum-crc32c", &good)));
    let (decoded, error, checksum) = read_all(&parts, now, body);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(decoded, data);
    assert_eq!(checksum, Some((ChecksumAlgorithm::Crc32c, good)));

    // A correctly signed trailer whose checksum is not the data's.
    let wrong = crc32c_base64(b"something else");
    let body = signed_chunked_body(&seed, now, &chunks, Some(("x-amz-checksum-crc32c", &wrong)));
    let (decoded, error, checksum) = read_all(&parts, now, body);
    assert_eq!(decoded, data);
    match error {
        Some(BodyError::BadDigest(message)) => assert_eq!(
            message,
            "The CRC32C you specified did not match the calculated checksum."
        ),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(checksum, None);
}

#[test]
fn signed_streaming_without_trailer() {
    let now = SystemTime::now();
    let chunks: [&[u8]; 2] = [&[7u8; 65_536], &[9u8; 100]];
    let data = chunks.concat();
    let length = data.len().to_string();
    let headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", length.as_str()),
    ];
    let (parts, seed) = signed(
        "PUT",
        "/bucket/key",
        &headers,
        SignableBody::Precomputed("STREAMING-AWS4-HMAC-SHA256-PAYLOAD".to_string()),
        SignatureLocation::Headers,
        now,
    );
    let body = signed_chunked_body(&seed, now, &chunks, None);
    let (decoded, error, _) = read_all(&parts, now, body.clone());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(decoded, data);
    // Chunks signed for another request (another seed) do not verify.
    let body = signed_chunked_body(&"1".repeat(64), now, &chunks, None);
    let (decoded, error, _) = read_all(&parts, now, body);
    assert!(matches!(error, Some(BodyError::SignatureDoesNotMatch)));
    assert!(decoded.is_empty());
}

#[test]
fn unsigned_streaming_trailer() {
    let now = SystemTime::now();
    let headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", "11"),
        ("x-amz-trailer", "x-amz-checksum-crc32c"),
    ];
    let (parts, _) = signed(
        "PUT",
        "/bucket/key",
        &headers,
        SignableBody::StreamingUnsignedPayloadTrailer,
        SignatureLocation::Headers,
        now,
    );
    let value = crc32c_base64(b"hello world");
    let body = format!("b\r\nhello world\r\n0\r\nx-amz-checksum-crc32c:{value}\r\n\r\n");
    let (decoded, error, checksum) = read_all(&parts, now, body.into_bytes());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(decoded, b"hello world");
    assert_eq!(checksum, Some((ChecksumAlgorithm::Crc32c, value)));
}
