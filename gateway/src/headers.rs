//! Object headers at the HTTP edge: what a PUT may store (Content-Type, the
//! standard headers, `x-amz-meta-*`), the Tessera replication header,
//! Content-MD5, and the headers GET and HEAD answer with.

use crate::dates::http_date;
use crate::error::{S3Code, S3Error};
use crate::xml::documents::quoted;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use meta_api::ObjectRecord;
use proto::ReplicationConfig;
use std::collections::BTreeMap;

/// Chooses the replication of a new object or bucket.
pub const REPLICATION_HEADER: &str = "x-tessera-replication";

/// The [`REPLICATION_HEADER`] of an object kept in its meta record.
const INLINE: &str = "inline";
/// Prefix of user metadata headers.
const META_PREFIX: &str = "x-amz-meta-";
/// S3's limit on user metadata: names and values, in bytes.
pub const MAX_USER_METADATA: usize = 2048;

/// Standard headers S3 stores with an object and returns on GET.
const STORED_HEADERS: [HeaderName; 5] = [
    header::CONTENT_ENCODING,
    header::CONTENT_DISPOSITION,
    header::CONTENT_LANGUAGE,
    header::CACHE_CONTROL,
    header::EXPIRES,
];

/// What a PUT or CreateMultipartUpload stores besides the data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMetadata {
    /// Content-Type to store, if sent.
    pub content_type: Option<String>,
    /// Stored standard headers by lower-case name.
    pub headers: BTreeMap<String, String>,
    /// `x-amz-meta-*` by lower-case name without the prefix.
    pub user_metadata: BTreeMap<String, String>,
}

/// The most a request's header section may hold: S3 documents 8 KB.
pub const MAX_HEADER_SECTION: usize = 8 * 1024;

/// RequestHeaderSectionTooLarge when the headers, each counted as
/// `name: value` and its line end, exceed [`MAX_HEADER_SECTION`].
pub fn check_header_section(headers: &HeaderMap) -> Result<(), S3Error> {
    let size: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    if size > MAX_HEADER_SECTION {
        return Err(S3Error::new(S3Code::RequestHeaderSectionTooLarge)
            .detail("Size", size.to_string())
            .detail("MaxSizeAllowed", MAX_HEADER_SECTION.to_string()));
    }
    Ok(())
}

fn header_text(name: &str, value: &HeaderValue) -> Result<String, S3Error> {
    String::from_utf8(value.as_bytes().to_vec()).map_err(|_| {
        S3Error::invalid_argument(format!("Header {name} is not valid UTF-8"))
            .detail("ArgumentName", name.to_string())
    })
}

/// A user metadata value as S3 keeps it: RFC 2047 encoded words decoded
/// (a client that must send ASCII sends `=?UTF-8?B?...?=`), other bytes read
/// as UTF-8, or as Latin-1 where they are not UTF-8 (what HTTP libraries put
/// on the wire for a Latin-1 string).
fn metadata_value(value: &HeaderValue) -> String {
    let text = match std::str::from_utf8(value.as_bytes()) {
        Ok(text) => text.to_string(),
        Err(_) => value.as_bytes().iter().map(|&b| char::from(b)).collect(),
    };
    if !text.contains("=?") {
        return text;
    }
    rfc2047_decoder::Decoder::new()
        .too_long_encoded_word_strategy(rfc2047_decoder::RecoverStrategy::Decode)
        .decode(text.as_bytes())
        .unwrap_or(text)
}

/// A metadata value as S3 returns it: as stored when it is printable ASCII,
/// else one RFC 2047 encoded word of its UTF-8 (`=?UTF-8?B?...?=`).
fn mail_safe(value: &str) -> std::borrow::Cow<'_, str> {
    if value
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
    {
        return value.into();
    }
    let encoded = STANDARD.encode(value.as_bytes());
    format!("=?UTF-8?B?{encoded}?=").into()
}

impl ObjectMetadata {
    /// Reads the stored headers of a request; MetadataTooLarge past 2 KB of user metadata.
    pub fn from_request(headers: &HeaderMap) -> Result<Self, S3Error> {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .map(|v| header_text("Content-Type", v))
            .transpose()?;
        let mut stored = BTreeMap::new();
        for name in &STORED_HEADERS {
            // A header sent more than once is one list, joined as HTTP
            // joins repeated fields.
            let values = headers
                .get_all(name)
                .iter()
                .map(|value| header_text(name.as_str(), value))
                .collect::<Result<Vec<_>, _>>()?;
            if !values.is_empty() {
                let mut text = values.join(",");
                if name == header::CONTENT_ENCODING {
                    // aws-chunked describes the upload framing, not the object: S3 drops it.
                    text = without_aws_chunked(&text);
                    if text.is_empty() {
                        continue;
                    }
                }
                stored.insert(name.as_str().to_string(), text);
            }
        }
        let mut user_metadata = BTreeMap::new();
        let mut metadata_size = 0;
        for (name, value) in headers {
            if let Some(short) = name.as_str().strip_prefix(META_PREFIX) {
                let value = metadata_value(value);
                metadata_size += short.len() + value.len();
                // Repeated headers are joined as S3 does.
                user_metadata
                    .entry(short.to_string())
                    .and_modify(|v: &mut String| {
                        v.push(',');
                        v.push_str(&value);
                    })
                    .or_insert(value);
            }
        }
        if metadata_size > MAX_USER_METADATA {
            return Err(S3Error::new(S3Code::MetadataTooLarge)
                .detail("Size", metadata_size.to_string())
                .detail("MaxSizeAllowed", MAX_USER_METADATA.to_string()));
        }
        Ok(Self {
            content_type,
            headers: stored,
            user_metadata,
        })
    }
}

/// A Content-Encoding list without its `aws-chunked` token.
fn without_aws_chunked(value: &str) -> String {
    value
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("aws-chunked"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The replication the request asks for, if any; InvalidArgument when unknown.
pub fn replication(headers: &HeaderMap) -> Result<Option<ReplicationConfig>, S3Error> {
    let Some(value) = headers.get(REPLICATION_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("");
    text.parse::<ReplicationConfig>().map(Some).map_err(|e| {
        S3Error::invalid_argument(e.to_string())
            .detail("ArgumentName", REPLICATION_HEADER)
            .detail("ArgumentValue", text.to_string())
    })
}

/// The Content-MD5 the client sent, decoded; InvalidDigest when it is not
/// base64 of 16 bytes.
pub fn content_md5(headers: &HeaderMap) -> Result<Option<[u8; 16]>, S3Error> {
    let Some(value) = headers.get("content-md5") else {
        return Ok(None);
    };
    let bytes = value
        .to_str()
        .ok()
        .and_then(|s| STANDARD.decode(s.trim()).ok())
        .ok_or_else(|| S3Error::new(S3Code::InvalidDigest))?;
    let digest: [u8; 16] = bytes
        .try_into()
        .map_err(|_| S3Error::new(S3Code::InvalidDigest))?;
    Ok(Some(digest))
}

/// A quoted ETag header value.
pub fn etag_value(etag: &str) -> HeaderValue {
    HeaderValue::from_str(&quoted(etag)).unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

fn insert(out: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        out.insert(name, value);
    }
}

/// The headers GET and HEAD answer with, except Content-Length and Content-Range.
pub fn object_headers(record: &ObjectRecord) -> HeaderMap {
    let mut out = HeaderMap::new();
    let content_type = record
        .content_type
        .as_deref()
        .unwrap_or("binary/octet-stream");
    insert(&mut out, header::CONTENT_TYPE, content_type);
    out.insert(header::ETAG, etag_value(&record.etag));
    insert(&mut out, header::LAST_MODIFIED, &http_date(record.created));
    out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    for (name, value) in &record.headers {
        if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
            insert(&mut out, name, value);
        }
    }
    for (name, value) in &record.user_metadata {
        if let Ok(name) = HeaderName::from_bytes(format!("{META_PREFIX}{name}").as_bytes()) {
            insert(&mut out, name, &mail_safe(value));
        }
    }
    // Where the bytes are: in the record itself, or blocks laid out so.
    let stored_as = match &record.inline {
        Some(_) => INLINE.to_string(),
        None => record.replication.to_string(),
    };
    insert(
        &mut out,
        HeaderName::from_static(REPLICATION_HEADER),
        &stored_as,
    );
    out
}

/// Whether the client asked for checksums on GET or HEAD (`x-amz-checksum-mode: ENABLED`).
pub fn checksum_mode_enabled(headers: &HeaderMap) -> bool {
    headers
        .get("x-amz-checksum-mode")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("ENABLED"))
}

/// Adds `x-amz-checksum-<alg>` (and `x-amz-checksum-type` when known).
pub fn insert_checksum(
    out: &mut HeaderMap,
    checksum: &meta_api::StoredChecksum,
    kind: Option<&str>,
) {
    let name = format!("x-amz-checksum-{}", checksum.algorithm.to_ascii_lowercase());
    if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
        insert(out, name, &checksum.value);
    }
    if let Some(kind) = kind {
        insert(out, HeaderName::from_static("x-amz-checksum-type"), kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_header_section_over_8_kb_is_refused() {
        let near = "v".repeat(MAX_HEADER_SECTION - "x-big".len() - 4);
        assert!(check_header_section(&headers(&[("x-big", &near)])).is_ok());
        let over = format!("{near}v");
        let err = check_header_section(&headers(&[("x-big", &over)])).unwrap_err();
        assert_eq!(err.code(), S3Code::RequestHeaderSectionTooLarge);
    }

    #[test]
    fn reads_stored_headers_and_metadata() {
        let m = ObjectMetadata::from_request(&headers(&[
            ("content-type", "text/plain"),
            ("cache-control", "no-cache"),
            ("x-amz-meta-Color", "blue"),
            ("x-amz-meta-color", "red"),
            ("content-language", "en"),
            ("content-language", "fr"),
            ("x-amz-date", "ignored"),
        ]))
        .unwrap();
        assert_eq!(
            m.headers.get("content-language").map(String::as_str),
            Some("en,fr")
        );
        assert_eq!(m.content_type.as_deref(), Some("text/plain"));
        assert_eq!(
            m.headers.get("cache-control").map(String::as_str),
            Some("no-cache")
        );
        assert_eq!(
            m.user_metadata.get("color").map(String::as_str),
            Some("blue,red")
        );
        assert_eq!(m.user_metadata.len(), 1);
    }

    /// Non-ASCII metadata: encoded words are decoded before storing, raw
    /// UTF-8 (or Latin-1) read as text; GET answers one UTF-8 encoded word.
    #[test]
    fn non_ascii_metadata_is_stored_decoded_and_returned_encoded() {
        let mut sent = HeaderMap::new();
        let pairs: [(&str, &[u8]); 4] = [
            ("x-amz-meta-word", b"=?UTF-8?B?w6l0w6k=?="),
            ("x-amz-meta-q", b"=?utf-8?Q?caf=C3=A9?= au lait"),
            ("x-amz-meta-raw", "d\u{e9}j\u{e0} \u{2122}".as_bytes()),
            ("x-amz-meta-latin", b"na\xefve"),
        ];
        for (name, value) in pairs {
            sent.insert(name, HeaderValue::from_bytes(value).unwrap());
        }
        let m = ObjectMetadata::from_request(&sent).unwrap();
        assert_eq!(m.user_metadata["word"], "\u{e9}t\u{e9}");
        assert_eq!(m.user_metadata["q"], "caf\u{e9} au lait");
        assert_eq!(m.user_metadata["raw"], "d\u{e9}j\u{e0} \u{2122}");
        assert_eq!(m.user_metadata["latin"], "na\u{ef}ve");
        assert_eq!(mail_safe("\u{e9}t\u{e9}"), "=?UTF-8?B?w6l0w6k=?=");
        assert_eq!(mail_safe("plain ascii ~"), "plain ascii ~");
        assert_eq!(mail_safe("bell\u{7}"), "=?UTF-8?B?YmVsbAc=?=");
        // Text that only looks like an encoded word is kept.
        let odd = HeaderValue::from_static("=?not an encoded word");
        assert_eq!(metadata_value(&odd), "=?not an encoded word");
    }

    #[test]
    fn aws_chunked_is_not_stored_as_content_encoding() {
        let only = ObjectMetadata::from_request(&headers(&[("content-encoding", "aws-chunked")]));
        assert!(only.unwrap().headers.is_empty());
        let both =
            ObjectMetadata::from_request(&headers(&[("content-encoding", "aws-chunked,gzip")]));
        assert_eq!(both.unwrap().headers["content-encoding"], "gzip");
    }

    #[test]
    fn user_metadata_is_limited_to_2kb() {
        let big = "v".repeat(2045);
        let err = ObjectMetadata::from_request(&headers(&[("x-amz-meta-long", &big)])).unwrap_err();
        assert_eq!(err.code(), S3Code::MetadataTooLarge);
    }

    #[test]
    fn checksum_headers() {
        let mut out = HeaderMap::new();
        let checksum = meta_api::StoredChecksum {
            algorithm: "CRC64NVME".into(),
            value: "AAAAAAAAAAA=".into(),
        };
        insert_checksum(&mut out, &checksum, Some("FULL_OBJECT"));
        assert_eq!(out["x-amz-checksum-crc64nvme"], "AAAAAAAAAAA=");
        assert_eq!(out["x-amz-checksum-type"], "FULL_OBJECT");
        assert!(checksum_mode_enabled(&headers(&[(
            "x-amz-checksum-mode",
            "ENABLED"
        )])));
        assert!(!checksum_mode_enabled(&headers(&[])));
    }

    #[test]
    fn replication_header_is_validated() {
        assert_eq!(replication(&headers(&[])).unwrap(), None);
        assert_eq!(
            replication(&headers(&[(REPLICATION_HEADER, "replicated-3")])).unwrap(),
            Some(ReplicationConfig::REPLICATED_3)
        );
        let err = replication(&headers(&[(REPLICATION_HEADER, "rs-9-9")])).unwrap_err();
        assert_eq!(err.code(), S3Code::InvalidArgument);
    }

    #[test]
    fn content_md5_must_be_base64_of_16_bytes() {
        let ok = headers(&[("content-md5", "1B2M2Y8AsgTpgAmY7PhCfg==")]);
        assert_eq!(
            hex::encode(content_md5(&ok).unwrap().unwrap()),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        for bad in ["not base64!", "AAAA", ""] {
            let err = content_md5(&headers(&[("content-md5", bad)])).unwrap_err();
            assert_eq!(err.code(), S3Code::InvalidDigest, "{bad}");
        }
    }
}
