//! SigV4 in the query string (presigned URLs): `X-Amz-Algorithm`, `X-Amz-Credential`,
//! `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders` and `X-Amz-Signature`, the last one left
//! out of the canonical query. The payload is `UNSIGNED-PAYLOAD` unless the request carries
//! `x-amz-content-sha256`.

use std::time::{Duration, SystemTime};

use http::request::Parts;

use super::canonical::{
    canonical_query, AmzDate, CredentialScope, SignedParts, ALGORITHM, MAX_SKEW,
};
use super::payload::{invalid_content_sha256, ContentSha256, UNSIGNED_PAYLOAD};
use super::sigv4::parse_signed_headers;
use super::{AuthError, Identity, VerifiedRequest};

const SIGNATURE_PARAM: &[u8] = b"X-Amz-Signature";
/// The longest validity S3 grants a presigned URL: one week.
const MAX_EXPIRES_SECS: u64 = 604_800;

fn query_error(message: &str) -> AuthError {
    AuthError::AuthorizationQueryParametersError(message.to_string())
}

/// Whether the query carries SigV4 query authentication, even partially.
pub(crate) fn is_presigned(pairs: &[(Vec<u8>, Vec<u8>)]) -> bool {
    pairs.iter().any(|(name, _)| {
        matches!(
            name.as_slice(),
            b"X-Amz-Algorithm" | b"X-Amz-Credential" | b"X-Amz-Signature"
        )
    })
}

/// The single value of an authentication parameter; repeated is an error, as the URL would mean
/// two things.
fn param(pairs: &[(Vec<u8>, Vec<u8>)], name: &str) -> Result<String, AuthError> {
    let mut values = pairs
        .iter()
        .filter(|(n, _)| n.as_slice() == name.as_bytes())
        .map(|(_, v)| v);
    let value = values.next().ok_or_else(|| {
        query_error(
            "Query-string authentication version 4 requires the X-Amz-Algorithm, \
             X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and \
             X-Amz-Expires parameters.",
        )
    })?;
    if values.next().is_some() {
        return Err(query_error(&format!("{name} must appear only once.")));
    }
    String::from_utf8(value.clone()).map_err(|_| query_error(&format!("{name} is not UTF-8.")))
}

fn parse_expires(value: &str) -> Result<Duration, AuthError> {
    let seconds: i64 = value
        .parse()
        .map_err(|_| query_error("X-Amz-Expires should be a number"))?;
    match u64::try_from(seconds) {
        Err(_) => Err(query_error("X-Amz-Expires must be non-negative")),
        Ok(0) => Err(query_error("X-Amz-Expires must be at least 1 second")),
        Ok(s) if s > MAX_EXPIRES_SECS => Err(query_error(
            "X-Amz-Expires must be less than a week (in seconds) that is 604800",
        )),
        Ok(s) => Ok(Duration::from_secs(s)),
    }
}

/// Parsed query authentication with the request values it signs.
#[derive(Debug)]
pub(crate) struct PresignedAuth {
    scope: CredentialScope,
    signed_headers: Vec<String>,
    signature: String,
    date: AmzDate,
    expires: Duration,
    payload: ContentSha256,
    payload_line: String,
}

impl PresignedAuth {
    /// Parses and validates the `X-Amz-*` parameters against `region`; needs no secret.
    pub fn parse(
        parts: &Parts,
        pairs: &[(Vec<u8>, Vec<u8>)],
        region: &str,
    ) -> Result<Self, AuthError> {
        let algorithm = param(pairs, "X-Amz-Algorithm")?;
        let credential = param(pairs, "X-Amz-Credential")?;
        let date = param(pairs, "X-Amz-Date")?;
        let expires = param(pairs, "X-Amz-Expires")?;
        let signed_headers = param(pairs, "X-Amz-SignedHeaders")?;
        let signature = param(pairs, "X-Amz-Signature")?;
        if algorithm != ALGORITHM {
            return Err(query_error(
                "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"",
            ));
        }
        let scope = CredentialScope::parse(&credential, region).map_err(|err| {
            query_error(&format!(
                "Error parsing the X-Amz-Credential parameter; {}",
                err.detail(region)
            ))
        })?;
        let date = AmzDate::parse(&date).ok_or_else(|| {
            query_error("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
        })?;
        if date.date() != scope.date {
            return Err(query_error(
                "Invalid credential date. Date is not the same as X-Amz-Date.",
            ));
        }
        let expires = parse_expires(&expires)?;
        let signed_headers = parse_signed_headers(&signed_headers).ok_or_else(|| {
            query_error("X-Amz-SignedHeaders must be header names including host.")
        })?;
        let payload_line = match parts.headers.get("x-amz-content-sha256") {
            Some(value) => value
                .to_str()
                .map_err(|_| invalid_content_sha256())?
                .to_string(),
            None => UNSIGNED_PAYLOAD.to_string(),
        };
        let payload = ContentSha256::parse(&payload_line)?;
        Ok(Self {
            scope,
            signed_headers,
            signature,
            date,
            expires,
            payload,
            payload_line,
        })
    }

    /// The access key whose secret signed the URL.
    pub fn access_key(&self) -> &str {
        &self.scope.access_key
    }

    /// Checks the validity window against `now`, then the signature with `secret`.
    pub fn verify(
        &self,
        parts: &Parts,
        now: SystemTime,
        secret: &str,
        identity: Identity,
        keys: &super::cache::SigningKeyCache,
    ) -> Result<VerifiedRequest, AuthError> {
        if now > self.date.time + self.expires {
            return Err(AuthError::AccessDenied("Request has expired".to_string()));
        }
        if self.date.time > now + MAX_SKEW {
            return Err(AuthError::AccessDenied(
                "Request is not valid yet".to_string(),
            ));
        }
        let canonical_query = canonical_query(parts.uri.query(), |name| name == SIGNATURE_PARAM);
        let signed = SignedParts {
            amz_date: &self.date,
            scope: &self.scope,
            canonical_query: &canonical_query,
            signed_headers: &self.signed_headers,
            payload: &self.payload_line,
            signature: &self.signature,
        };
        VerifiedRequest::check(parts, &signed, secret, identity, self.payload, keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::testing::{example_lookup, example_time, request};
    use crate::auth::verify_request;

    const HOST: (&str, &str) = ("host", "examplebucket.s3.amazonaws.com");
    const EXAMPLE_QUERY: &str = "X-Amz-Algorithm=AWS4-HMAC-SHA256\
        &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
        &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host";
    const EXAMPLE_SIGNATURE: &str =
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";

    fn at(seconds: u64) -> SystemTime {
        example_time() + Duration::from_secs(seconds)
    }

    fn presigned(query: &str, headers: &[(&str, &str)]) -> Parts {
        request("GET", &format!("/test.txt?{query}"), headers)
    }

    fn example_url() -> Parts {
        presigned(
            &format!("{EXAMPLE_QUERY}&X-Amz-Signature={EXAMPLE_SIGNATURE}"),
            &[HOST],
        )
    }

    /// AWS "Authenticating Requests: Using Query Parameters", example "GET /test.txt" valid for
    /// 24 hours.
    #[test]
    fn aws_example_presigned_get() {
        let verified = verify_request(
            &example_url(),
            at(3600),
            &crate::auth::Realm::new("us-east-1"),
            example_lookup,
        )
        .expect("valid");
        assert_eq!(verified.content_sha256(), ContentSha256::UnsignedPayload);
        // The signature may come first: it is left out of the canonical query wherever it is.
        let reordered = presigned(
            &format!("X-Amz-Signature={EXAMPLE_SIGNATURE}&{EXAMPLE_QUERY}"),
            &[HOST],
        );
        assert!(verify_request(
            &reordered,
            at(86_400),
            &crate::auth::Realm::new("us-east-1"),
            example_lookup
        )
        .is_ok());
    }

    #[test]
    fn expired_presigned_url() {
        match verify_request(
            &example_url(),
            at(86_401),
            &crate::auth::Realm::new("us-east-1"),
            example_lookup,
        ) {
            Err(AuthError::AccessDenied(message)) => assert_eq!(message, "Request has expired"),
            other => panic!("unexpected {other:?}"),
        }
        let early = example_time() - Duration::from_secs(16 * 60);
        assert!(matches!(
            verify_request(
                &example_url(),
                early,
                &crate::auth::Realm::new("us-east-1"),
                example_lookup
            ),
            Err(AuthError::AccessDenied(_))
        ));
    }

    #[test]
    fn tampered_presigned_url() {
        let added = presigned(
            &format!("{EXAMPLE_QUERY}&X-Amz-Signature={EXAMPLE_SIGNATURE}&versionId=1"),
            &[HOST],
        );
        assert!(matches!(
            verify_request(
                &added,
                at(1),
                &crate::auth::Realm::new("us-east-1"),
                example_lookup
            ),
            Err(AuthError::SignatureDoesNotMatch)
        ));
        let longer = presigned(
            &format!(
                "{}&X-Amz-Signature={EXAMPLE_SIGNATURE}",
                EXAMPLE_QUERY.replace("86400", "86401")
            ),
            &[HOST],
        );
        assert!(matches!(
            verify_request(
                &longer,
                at(1),
                &crate::auth::Realm::new("us-east-1"),
                example_lookup
            ),
            Err(AuthError::SignatureDoesNotMatch)
        ));
        // A payload hash header is signed as the payload line.
        let with_hash = presigned(
            &format!("{EXAMPLE_QUERY}&X-Amz-Signature={EXAMPLE_SIGNATURE}"),
            &[
                HOST,
                ("x-amz-content-sha256", crate::auth::canonical::EMPTY_SHA256),
            ],
        );
        assert!(matches!(
            verify_request(
                &with_hash,
                at(1),
                &crate::auth::Realm::new("us-east-1"),
                example_lookup
            ),
            Err(AuthError::SignatureDoesNotMatch)
        ));
    }

    #[test]
    fn malformed_query_parameters() {
        let signed = format!("{EXAMPLE_QUERY}&X-Amz-Signature={EXAMPLE_SIGNATURE}");
        let check = |query: String| match verify_request(
            &presigned(&query, &[HOST]),
            at(1),
            &crate::auth::Realm::new("us-east-1"),
            example_lookup,
        ) {
            Err(AuthError::AuthorizationQueryParametersError(message)) => message,
            other => panic!("{query}: unexpected {other:?}"),
        };
        assert_eq!(
            check(signed.replace("86400", "604801")),
            "X-Amz-Expires must be less than a week (in seconds) that is 604800"
        );
        assert_eq!(
            check(signed.replace("86400", "-1")),
            "X-Amz-Expires must be non-negative"
        );
        assert_eq!(
            parse_expires("604800").expect("a week is allowed"),
            Duration::from_secs(604_800)
        );
        check(signed.replace("86400", "0"));
        check(signed.replace("86400", "soon"));
        check(signed.replace("&X-Amz-Date=20130524T000000Z", ""));
        check(signed.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1"));
        check(signed.replace("20130524T000000Z", "20130525T000000Z"));
        check(format!("{signed}&X-Amz-Expires=10"));
        assert_eq!(
            check(signed.replace("us-east-1", "eu-west-1")),
            "Error parsing the X-Amz-Credential parameter; the region 'eu-west-1' is wrong; \
             expecting 'us-east-1'"
        );
        // Query and header authentication at once.
        let both = presigned(&signed, &[HOST, ("authorization", "AWS4-HMAC-SHA256 x")]);
        assert!(matches!(
            verify_request(
                &both,
                at(1),
                &crate::auth::Realm::new("us-east-1"),
                example_lookup
            ),
            Err(AuthError::InvalidArgument(_))
        ));
        // No authentication at all.
        let anonymous = presigned("prefix=a", &[HOST]);
        match verify_request(
            &anonymous,
            at(1),
            &crate::auth::Realm::new("us-east-1"),
            example_lookup,
        ) {
            Err(AuthError::AccessDenied(message)) => {
                assert_eq!(message, "anonymous access is not allowed")
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
