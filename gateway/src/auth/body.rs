//! The request body as the client meant it: de-framed, its length, payload SHA-256 and
//! `x-amz-checksum-*` checked as the bytes pass.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use http::HeaderMap;
use sha2::{Digest as _, Sha256};

use super::checksum::{ChecksumAlgorithm, Checksummer};
use super::chunked::{AwsChunkedStream, Framing};
use super::payload::ContentSha256;
use super::{AuthError, BodyError, VerifiedRequest};

type RawBody = BoxStream<'static, Result<Bytes, BodyError>>;

enum Decoder {
    Plain(RawBody),
    Chunked(Box<AwsChunkedStream<RawBody>>),
}

/// Where the client's checksum comes from.
enum ExpectedChecksum {
    /// An `x-amz-checksum-*` header, already decoded.
    Header(Vec<u8>),
    /// The aws-chunked trailer announced by `x-amz-trailer`.
    Trailer,
}

/// `Stream<Item = Result<Bytes, BodyError>> + Send + Unpin + 'static`: the decoded body. A failed
/// check is the last item, after all data items.
pub struct BodyStream {
    decoder: Decoder,
    declared: Option<u64>,
    received: u64,
    /// The hex `x-amz-content-sha256` and the running hash of the body.
    content_sha256: Option<([u8; 32], Sha256)>,
    checksum: Option<(Checksummer, ExpectedChecksum)>,
    verified: Option<(ChecksumAlgorithm, String)>,
    finished: bool,
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, AuthError> {
    headers
        .get(name)
        .map(|value| {
            value
                .to_str()
                .map(str::trim)
                .map_err(|_| AuthError::InvalidArgument(format!("invalid {name} header")))
        })
        .transpose()
}

fn length_header(headers: &HeaderMap, name: &str) -> Result<Option<u64>, AuthError> {
    header_str(headers, name)?
        .map(|value| {
            value
                .parse::<u64>()
                .map_err(|_| AuthError::InvalidArgument(format!("invalid {name} header")))
        })
        .transpose()
}

fn multiple_checksums() -> AuthError {
    AuthError::InvalidRequest(
        "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
            .to_string(),
    )
}

/// The checksum to verify, and the trailer that must carry it (lowercased `x-amz-trailer`).
struct ChecksumPlan {
    expected: Option<(ChecksumAlgorithm, ExpectedChecksum)>,
    announced_trailer: Option<String>,
}

/// The checksum the client asks us to verify, from an `x-amz-checksum-*` header or announced by
/// `x-amz-trailer`. `x-amz-sdk-checksum-algorithm` alone names no value, so nothing to verify.
fn expected_checksum(
    headers: &HeaderMap,
    payload: ContentSha256,
) -> Result<ChecksumPlan, AuthError> {
    let mut found = None;
    for algorithm in ChecksumAlgorithm::ALL {
        let Some(value) = header_str(headers, algorithm.header_name())? else {
            continue;
        };
        let digest = algorithm.decode_value(value).ok_or_else(|| {
            AuthError::InvalidRequest(format!(
                "Value for {} header is invalid.",
                algorithm.header_name()
            ))
        })?;
        if found.is_some() {
            return Err(multiple_checksums());
        }
        found = Some((algorithm, ExpectedChecksum::Header(digest)));
    }
    let Some(trailer) = header_str(headers, "x-amz-trailer")? else {
        return Ok(ChecksumPlan {
            expected: found,
            announced_trailer: None,
        });
    };
    let trailer = trailer.to_ascii_lowercase();
    let algorithm = ChecksumAlgorithm::from_header_name(&trailer).ok_or_else(|| {
        AuthError::InvalidRequest(
            "The value specified in the x-amz-trailer header is not supported".to_string(),
        )
    })?;
    if !payload.has_trailer() {
        return Err(AuthError::InvalidRequest(format!(
            "x-amz-trailer requires x-amz-content-sha256 \
             STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or STREAMING-UNSIGNED-PAYLOAD-TRAILER, \
             not {payload:?}"
        )));
    }
    if found.is_some() {
        return Err(multiple_checksums());
    }
    Ok(ChecksumPlan {
        expected: Some((algorithm, ExpectedChecksum::Trailer)),
        announced_trailer: Some(trailer),
    })
}

/// The request body as the client meant it: aws-chunked de-framed (every chunk signature checked for
/// STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]), the declared length enforced (Content-Length, or
/// x-amz-decoded-content-length for aws-chunked): a short body ends with BodyError::IncompleteBody,
/// a longer one too; x-amz-content-sha256 (hex) checked at the end (ContentSha256Mismatch);
/// x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} checked whether sent as a header or as an
/// aws-chunked trailer (BadDigest naming the algorithm). A failed check is the LAST item of the stream
/// (an Err), after all data items; the consumer must then discard what it wrote.
pub fn body_stream(
    req: &VerifiedRequest,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<BodyStream, AuthError> {
    let payload = req.payload;
    let ChecksumPlan {
        expected: checksum,
        announced_trailer,
    } = expected_checksum(headers, payload)?;
    let declared = if payload.is_aws_chunked() {
        Some(
            length_header(headers, "x-amz-decoded-content-length")?
                .ok_or(AuthError::MissingContentLength)?,
        )
    } else {
        length_header(headers, http::header::CONTENT_LENGTH.as_str())?
    };
    let raw: RawBody = body
        .into_data_stream()
        .map_err(|err| {
            if crate::body_rate::is_too_slow(&err) {
                BodyError::TooSlow(err.to_string())
            } else {
                BodyError::Io(err.to_string())
            }
        })
        .boxed();
    let decoder = match payload {
        ContentSha256::Sha256(_) | ContentSha256::UnsignedPayload => Decoder::Plain(raw),
        ContentSha256::StreamingSigned | ContentSha256::StreamingSignedTrailer => {
            let framing = Framing::Signed {
                chain: req.chain.clone(),
                trailer: payload.has_trailer(),
            };
            Decoder::Chunked(Box::new(AwsChunkedStream::new(
                raw,
                framing,
                announced_trailer,
            )))
        }
        ContentSha256::StreamingUnsignedTrailer => Decoder::Chunked(Box::new(
            AwsChunkedStream::new(raw, Framing::UnsignedTrailer, announced_trailer),
        )),
    };
    let content_sha256 = match payload {
        ContentSha256::Sha256(digest) => Some((digest, Sha256::new())),
        _ => None,
    };
    Ok(BodyStream {
        decoder,
        declared,
        received: 0,
        content_sha256,
        checksum: checksum.map(|(alg, expected)| (Checksummer::new(alg), expected)),
        verified: None,
        finished: false,
    })
}

impl BodyStream {
    /// The decoded body length the client declared, when it declared one.
    pub fn declared_length(&self) -> Option<u64> {
        self.declared
    }

    /// The checksum the client sent (header or trailer) and we verified, as S3 stores and returns
    /// it: algorithm and base64 value. Available once the stream has ended without error.
    pub fn verified_checksum(&self) -> Option<(ChecksumAlgorithm, String)> {
        self.verified.clone()
    }

    /// The checks due once the decoder has ended.
    fn finish(&mut self) -> Result<(), BodyError> {
        if self
            .declared
            .is_some_and(|declared| declared != self.received)
        {
            return Err(BodyError::IncompleteBody);
        }
        if let Some((expected, hasher)) = self.content_sha256.take() {
            if hasher.finalize().as_slice() != expected {
                return Err(BodyError::ContentSha256Mismatch);
            }
        }
        let Some((hasher, expected)) = self.checksum.take() else {
            return Ok(());
        };
        let algorithm = hasher.algorithm();
        let expected = match expected {
            ExpectedChecksum::Header(digest) => digest,
            ExpectedChecksum::Trailer => {
                let value = match &self.decoder {
                    Decoder::Chunked(chunked) => chunked.trailer_value(),
                    Decoder::Plain(_) => None,
                };
                let value = value.ok_or_else(|| {
                    BodyError::MalformedChunk(format!(
                        "trailer {} missing",
                        algorithm.header_name()
                    ))
                })?;
                algorithm.decode_value(value).ok_or_else(|| {
                    BodyError::InvalidDigest(format!(
                        "Value for {} trailing header is invalid.",
                        algorithm.header_name()
                    ))
                })?
            }
        };
        let computed = hasher.finalize();
        if computed != expected {
            return Err(BodyError::BadDigest(algorithm.mismatch_message()));
        }
        self.verified = Some((algorithm, base64_encode(&computed)));
        Ok(())
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Stream for BodyStream {
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.finished {
                return Poll::Ready(None);
            }
            let item = match &mut this.decoder {
                Decoder::Plain(raw) => ready!(raw.poll_next_unpin(cx)),
                Decoder::Chunked(chunked) => ready!(chunked.poll_next_unpin(cx)),
            };
            match item {
                Some(Ok(data)) if data.is_empty() => continue,
                Some(Ok(data)) => {
                    this.received += data.len() as u64;
                    if this
                        .declared
                        .is_some_and(|declared| this.received > declared)
                    {
                        this.finished = true;
                        return Poll::Ready(Some(Err(BodyError::IncompleteBody)));
                    }
                    if let Some((_, hasher)) = &mut this.content_sha256 {
                        hasher.update(&data);
                    }
                    if let Some((hasher, _)) = &mut this.checksum {
                        hasher.update(&data);
                    }
                    return Poll::Ready(Some(Ok(data)));
                }
                Some(Err(err)) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(err)));
                }
                None => {
                    this.finished = true;
                    return Poll::Ready(this.finish().err().map(Err));
                }
            }
        }
    }
}

impl std::fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyStream")
            .field("declared", &self.declared)
            .field("received", &self.received)
            .field("verified", &self.verified)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::canonical::SigningKey;
    use crate::auth::chunked::SignatureChain;
    use crate::auth::testing::{
        aws_streaming_body, aws_trailer_body, example_time, request, verify_example, EXAMPLE_SECRET,
    };
    use crate::auth::Identity;
    use futures::executor::block_on;

    fn assert_send_unpin_static<T: Send + Unpin + 'static>() {}

    #[test]
    fn body_stream_is_send_unpin_static() {
        assert_send_unpin_static::<BodyStream>();
    }

    /// A verified request with the given payload mode (the chain seeded like the AWS streaming
    /// example), for tests of the body checks alone.
    fn verified(payload: ContentSha256) -> VerifiedRequest {
        let key = SigningKey::derive(EXAMPLE_SECRET, example_time(), "us-east-1");
        VerifiedRequest {
            identity: Identity {
                access_key: "AK".into(),
                user: "u".into(),
                is_root: false,
                bucket_grants: None,
                anonymous: false,
                user_policy: None,
            },
            signed_by: None,
            payload,
            chain: SignatureChain::new(
                key,
                "20130524T000000Z".into(),
                "20130524/us-east-1/s3/aws4_request".into(),
                "0".repeat(64),
            ),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        request("PUT", "/b/k", pairs).headers
    }

    /// Reads the whole stream in frames of `frame` bytes: the data and the final error.
    fn collect(
        req: &VerifiedRequest,
        pairs: &[(&str, &str)],
        body: &[u8],
        frame: usize,
    ) -> (
        Vec<u8>,
        Option<BodyError>,
        Option<(ChecksumAlgorithm, String)>,
    ) {
        let frames: Vec<Result<Bytes, std::io::Error>> = body
            .chunks(frame.max(1))
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let body = axum::body::Body::from_stream(futures::stream::iter(frames));
        let mut stream = body_stream(req, &headers(pairs), body).expect("body stream");
        let mut data = Vec::new();
        let mut error = None;
        while let Some(item) = block_on(stream.next()) {
            match item {
                Ok(bytes) => {
                    assert!(error.is_none(), "data after the error");
                    data.extend_from_slice(&bytes);
                }
                Err(err) => error = Some(err),
            }
        }
        (data, error, stream.verified_checksum())
    }

    /// Empty frames between the data (a client flushing early) yield no
    /// empty items; the declared length is Content-Length, or the decoded
    /// length of an aws-chunked body.
    #[test]
    fn empty_frames_are_skipped_and_the_declared_length_is_kept() {
        let req = verified(ContentSha256::UnsignedPayload);
        let frames: Vec<Result<Bytes, std::io::Error>> = [&b"ab"[..], b"", b"", b"cd", b""]
            .iter()
            .map(|f| Ok(Bytes::copy_from_slice(f)))
            .collect();
        let body = axum::body::Body::from_stream(futures::stream::iter(frames));
        let mut stream = body_stream(&req, &headers(&[("content-length", "4")]), body).unwrap();
        assert_eq!(stream.declared_length(), Some(4));
        let mut items = Vec::new();
        while let Some(item) = block_on(stream.next()) {
            items.push(item.unwrap());
        }
        assert_eq!(items, [&b"ab"[..], b"cd"]);
        let pairs = [
            ("content-encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("content-length", "66824"),
        ];
        let chunked = verified(ContentSha256::StreamingSigned);
        let empty = axum::body::Body::empty();
        let stream = body_stream(&chunked, &headers(&pairs), empty).unwrap();
        assert_eq!(stream.declared_length(), Some(66560));
        let none = body_stream(&req, &headers(&[]), axum::body::Body::empty()).unwrap();
        assert_eq!(none.declared_length(), None);
        assert!(format!("{stream:?}").contains("declared: Some(66560)"));
    }

    /// AWS "Transferring Payload in Multiple Chunks", end to end: the seed request verifies, and
    /// its body decodes to the 66,560 bytes.
    #[test]
    fn aws_example_streaming_put() {
        let pairs = [
            ("host", "s3.amazonaws.com"),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            ("content-encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("content-length", "66824"),
        ];
        let parts = request("PUT", "/examplebucket/chunkObject.txt", &pairs);
        let req = verify_example(&parts).expect("seed signature");
        let body = aws_streaming_body();
        assert_eq!(body.len(), 66824);
        let (data, error, checksum) = collect(&req, &pairs, &body, 8192);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(data, vec![b'a'; 66560]);
        assert_eq!(checksum, None);
        // Declared one byte more than sent.
        let mut longer = pairs;
        longer[6] = ("x-amz-decoded-content-length", "66561");
        let (_, error, _) = collect(&req, &longer, &body, 8192);
        assert!(matches!(error, Some(BodyError::IncompleteBody)));
    }

    /// AWS "sigv4-streaming-trailers", end to end: the CRC32C trailer is verified and exposed.
    #[test]
    fn aws_example_streaming_trailer_put() {
        let pairs = [
            ("host", "s3.amazonaws.com"),
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer,Signature=106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"),
            ("content-encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("x-amz-trailer", "x-amz-checksum-crc32c"),
        ];
        let parts = request("PUT", "/examplebucket/chunkObject.txt", &pairs);
        let req = verify_example(&parts).expect("seed signature");
        let body = aws_trailer_body();
        let (data, error, checksum) = collect(&req, &pairs, &body, 1000);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(data.len(), 66560);
        assert_eq!(
            checksum,
            Some((ChecksumAlgorithm::Crc32c, "sOO8/Q==".to_string()))
        );
    }

    #[test]
    fn plain_body_sha256_and_length() {
        let body = b"Welcome to Amazon S3.";
        let digest: [u8; 32] = Sha256::digest(body).into();
        let req = verified(ContentSha256::Sha256(digest));
        let (data, error, _) = collect(&req, &[("content-length", "21")], body, 4);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(data, body);
        let (_, error, _) = collect(&req, &[], b"Welcome to Amazon S3!", 4);
        assert!(matches!(error, Some(BodyError::ContentSha256Mismatch)));
        for length in ["20", "22"] {
            let (_, error, _) = collect(&req, &[("content-length", length)], body, 4);
            assert!(matches!(error, Some(BodyError::IncompleteBody)), "{length}");
        }
        let unsigned = verified(ContentSha256::UnsignedPayload);
        let (data, error, _) = collect(&unsigned, &[], b"anything", 3);
        assert!(error.is_none());
        assert_eq!(data, b"anything");
    }

    #[test]
    fn header_checksums() {
        let req = verified(ContentSha256::UnsignedPayload);
        // SHA-256 of "abc" (FIPS 180), base64.
        let good = "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=";
        let (_, error, checksum) = collect(&req, &[("x-amz-checksum-sha256", good)], b"abc", 2);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(
            checksum,
            Some((ChecksumAlgorithm::Sha256, good.to_string()))
        );
        let (_, error, checksum) = collect(&req, &[("x-amz-checksum-sha256", good)], b"abd", 2);
        match error {
            Some(BodyError::BadDigest(message)) => assert_eq!(
                message,
                "The SHA256 you specified did not match the calculated checksum."
            ),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(checksum, None);
        // x-amz-sdk-checksum-algorithm alone: nothing to verify.
        let (_, error, checksum) = collect(
            &req,
            &[("x-amz-sdk-checksum-algorithm", "CRC32")],
            b"abc",
            2,
        );
        assert!(error.is_none());
        assert_eq!(checksum, None);
    }

    #[test]
    fn rejected_checksum_headers() {
        let req = verified(ContentSha256::UnsignedPayload);
        let make = |pairs: &[(&str, &str)]| {
            body_stream(&req, &headers(pairs), axum::body::Body::empty()).map(|_| ())
        };
        assert!(matches!(
            make(&[
                ("x-amz-checksum-crc32", "AAAAAA=="),
                ("x-amz-checksum-crc32c", "AAAAAA==")
            ]),
            Err(AuthError::InvalidRequest(_))
        ));
        assert!(matches!(
            make(&[("x-amz-checksum-crc32", "AAAAAAAA")]),
            Err(AuthError::InvalidRequest(_))
        ));
        // A trailer needs a -TRAILER payload; aws-chunked needs its decoded length.
        assert!(matches!(
            make(&[("x-amz-trailer", "x-amz-checksum-crc32")]),
            Err(AuthError::InvalidRequest(_))
        ));
        let chunked = verified(ContentSha256::StreamingUnsignedTrailer);
        let make = |pairs: &[(&str, &str)]| {
            body_stream(&chunked, &headers(pairs), axum::body::Body::empty()).map(|_| ())
        };
        assert!(matches!(make(&[]), Err(AuthError::MissingContentLength)));
        assert!(matches!(
            make(&[
                ("x-amz-decoded-content-length", "1"),
                ("x-amz-trailer", "x-amz-meta-foo")
            ]),
            Err(AuthError::InvalidRequest(_))
        ));
        assert!(matches!(
            make(&[
                ("x-amz-decoded-content-length", "1"),
                ("x-amz-trailer", "x-amz-checksum-crc32"),
                ("x-amz-checksum-crc32", "AAAAAA==")
            ]),
            Err(AuthError::InvalidRequest(_))
        ));
    }

    /// STREAMING-UNSIGNED-PAYLOAD-TRAILER with each CRC, the value being the catalogue check
    /// value of "123456789"; a wrong value is BadDigest, a value that is not base64 InvalidDigest.
    #[test]
    fn unsigned_trailer_crcs() {
        let req = verified(ContentSha256::StreamingUnsignedTrailer);
        let checks = [
            (
                ChecksumAlgorithm::Crc32,
                0xCBF4_3926u64.to_be_bytes()[4..].to_vec(),
            ),
            (
                ChecksumAlgorithm::Crc32c,
                0xE306_9283u64.to_be_bytes()[4..].to_vec(),
            ),
            (
                ChecksumAlgorithm::Crc64Nvme,
                0xAE8B_1486_0A79_9888u64.to_be_bytes().to_vec(),
            ),
        ];
        for (algorithm, digest) in checks {
            let name = algorithm.header_name();
            let value = base64_encode(&digest);
            let pairs = [
                ("x-amz-decoded-content-length", "9"),
                ("x-amz-trailer", name),
            ];
            let body = format!("4\r\n1234\r\n5\r\n56789\r\n0\r\n{name}:{value}\r\n\r\n");
            let (data, error, checksum) = collect(&req, &pairs, body.as_bytes(), 5);
            assert!(error.is_none(), "{algorithm}: {error:?}");
            assert_eq!(data, b"123456789");
            assert_eq!(checksum, Some((algorithm, value.clone())));

            let mut wrong = digest.clone();
            wrong[0] ^= 1;
            let body = format!(
                "9\r\n123456789\r\n0\r\n{name}:{}\r\n\r\n",
                base64_encode(&wrong)
            );
            let (data, error, checksum) = collect(&req, &pairs, body.as_bytes(), 5);
            assert_eq!(data, b"123456789", "data comes before the error");
            match error {
                Some(BodyError::BadDigest(message)) => assert_eq!(
                    message,
                    format!(
                        "The {} you specified did not match the calculated checksum.",
                        algorithm.as_str()
                    )
                ),
                other => panic!("{algorithm}: unexpected {other:?}"),
            }
            assert_eq!(checksum, None);

            let body = format!("9\r\n123456789\r\n0\r\n{name}:!!\r\n\r\n");
            let (_, error, _) = collect(&req, &pairs, body.as_bytes(), 5);
            assert!(matches!(error, Some(BodyError::InvalidDigest(_))));
        }
    }

    #[test]
    fn chunked_length_and_truncation() {
        let req = verified(ContentSha256::StreamingUnsignedTrailer);
        let pairs = [("x-amz-decoded-content-length", "9")];
        let (_, error, _) = collect(&req, &pairs, b"9\r\n12345", 3);
        assert!(matches!(error, Some(BodyError::IncompleteBody)));
        let (_, error, _) = collect(&req, &pairs, b"a\r\n1234567890\r\n0\r\n\r\n", 3);
        assert!(matches!(error, Some(BodyError::IncompleteBody)));
        let (data, error, _) = collect(&req, &pairs, b"9\r\n123456789\r\n0\r\n\r\n", 3);
        assert!(error.is_none());
        assert_eq!(data, b"123456789");
    }
}
