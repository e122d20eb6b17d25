//! Query parameters: the decoded query string, and the validated parameter
//! sets of the operations that take some (listings, part numbers, response
//! header overrides).

use crate::error::{S3Code, S3Error};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use http::header::{self, HeaderName};
use meta_api::naming::{parse_version_id, VersionRef};
use percent_encoding::percent_decode_str;

pub use meta_api::MAX_PART_NUMBER;
/// Largest page of keys, parts or uploads S3 returns.
pub const MAX_PAGE: u32 = 1000;

/// The query string as decoded (name, value) pairs, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

fn decode_component(raw: &str) -> Result<String, S3Error> {
    // S3 reads the query as form data: '+' is a space.
    let spaced = raw.replace('+', " ");
    percent_decode_str(&spaced)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| S3Error::new(S3Code::InvalidURI))
}

impl Query {
    /// Decodes a raw query string; InvalidURI when a component is not UTF-8.
    pub fn parse(raw: Option<&str>) -> Result<Self, S3Error> {
        let mut pairs = Vec::new();
        for item in raw.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').unwrap_or((item, ""));
            pairs.push((decode_component(name)?, decode_component(value)?));
        }
        Ok(Self(pairs))
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `name` is present, with or without a value.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    /// Every parameter name, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// The value of `name`, with an empty value counting as absent.
    fn non_empty(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.is_empty()).map(str::to_string)
    }

    /// `encoding-type`: only `url` exists.
    fn url_encoding(&self) -> Result<bool, S3Error> {
        match self.get("encoding-type") {
            None => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("url") => Ok(true),
            Some(_) => Err(S3Error::invalid_argument(
                "Invalid Encoding Method specified in Request",
            )
            .detail("ArgumentName", "encoding-type")),
        }
    }

    /// A page size parameter: an integer >= 0, capped at 1000 as S3 does.
    fn page_size(&self, name: &'static str) -> Result<u32, S3Error> {
        let Some(raw) = self.get(name) else {
            return Ok(MAX_PAGE);
        };
        let n: i64 = raw.trim().parse().map_err(|_| bad_integer(name, raw))?;
        if n < 0 {
            return Err(bad_integer(name, raw));
        }
        Ok(n.min(i64::from(MAX_PAGE)) as u32)
    }
}

fn bad_integer(name: &'static str, value: &str) -> S3Error {
    S3Error::invalid_argument(format!(
        "Provided {name} not an integer or within integer range"
    ))
    .detail("ArgumentName", name)
    .detail("ArgumentValue", value)
}

/// Parses a part number: an integer in 1..=10000, else InvalidArgument.
pub fn part_number(raw: &str) -> Result<u32, S3Error> {
    match raw.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_PART_NUMBER).contains(&n) => Ok(n),
        _ => Err(S3Error::invalid_argument(
            "Part number must be an integer between 1 and 10000, inclusive",
        )
        .detail("ArgumentName", "partNumber")
        .detail("ArgumentValue", raw)),
    }
}

/// The opaque continuation token of a ListObjectsV2 page that resumes after `marker`.
pub fn continuation_token(marker: &str) -> String {
    URL_SAFE_NO_PAD.encode(marker.as_bytes())
}

fn decode_continuation_token(token: &str) -> Result<String, S3Error> {
    let invalid = || {
        S3Error::invalid_argument("The continuation token provided is incorrect")
            .detail("ArgumentName", "continuation-token")
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(token.trim())
        .map_err(|_| invalid())?;
    String::from_utf8(bytes).map_err(|_| invalid())
}

/// Validated parameters of ListObjectsV2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListV2Params {
    /// Only keys starting with this.
    pub prefix: String,
    /// Roll keys up to common prefixes at this delimiter.
    pub delimiter: Option<String>,
    /// Most entries per page.
    pub max_keys: u32,
    /// The continuation token as sent (echoed in the answer).
    pub continuation_token: Option<String>,
    /// The start-after key as sent (echoed in the answer).
    pub start_after: Option<String>,
    /// Where the page starts (strictly after): the token's marker, else start-after.
    pub resume_after: Option<String>,
    /// Whether to show each object's owner.
    pub fetch_owner: bool,
    /// Whether keys are returned URL-encoded (encoding-type=url).
    pub url_encode: bool,
}

impl ListV2Params {
    /// Reads and validates the parameters.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        let continuation_token = q.non_empty("continuation-token");
        let start_after = q.non_empty("start-after");
        let resume_after = match &continuation_token {
            Some(token) => Some(decode_continuation_token(token)?),
            None => start_after.clone(),
        };
        Ok(Self {
            prefix: q.get("prefix").unwrap_or("").to_string(),
            delimiter: q.non_empty("delimiter"),
            max_keys: q.page_size("max-keys")?,
            continuation_token,
            start_after,
            resume_after,
            fetch_owner: q
                .get("fetch-owner")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            url_encode: q.url_encoding()?,
        })
    }
}

/// Largest page of buckets ListBuckets returns.
pub const MAX_BUCKETS_PAGE: u32 = 10_000;

/// Validated parameters of ListBuckets. Without any, every bucket is listed
/// at once; with any, pages of at most `max-buckets` (default 10,000).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListBucketsParams {
    /// Only buckets whose names start with this.
    pub prefix: Option<String>,
    /// Most buckets on the page.
    pub max_buckets: Option<u32>,
    /// The continuation token as sent.
    pub continuation_token: Option<String>,
    /// Where the page starts (strictly after): the token's bucket name.
    pub resume_after: Option<String>,
    /// The region asked for (only the gateway's own is served).
    pub bucket_region: Option<String>,
}

impl ListBucketsParams {
    /// Reads and validates the parameters.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        let max_buckets = q
            .get("max-buckets")
            .map(|raw| {
                let n: i64 = raw.parse().map_err(|_| bad_integer("max-buckets", raw))?;
                u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=MAX_BUCKETS_PAGE).contains(n))
                    .ok_or_else(|| {
                        S3Error::invalid_argument(format!(
                            "Argument max-buckets must be an integer between 1 and {MAX_BUCKETS_PAGE}"
                        ))
                        .detail("ArgumentName", "max-buckets")
                        .detail("ArgumentValue", raw)
                    })
            })
            .transpose()?;
        let continuation_token = q.non_empty("continuation-token");
        let resume_after = continuation_token
            .as_deref()
            .map(decode_continuation_token)
            .transpose()?;
        Ok(Self {
            prefix: q.get("prefix").map(str::to_string),
            max_buckets,
            continuation_token,
            resume_after,
            bucket_region: q.non_empty("bucket-region"),
        })
    }

    /// Whether any parameter was sent: the answer is then a page.
    pub fn paginated(&self) -> bool {
        self.prefix.is_some()
            || self.max_buckets.is_some()
            || self.continuation_token.is_some()
            || self.bucket_region.is_some()
    }
}

/// Validated parameters of ListObjects (v1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListV1Params {
    /// Only keys starting with this.
    pub prefix: String,
    /// Roll keys up to common prefixes at this delimiter.
    pub delimiter: Option<String>,
    /// Most entries per page.
    pub max_keys: u32,
    /// Start strictly after this key.
    pub marker: Option<String>,
    /// Whether keys are returned URL-encoded (encoding-type=url).
    pub url_encode: bool,
}

impl ListV1Params {
    /// Reads and validates the parameters.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        Ok(Self {
            prefix: q.get("prefix").unwrap_or("").to_string(),
            delimiter: q.non_empty("delimiter"),
            max_keys: q.page_size("max-keys")?,
            marker: q.non_empty("marker"),
            url_encode: q.url_encoding()?,
        })
    }
}

/// Validated parameters of ListParts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPartsParams {
    /// Parts after this number.
    pub part_number_marker: u32,
    /// Most parts per page.
    pub max_parts: u32,
}

impl ListPartsParams {
    /// Reads and validates the parameters.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        let part_number_marker = match q.get("part-number-marker") {
            None | Some("") => 0,
            Some(raw) => raw
                .trim()
                .parse::<u32>()
                .map_err(|_| bad_integer("part-number-marker", raw))?,
        };
        Ok(Self {
            part_number_marker,
            max_parts: q.page_size("max-parts")?,
        })
    }
}

/// Validated parameters of ListMultipartUploads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListUploadsParams {
    /// Only uploads whose key starts with this.
    pub prefix: String,
    /// Start after this key (with `upload_id_marker`).
    pub key_marker: Option<String>,
    /// Within `key_marker`, start after this upload id.
    pub upload_id_marker: Option<String>,
    /// Roll keys up to the first occurrence of this after the prefix.
    pub delimiter: Option<String>,
    /// Most uploads per page.
    pub max_uploads: u32,
    /// Whether keys are returned URL-encoded (encoding-type=url).
    pub url_encode: bool,
}

impl ListUploadsParams {
    /// Reads and validates the parameters.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        Ok(Self {
            prefix: q.get("prefix").unwrap_or("").to_string(),
            key_marker: q.non_empty("key-marker"),
            upload_id_marker: q.non_empty("upload-id-marker"),
            delimiter: q.non_empty("delimiter"),
            max_uploads: q.page_size("max-uploads")?,
            url_encode: q.url_encoding()?,
        })
    }
}

/// The `response-*` parameters of GetObject and the header each overrides.
const RESPONSE_OVERRIDES: [(&str, HeaderName); 6] = [
    ("response-content-type", header::CONTENT_TYPE),
    ("response-content-language", header::CONTENT_LANGUAGE),
    ("response-expires", header::EXPIRES),
    ("response-cache-control", header::CACHE_CONTROL),
    ("response-content-disposition", header::CONTENT_DISPOSITION),
    ("response-content-encoding", header::CONTENT_ENCODING),
];

/// Validated parameters of GetObject and HeadObject.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadParams {
    /// `partNumber`: read only this part of a multipart object.
    pub part_number: Option<u32>,
    /// Response headers the client asked to override, with their values.
    pub overrides: Vec<(HeaderName, String)>,
}

impl ReadParams {
    /// Reads and validates the parameters.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        let part_number = q.get("partNumber").map(part_number).transpose()?;
        let mut overrides = Vec::new();
        for (param, header) in RESPONSE_OVERRIDES {
            if let Some(value) = q.get(param) {
                if http::HeaderValue::from_str(value).is_err() {
                    return Err(
                        S3Error::invalid_argument(format!("Invalid value for {param}"))
                            .detail("ArgumentName", param),
                    );
                }
                overrides.push((header, value.to_string()));
            }
        }
        Ok(Self {
            part_number,
            overrides,
        })
    }
}

/// A version id a request sent (`versionId`, `version-id-marker`, a copy
/// source's `versionId`), or S3's InvalidArgument.
pub fn version_ref(text: &str) -> Result<VersionRef, S3Error> {
    parse_version_id(text)
        .map_err(|message| S3Error::invalid_argument(message).detail("ArgumentName", "versionId"))
}

/// Validated parameters of ListObjectVersions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListVersionsParams {
    /// Only keys starting with this.
    pub prefix: String,
    /// Roll keys up to common prefixes at this delimiter.
    pub delimiter: Option<String>,
    /// Most entries per page.
    pub max_keys: u32,
    /// Start after this key (with `version_id_marker`).
    pub key_marker: Option<String>,
    /// Within `key_marker`, start after this version.
    pub version_id_marker: Option<VersionRef>,
    /// Whether keys are returned URL-encoded (encoding-type=url).
    pub url_encode: bool,
}

impl ListVersionsParams {
    /// Reads and validates the parameters; a version-id-marker needs a
    /// key-marker, as in S3.
    pub fn from_query(q: &Query) -> Result<Self, S3Error> {
        let key_marker = q.non_empty("key-marker");
        let version_id_marker = q
            .non_empty("version-id-marker")
            .map(|id| version_ref(&id))
            .transpose()?;
        if version_id_marker.is_some() && key_marker.is_none() {
            return Err(S3Error::invalid_argument(
                "A version-id marker cannot be specified without a key marker.",
            )
            .detail("ArgumentName", "version-id-marker"));
        }
        Ok(Self {
            prefix: q.get("prefix").unwrap_or("").to_string(),
            delimiter: q.non_empty("delimiter"),
            max_keys: q.page_size("max-keys")?,
            key_marker,
            version_id_marker,
            url_encode: q.url_encoding()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(raw: &str) -> Query {
        Query::parse(Some(raw)).unwrap()
    }

    #[test]
    fn query_decodes_percent_and_plus() {
        let query = q("prefix=a%2Fb+c&uploads&x=1&x=2");
        assert_eq!(query.get("prefix"), Some("a/b c"));
        assert!(query.has("uploads"));
        assert_eq!(query.get("uploads"), Some(""));
        assert_eq!(query.get("x"), Some("1"));
        assert!(Query::parse(Some("prefix=%FF")).is_err());
    }

    #[test]
    fn list_buckets_pages_only_when_asked() {
        let none = ListBucketsParams::from_query(&q("")).unwrap();
        assert!(!none.paginated());
        for raw in ["max-buckets=1", "prefix=", "bucket-region=us-east-1"] {
            assert!(
                ListBucketsParams::from_query(&q(raw)).unwrap().paginated(),
                "{raw}"
            );
        }
        let token = continuation_token("logs");
        let p = ListBucketsParams::from_query(&q(&format!(
            "max-buckets=10000&continuation-token={token}"
        )))
        .unwrap();
        assert_eq!(p.max_buckets, Some(10_000));
        assert_eq!(p.resume_after.as_deref(), Some("logs"));
        for (raw, message) in [
            ("max-buckets=0", "between 1 and 10000"),
            ("max-buckets=10001", "between 1 and 10000"),
            ("max-buckets=-1", "between 1 and 10000"),
            ("max-buckets=ten", "not an integer"),
            ("continuation-token=%21%21", "continuation token"),
        ] {
            let err = ListBucketsParams::from_query(&q(raw)).unwrap_err();
            assert_eq!(err.code(), S3Code::InvalidArgument, "{raw}");
            assert!(err.message().contains(message), "{raw}: {}", err.message());
        }
    }

    #[test]
    fn list_v2_defaults_and_limits() {
        let p = ListV2Params::from_query(&q("list-type=2")).unwrap();
        assert_eq!(p.max_keys, 1000);
        assert_eq!(p.prefix, "");
        assert_eq!(p.delimiter, None);
        assert!(!p.url_encode);
        assert_eq!(
            ListV2Params::from_query(&q("max-keys=5000"))
                .unwrap()
                .max_keys,
            1000
        );
        assert_eq!(
            ListV2Params::from_query(&q("max-keys=0")).unwrap().max_keys,
            0
        );
        for bad in [
            "max-keys=-1",
            "max-keys=abc",
            "max-keys=99999999999999999999",
            "encoding-type=xml",
        ] {
            let err = ListV2Params::from_query(&q(bad)).unwrap_err();
            assert_eq!(err.code(), S3Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn continuation_token_round_trips_and_wins_over_start_after() {
        let token = continuation_token("photos/2024/é.jpg");
        let raw = format!("continuation-token={token}&start-after=zzz");
        let p = ListV2Params::from_query(&q(&raw)).unwrap();
        assert_eq!(p.resume_after.as_deref(), Some("photos/2024/é.jpg"));
        assert_eq!(p.start_after.as_deref(), Some("zzz"));
        let p = ListV2Params::from_query(&q("start-after=abc")).unwrap();
        assert_eq!(p.resume_after.as_deref(), Some("abc"));
        let err = ListV2Params::from_query(&q("continuation-token=!!!")).unwrap_err();
        assert_eq!(err.code(), S3Code::InvalidArgument);
    }

    #[test]
    fn part_numbers_are_1_to_10000() {
        assert_eq!(part_number("1").unwrap(), 1);
        assert_eq!(part_number("10000").unwrap(), 10000);
        for bad in ["0", "10001", "-1", "x", ""] {
            assert_eq!(
                part_number(bad).unwrap_err().code(),
                S3Code::InvalidArgument
            );
        }
    }

    #[test]
    fn list_parts_and_read_params() {
        let p = ListPartsParams::from_query(&q("part-number-marker=3&max-parts=2")).unwrap();
        assert_eq!((p.part_number_marker, p.max_parts), (3, 2));
        assert!(ListPartsParams::from_query(&q("part-number-marker=x")).is_err());
        let r =
            ReadParams::from_query(&q("partNumber=2&response-content-type=text/plain")).unwrap();
        assert_eq!(r.part_number, Some(2));
        assert_eq!(
            r.overrides,
            vec![(header::CONTENT_TYPE, "text/plain".to_string())]
        );
        assert!(ReadParams::from_query(&q("partNumber=0")).is_err());
    }
}
