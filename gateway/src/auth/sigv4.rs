//! SigV4 in the Authorization header:
//! `AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/s3/aws4_request, SignedHeaders=a;b, Signature=hex`.

use std::time::SystemTime;

use http::request::Parts;
use http::HeaderValue;

use super::canonical::{
    canonical_query, AmzDate, CredentialScope, ScopeError, SignedParts, ALGORITHM,
};
use super::payload::{invalid_content_sha256, ContentSha256};
use super::{unsupported_mechanism, AuthError, Identity, VerifiedRequest};

const MALFORMED: &str = "The authorization header is malformed;";

fn malformed(detail: &str) -> AuthError {
    AuthError::AuthorizationHeaderMalformed(format!("{MALFORMED} {detail}"))
}

/// S3's answer when neither `x-amz-date` nor `Date` holds a usable timestamp.
pub(crate) fn no_valid_date() -> AuthError {
    AuthError::AccessDenied("AWS authentication requires a valid Date or x-amz-date header".into())
}

/// A parsed Authorization header with the request values it signs.
#[derive(Debug)]
pub(crate) struct HeaderAuth {
    scope: CredentialScope,
    signed_headers: Vec<String>,
    signature: String,
    date: AmzDate,
    payload: ContentSha256,
    /// The `x-amz-content-sha256` value as sent: the last line of the canonical request.
    payload_line: String,
}

/// The three components of the header, unvalidated.
#[derive(Debug, PartialEq, Eq)]
struct Components<'a> {
    credential: &'a str,
    signed_headers: &'a str,
    signature: &'a str,
}

/// Splits the part after the algorithm into its components. As AWS, tolerant of the separators:
/// `, `, `,` or spaces alone; any order.
fn split_components(rest: &str) -> Result<Components<'_>, AuthError> {
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for component in rest
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter(|c| !c.is_empty())
    {
        let (name, value) = component.split_once('=').ok_or_else(|| {
            malformed(&format!(
                "the authorization component \"{component}\" is malformed."
            ))
        })?;
        let slot = match name {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed_headers,
            "Signature" => &mut signature,
            _ => {
                return Err(malformed(&format!(
                    "the authorization component \"{component}\" is malformed."
                )))
            }
        };
        if slot.replace(value).is_some() {
            return Err(malformed(&format!("the component {name} is repeated.")));
        }
    }
    match (credential, signed_headers, signature) {
        (Some(credential), Some(signed_headers), Some(signature)) => Ok(Components {
            credential,
            signed_headers,
            signature,
        }),
        _ => Err(malformed(
            "the authorization header requires three components: Credential, SignedHeaders, \
             and Signature.",
        )),
    }
}

/// `a;b;c` as lowercase names; `host` must be among them (every SigV4 signer signs it).
pub(crate) fn parse_signed_headers(value: &str) -> Option<Vec<String>> {
    let names: Vec<String> = value
        .split(';')
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let valid = names
        .iter()
        .all(|n| !n.is_empty() && http::HeaderName::from_bytes(n.as_bytes()).is_ok());
    (valid && names.iter().any(|n| n == "host")).then_some(names)
}

/// The request timestamp: `x-amz-date`, else `Date`.
fn request_date(parts: &Parts) -> Result<AmzDate, AuthError> {
    if let Some(value) = parts.headers.get("x-amz-date") {
        return value
            .to_str()
            .ok()
            .and_then(AmzDate::parse)
            .ok_or_else(no_valid_date);
    }
    parts
        .headers
        .get(http::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(AmzDate::from_http_date)
        .ok_or_else(no_valid_date)
}

impl HeaderAuth {
    /// Parses the Authorization header and the headers it depends on, and validates the scope
    /// against `region`. Nothing here needs the secret.
    pub fn parse(
        parts: &Parts,
        authorization: &HeaderValue,
        region: &str,
    ) -> Result<Self, AuthError> {
        let authorization = authorization
            .to_str()
            .map_err(|_| malformed("the header is not ASCII."))?
            .trim();
        let rest = match authorization.split_once(|c: char| c.is_ascii_whitespace()) {
            Some((ALGORITHM, rest)) => rest,
            _ => return Err(unsupported_mechanism()),
        };
        let components = split_components(rest)?;
        let scope =
            CredentialScope::parse(components.credential, region).map_err(|err| match err {
                ScopeError::WrongRegion(_) => AuthError::WrongRegion {
                    message: format!("{MALFORMED} {}", err.detail(region)),
                    expected: region.to_string(),
                },
                _ => malformed(&err.detail(region)),
            })?;
        let signed_headers = parse_signed_headers(components.signed_headers)
            .ok_or_else(|| malformed("the SignedHeaders must be header names including host."))?;
        let date = request_date(parts)?;
        if date.date() != scope.date {
            return Err(malformed(
                "Invalid credential date. Date is not the same as X-Amz-Date.",
            ));
        }
        let payload_line = parts
            .headers
            .get("x-amz-content-sha256")
            .ok_or_else(|| {
                AuthError::InvalidRequest(
                    "Missing required header for this request: x-amz-content-sha256".into(),
                )
            })?
            .to_str()
            .map_err(|_| invalid_content_sha256())?
            .to_string();
        let payload = ContentSha256::parse(&payload_line)?;
        Ok(Self {
            scope,
            signed_headers,
            signature: components.signature.to_string(),
            date,
            payload,
            payload_line,
        })
    }

    /// The access key whose secret signs the request.
    pub fn access_key(&self) -> &str {
        &self.scope.access_key
    }

    /// Checks the request time against `now`, then the signature with `secret`.
    pub fn verify(
        &self,
        parts: &Parts,
        now: SystemTime,
        secret: &str,
        identity: Identity,
        keys: &super::cache::SigningKeyCache,
    ) -> Result<VerifiedRequest, AuthError> {
        if self.date.is_skewed(now) {
            return Err(AuthError::RequestTimeTooSkewed);
        }
        let canonical_query = canonical_query(parts.uri.query(), |_| false);
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

    #[test]
    fn signed_headers_must_be_header_names_and_include_host() {
        assert_eq!(
            parse_signed_headers("Host;X-Amz-Date"),
            Some(vec!["host".to_string(), "x-amz-date".to_string()])
        );
        for bad in ["x-amz-date", "host;a b", "host;;x-amz-date", "host;\u{e9}"] {
            assert_eq!(parse_signed_headers(bad), None, "{bad}");
        }
    }
    use crate::auth::testing::{example_lookup, example_time, request};
    use crate::auth::verify_request;
    use std::time::Duration;

    const AUTH_PREFIX: &str =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request";
    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn verify_at(parts: &Parts, now: SystemTime) -> Result<VerifiedRequest, AuthError> {
        verify_request(
            parts,
            now,
            &crate::auth::Realm::new("us-east-1"),
            example_lookup,
        )
    }

    fn verify(parts: &Parts) -> Result<VerifiedRequest, AuthError> {
        verify_at(parts, example_time())
    }

    /// AWS "Signature Calculations for the Authorization Header: Transferring Payload in a Single
    /// Chunk", example "GET Object" (with a Range header).
    fn get_object(signature: &str) -> Parts {
        request(
            "GET",
            "/test.txt",
            &[
                ("host", "examplebucket.s3.amazonaws.com"),
                ("range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY),
                ("x-amz-date", "20130524T000000Z"),
                (
                    "authorization",
                    &format!(
                        "{AUTH_PREFIX},SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,\
                         Signature={signature}"
                    ),
                ),
            ],
        )
    }

    const GET_OBJECT_SIGNATURE: &str =
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";

    #[test]
    fn aws_example_get_object() {
        let verified = verify(&get_object(GET_OBJECT_SIGNATURE)).expect("signature");
        assert_eq!(verified.identity.access_key, "AKIAIOSFODNN7EXAMPLE");
        assert!(matches!(
            verified.content_sha256(),
            ContentSha256::Sha256(_)
        ));
    }

    /// Same example, "PUT Object": key `test$file.text`, a Date header besides x-amz-date.
    #[test]
    fn aws_example_put_object() {
        let parts = request(
            "PUT",
            "/test$file.text",
            &[
                ("host", "examplebucket.s3.amazonaws.com"),
                ("date", "Fri, 24 May 2013 00:00:00 GMT"),
                ("x-amz-date", "20130524T000000Z"),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                (
                    "x-amz-content-sha256",
                    "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                ),
                (
                    "authorization",
                    &format!(
                        "{AUTH_PREFIX},SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;\
                         x-amz-storage-class,Signature=\
                         98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
                    ),
                ),
            ],
        );
        verify(&parts).expect("signature");
    }

    fn bucket_get(uri: &str, signature: &str) -> Parts {
        request(
            "GET",
            uri,
            &[
                ("host", "examplebucket.s3.amazonaws.com"),
                ("x-amz-date", "20130524T000000Z"),
                ("x-amz-content-sha256", EMPTY),
                (
                    "authorization",
                    &format!(
                        "{AUTH_PREFIX}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, \
                         Signature={signature}"
                    ),
                ),
            ],
        )
    }

    /// Same example, "GET Bucket Lifecycle": a query parameter without a value.
    #[test]
    fn aws_example_get_bucket_lifecycle() {
        let parts = bucket_get(
            "/?lifecycle",
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
        );
        verify(&parts).expect("signature");
    }

    /// Same example, "Get Bucket (List Objects)": `?max-keys=2&prefix=J`.
    #[test]
    fn aws_example_list_objects() {
        let signature = "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7";
        verify(&bucket_get("/?max-keys=2&prefix=J", signature)).expect("signature");
        // The order of the parameters as sent does not matter.
        verify(&bucket_get("/?prefix=J&max-keys=2", signature)).expect("signature");
        assert!(matches!(
            verify(&bucket_get("/?max-keys=3&prefix=J", signature)),
            Err(AuthError::SignatureDoesNotMatch)
        ));
    }

    #[test]
    fn tampered_requests_do_not_match() {
        let mut parts = get_object(GET_OBJECT_SIGNATURE);
        parts
            .headers
            .insert("range", HeaderValue::from_static("bytes=0-10"));
        assert!(matches!(
            verify(&parts),
            Err(AuthError::SignatureDoesNotMatch)
        ));
        let wrong = GET_OBJECT_SIGNATURE.replace("f0e8", "f0e9");
        assert!(matches!(
            verify(&get_object(&wrong)),
            Err(AuthError::SignatureDoesNotMatch)
        ));
        let wrong_secret = verify_request(
            &get_object(GET_OBJECT_SIGNATURE),
            example_time(),
            &crate::auth::Realm::new("us-east-1"),
            |ak| example_lookup(ak).map(|(_, identity)| ("other secret".to_string(), identity)),
        );
        assert!(matches!(
            wrong_secret,
            Err(AuthError::SignatureDoesNotMatch)
        ));
    }

    /// RequestTimeTooSkewed beyond 15 minutes either way; within, the AWS example still verifies.
    #[test]
    fn skewed_time() {
        let parts = get_object(GET_OBJECT_SIGNATURE);
        let minutes = |m: u64| Duration::from_secs(m * 60);
        assert!(verify_at(&parts, example_time() + minutes(14)).is_ok());
        assert!(verify_at(&parts, example_time() - minutes(14)).is_ok());
        for now in [example_time() + minutes(16), example_time() - minutes(16)] {
            assert!(matches!(
                verify_at(&parts, now),
                Err(AuthError::RequestTimeTooSkewed)
            ));
        }
    }

    #[test]
    fn unknown_key_and_wrong_region() {
        let parts = get_object(GET_OBJECT_SIGNATURE);
        let unknown = verify_request(
            &parts,
            example_time(),
            &crate::auth::Realm::new("us-east-1"),
            |_| None,
        );
        assert!(matches!(unknown, Err(AuthError::InvalidAccessKeyId)));
        match verify_request(
            &parts,
            example_time(),
            &crate::auth::Realm::new("eu-west-3"),
            example_lookup,
        ) {
            Err(AuthError::WrongRegion { message, expected }) => assert_eq!(
                (message.as_str(), expected.as_str()),
                (
                    "The authorization header is malformed; the region 'us-east-1' is wrong; \
                 expecting 'eu-west-3'",
                    "eu-west-3"
                )
            ),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn header_components_are_tolerant() {
        let expected = Components {
            credential: "AK/20130524/us-east-1/s3/aws4_request",
            signed_headers: "host;x-amz-date",
            signature: "abc",
        };
        for rest in [
            "Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
            "Credential=AK/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-date,Signature=abc",
            " Signature=abc ,  Credential=AK/20130524/us-east-1/s3/aws4_request SignedHeaders=host;x-amz-date,",
        ] {
            assert_eq!(split_components(rest).expect(rest), expected);
        }
        for bad in [
            "Credential=a, SignedHeaders=host",
            "Credential=a, SignedHeaders=host, Signature=x, Signature=y",
            "Credential=a, SignedHeaders=host, Signature=x, Extra=1",
            "Credential, SignedHeaders=host, Signature=x",
        ] {
            assert!(matches!(
                split_components(bad),
                Err(AuthError::AuthorizationHeaderMalformed(_))
            ));
        }
    }

    #[test]
    fn malformed_requests() {
        let with = |name: &'static str, value: Option<&str>| {
            let mut parts = get_object(GET_OBJECT_SIGNATURE);
            match value {
                Some(v) => parts
                    .headers
                    .insert(name, HeaderValue::from_str(v).expect("value")),
                None => parts.headers.remove(name),
            };
            verify(&parts)
        };
        assert!(matches!(
            with("x-amz-content-sha256", None),
            Err(AuthError::InvalidRequest(_))
        ));
        assert!(matches!(
            with("x-amz-content-sha256", Some("STREAMING-FOO")),
            Err(AuthError::InvalidArgument(_))
        ));
        assert!(matches!(
            with("x-amz-date", None),
            Err(AuthError::AccessDenied(_))
        ));
        assert!(matches!(
            with("x-amz-date", Some("2013-05-24T00:00:00Z")),
            Err(AuthError::AccessDenied(_))
        ));
        assert!(matches!(
            with("x-amz-date", Some("20130525T000000Z")),
            Err(AuthError::AuthorizationHeaderMalformed(_))
        ));
        assert!(matches!(
            with(
                "authorization",
                Some("AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=")
            ),
            Err(AuthError::SignatureDoesNotMatch)
        ));
        let no_host = format!(
            "{AUTH_PREFIX},SignedHeaders=range;x-amz-date,Signature={GET_OBJECT_SIGNATURE}"
        );
        assert!(matches!(
            with("authorization", Some(&no_host)),
            Err(AuthError::AuthorizationHeaderMalformed(_))
        ));
        assert!(matches!(
            with("authorization", None),
            Err(AuthError::AccessDenied(_))
        ));
    }
}
