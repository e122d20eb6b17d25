//! Tags as S3 limits them (count, lengths, unique keys) and the
//! `x-amz-tagging` header that carries them on writes, shared by the tagging
//! operations, the writes and the conditions bucket policies test.

use crate::error::{S3Code, S3Error};
use http::HeaderMap;
use percent_encoding::percent_decode_str;
use std::collections::BTreeMap;

/// Most tags on an object, as in S3.
pub const MAX_OBJECT_TAGS: usize = 10;
/// Most tags on a bucket, as in S3.
pub const MAX_BUCKET_TAGS: usize = 50;
/// Longest tag key, in Unicode characters.
pub const MAX_TAG_KEY: usize = 128;
/// Longest tag value, in Unicode characters.
pub const MAX_TAG_VALUE: usize = 256;
/// The header carrying tags on PUT, as a URL query string.
pub const TAGGING_HEADER: &str = "x-amz-tagging";
/// The header GetObject and HeadObject answer with when an object has tags.
pub const TAG_COUNT_HEADER: &str = "x-amz-tagging-count";

fn invalid_tag(message: &'static str) -> S3Error {
    S3Error::with_message(S3Code::InvalidTag, message)
}

/// Checks tags against S3's rules (count, lengths, unique keys) and keeps them.
pub fn validate_tags(
    pairs: Vec<(String, String)>,
    max_tags: usize,
) -> Result<BTreeMap<String, String>, S3Error> {
    if pairs.len() > max_tags {
        return Err(if max_tags == MAX_OBJECT_TAGS {
            invalid_tag("Object tags cannot be greater than 10")
        } else {
            invalid_tag("Bucket tag count cannot be greater than 50")
        });
    }
    let mut tags = BTreeMap::new();
    for (key, value) in pairs {
        if key.is_empty() {
            return Err(invalid_tag("The TagKey you have provided is invalid"));
        }
        if key.chars().count() > MAX_TAG_KEY {
            return Err(invalid_tag(
                "The TagKey you have provided is too long, max 128",
            ));
        }
        if value.chars().count() > MAX_TAG_VALUE {
            return Err(invalid_tag(
                "The TagValue you have provided is too long, max 256",
            ));
        }
        if tags.insert(key, value).is_some() {
            return Err(invalid_tag(
                "Cannot provide multiple Tags with the same key",
            ));
        }
    }
    Ok(tags)
}

fn decode_form(raw: &str) -> Result<String, S3Error> {
    percent_decode_str(&raw.replace('+', " "))
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| invalid_tag("The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates."))
}

/// The tags of an `x-amz-tagging` header (`k1=v1&k2=v2`), validated; None when absent.
pub fn tags_from_header(headers: &HeaderMap) -> Result<Option<BTreeMap<String, String>>, S3Error> {
    let Some(value) = headers.get(TAGGING_HEADER) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| invalid_tag("The header 'x-amz-tagging' is not valid"))?;
    let mut pairs = Vec::new();
    for item in text.split('&').filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').unwrap_or((item, ""));
        pairs.push((decode_form(key)?, decode_form(value)?));
    }
    validate_tags(pairs, MAX_OBJECT_TAGS).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn tag_rules_follow_s3_limits() {
        let ok = validate_tags(pairs(&[("a", "1"), ("b", "")]), MAX_OBJECT_TAGS).unwrap();
        assert_eq!(ok.len(), 2);
        let eleven: Vec<_> = (0..11).map(|i| (i.to_string(), String::new())).collect();
        assert_eq!(
            validate_tags(eleven.clone(), MAX_OBJECT_TAGS)
                .unwrap_err()
                .code(),
            S3Code::InvalidTag
        );
        assert!(validate_tags(eleven, MAX_BUCKET_TAGS).is_ok());
        let long_key = "k".repeat(129);
        let long_value = "é".repeat(257);
        for bad in [
            pairs(&[(long_key.as_str(), "v")]),
            pairs(&[("k", long_value.as_str())]),
            pairs(&[("k", "1"), ("k", "2")]),
            pairs(&[("", "v")]),
        ] {
            assert_eq!(
                validate_tags(bad, MAX_OBJECT_TAGS).unwrap_err().code(),
                S3Code::InvalidTag
            );
        }
        let max = "é".repeat(256);
        assert!(validate_tags(pairs(&[(&"k".repeat(128), max.as_str())]), 10).is_ok());
    }

    #[test]
    fn tagging_header_is_a_url_query() {
        let mut headers = HeaderMap::new();
        assert_eq!(tags_from_header(&headers).unwrap(), None);
        headers.insert(
            TAGGING_HEADER,
            HeaderValue::from_static("project=blue%20sky&empty=&a+b=c%26d"),
        );
        let tags = tags_from_header(&headers).unwrap().unwrap();
        assert_eq!(tags["project"], "blue sky");
        assert_eq!(tags["empty"], "");
        assert_eq!(tags["a b"], "c&d");
        headers.insert(TAGGING_HEADER, HeaderValue::from_static("k=1&k=2"));
        assert_eq!(
            tags_from_header(&headers).unwrap_err().code(),
            S3Code::InvalidTag
        );
    }
}
