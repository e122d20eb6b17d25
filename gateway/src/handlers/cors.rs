//! CORS: PutBucketCors / GetBucketCors / DeleteBucketCors (the rules live in
//! the bucket record in meta), the browser's OPTIONS preflight answered from
//! those rules, and the `Access-Control-*` headers added to any response whose
//! request carries an `Origin` a rule allows.

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::xml::parse::{parse_document, Element};
use crate::xml::XmlWriter;
use axum::body::Body;
use axum::response::Response;
use http::header::{HeaderMap, HeaderValue, ORIGIN};
use http::request::Parts;
use http::{Method, StatusCode};
use meta_api::{BucketRecord, CorsRule};

/// Largest PutBucketCors body accepted (S3 allows 64 KB of configuration).
pub const CORS_BODY_LIMIT: u64 = 64 * 1024;
/// Most rules one configuration may hold, as in S3.
pub const MAX_CORS_RULES: usize = 100;
/// Methods a rule may allow.
const CORS_METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

/// The request's `Origin`, if it sends one.
pub fn request_origin(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get(ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Whether `value` matches `pattern`, which may hold one `*` standing for any
/// run of characters. `fold` compares ASCII case-insensitively (headers).
fn wildcard_match(pattern: &str, value: &str, fold: bool) -> bool {
    let (pattern, value) = if fold {
        (pattern.to_ascii_lowercase(), value.to_ascii_lowercase())
    } else {
        (pattern.to_string(), value.to_string())
    };
    match pattern.split_once('*') {
        None => pattern == value,
        Some((head, tail)) => {
            value.len() >= head.len() + tail.len()
                && value.starts_with(head)
                && value.ends_with(tail)
        }
    }
}

/// The first rule allowing `origin` to use `method` with `headers`.
pub fn matching_rule<'r>(
    rules: &'r [CorsRule],
    origin: &str,
    method: &str,
    headers: &[String],
) -> Option<&'r CorsRule> {
    rules.iter().find(|rule| {
        rule.allowed_origins
            .iter()
            .any(|o| wildcard_match(o, origin, false))
            && rule.allowed_methods.iter().any(|m| m == method)
            && headers.iter().all(|h| {
                rule.allowed_headers
                    .iter()
                    .any(|allowed| wildcard_match(allowed, h, true))
            })
    })
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

/// The headers S3 sends for a request `rule` allows from `origin`.
fn allowed_headers(rule: &CorsRule, origin: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if rule.allowed_origins.iter().any(|o| o == "*") {
        out.push(("access-control-allow-origin", "*".to_string()));
    } else {
        out.push(("access-control-allow-origin", origin.to_string()));
        out.push(("access-control-allow-credentials", "true".to_string()));
    }
    out.push((
        "access-control-allow-methods",
        rule.allowed_methods.join(", "),
    ));
    if !rule.expose_headers.is_empty() {
        out.push((
            "access-control-expose-headers",
            rule.expose_headers.join(", "),
        ));
    }
    if let Some(age) = rule.max_age_seconds {
        out.push(("access-control-max-age", age.to_string()));
    }
    out.push((
        "vary",
        "Origin, Access-Control-Request-Headers, Access-Control-Request-Method".to_string(),
    ));
    out
}

fn allow_headers(headers: &mut HeaderMap, rule: &CorsRule, origin: &str) {
    for (name, value) in allowed_headers(rule, origin) {
        insert(headers, name, &value);
    }
}

/// The rule of `bucket` that applies to an ordinary (not preflight) request.
fn ordinary_rule<'b>(
    bucket: &'b BucketRecord,
    method: &Method,
    origin: &str,
) -> Option<&'b CorsRule> {
    if *method == Method::OPTIONS {
        return None;
    }
    matching_rule(&bucket.cors, origin, method.as_str(), &[])
}

/// Adds the CORS headers to the response of an ordinary request from `origin`
/// when a rule of `bucket` allows its method.
pub fn decorate(response: &mut Response, bucket: &BucketRecord, method: &Method, origin: &str) {
    if let Some(rule) = ordinary_rule(bucket, method, origin) {
        allow_headers(response.headers_mut(), rule, origin);
    }
}

/// The same headers on an error answer, so that the browser lets the page
/// read S3's error (S3 sends them on errors too).
pub fn decorate_error(
    mut error: S3Error,
    bucket: &BucketRecord,
    method: &Method,
    origin: &str,
) -> S3Error {
    if let Some(rule) = ordinary_rule(bucket, method, origin) {
        for (name, value) in allowed_headers(rule, origin) {
            error = error.header(http::header::HeaderName::from_static(name), value);
        }
    }
    error
}

/// OPTIONS: 200 with the allowing rule's headers, or 403 when none matches.
pub fn preflight(ctx: &RequestContext<'_>, bucket: &BucketRecord) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    let origin = request_origin(ctx.parts).ok_or_else(|| {
        S3Error::with_message(
            S3Code::InvalidRequest,
            "Insufficient information. Origin request header needed.",
        )
    })?;
    let method = headers
        .get("access-control-request-method")
        .and_then(|v| v.to_str().ok())
        .filter(|m| CORS_METHODS.contains(m))
        .ok_or_else(|| {
            S3Error::with_message(
                S3Code::InvalidRequest,
                "Invalid Access-Control-Request-Method: null",
            )
        })?;
    let requested: Vec<String> = headers
        .get_all("access-control-request-headers")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    if bucket.cors.is_empty() {
        return Err(S3Error::with_message(
            S3Code::AccessForbidden,
            "CORSResponse: CORS is not enabled for this bucket.",
        )
        .detail("Method", method)
        .detail("ResourceType", "BUCKET"));
    }
    let rule = matching_rule(&bucket.cors, &origin, method, &requested).ok_or_else(|| {
        S3Error::new(S3Code::AccessForbidden)
            .detail("Method", method)
            .detail("ResourceType", "OBJECT")
    })?;
    let mut response = empty_response(StatusCode::OK);
    allow_headers(response.headers_mut(), rule, &origin);
    if !requested.is_empty() {
        insert(
            response.headers_mut(),
            "access-control-allow-headers",
            &requested.join(", "),
        );
    }
    Ok(response)
}

fn malformed() -> S3Error {
    S3Error::new(S3Code::MalformedXML)
}

fn leaf(element: &Element) -> Result<String, S3Error> {
    if element.children.is_empty() {
        Ok(element.text.trim().to_string())
    } else {
        Err(malformed())
    }
}

fn parse_rule(element: &Element) -> Result<CorsRule, S3Error> {
    if element.name != "CORSRule" {
        return Err(malformed());
    }
    let mut rule = CorsRule::default();
    for child in &element.children {
        let text = leaf(child)?;
        match child.name.as_str() {
            "ID" if rule.id.is_none() => rule.id = Some(text),
            "AllowedOrigin" => rule.allowed_origins.push(text),
            "AllowedMethod" => {
                if !CORS_METHODS.contains(&text.as_str()) {
                    return Err(S3Error::with_message(
                        S3Code::InvalidRequest,
                        format!(
                            "Found unsupported HTTP method in CORS config. Unsupported method is {text}"
                        ),
                    ));
                }
                rule.allowed_methods.push(text);
            }
            "AllowedHeader" => rule.allowed_headers.push(text),
            "ExposeHeader" => rule.expose_headers.push(text),
            "MaxAgeSeconds" if rule.max_age_seconds.is_none() => {
                rule.max_age_seconds = Some(text.parse().map_err(|_| malformed())?);
            }
            _ => return Err(malformed()),
        }
    }
    for pattern in rule.allowed_origins.iter().chain(&rule.allowed_headers) {
        if pattern.matches('*').count() > 1 {
            return Err(S3Error::with_message(
                S3Code::InvalidRequest,
                format!("AllowedOrigin/AllowedHeader \"{pattern}\" can not have more than one wildcard."),
            ));
        }
    }
    if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
        return Err(malformed());
    }
    Ok(rule)
}

/// Parses a `CORSConfiguration` document: 1 to 100 rules, each with at least
/// one AllowedOrigin and one AllowedMethod.
pub fn parse_cors_configuration(bytes: &[u8]) -> Result<Vec<CorsRule>, S3Error> {
    let root = parse_document(bytes)?;
    if root.name != "CORSConfiguration" || root.children.is_empty() {
        return Err(malformed());
    }
    if root.children.len() > MAX_CORS_RULES {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "The number of CORS rules should not exceed allowed limit of 100 rules.",
        ));
    }
    root.children.iter().map(parse_rule).collect()
}

/// The `CORSConfiguration` document of `rules`.
pub fn cors_document(rules: &[CorsRule]) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("CORSConfiguration");
    for rule in rules {
        w.open("CORSRule");
        w.optional("ID", rule.id.as_deref());
        for header in &rule.allowed_headers {
            w.element("AllowedHeader", header);
        }
        for method in &rule.allowed_methods {
            w.element("AllowedMethod", method);
        }
        for origin in &rule.allowed_origins {
            w.element("AllowedOrigin", origin);
        }
        for header in &rule.expose_headers {
            w.element("ExposeHeader", header);
        }
        if let Some(age) = rule.max_age_seconds {
            w.number("MaxAgeSeconds", u64::from(age));
        }
        w.close("CORSRule");
    }
    w.close("CORSConfiguration");
    w.finish()
}

/// GetBucketCors: the rules, or NoSuchCORSConfiguration.
pub fn get_bucket_cors(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    if bucket.cors.is_empty() {
        return Err(
            S3Error::new(S3Code::NoSuchCORSConfiguration).detail("BucketName", bucket.name.clone())
        );
    }
    Ok(xml_response(cors_document(&bucket.cors)))
}

/// PutBucketCors: replaces the bucket's rules.
pub async fn put_bucket_cors(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let document = read_small_body(&ctx.request, &ctx.parts.headers, body, CORS_BODY_LIMIT).await?;
    let rules = parse_cors_configuration(&document)?;
    ctx.state
        .meta
        .call(meta_api::SetBucketCors {
            bucket: bucket.name.to_string(),
            rules,
        })
        .await?;
    Ok(empty_response(StatusCode::OK))
}

/// DeleteBucketCors: 204, whether or not the bucket had rules.
pub async fn delete_bucket_cors(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .call(meta_api::SetBucketCors {
            bucket: bucket.name.to_string(),
            rules: Vec::new(),
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// `result` with the CORS headers `bucket`'s rules give the request's
/// origin, when it has one.
pub fn with_cors(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    result: Result<Response, S3Error>,
) -> Result<Response, S3Error> {
    let Some(origin) = request_origin(ctx.parts) else {
        return result;
    };
    let method = &ctx.parts.method;
    match result {
        Ok(mut response) => {
            decorate(&mut response, bucket, method, &origin);
            Ok(response)
        }
        Err(error) => Err(decorate_error(error, bucket, method, &origin)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example configuration of the PutBucketCors documentation.
    const AWS_EXAMPLE: &str = r#"<CORSConfiguration>
 <CORSRule>
   <AllowedOrigin>http://www.example.com</AllowedOrigin>
   <AllowedMethod>PUT</AllowedMethod>
   <AllowedMethod>POST</AllowedMethod>
   <AllowedMethod>DELETE</AllowedMethod>
   <AllowedHeader>*</AllowedHeader>
   <MaxAgeSeconds>3000</MaxAgeSeconds>
   <ExposeHeader>x-amz-server-side-encryption</ExposeHeader>
 </CORSRule>
 <CORSRule>
   <AllowedOrigin>*</AllowedOrigin>
   <AllowedMethod>GET</AllowedMethod>
   <AllowedHeader>*</AllowedHeader>
   <MaxAgeSeconds>3000</MaxAgeSeconds>
 </CORSRule>
</CORSConfiguration>"#;

    #[test]
    fn parses_the_aws_example_and_round_trips() {
        let rules = parse_cors_configuration(AWS_EXAMPLE.as_bytes()).unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].allowed_methods, ["PUT", "POST", "DELETE"]);
        assert_eq!(rules[0].max_age_seconds, Some(3000));
        assert_eq!(rules[0].expose_headers, ["x-amz-server-side-encryption"]);
        let again = parse_cors_configuration(&cors_document(&rules)).unwrap();
        assert_eq!(again, rules);
    }

    #[test]
    fn rejects_bad_configurations() {
        let bad_method = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>\
            <AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>";
        let err = parse_cors_configuration(bad_method.as_bytes()).unwrap_err();
        assert_eq!(err.code(), S3Code::InvalidRequest);
        let no_origin = "<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod>\
            </CORSRule></CORSConfiguration>";
        let err = parse_cors_configuration(no_origin.as_bytes()).unwrap_err();
        assert_eq!(err.code(), S3Code::MalformedXML);
        let err = parse_cors_configuration(b"<CORSConfiguration/>").unwrap_err();
        assert_eq!(err.code(), S3Code::MalformedXML);
    }

    #[test]
    fn rules_match_origin_method_and_headers() {
        let rules = parse_cors_configuration(AWS_EXAMPLE.as_bytes()).unwrap();
        let origin = "http://www.example.com";
        let put = matching_rule(&rules, origin, "PUT", &["content-type".into()]);
        assert_eq!(put.map(|r| r.allowed_methods.len()), Some(3));
        // Any origin may GET (second rule), none other may PUT.
        assert!(matching_rule(&rules, "http://evil.test", "GET", &[]).is_some());
        assert!(matching_rule(&rules, "http://evil.test", "PUT", &[]).is_none());
        assert!(wildcard_match(
            "http://*.example.com",
            "http://a.example.com",
            false
        ));
        assert!(!wildcard_match(
            "http://*.example.com",
            "http://example.org",
            false
        ));
        assert!(wildcard_match("X-Amz-*", "x-amz-date", true));
    }
}
