//! The two timestamp formats of S3: ISO 8601 with milliseconds in XML
//! documents, and the HTTP date in headers.

use meta_api::UnixMillis;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use time::format_description::well_known::Rfc3339;
use time::format_description::FormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

const ISO8601_MILLIS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

fn system_time(ms: UnixMillis) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// `2009-10-12T17:50:30.000Z`, as in `LastModified` and `CreationDate`.
pub fn iso8601(ms: UnixMillis) -> String {
    let nanos = i128::from(ms.max(0)) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(ISO8601_MILLIS).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_string())
}

/// `Wed, 21 Oct 2015 07:28:00 GMT`, as in the `Last-Modified` header.
pub fn http_date(ms: UnixMillis) -> String {
    httpdate::fmt_http_date(system_time(ms))
}

/// Parses an ISO 8601 (RFC 3339) time, as clients send retention dates,
/// to milliseconds since the epoch.
pub fn parse_iso8601(value: &str) -> Option<UnixMillis> {
    let time = OffsetDateTime::parse(value.trim(), &Rfc3339).ok()?;
    i64::try_from(time.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Parses an HTTP date header value to whole seconds since the epoch.
pub fn parse_http_date_secs(value: &str) -> Option<i64> {
    let t = httpdate::parse_http_date(value).ok()?;
    t.duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_both_forms() {
        let ms = 1_255_369_830_123; // 2009-10-12T17:50:30.123Z
        assert_eq!(iso8601(ms), "2009-10-12T17:50:30.123Z");
        assert_eq!(http_date(ms), "Mon, 12 Oct 2009 17:50:30 GMT");
        assert_eq!(
            parse_http_date_secs("Mon, 12 Oct 2009 17:50:30 GMT"),
            Some(ms / 1000)
        );
        assert_eq!(parse_http_date_secs("yesterday"), None);
        assert_eq!(iso8601(-5), "1970-01-01T00:00:00.000Z");
        assert_eq!(parse_iso8601("2009-10-12T17:50:30.123Z"), Some(ms));
        assert_eq!(parse_iso8601("2009-10-12T17:50:30Z"), Some(ms - 123));
        assert_eq!(parse_iso8601("2009-10-12T19:50:30+02:00"), Some(ms - 123));
        assert_eq!(parse_iso8601("2009-10-12"), None);
    }
}
