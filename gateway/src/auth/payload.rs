//! `x-amz-content-sha256`: the last line of the canonical request, and how the body is framed
//! and checked.

use super::AuthError;

/// `UNSIGNED-PAYLOAD`.
pub(crate) const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
const STREAMING_SIGNED: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
const STREAMING_SIGNED_TRAILER: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
const STREAMING_UNSIGNED_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

/// The value of `x-amz-content-sha256`, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentSha256 {
    /// The SHA-256 of the whole body, checked once the body has been read.
    Sha256([u8; 32]),
    /// `UNSIGNED-PAYLOAD`: the body is not covered by the signature.
    UnsignedPayload,
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`: aws-chunked, every chunk signed.
    StreamingSigned,
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`: aws-chunked, chunks and trailer signed.
    StreamingSignedTrailer,
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: aws-chunked, nothing signed, checksum trailer.
    StreamingUnsignedTrailer,
}

/// S3's InvalidArgument for an `x-amz-content-sha256` it does not know.
pub(crate) fn invalid_content_sha256() -> AuthError {
    AuthError::InvalidArgument(format!(
        "x-amz-content-sha256 must be {UNSIGNED_PAYLOAD}, {STREAMING_UNSIGNED_TRAILER}, \
         {STREAMING_SIGNED}, {STREAMING_SIGNED_TRAILER} or a valid sha256 value."
    ))
}

impl ContentSha256 {
    /// Parses the header value; anything else than a hex SHA-256 or one of the four keywords is
    /// InvalidArgument, as in S3 (the ECDSA streaming forms of SigV4a are not supported).
    pub fn parse(value: &str) -> Result<Self, AuthError> {
        match value {
            UNSIGNED_PAYLOAD => Ok(Self::UnsignedPayload),
            STREAMING_SIGNED => Ok(Self::StreamingSigned),
            STREAMING_SIGNED_TRAILER => Ok(Self::StreamingSignedTrailer),
            STREAMING_UNSIGNED_TRAILER => Ok(Self::StreamingUnsignedTrailer),
            hash => {
                let mut digest = [0u8; 32];
                match hex::decode_to_slice(hash, &mut digest) {
                    Ok(()) => Ok(Self::Sha256(digest)),
                    Err(_) => Err(invalid_content_sha256()),
                }
            }
        }
    }

    /// Whether the body is aws-chunked framed.
    pub fn is_aws_chunked(self) -> bool {
        matches!(
            self,
            Self::StreamingSigned | Self::StreamingSignedTrailer | Self::StreamingUnsignedTrailer
        )
    }

    /// Whether the aws-chunked body ends with trailing headers.
    pub fn has_trailer(self) -> bool {
        matches!(
            self,
            Self::StreamingSignedTrailer | Self::StreamingUnsignedTrailer
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert!(
            matches!(ContentSha256::parse(empty), Ok(ContentSha256::Sha256(d)) if d[0] == 0xe3)
        );
        assert!(matches!(
            ContentSha256::parse(&empty.to_uppercase()),
            Ok(ContentSha256::Sha256(_))
        ));
        assert_eq!(
            ContentSha256::parse("UNSIGNED-PAYLOAD").ok(),
            Some(ContentSha256::UnsignedPayload)
        );
        let signed = ContentSha256::parse("STREAMING-AWS4-HMAC-SHA256-PAYLOAD").ok();
        assert_eq!(signed, Some(ContentSha256::StreamingSigned));
        let trailer = ContentSha256::parse("STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER").ok();
        assert_eq!(trailer, Some(ContentSha256::StreamingSignedTrailer));
        let unsigned = ContentSha256::parse("STREAMING-UNSIGNED-PAYLOAD-TRAILER").ok();
        assert_eq!(unsigned, Some(ContentSha256::StreamingUnsignedTrailer));
        assert!(unsigned.is_some_and(|p| p.is_aws_chunked() && p.has_trailer()));
        assert!(signed.is_some_and(|p| p.is_aws_chunked() && !p.has_trailer()));
        for bad in [
            "",
            "unsigned-payload",
            &empty[1..],
            "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
        ] {
            assert!(matches!(
                ContentSha256::parse(bad),
                Err(AuthError::InvalidArgument(_))
            ));
        }
    }
}
