//! Conditional GET and HEAD (If-Match, If-None-Match, If-Modified-Since,
//! If-Unmodified-Since), evaluated in the order of RFC 9110 as S3 does.

use crate::dates::parse_http_date_secs;
use blockstore::meta::UnixMillis;
use http::HeaderMap;

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
}
