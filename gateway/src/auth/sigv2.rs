//! AWS Signature Version 2, which S3 still accepts and which aws-cli v1's
//! `aws s3 presign`, boto3's default presigned URLs, s3cmd's `signature_v2`
//! and many appliances make: `Authorization: AWS AK:signature`, or the query
//! parameters `AWSAccessKeyId`, `Expires` and `Signature`. The signature is
//! base64(HMAC-SHA1(secret, string to sign)) over the method, Content-MD5,
//! Content-Type, the date (the query form's `Expires` in its place), the
//! `x-amz-*` headers and the canonical resource: `/bucket/key` plus the signed
//! sub-resources. The body is not signed (Content-MD5 and checksums still
//! apply).

use std::time::{Duration, SystemTime};

use base64::Engine;
use hmac::{Hmac, Mac};
use http::request::Parts;
use sha1::Sha1;
use subtle::ConstantTimeEq;

use super::canonical::{is_skewed, query_pairs, AmzDate};
use super::sigv4::no_valid_date;
use super::{AuthError, Identity, Realm, VerifiedRequest};

/// The header form's algorithm word.
const HEADER_PREFIX: &str = "AWS ";

/// The sub-resources and response overrides botocore signs (the widest list
/// any client uses), sorted.
const SIGNED_SUBRESOURCES: &[&str] = &[
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
];

/// The names of [`SIGNED_SUBRESOURCES`] that AWS's SigV2 documentation (and
/// s3cmd) leave out: a request signed without them is tried too.
const UNDOCUMENTED_SUBRESOURCES: &[&str] = &[
    "accelerate",
    "analytics",
    "defaultObjectAcl",
    "inventory",
    "metrics",
    "object-lock",
    "replication",
    "select",
    "select-type",
    "storageClass",
    "tagging",
];

/// Whether the query carries SigV2 query authentication, even partially.
pub(crate) fn is_query_signed(pairs: &[(Vec<u8>, Vec<u8>)]) -> bool {
    pairs
        .iter()
        .any(|(name, _)| name == b"AWSAccessKeyId" || name == b"Signature")
}

/// Whether an Authorization header value is SigV2's.
pub(crate) fn is_header_signed(value: &http::HeaderValue) -> bool {
    value.as_bytes().starts_with(HEADER_PREFIX.as_bytes())
}

/// Where the request carries its SigV2 signature.
#[derive(Debug)]
enum Form {
    /// `Authorization: AWS AK:signature`; the request time is `x-amz-date` or `Date`.
    Header,
    /// A presigned URL, valid until `Expires` (seconds since the epoch).
    Query { expires: u64 },
}

/// A parsed SigV2 signature, not yet verified.
#[derive(Debug)]
pub(crate) struct V2Auth {
    access_key: String,
    signature: String,
    form: Form,
}

/// The single value of a query authentication parameter.
fn query_param(pairs: &[(Vec<u8>, Vec<u8>)], name: &str) -> Result<String, AuthError> {
    let mut values = pairs.iter().filter(|(n, _)| n == name.as_bytes());
    match (values.next(), values.next()) {
        (Some((_, value)), None) => String::from_utf8(value.clone())
            .map_err(|_| AuthError::AccessDenied(format!("{name} is not UTF-8"))),
        (Some(_), Some(_)) => Err(AuthError::InvalidArgument(format!(
            "{name} must appear only once."
        ))),
        (None, _) => Err(AuthError::AccessDenied(
            "Query-string authentication requires the Signature, Expires and AWSAccessKeyId \
             parameters"
                .to_string(),
        )),
    }
}

impl V2Auth {
    /// Parses `AWS AK:signature`.
    pub fn parse_header(value: &http::HeaderValue) -> Result<Self, AuthError> {
        let malformed = || {
            AuthError::InvalidArgument(
                "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature"
                    .to_string(),
            )
        };
        let value = value.to_str().map_err(|_| malformed())?;
        let rest = value.strip_prefix(HEADER_PREFIX).ok_or_else(malformed)?;
        let (access_key, signature) = rest.trim().split_once(':').ok_or_else(malformed)?;
        if access_key.is_empty() || signature.is_empty() {
            return Err(malformed());
        }
        Ok(Self {
            access_key: access_key.to_string(),
            signature: signature.to_string(),
            form: Form::Header,
        })
    }

    /// Parses `AWSAccessKeyId`, `Signature` and `Expires` from the query.
    pub fn parse_query(pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<Self, AuthError> {
        let access_key = query_param(pairs, "AWSAccessKeyId")?;
        let signature = query_param(pairs, "Signature")?;
        let expires = query_param(pairs, "Expires")?;
        let expires = expires.parse().map_err(|_| {
            AuthError::AccessDenied(format!(
                "Invalid date (should be seconds since epoch): {expires}"
            ))
        })?;
        // A `+` sent unencoded reads as a space; base64 has no spaces.
        let signature = signature.replace(' ', "+");
        Ok(Self {
            access_key,
            signature,
            form: Form::Query { expires },
        })
    }

    /// The access key whose secret signed the request.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Whether the signature came in the query.
    pub fn is_query(&self) -> bool {
        matches!(self.form, Form::Query { .. })
    }

    /// Checks the request time (header form) or the expiry (query form)
    /// against `now`, then the signature with `secret`.
    pub fn verify(
        &self,
        parts: &Parts,
        now: SystemTime,
        realm: &Realm<'_>,
        secret: &str,
        identity: Identity,
    ) -> Result<VerifiedRequest, AuthError> {
        let date_line = match self.form {
            Form::Header => {
                if is_skewed(request_date(parts)?, now) {
                    return Err(AuthError::RequestTimeTooSkewed);
                }
                // With x-amz-date the date line is empty: x-amz-date is
                // signed among the x-amz-* headers.
                if parts.headers.contains_key("x-amz-date") {
                    Vec::new()
                } else {
                    header_bytes(parts, "date").to_vec()
                }
            }
            Form::Query { expires } => {
                if now > SystemTime::UNIX_EPOCH + Duration::from_secs(expires) {
                    return Err(AuthError::AccessDenied("Request has expired".to_string()));
                }
                expires.to_string().into_bytes()
            }
        };
        let pairs = query_pairs(parts.uri.query());
        let signing = Signing {
            parts,
            pairs: &pairs,
            query_form: matches!(self.form, Form::Query { .. }),
        };
        let head = signing.head(&date_line);
        for resource in canonical_resources(parts, &pairs, realm.domain) {
            let mut string_to_sign = head.clone();
            string_to_sign.extend_from_slice(resource.as_bytes());
            if signature_matches(&sign(secret, &string_to_sign), &self.signature) {
                return Ok(VerifiedRequest::unsigned_body(identity));
            }
            tracing::debug!(
                string_to_sign = %super::loggable(&string_to_sign),
                "SigV2 signature does not match"
            );
        }
        Err(AuthError::SignatureDoesNotMatch)
    }
}

/// base64(HMAC-SHA1(secret, data)): a SigV2 signature, also of a POST policy.
pub(crate) fn sign(secret: &str, data: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(data);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Compares base64 signatures in constant time.
pub(crate) fn signature_matches(computed: &str, given: &str) -> bool {
    let given = given.trim();
    computed.len() == given.len() && bool::from(computed.as_bytes().ct_eq(given.as_bytes()))
}

/// The request time of the header form: `x-amz-date`, else `Date`, each an
/// HTTP date, an RFC 2822 date with a numeric zone (`+0000`, as AWS's own
/// examples), or ISO 8601 basic (as some clients send x-amz-date).
fn request_date(parts: &Parts) -> Result<SystemTime, AuthError> {
    let header = parts
        .headers
        .get("x-amz-date")
        .or_else(|| parts.headers.get(http::header::DATE))
        .ok_or_else(no_valid_date)?;
    let text = header.to_str().map_err(|_| no_valid_date())?.trim();
    httpdate::parse_http_date(text)
        .ok()
        .or_else(|| {
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc2822)
                .ok()
                .map(SystemTime::from)
        })
        .or_else(|| AmzDate::parse(text).map(|date| date.time))
        // A date before 1970 is no valid date to S3 (AccessDenied), not a
        // skewed one.
        .filter(|time| *time >= SystemTime::UNIX_EPOCH)
        .ok_or_else(no_valid_date)
}

/// A header's value as sent, trimmed; empty when absent.
fn header_bytes<'a>(parts: &'a Parts, name: &str) -> &'a [u8] {
    parts
        .headers
        .get(name)
        .map_or(&[][..], |value| value.as_bytes().trim_ascii())
}

/// What the string to sign is made of besides the date and the resource.
struct Signing<'a> {
    parts: &'a Parts,
    pairs: &'a [(Vec<u8>, Vec<u8>)],
    /// A presigned URL may carry Content-Type, Content-MD5 and `x-amz-*`
    /// values in its query (botocore moves the signed ones there).
    query_form: bool,
}

impl Signing<'_> {
    /// A value of the header `name`, or in the query form the query
    /// parameter of that name when the header is absent.
    fn standard_header(&self, name: &str) -> Vec<u8> {
        let header = header_bytes(self.parts, name);
        if !header.is_empty() || !self.query_form {
            return header.to_vec();
        }
        self.pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| value.trim_ascii().to_vec())
            .unwrap_or_default()
    }

    /// `METHOD\nContent-MD5\nContent-Type\nDATE\n` then each `x-amz-*`
    /// header as `name:value\n` (names lower-cased and sorted, repeated
    /// headers joined with commas).
    fn head(&self, date_line: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(self.parts.method.as_str().as_bytes());
        out.push(b'\n');
        out.extend_from_slice(&self.standard_header("content-md5"));
        out.push(b'\n');
        out.extend_from_slice(&self.standard_header("content-type"));
        out.push(b'\n');
        out.extend_from_slice(date_line);
        out.push(b'\n');
        let mut amz: std::collections::BTreeMap<Vec<u8>, Vec<Vec<u8>>> = Default::default();
        for (name, value) in &self.parts.headers {
            if name.as_str().starts_with("x-amz-") {
                amz.entry(name.as_str().as_bytes().to_vec())
                    .or_default()
                    .push(value.as_bytes().trim_ascii().to_vec());
            }
        }
        if self.query_form {
            for (name, value) in self.pairs {
                let name = name.to_ascii_lowercase();
                if name.starts_with(b"x-amz-") && !amz.contains_key(&name) {
                    amz.insert(name, vec![value.trim_ascii().to_vec()]);
                }
            }
        }
        for (name, values) in amz {
            out.extend_from_slice(&name);
            out.push(b':');
            out.extend_from_slice(&values.join(&b','));
            out.push(b'\n');
        }
        out
    }
}

/// The canonical resources a client may have signed, most likely first:
/// the path as sent (after `/bucket` for a virtual-hosted request) and, when
/// it differs, decoded, and a path-style bucket with a trailing slash; the sub-resources of botocore's list and, when they
/// differ, of AWS's documented list. Each is `PATH[?name[=value]&...]` with
/// the sub-resources sorted by name and their values decoded.
fn canonical_resources(
    parts: &Parts,
    pairs: &[(Vec<u8>, Vec<u8>)],
    domain: Option<&str>,
) -> Vec<String> {
    let raw_path = match parts.uri.path() {
        "" => "/",
        path => path,
    };
    let prefix = crate::host_style::virtual_host_bucket(&parts.headers, domain)
        .map(|bucket| format!("/{bucket}"))
        .unwrap_or_default();
    let mut paths = vec![format!("{prefix}{raw_path}")];
    if let Ok(decoded) = percent_encoding::percent_decode_str(raw_path).decode_utf8() {
        if decoded != raw_path {
            paths.push(format!("{prefix}{decoded}"));
        }
    }
    // botocore signs a path-style bucket request `/bucket` as `/bucket/`.
    if prefix.is_empty() && raw_path.len() > 1 && !raw_path[1..].contains('/') {
        paths.push(format!("{raw_path}/"));
    }
    let mut resources = Vec::new();
    for documented_only in [false, true] {
        let subresources = subresource_string(pairs, |name| {
            SIGNED_SUBRESOURCES.contains(&name)
                && !(documented_only && UNDOCUMENTED_SUBRESOURCES.contains(&name))
        });
        for path in &paths {
            let resource = format!("{path}{subresources}");
            if !resources.contains(&resource) {
                resources.push(resource);
            }
        }
    }
    resources
}

/// `?a&b=v` of the query parameters that are `signed`, sorted by name; empty
/// when there are none.
fn subresource_string(pairs: &[(Vec<u8>, Vec<u8>)], signed: impl Fn(&str) -> bool) -> String {
    let mut chosen: Vec<(String, String)> = pairs
        .iter()
        .filter_map(|(name, value)| {
            let name = std::str::from_utf8(name).ok()?;
            signed(name).then(|| {
                (
                    name.to_string(),
                    String::from_utf8_lossy(value).into_owned(),
                )
            })
        })
        .collect();
    if chosen.is_empty() {
        return String::new();
    }
    chosen.sort_by(|a, b| a.0.cmp(&b.0));
    let joined: Vec<String> = chosen
        .into_iter()
        .map(|(name, value)| {
            if value.is_empty() {
                name
            } else {
                format!("{name}={value}")
            }
        })
        .collect();
    format!("?{}", joined.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::testing::{example_lookup, request, EXAMPLE_ACCESS_KEY, EXAMPLE_SECRET};
    use crate::auth::verify_request;

    const REALM: Realm<'static> = Realm::new("us-east-1");

    /// 2007-03-27T19:36:42Z, the Date of AWS's SigV2 examples.
    fn example_date() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_175_024_202)
    }

    fn signed_header(string_to_sign: &str) -> String {
        format!(
            "AWS {EXAMPLE_ACCESS_KEY}:{}",
            sign(EXAMPLE_SECRET, string_to_sign.as_bytes())
        )
    }

    /// `GET /b/k` dated and signed at [`example_date`].
    fn signed_get_at_example_date() -> Parts {
        let date = "Tue, 27 Mar 2007 19:36:42 +0000";
        request(
            "GET",
            "/b/k",
            &[
                ("date", date),
                (
                    "authorization",
                    &signed_header(&format!("GET\n\n\n{date}\n/b/k")),
                ),
            ],
        )
    }

    /// The AWS documentation's "Object GET" example, with its published
    /// signature (computed with the documentation's example secret).
    #[test]
    fn aws_documentation_object_get() {
        let string_to_sign =
            "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg";
        assert_eq!(
            sign(EXAMPLE_SECRET, string_to_sign.as_bytes()),
            "qgk2+6Sv9/oM7G3qLEjTH1a1l1g="
        );
        let parts = request(
            "GET",
            "/photos/puppy.jpg",
            &[
                ("host", "awsexamplebucket1.s3.us-west-1.amazonaws.com"),
                ("date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                (
                    "authorization",
                    "AWS AKIAIOSFODNN7EXAMPLE:qgk2+6Sv9/oM7G3qLEjTH1a1l1g=",
                ),
            ],
        );
        let realm = Realm {
            domain: Some("s3.us-west-1.amazonaws.com"),
            ..REALM
        };
        let verified = verify_request(&parts, example_date(), &realm, example_lookup)
            .expect("documented example verifies");
        assert_eq!(verified.identity.access_key, EXAMPLE_ACCESS_KEY);
        // Path style names the bucket in the path: without the domain the
        // resource lacks it and the signature no longer matches.
        assert!(matches!(
            verify_request(&parts, example_date(), &REALM, example_lookup),
            Err(AuthError::SignatureDoesNotMatch)
        ));
    }

    /// The documentation's "Object PUT" example: Content-Type in the string
    /// to sign.
    #[test]
    fn aws_documentation_object_put() {
        let parts = request(
            "PUT",
            "/awsexamplebucket1/photos/puppy.jpg",
            &[
                ("content-type", "image/jpeg"),
                ("content-length", "94328"),
                ("date", "Tue, 27 Mar 2007 21:15:45 +0000"),
                (
                    "authorization",
                    "AWS AKIAIOSFODNN7EXAMPLE:iqRzw+ileNPu1fhspnRs8nOjjIA=",
                ),
            ],
        );
        let now = example_date() + Duration::from_secs(5_943);
        verify_request(&parts, now, &REALM, example_lookup).expect("documented example verifies");
    }

    /// Sub-resources are sorted and signed with their decoded values; other
    /// parameters are not signed; x-amz-* headers are, sorted and joined.
    #[test]
    fn string_to_sign_covers_subresources_and_amz_headers() {
        let sts = "PUT\nmd5==\ntext/plain\n\nx-amz-date:Tue, 27 Mar 2007 19:36:42 +0000\n\
                   x-amz-meta-a:1,2\n/b/k%20x?partNumber=3&uploadId=a b";
        let signed_put = |string_to_sign: &str| {
            request(
                "PUT",
                "/b/k%20x?uploadId=a%20b&partNumber=3&max-keys=9",
                &[
                    ("content-md5", "md5=="),
                    ("content-type", "text/plain"),
                    ("x-amz-meta-a", " 1 "),
                    ("x-amz-meta-a", "2"),
                    ("x-amz-date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                    ("date", "ignored when x-amz-date is sent"),
                    ("authorization", &signed_header(string_to_sign)),
                ],
            )
        };
        verify_request(&signed_put(sts), example_date(), &REALM, example_lookup).expect("verifies");
        // Any piece changed: refused.
        for (from, to) in [
            ("md5==", "md5=!"),
            ("text/plain", "text/html"),
            ("a:1,2", "a:2,1"),
            ("uploadId=a b", "uploadId=a%20b"),
            ("PUT", "GET"),
        ] {
            let parts = signed_put(&sts.replace(from, to));
            assert!(
                matches!(
                    verify_request(&parts, example_date(), &REALM, example_lookup),
                    Err(AuthError::SignatureDoesNotMatch)
                ),
                "{from} -> {to} accepted"
            );
        }
    }

    /// A decoded path, a client that leaves `tagging` out of its
    /// sub-resources (as s3cmd does) and botocore's `/bucket/` for a
    /// path-style `/bucket` are all accepted.
    #[test]
    fn decoded_paths_and_the_documented_list_are_tried() {
        for (path, sts) in [
            (
                "/b/a%20b?tagging",
                "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/b/a b?tagging",
            ),
            (
                "/b/a%20b?tagging",
                "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/b/a%20b",
            ),
            (
                "/b?acl",
                "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/b/?acl",
            ),
        ] {
            let parts = request(
                "GET",
                path,
                &[
                    ("date", "Tue, 27 Mar 2007 19:36:42 +0000"),
                    ("authorization", &signed_header(sts)),
                ],
            );
            verify_request(&parts, example_date(), &REALM, example_lookup)
                .unwrap_or_else(|e| panic!("{sts:?}: {e}"));
        }
    }

    /// Only a path-style bucket gains a trailing slash: not the root, not
    /// an object, not a virtual-hosted key.
    #[test]
    fn only_a_path_style_bucket_is_tried_with_a_slash() {
        let date = "Tue, 27 Mar 2007 19:36:42 +0000";
        let virtual_hosted = Realm {
            domain: Some("s3.example.com"),
            ..REALM
        };
        let check = |path: &str, host: &str, resource: &str, realm: &Realm<'_>| {
            let parts = request(
                "GET",
                path,
                &[
                    ("host", host),
                    ("date", date),
                    (
                        "authorization",
                        &signed_header(&format!("GET\n\n\n{date}\n{resource}")),
                    ),
                ],
            );
            verify_request(&parts, example_date(), realm, example_lookup)
        };
        let host = "s3.example.com";
        check("/b/k", host, "/b/k", &REALM).expect("the object itself");
        check("/k", "b.s3.example.com", "/b/k", &virtual_hosted).expect("virtual-hosted");
        for (path, host, resource, realm) in [
            ("/", host, "//", &REALM),
            ("/b/k", host, "/b/k/", &REALM),
            ("/k", "b.s3.example.com", "/k/", &virtual_hosted),
            ("/k", "b.s3.example.com", "/b/k/", &virtual_hosted),
        ] {
            assert!(
                matches!(
                    check(path, host, resource, realm),
                    Err(AuthError::SignatureDoesNotMatch)
                ),
                "{path} signed as {resource} accepted"
            );
        }
    }

    /// The query form reads Content-Type from the header, else from the
    /// query; the header form never reads the query.
    #[test]
    fn content_type_comes_from_the_query_only_in_the_query_form() {
        let date = "Tue, 27 Mar 2007 19:36:42 +0000";
        let parts = request(
            "GET",
            "/b/k?content-type=text/plain",
            &[
                ("date", date),
                (
                    "authorization",
                    &signed_header(&format!("GET\n\n\n{date}\n/b/k")),
                ),
            ],
        );
        verify_request(&parts, example_date(), &REALM, example_lookup)
            .expect("the header form ignores the query's content-type");
        let expires = 1_175_024_202;
        let mut parts = presigned(expires, "", &format!("GET\n\ntext/csv\n{expires}\n/b/k"));
        parts
            .headers
            .insert("content-type", http::HeaderValue::from_static("text/csv"));
        verify_request(&parts, example_date(), &REALM, example_lookup)
            .expect("the query form reads the Content-Type header");
    }

    #[test]
    fn header_form_checks_the_clock() {
        let parts = signed_get_at_example_date();
        let fifteen = Duration::from_secs(15 * 60);
        for now in [example_date() + fifteen, example_date() - fifteen] {
            verify_request(&parts, now, &REALM, example_lookup).expect("within the skew");
        }
        let signed_by = verify_request(&parts, example_date(), &REALM, example_lookup)
            .expect("valid")
            .signed_by
            .expect("signed");
        assert_eq!(signed_by, crate::auth::SignedBy::V2Header);
        assert_eq!(
            (signed_by.version(), signed_by.auth_type()),
            ("AWS", "REST-HEADER")
        );
        let second = Duration::from_secs(1);
        for now in [
            example_date() + fifteen + second,
            example_date() - fifteen - second,
        ] {
            assert!(matches!(
                verify_request(&parts, now, &REALM, example_lookup),
                Err(AuthError::RequestTimeTooSkewed)
            ));
        }
        let before_epoch = request(
            "GET",
            "/b/k",
            &[
                ("authorization", &signed_header("x")),
                ("x-amz-date", "Tue, 07 Jul 1950 21:53:04 GMT"),
            ],
        );
        assert!(matches!(
            verify_request(&before_epoch, example_date(), &REALM, example_lookup),
            Err(AuthError::AccessDenied(_))
        ));
        let undated = request("GET", "/b/k", &[("authorization", &signed_header("x"))]);
        match verify_request(&undated, example_date(), &REALM, example_lookup) {
            Err(AuthError::AccessDenied(message)) => assert!(message.contains("Date")),
            other => panic!("undated request: {other:?}"),
        }
    }

    fn presigned(expires: u64, extra: &str, string_to_sign: &str) -> Parts {
        let signature = sign(EXAMPLE_SECRET, string_to_sign.as_bytes());
        let signature =
            percent_encoding::utf8_percent_encode(&signature, percent_encoding::NON_ALPHANUMERIC);
        request(
            "GET",
            &format!(
                "/b/k?{extra}AWSAccessKeyId={EXAMPLE_ACCESS_KEY}&Expires={expires}&Signature={signature}"
            ),
            &[],
        )
    }

    #[test]
    fn query_form_is_valid_until_expires() {
        let expires = 1_175_024_202;
        let parts = presigned(expires, "", &format!("GET\n\n\n{expires}\n/b/k"));
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let signed_by = verify_request(&parts, at(expires), &REALM, example_lookup)
            .expect("valid at Expires")
            .signed_by
            .expect("signed");
        assert_eq!(signed_by, crate::auth::SignedBy::V2Query);
        assert_eq!(
            (signed_by.version(), signed_by.auth_type()),
            ("AWS", "REST-QUERY-STRING")
        );
        match verify_request(&parts, at(expires + 1), &REALM, example_lookup) {
            Err(AuthError::AccessDenied(message)) => assert_eq!(message, "Request has expired"),
            other => panic!("expired link: {other:?}"),
        }
        // The expiry is signed: a later one is refused.
        let later = presigned(expires + 60, "", &format!("GET\n\n\n{expires}\n/b/k"));
        assert!(matches!(
            verify_request(&later, at(expires), &REALM, example_lookup),
            Err(AuthError::SignatureDoesNotMatch)
        ));
    }

    /// botocore moves signed Content-Type and x-amz-* headers into the query
    /// of a presigned URL; response overrides are signed sub-resources.
    #[test]
    fn query_form_signs_values_it_carries() {
        let expires = 1_175_024_202;
        let sts = format!(
            "GET\n\ntext/plain\n{expires}\nx-amz-acl:private\n/b/k?response-content-type=a/b"
        );
        let parts = presigned(
            expires,
            "response-content-type=a%2Fb&content-type=text%2Fplain&x-amz-acl=private&",
            &sts,
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(expires);
        verify_request(&parts, now, &REALM, example_lookup).expect("verifies");
    }

    #[test]
    fn malformed_signatures_are_named() {
        for header in ["AWS ", "AWS AK", "AWS :sig", "AWS AK:"] {
            let parts = request("GET", "/b/k", &[("authorization", header)]);
            assert!(
                matches!(
                    verify_request(&parts, example_date(), &REALM, example_lookup),
                    Err(AuthError::InvalidArgument(_))
                ),
                "{header:?}"
            );
        }
        for query in [
            "AWSAccessKeyId=AK&Signature=x",
            "Expires=1&Signature=x",
            "AWSAccessKeyId=AK&Expires=1",
            "AWSAccessKeyId=AK&Expires=soon&Signature=x",
        ] {
            let parts = request("GET", &format!("/b/k?{query}"), &[]);
            assert!(
                matches!(
                    verify_request(&parts, example_date(), &REALM, example_lookup),
                    Err(AuthError::AccessDenied(_))
                ),
                "{query}"
            );
        }
        let unknown = request(
            "GET",
            "/b/k?AWSAccessKeyId=nobody&Expires=1&Signature=x",
            &[],
        );
        assert!(matches!(
            verify_request(&unknown, example_date(), &REALM, example_lookup),
            Err(AuthError::InvalidAccessKeyId)
        ));
    }

    /// With SigV2 turned off, a SigV2 request is told to use SigV4.
    #[test]
    fn sigv2_can_be_turned_off() {
        let parts = signed_get_at_example_date();
        let off = Realm {
            sigv2: false,
            ..REALM
        };
        match verify_request(&parts, example_date(), &off, example_lookup) {
            Err(AuthError::InvalidRequest(message)) => {
                assert!(message.contains("AWS4-HMAC-SHA256"))
            }
            other => panic!("SigV2 while off: {other:?}"),
        }
        let query = presigned(1, "", "GET\n\n\n1\n/b/k");
        assert!(matches!(
            verify_request(&query, example_date(), &off, example_lookup),
            Err(AuthError::InvalidRequest(_))
        ));
    }
}
