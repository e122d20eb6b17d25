//! Tags: Put/Get/DeleteObjectTagging, Put/Get/DeleteBucketTagging, and the
//! `x-amz-tagging` header of PutObject, CreateMultipartUpload and CopyObject.
//! An object's tags change in place: meta commits the same record with new
//! tags only while the key still holds that object.

use super::{empty_response, recommit_object, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::xml::object_documents::{self, parse_tagging, TAGGING_BODY_LIMIT};
use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, StatusCode};

use percent_encoding::percent_decode_str;
use std::collections::BTreeMap;
use std::sync::Arc;

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

/// GetObjectTagging.
pub async fn get_object_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
) -> Result<Response, S3Error> {
    let record = ctx.authorized_object(bucket, key).await?;
    Ok(xml_response(object_documents::tagging(
        &record.attributes.tags,
    )))
}

async fn read_tagging_body(
    ctx: &RequestContext<'_>,
    body: Body,
    max_tags: usize,
) -> Result<BTreeMap<String, String>, S3Error> {
    let headers = &ctx.parts.headers;
    let document = read_small_body(&ctx.request, headers, body, TAGGING_BODY_LIMIT).await?;
    validate_tags(parse_tagging(&document)?, max_tags)
}

/// PutObjectTagging: replaces the object's whole tag set.
pub async fn put_object_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    body: Body,
) -> Result<Response, S3Error> {
    let tags = read_tagging_body(ctx, body, MAX_OBJECT_TAGS).await?;
    let record = ctx.authorized_object(bucket, key).await?;
    let mut record = Arc::unwrap_or_clone(record);
    record.attributes.tags = tags;
    recommit_object(ctx, record).await?;
    Ok(empty_response(StatusCode::OK))
}

/// DeleteObjectTagging: 204, the object keeps everything else.
pub async fn delete_object_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
) -> Result<Response, S3Error> {
    let record = ctx.authorized_object(bucket, key).await?;
    if !record.attributes.tags.is_empty() {
        let mut record = Arc::unwrap_or_clone(record);
        record.attributes.tags = BTreeMap::new();
        recommit_object(ctx, record).await?;
    }
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// GetBucketTagging: NoSuchTagSet when the bucket has none, as in S3.
pub fn get_bucket_tagging(bucket: &AuthorizedBucket) -> Result<Response, S3Error> {
    if bucket.tags.is_empty() {
        return Err(S3Error::new(S3Code::NoSuchTagSet).detail("BucketName", bucket.name.clone()));
    }
    Ok(xml_response(object_documents::tagging(&bucket.tags)))
}

/// PutBucketTagging: replaces the bucket's tag set (204, as S3 answers).
pub async fn put_bucket_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    body: Body,
) -> Result<Response, S3Error> {
    let tags = read_tagging_body(ctx, body, MAX_BUCKET_TAGS).await?;
    ctx.state
        .meta
        .call(meta_api::SetBucketTags {
            name: bucket.name.to_string(),
            tags,
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// DeleteBucketTagging: 204.
pub async fn delete_bucket_tagging(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .call(meta_api::SetBucketTags {
            name: bucket.name.to_string(),
            tags: BTreeMap::new(),
        })
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
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
