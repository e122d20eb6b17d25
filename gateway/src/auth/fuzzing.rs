//! Entry points for the fuzz targets (`fuzz/`): each hands untrusted bytes
//! to one parser of the request path the way a request would, and checks
//! what must hold whatever the bytes (no panic; no data after an error).
//! Kept in the crate, and built with it, so that they cannot rot.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::executor::block_on;
use futures::{stream, StreamExt as _};

use super::canonical::SigningKey;
use super::chunked::{AwsChunkedStream, Framing, SignatureChain};
use super::{verify_request, Identity, PostPolicy};

const ACCESS_KEY: &str = "AKIAFUZZFUZZFUZZFUZZ";
const SECRET: &str = "fuzz/secret/key/fuzz/secret/key/fuzz/sec";

/// 2013-05-24T00:00:00Z: the date inputs are signed for.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600)
}

fn lookup(access_key: &str) -> Option<(String, Identity)> {
    (access_key == ACCESS_KEY).then(|| {
        let identity = Identity {
            access_key: access_key.to_string(),
            user: "fuzz".to_string(),
            is_root: false,
            bucket_grants: None,
            anonymous: false,
            user_policy: None,
        };
        (SECRET.to_string(), identity)
    })
}

/// Decodes `body` as an aws-chunked body arriving in frames of `frame`
/// bytes, signed (chained from a fixed seed) or unsigned with a trailer.
/// Panics if the decoder yields data after an error.
pub fn aws_chunked(body: &[u8], frame: usize, signed: bool) {
    let framing = if signed {
        let key = SigningKey::derive(SECRET, now(), "us-east-1");
        let scope = "20130524/us-east-1/s3/aws4_request";
        let chain =
            SignatureChain::new(key, "20130524T000000Z".into(), scope.into(), "0".repeat(64));
        Framing::Signed {
            chain,
            trailer: true,
        }
    } else {
        Framing::UnsignedTrailer
    };
    let frames: Vec<_> = body
        .chunks(frame.max(1))
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let announced = Some("x-amz-checksum-crc32c".to_string());
    let mut decoder = AwsChunkedStream::new(stream::iter(frames), framing, announced);
    let mut failed = false;
    while let Some(item) = block_on(decoder.next()) {
        match item {
            Ok(_) => assert!(!failed, "data after an error"),
            Err(_) => failed = true,
        }
    }
}

/// Verifies a GET carrying `authorization` and `amz_date` as its headers.
pub fn authorization_header(authorization: &[u8], amz_date: &[u8]) {
    let mut builder = http::Request::get("/bucket/key");
    if let Ok(value) = http::HeaderValue::from_bytes(authorization) {
        builder = builder.header(http::header::AUTHORIZATION, value);
    }
    if let Ok(value) = http::HeaderValue::from_bytes(amz_date) {
        builder = builder.header("x-amz-date", value);
    }
    if let Ok(request) = builder.body(()) {
        let (parts, ()) = request.into_parts();
        let _ = verify_request(&parts, now(), &crate::auth::Realm::new("us-east-1"), lookup);
    }
}

/// Verifies a GET of `/bucket/key?QUERY` (a presigned URL, or not).
pub fn presigned_query(query: &str) {
    let Ok(request) = http::Request::get(format!("/bucket/key?{query}")).body(()) else {
        return;
    };
    let (parts, ()) = request.into_parts();
    let _ = verify_request(&parts, now(), &crate::auth::Realm::new("us-east-1"), lookup);
}

/// Decodes a POST form's base64 policy and checks a form against it.
pub fn post_policy(encoded: &str) {
    if let Ok(policy) = PostPolicy::decode(encoded) {
        let _ = policy.length_range();
        let form = [
            ("bucket", "b"),
            ("key", "k"),
            ("content-type", "text/plain"),
        ];
        let fields = form
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        let _ = policy.check(&fields, now());
    }
}
