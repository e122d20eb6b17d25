//! Test fixtures shared by the auth tests: the credentials and clock of the AWS SigV4 examples.

use std::time::{Duration, SystemTime};

use http::request::Parts;

use super::Identity;

/// The access key of every AWS SigV4 S3 example.
pub const EXAMPLE_ACCESS_KEY: &str = "AKIAIOSFODNN7EXAMPLE";
/// Its secret.
pub const EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// 2013-05-24T00:00:00Z, the x-amz-date of the AWS examples.
pub fn example_time() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600)
}

/// Knows the example key only.
pub fn example_lookup(access_key: &str) -> Option<(String, Identity)> {
    (access_key == EXAMPLE_ACCESS_KEY).then(|| {
        (
            EXAMPLE_SECRET.to_string(),
            Identity {
                access_key: access_key.to_string(),
                user: "example".to_string(),
                is_root: false,
                bucket_grants: None,
                anonymous: false,
                user_policy: None,
            },
        )
    })
}

/// Verifies `parts` at [`example_time`] in us-east-1 with [`example_lookup`].
pub fn verify_example(parts: &Parts) -> Result<super::VerifiedRequest, super::AuthError> {
    super::verify_request(
        parts,
        example_time(),
        &super::Realm::new("us-east-1"),
        example_lookup,
    )
}

/// The head of a request as hyper hands it to a handler.
pub fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
    let mut builder = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).expect("valid test request").into_parts().0
}

/// The body of AWS "Signature Calculations for the Authorization Header: Transferring Payload
/// in Multiple Chunks": 65,536 + 1,024 bytes of `a`, then the final chunk.
pub fn aws_streaming_body() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n");
    body.extend_from_slice(&[b'a'; 65536]);
    body.extend_from_slice(b"\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
    body.extend_from_slice(&[b'a'; 1024]);
    body.extend_from_slice(b"\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n");
    body
}
/// The seed (request) signature of that example.
pub const AWS_STREAMING_SEED: &str =
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

/// The body of the AWS "sigv4-streaming-trailers" example: same data, CRC32C trailer.
pub fn aws_trailer_body() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"10000;chunk-signature=b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2\r\n");
    body.extend_from_slice(&[b'a'; 65536]);
    body.extend_from_slice(b"\r\n400;chunk-signature=1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7\r\n");
    body.extend_from_slice(&[b'a'; 1024]);
    body.extend_from_slice(b"\r\n0;chunk-signature=2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992\r\n");
    body.extend_from_slice(b"x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n");
    body
}
/// The seed (request) signature of the trailer example.
pub const AWS_TRAILER_SEED: &str =
    "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";
