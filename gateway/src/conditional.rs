//! Conditional requests: GET and HEAD (If-Match, If-None-Match,
//! If-Modified-Since, If-Unmodified-Since) evaluated in the order of RFC 9110
//! as S3 does, the copy-source conditions of CopyObject, and the conditions
//! of conditional writes.

use crate::dates::parse_http_date_secs;
use http::HeaderMap;
use meta_api::UnixMillis;

/// What the preconditions say about serving the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Serve it.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 PreconditionFailed.
    Failed,
}

fn matches_etag(list: &str, etag: &str) -> bool {
    list.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.trim_start_matches("W/").trim_matches('"') == etag
    })
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Evaluates the conditional headers against an object's ETag (unquoted) and
/// modification time. Dates that do not parse are ignored, as S3 does.
pub fn evaluate(headers: &HeaderMap, etag: &str, modified: UnixMillis) -> Precondition {
    let modified_secs = modified.div_euclid(1000);
    match header(headers, "if-match") {
        Some(list) if !matches_etag(list, etag) => return Precondition::Failed,
        Some(_) => {}
        None => {
            let since = header(headers, "if-unmodified-since").and_then(parse_http_date_secs);
            if since.is_some_and(|since| modified_secs > since) {
                return Precondition::Failed;
            }
        }
    }
    match header(headers, "if-none-match") {
        Some(list) if matches_etag(list, etag) => Precondition::NotModified,
        Some(_) => Precondition::Proceed,
        None => {
            let since = header(headers, "if-modified-since").and_then(parse_http_date_secs);
            if since.is_some_and(|since| modified_secs <= since) {
                Precondition::NotModified
            } else {
                Precondition::Proceed
            }
        }
    }
}

/// The copy-source preconditions of CopyObject and UploadPartCopy
/// (`x-amz-copy-source-if-*`), evaluated by the same rules; where a GET would
/// answer 304, a copy fails with 412, as in S3.
pub fn evaluate_copy_source(headers: &HeaderMap, etag: &str, modified: UnixMillis) -> Precondition {
    let mut mapped = HeaderMap::new();
    for (from, to) in [
        ("x-amz-copy-source-if-match", "if-match"),
        ("x-amz-copy-source-if-none-match", "if-none-match"),
        ("x-amz-copy-source-if-modified-since", "if-modified-since"),
        (
            "x-amz-copy-source-if-unmodified-since",
            "if-unmodified-since",
        ),
    ] {
        if let Some(value) = headers.get(from) {
            mapped.insert(to, value.clone());
        }
    }
    match evaluate(&mapped, etag, modified) {
        Precondition::NotModified => Precondition::Failed,
        other => other,
    }
}

/// Why the headers of a conditional write cannot be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteConditionError {
    /// If-None-Match with anything but `*`: S3 does not implement it on writes.
    IfNoneMatchNotStar,
    /// Both If-Match and If-None-Match.
    Both,
}

/// The condition of a conditional PutObject or CompleteMultipartUpload:
/// `If-None-Match: *` (the key must be free) or `If-Match: <etag>` (the key
/// must hold that object); meta checks it inside the commit transaction.
pub fn write_condition(
    headers: &HeaderMap,
) -> Result<Option<meta_api::WriteCondition>, WriteConditionError> {
    use meta_api::WriteCondition;
    match (
        header(headers, "if-match"),
        header(headers, "if-none-match"),
    ) {
        (Some(_), Some(_)) => Err(WriteConditionError::Both),
        (None, Some(value)) if value.trim() == "*" => Ok(Some(WriteCondition::KeyAbsent)),
        (None, Some(_)) => Err(WriteConditionError::IfNoneMatchNotStar),
        (Some(etag), None) => Ok(Some(WriteCondition::EtagMatches(
            etag.trim()
                .trim_start_matches("W/")
                .trim_matches('"')
                .to_string(),
        ))),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const ETAG: &str = "abc";
    const MODIFIED: UnixMillis = 1_255_369_830_000; // Mon, 12 Oct 2009 17:50:30 GMT

    fn eval(pairs: &[(&'static str, &'static str)]) -> Precondition {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        evaluate(&map, ETAG, MODIFIED)
    }

    #[test]
    fn follows_rfc_order() {
        use Precondition::*;
        let table: &[(&[(&str, &str)], Precondition)] = &[
            (&[], Proceed),
            (&[("if-match", "\"abc\"")], Proceed),
            (&[("if-match", "\"x\", \"abc\"")], Proceed),
            (&[("if-match", "*")], Proceed),
            (&[("if-match", "\"x\"")], Failed),
            (&[("if-none-match", "\"abc\"")], NotModified),
            (&[("if-none-match", "\"x\"")], Proceed),
            (
                &[("if-modified-since", "Mon, 12 Oct 2009 17:50:30 GMT")],
                NotModified,
            ),
            (
                &[("if-modified-since", "Mon, 12 Oct 2009 17:50:29 GMT")],
                Proceed,
            ),
            (
                &[("if-unmodified-since", "Mon, 12 Oct 2009 17:50:29 GMT")],
                Failed,
            ),
            (
                &[("if-unmodified-since", "Mon, 12 Oct 2009 17:50:30 GMT")],
                Proceed,
            ),
            (&[("if-unmodified-since", "garbage")], Proceed),
            // If-Match true wins over a failing If-Unmodified-Since.
            (
                &[
                    ("if-match", "\"abc\""),
                    ("if-unmodified-since", "Mon, 12 Oct 2009 17:50:29 GMT"),
                ],
                Proceed,
            ),
            // If-None-Match false wins over If-Modified-Since.
            (
                &[
                    ("if-none-match", "\"x\""),
                    ("if-modified-since", "Mon, 12 Oct 2009 17:50:30 GMT"),
                ],
                Proceed,
            ),
        ];
        for (headers, expected) in table {
            assert_eq!(eval(headers), *expected, "{headers:?}");
        }
    }

    #[test]
    fn copy_source_conditions_fail_instead_of_304() {
        let mut map = HeaderMap::new();
        map.insert(
            "x-amz-copy-source-if-none-match",
            HeaderValue::from_static("\"abc\""),
        );
        assert_eq!(
            evaluate_copy_source(&map, ETAG, MODIFIED),
            Precondition::Failed
        );
        let mut map = HeaderMap::new();
        map.insert(
            "x-amz-copy-source-if-match",
            HeaderValue::from_static("\"abc\""),
        );
        assert_eq!(
            evaluate_copy_source(&map, ETAG, MODIFIED),
            Precondition::Proceed
        );
        map.insert(
            "x-amz-copy-source-if-match",
            HeaderValue::from_static("\"zzz\""),
        );
        assert_eq!(
            evaluate_copy_source(&map, ETAG, MODIFIED),
            Precondition::Failed
        );
        let mut map = HeaderMap::new();
        map.insert(
            "x-amz-copy-source-if-modified-since",
            HeaderValue::from_static("Mon, 12 Oct 2009 17:50:30 GMT"),
        );
        assert_eq!(
            evaluate_copy_source(&map, ETAG, MODIFIED),
            Precondition::Failed
        );
        // Plain If-Match is for the destination, not the source.
        let mut map = HeaderMap::new();
        map.insert("if-match", HeaderValue::from_static("\"zzz\""));
        assert_eq!(
            evaluate_copy_source(&map, ETAG, MODIFIED),
            Precondition::Proceed
        );
    }

    #[test]
    fn write_conditions() {
        use meta_api::WriteCondition;
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (n, v) in pairs {
                map.insert(*n, HeaderValue::from_static(v));
            }
            write_condition(&map)
        };
        assert_eq!(with(&[]), Ok(None));
        assert_eq!(
            with(&[("if-none-match", "*")]),
            Ok(Some(WriteCondition::KeyAbsent))
        );
        assert_eq!(
            with(&[("if-match", "\"abc\"")]),
            Ok(Some(WriteCondition::EtagMatches("abc".into())))
        );
        assert_eq!(
            with(&[("if-none-match", "\"abc\"")]),
            Err(WriteConditionError::IfNoneMatchNotStar)
        );
        assert_eq!(
            with(&[("if-none-match", "*"), ("if-match", "\"a\"")]),
            Err(WriteConditionError::Both)
        );
    }
}
