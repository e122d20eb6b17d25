//! The pieces of a SigV4 signature that header and query authentication share: the credential
//! scope, the request timestamp, the canonical request of S3, the string to sign and the signing
//! key (whose HMAC chain is aws-sigv4's).

use std::time::SystemTime;

use http::HeaderMap;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// The one algorithm we accept.
pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// The service of every S3 credential scope.
pub(crate) const SERVICE: &str = "s3";
/// The terminal of every credential scope.
pub(crate) const TERMINATOR: &str = "aws4_request";
/// Hex SHA-256 of the empty string.
pub(crate) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// How far a request timestamp may be from our clock (S3: 15 minutes).
pub(crate) const MAX_SKEW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// `AK/YYYYMMDD/REGION/s3/aws4_request`, validated against the gateway's region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CredentialScope {
    /// The access key id.
    pub access_key: String,
    /// `YYYYMMDD`.
    pub date: String,
    /// Signing region; must be the gateway's.
    pub region: String,
}

/// Why a credential did not parse; each caller words it for its header or query parameter.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScopeError {
    Malformed,
    WrongRegion(String),
    WrongService(String),
    WrongTerminal(String),
}

impl ScopeError {
    /// S3's wording, after the "...; " prefix the caller adds.
    pub fn detail(&self, expected_region: &str) -> String {
        match self {
            Self::Malformed => "the Credential is mal-formed; expecting \
                \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"."
                .to_string(),
            Self::WrongRegion(region) => {
                format!("the region '{region}' is wrong; expecting '{expected_region}'")
            }
            Self::WrongService(service) => {
                format!("incorrect service \"{service}\". This endpoint belongs to \"{SERVICE}\".")
            }
            Self::WrongTerminal(terminal) => {
                format!("incorrect terminal \"{terminal}\". This endpoint uses \"{TERMINATOR}\".")
            }
        }
    }
}

impl CredentialScope {
    /// Parses `AK/date/region/service/aws4_request`. The access key is everything before the last
    /// four components, so a key containing `/` still parses.
    pub fn parse(credential: &str, expected_region: &str) -> Result<Self, ScopeError> {
        let mut parts = credential.rsplitn(5, '/');
        let terminal = parts.next().ok_or(ScopeError::Malformed)?;
        let service = parts.next().ok_or(ScopeError::Malformed)?;
        let region = parts.next().ok_or(ScopeError::Malformed)?;
        let date = parts.next().ok_or(ScopeError::Malformed)?;
        let access_key = parts.next().ok_or(ScopeError::Malformed)?;
        if access_key.is_empty()
            || date.len() != 8
            || !date.bytes().all(|b| b.is_ascii_digit())
            || region.is_empty()
        {
            return Err(ScopeError::Malformed);
        }
        if region != expected_region {
            return Err(ScopeError::WrongRegion(region.to_string()));
        }
        if service != SERVICE {
            return Err(ScopeError::WrongService(service.to_string()));
        }
        if terminal != TERMINATOR {
            return Err(ScopeError::WrongTerminal(terminal.to_string()));
        }
        Ok(Self {
            access_key: access_key.to_string(),
            date: date.to_string(),
            region: region.to_string(),
        })
    }

    /// `date/region/s3/aws4_request`, the scope line of every string to sign.
    pub fn scope(&self) -> String {
        format!("{}/{}/{SERVICE}/{TERMINATOR}", self.date, self.region)
    }
}

/// A request timestamp in ISO 8601 basic format (`20130524T000000Z`), as it appears in the
/// string to sign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AmzDate {
    /// The timestamp as sent.
    pub text: String,
    /// The timestamp parsed.
    pub time: SystemTime,
}

impl AmzDate {
    /// Parses `YYYYMMDDTHHMMSSZ` (every signed request has one: read by
    /// hand rather than through a format description).
    pub fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
            return None;
        }
        let number = |range: std::ops::Range<usize>| -> Option<u32> {
            b[range].iter().try_fold(0u32, |n, &c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        let month = time::Month::try_from(u8::try_from(number(4..6)?).ok()?).ok()?;
        let date = time::Date::from_calendar_date(
            i32::try_from(number(0..4)?).ok()?,
            month,
            u8::try_from(number(6..8)?).ok()?,
        )
        .ok()?;
        let clock = time::Time::from_hms(
            u8::try_from(number(9..11)?).ok()?,
            u8::try_from(number(11..13)?).ok()?,
            u8::try_from(number(13..15)?).ok()?,
        )
        .ok()?;
        let time = PrimitiveDateTime::new(date, clock).assume_utc();
        Some(Self {
            text: text.to_string(),
            time: time.into(),
        })
    }

    /// Converts an HTTP `Date` header value (RFC 1123 and the other HTTP forms).
    pub fn from_http_date(value: &str) -> Option<Self> {
        let time = httpdate::parse_http_date(value).ok()?;
        let format = format_description!("[year][month][day]T[hour][minute][second]Z");
        let text = OffsetDateTime::from(time).format(format).ok()?;
        Some(Self { text, time })
    }

    /// `YYYYMMDD`, to compare with the credential scope's date.
    pub fn date(&self) -> &str {
        &self.text[..8]
    }

    /// Whether the timestamp is more than [`MAX_SKEW`] away from `now`, either way.
    pub fn is_skewed(&self, now: SystemTime) -> bool {
        is_skewed(self.time, now)
    }
}

/// Whether `time` is more than [`MAX_SKEW`] away from `now`, either way.
pub(crate) fn is_skewed(time: SystemTime, now: SystemTime) -> bool {
    let distance = match now.duration_since(time) {
        Ok(ahead) => ahead,
        Err(behind) => behind.duration(),
    };
    distance > MAX_SKEW
}

/// An S3 unreserved byte (RFC 3986): never percent-encoded in a canonical request.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn push_encoded(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0x0f)]));
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// The canonical URI of S3: the path as sent, encoded exactly once. Every `%XX` escape is decoded
/// and every byte re-encoded with AWS's UriEncode (unreserved bytes and `/` literal, the rest
/// `%XX` uppercase), so `%7e`, `~` and `%7E` all become `~` and a raw `$` becomes `%24`. An
/// escaped slash (`%2F`) stays escaped: it is part of a key, not a separator. S3 does not remove
/// dot segments nor merge slashes, and neither do we.
pub(crate) fn canonical_uri(raw_path: &str) -> String {
    if raw_path.is_empty() {
        return "/".to_string();
    }
    let bytes = raw_path.as_bytes();
    let mut out = String::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte == b'%' {
            let escaped = bytes
                .get(i + 1)
                .and_then(|&h| hex_value(h))
                .zip(bytes.get(i + 2).and_then(|&l| hex_value(l)));
            if let Some((high, low)) = escaped {
                let decoded = (high << 4) | low;
                if is_unreserved(decoded) {
                    out.push(char::from(decoded));
                } else {
                    push_encoded(&mut out, decoded);
                }
                i += 3;
                continue;
            }
        }
        if is_unreserved(byte) || byte == b'/' {
            out.push(char::from(byte));
        } else {
            push_encoded(&mut out, byte);
        }
        i += 1;
    }
    out
}

/// Decodes one query component: `%XX` escapes and `+` as a space (as S3 and aws-sigv4 read a
/// query); a malformed escape is kept literally.
fn decode_query_component(raw: &str) -> Vec<u8> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let escaped = bytes
                    .get(i + 1)
                    .and_then(|&h| hex_value(h))
                    .zip(bytes.get(i + 2).and_then(|&l| hex_value(l)));
                if let Some((high, low)) = escaped {
                    out.push((high << 4) | low);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    out
}

/// AWS UriEncode of a query name or value: everything but unreserved bytes is `%XX`.
fn encode_query_component(decoded: &[u8]) -> String {
    let mut out = String::with_capacity(decoded.len() * 3);
    for &byte in decoded {
        if is_unreserved(byte) {
            out.push(char::from(byte));
        } else {
            push_encoded(&mut out, byte);
        }
    }
    out
}

/// The query's parameters, decoded, in the order sent; a parameter without `=` has an empty value.
pub(crate) fn query_pairs(raw_query: Option<&str>) -> Vec<(Vec<u8>, Vec<u8>)> {
    raw_query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode_query_component(name), decode_query_component(value))
        })
        .collect()
}

/// The canonical query string: each name and value decoded then UriEncoded, sorted by encoded
/// name then value, joined with `&`. Parameters for which `skip` is true (the presigned
/// `X-Amz-Signature`) are left out.
pub(crate) fn canonical_query(raw_query: Option<&str>, skip: impl Fn(&[u8]) -> bool) -> String {
    let mut pairs: Vec<(String, String)> = query_pairs(raw_query)
        .into_iter()
        .filter(|(name, _)| !skip(name))
        .map(|(name, value)| {
            (
                encode_query_component(&name),
                encode_query_component(&value),
            )
        })
        .collect();
    pairs.sort_unstable();
    let mut out = String::new();
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
    out
}

/// A header value as canonicalised: spaces trimmed at both ends and runs of spaces collapsed to
/// one (S3 and aws-sigv4 touch spaces only, not other whitespace).
fn push_trimmed_value(out: &mut Vec<u8>, value: &[u8]) {
    let start = value.iter().position(|&b| b != b' ').unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|&b| b != b' ')
        .map_or(start, |i| i + 1);
    let mut previous_space = false;
    for &byte in &value[start..end] {
        if byte == b' ' {
            if previous_space {
                continue;
            }
            previous_space = true;
        } else {
            previous_space = false;
        }
        out.push(byte);
    }
}

/// Everything a canonical request is built from, once the URI and the query are canonical.
pub(crate) struct CanonicalInput<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// URI-encoded path.
    pub canonical_uri: &'a str,
    /// Sorted, encoded query string.
    pub canonical_query: &'a str,
    /// The request headers.
    pub headers: &'a HeaderMap,
    /// Used for a signed `host` when the request has no Host header (HTTP/2 `:authority`).
    pub authority: Option<&'a str>,
    /// Lowercase names, in the order of SignedHeaders.
    pub signed_headers: &'a [String],
    /// The last line: hex SHA-256, `UNSIGNED-PAYLOAD` or a `STREAMING-*` value.
    pub payload: &'a str,
}

impl CanonicalInput<'_> {
    /// The canonical request as bytes (header values may hold non-UTF-8 bytes, e.g. raw UTF-8 in
    /// `x-amz-meta-*`). Values of a repeated header are joined with `,`; a signed header that is
    /// absent is canonicalised with an empty value, so the signature cannot match unless the
    /// client signed it that way.
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(self.method.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(self.canonical_uri.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(self.canonical_query.as_bytes());
        out.push(b'\n');
        for name in self.signed_headers {
            out.extend_from_slice(name.as_bytes());
            out.push(b':');
            let mut values = self.headers.get_all(name.as_str()).iter().peekable();
            if values.peek().is_none() && name == "host" {
                if let Some(authority) = self.authority {
                    push_trimmed_value(&mut out, authority.as_bytes());
                }
            }
            let mut first = true;
            for value in values {
                if !first {
                    out.push(b',');
                }
                first = false;
                push_trimmed_value(&mut out, value.as_bytes());
            }
            out.push(b'\n');
        }
        out.push(b'\n');
        out.extend_from_slice(self.signed_headers.join(";").as_bytes());
        out.push(b'\n');
        out.extend_from_slice(self.payload.as_bytes());
        out
    }
}

/// `AWS4-HMAC-SHA256\n{timestamp}\n{scope}\n{hex sha256(canonical request)}`.
pub(crate) fn string_to_sign(amz_date: &str, scope: &str, canonical_request: &[u8]) -> String {
    let hashed = hex::encode(Sha256::digest(canonical_request));
    format!("{ALGORITHM}\n{amz_date}\n{scope}\n{hashed}")
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The SigV4 signing key of one secret, day and region (kSigning), derived by aws-sigv4.
#[derive(Clone)]
pub(crate) struct SigningKey([u8; 32]);

impl SigningKey {
    /// Derives kSigning for the day of `time` (the request timestamp, whose date equals the scope's).
    pub fn derive(secret: &str, time: SystemTime, region: &str) -> Self {
        let key = aws_sigv4::sign::v4::generate_signing_key(secret, time, region, SERVICE);
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(key.as_ref());
        Self(bytes)
    }

    /// Lowercase hex HMAC-SHA256 of `string_to_sign`.
    pub fn sign(&self, string_to_sign: &str) -> String {
        aws_sigv4::sign::v4::calculate_signature(self.0, string_to_sign.as_bytes())
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

/// What a request signature covers beyond the method, path and headers of the request itself.
pub(crate) struct SignedParts<'a> {
    /// Request timestamp.
    pub amz_date: &'a AmzDate,
    /// Credential scope.
    pub scope: &'a CredentialScope,
    /// Canonical query string.
    pub canonical_query: &'a str,
    /// Lower-case names of the signed headers.
    pub signed_headers: &'a [String],
    /// Payload hash or `UNSIGNED-PAYLOAD` as signed.
    pub payload: &'a str,
    /// The request signature, hex.
    pub signature: &'a str,
}

/// Recomputes the request signature and compares it with the client's; returns it (the seed of
/// an aws-chunked signature chain). The canonical URI is [`canonical_uri`]; when the client did
/// not sign that but the path exactly as sent (a client that signs a path it did not encode the
/// AWS way), the raw path is tried too: both name the same key.
pub(crate) fn verify_signature(
    parts: &http::request::Parts,
    signed: &SignedParts<'_>,
    key: &SigningKey,
) -> Result<String, super::AuthError> {
    let raw_path = parts.uri.path();
    let normalised = canonical_uri(raw_path);
    let mut candidates = vec![normalised.as_str()];
    if raw_path != normalised && !raw_path.is_empty() {
        candidates.push(raw_path);
    }
    let scope = signed.scope.scope();
    for canonical_uri in candidates {
        let canonical_request = CanonicalInput {
            method: parts.method.as_str(),
            canonical_uri,
            canonical_query: signed.canonical_query,
            headers: &parts.headers,
            authority: parts.uri.authority().map(|a| a.as_str()),
            signed_headers: signed.signed_headers,
            payload: signed.payload,
        }
        .build();
        let string_to_sign = string_to_sign(&signed.amz_date.text, &scope, &canonical_request);
        let computed = key.sign(&string_to_sign);
        if signature_matches(&computed, signed.signature) {
            return Ok(computed);
        }
        tracing::debug!(
            canonical_request = %super::loggable(&canonical_request),
            string_to_sign,
            "SigV4 signature does not match"
        );
    }
    Err(super::AuthError::SignatureDoesNotMatch)
}

/// Compares a computed signature with the one the client sent, in constant time.
pub(crate) fn signature_matches(computed: &str, given: &str) -> bool {
    let given = given.trim().to_ascii_lowercase();
    computed.len() == given.len() && bool::from(computed.as_bytes().ct_eq(given.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signing_keys_do_not_show_in_logs() {
        let key = SigningKey::derive("secret", std::time::SystemTime::UNIX_EPOCH, "us-east-1");
        assert_eq!(format!("{key:?}"), "SigningKey(..)");
    }

    #[test]
    fn canonical_uri_encodes_once() {
        // AWS "PUT Object" example: the key test$file.text.
        assert_eq!(canonical_uri("/test$file.text"), "/test%24file.text");
        assert_eq!(canonical_uri("/test%24file.text"), "/test%24file.text");
        assert_eq!(canonical_uri("/a%7eb~c%7E"), "/a~b~c~");
        assert_eq!(canonical_uri("/b/k%20y%2bz+"), "/b/k%20y%2Bz%2B");
        assert_eq!(canonical_uri("/b/a%2Fb"), "/b/a%2Fb");
        assert_eq!(canonical_uri("/b//./../k"), "/b//./../k");
        assert_eq!(canonical_uri("/b/%E2%82%AC"), "/b/%E2%82%AC");
        assert_eq!(canonical_uri("/b/100%"), "/b/100%25");
        assert_eq!(canonical_uri(""), "/");
    }

    #[test]
    fn canonical_query_sorts_encoded_pairs() {
        // AWS "GET Bucket (List Objects)" and "GET Bucket Lifecycle" examples.
        assert_eq!(
            canonical_query(Some("max-keys=2&prefix=J"), |_| false),
            "max-keys=2&prefix=J"
        );
        assert_eq!(canonical_query(Some("lifecycle"), |_| false), "lifecycle=");
        assert_eq!(
            canonical_query(Some("prefix=a+b%2bc&a=%7e~&a=!&&b"), |_| false),
            "a=%21&a=~~&b=&prefix=a%20b%2Bc"
        );
        assert_eq!(
            canonical_query(Some("X-Amz-Signature=abc&x=1"), |n| n == b"X-Amz-Signature"),
            "x=1"
        );
        assert_eq!(canonical_query(None, |_| false), "");
    }

    #[test]
    fn header_values_trimmed_and_collapsed() {
        let mut out = Vec::new();
        push_trimmed_value(&mut out, b"  a   b  c ");
        assert_eq!(out, b"a b c");
        out.clear();
        push_trimmed_value(&mut out, b"   ");
        assert_eq!(out, b"");
    }

    #[test]
    fn canonical_request_headers() {
        let mut headers = HeaderMap::new();
        headers.append("x-amz-meta-a", http::HeaderValue::from_static("one"));
        headers.append(
            "x-amz-meta-a",
            http::HeaderValue::from_static(" two  words "),
        );
        let signed = [
            "host".to_string(),
            "x-amz-meta-a".to_string(),
            "x-amz-meta-b".to_string(),
        ];
        let canonical = CanonicalInput {
            method: "PUT",
            canonical_uri: "/b/k",
            canonical_query: "",
            headers: &headers,
            authority: Some("example.com:9000"),
            signed_headers: &signed,
            payload: "UNSIGNED-PAYLOAD",
        }
        .build();
        assert_eq!(
            String::from_utf8_lossy(&canonical),
            "PUT\n/b/k\n\nhost:example.com:9000\nx-amz-meta-a:one,two words\nx-amz-meta-b:\n\n\
             host;x-amz-meta-a;x-amz-meta-b\nUNSIGNED-PAYLOAD"
        );
    }

    #[test]
    fn credential_scope_errors() {
        let ok = CredentialScope::parse("AK/20130524/us-east-1/s3/aws4_request", "us-east-1");
        assert_eq!(
            ok.map(|s| s.scope()).as_deref(),
            Ok("20130524/us-east-1/s3/aws4_request")
        );
        let slash = CredentialScope::parse("A/K/20130524/us-east-1/s3/aws4_request", "us-east-1");
        assert_eq!(slash.map(|s| s.access_key).as_deref(), Ok("A/K"));
        assert_eq!(
            CredentialScope::parse("AK/20130524/eu-west-1/s3/aws4_request", "us-east-1"),
            Err(ScopeError::WrongRegion("eu-west-1".into()))
        );
        assert_eq!(
            ScopeError::WrongRegion("x".into()).detail("us-east-1"),
            "the region 'x' is wrong; expecting 'us-east-1'"
        );
        assert_eq!(
            CredentialScope::parse("AK/20130524/us-east-1/ec2/aws4_request", "us-east-1"),
            Err(ScopeError::WrongService("ec2".into()))
        );
        assert_eq!(
            CredentialScope::parse("AK/20130524/us-east-1/s3/aws4", "us-east-1"),
            Err(ScopeError::WrongTerminal("aws4".into()))
        );
        assert_eq!(
            CredentialScope::parse("20130524/us-east-1/s3/aws4_request", "us-east-1"),
            Err(ScopeError::Malformed)
        );
        for malformed in [
            "AK/2013052/us-east-1/s3/aws4_request",
            "AK/2013O524/us-east-1/s3/aws4_request",
            "/20130524/us-east-1/s3/aws4_request",
            "AK/20130524//s3/aws4_request",
        ] {
            assert_eq!(
                CredentialScope::parse(malformed, "us-east-1"),
                Err(ScopeError::Malformed),
                "{malformed}"
            );
        }
    }

    #[test]
    fn amz_dates() {
        let date = AmzDate::parse("20130524T000000Z").expect("valid");
        assert_eq!(date.date(), "20130524");
        let from_http = AmzDate::from_http_date("Fri, 24 May 2013 00:00:00 GMT").expect("valid");
        assert_eq!(from_http, date);
        assert!(AmzDate::parse("2013-05-24T00:00:00Z").is_none());
        assert!(AmzDate::parse("20130524T000000").is_none());
        // Out-of-range fields and non-digits are refused, not wrapped.
        for bad in [
            "20131324T000000Z",
            "20130532T000000Z",
            "20130229T000000Z",
            "20130524T240000Z",
            "20130524T006000Z",
            "2013O524T000000Z",
            "+0130524T000000Z",
            "20130524t000000Z",
        ] {
            assert!(AmzDate::parse(bad).is_none(), "{bad}");
        }
        let leap = AmzDate::parse("20240229T235959Z").expect("leap day");
        assert_eq!(
            leap.time
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
            1_709_251_199
        );
        let at = |secs: u64| date.time + std::time::Duration::from_secs(secs);
        assert!(!date.is_skewed(at(15 * 60)));
        assert!(date.is_skewed(at(15 * 60 + 1)));
        assert!(date.is_skewed(date.time - std::time::Duration::from_secs(15 * 60 + 1)));
    }

    #[test]
    fn signature_comparison() {
        assert!(signature_matches("abcd", "abcd"));
        assert!(signature_matches("abcd", "ABCD"));
        assert!(!signature_matches("abcd", "abce"));
        assert!(!signature_matches("abcd", "abc"));
    }
}
