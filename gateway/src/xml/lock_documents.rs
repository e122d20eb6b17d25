//! Object lock documents: ObjectLockConfiguration, Retention and LegalHold,
//! read strictly (S3 answers MalformedXML to anything else) and written back.

use super::parse::{leaf, leaves, parse_document, Element};
use super::{MalformedXml, XmlWriter};
use crate::dates::{iso8601, parse_iso8601};
use meta_api::{DefaultRetention, LockMode, ObjectLock, Retention, RetentionPeriod, UnixMillis};

/// Longest default retention S3 accepts, in days (100 years).
const MAX_RETENTION_DAYS: u32 = 36_500;
/// The same in years.
const MAX_RETENTION_YEARS: u32 = 100;

/// Why an ObjectLockConfiguration body was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum LockConfigurationError {
    /// Not a configuration S3 would read.
    Malformed,
    /// A default retention of no days, or of more than 100 years.
    InvalidPeriod,
}

impl From<MalformedXml> for LockConfigurationError {
    fn from(_: MalformedXml) -> Self {
        Self::Malformed
    }
}

/// An ObjectLockConfiguration body: `ObjectLockEnabled` must be `Enabled`;
/// an optional Rule with a DefaultRetention of a Mode and Days or Years.
pub fn parse_object_lock_configuration(bytes: &[u8]) -> Result<ObjectLock, LockConfigurationError> {
    let root = parse_document(bytes)?;
    if root.name != "ObjectLockConfiguration" {
        return Err(LockConfigurationError::Malformed);
    }
    let mut enabled = false;
    let mut default_retention = None;
    for child in &root.children {
        match child.name.as_str() {
            "ObjectLockEnabled" if !enabled && child.children.is_empty() => {
                if child.text.trim() != "Enabled" {
                    return Err(LockConfigurationError::Malformed);
                }
                enabled = true;
            }
            "Rule" if default_retention.is_none() => {
                let [retention] = child.children.as_slice() else {
                    return Err(LockConfigurationError::Malformed);
                };
                if retention.name != "DefaultRetention" {
                    return Err(LockConfigurationError::Malformed);
                }
                default_retention = Some(parse_default_retention(retention)?);
            }
            _ => return Err(LockConfigurationError::Malformed),
        }
    }
    if !enabled {
        return Err(LockConfigurationError::Malformed);
    }
    Ok(ObjectLock { default_retention })
}

fn parse_default_retention(element: &Element) -> Result<DefaultRetention, LockConfigurationError> {
    let fields = leaves(element, &["Mode", "Days", "Years"])?;
    let mode = leaf(&fields, "Mode")
        .and_then(LockMode::parse)
        .ok_or(LockConfigurationError::Malformed)?;
    let number = |text: &str| {
        text.parse::<i64>()
            .map_err(|_| LockConfigurationError::Malformed)
    };
    let period = match (leaf(&fields, "Days"), leaf(&fields, "Years")) {
        (Some(days), None) => match number(days)? {
            n @ 1.. if n <= i64::from(MAX_RETENTION_DAYS) => RetentionPeriod::Days(n as u32),
            _ => return Err(LockConfigurationError::InvalidPeriod),
        },
        (None, Some(years)) => match number(years)? {
            n @ 1.. if n <= i64::from(MAX_RETENTION_YEARS) => RetentionPeriod::Years(n as u32),
            _ => return Err(LockConfigurationError::InvalidPeriod),
        },
        _ => return Err(LockConfigurationError::Malformed),
    };
    Ok(DefaultRetention { mode, period })
}

/// ObjectLockConfiguration as GetObjectLockConfiguration answers it.
pub fn object_lock_configuration(lock: &ObjectLock) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("ObjectLockConfiguration");
    w.element("ObjectLockEnabled", "Enabled");
    if let Some(rule) = &lock.default_retention {
        w.open("Rule");
        w.open("DefaultRetention");
        w.element("Mode", rule.mode.as_str());
        match rule.period {
            RetentionPeriod::Days(days) => w.number("Days", u64::from(days)),
            RetentionPeriod::Years(years) => w.number("Years", u64::from(years)),
        }
        w.close("DefaultRetention");
        w.close("Rule");
    }
    w.close("ObjectLockConfiguration");
    w.finish()
}

/// A Retention body: a Mode and a RetainUntilDate, or neither (an empty
/// retention, which removes it).
pub fn parse_retention(bytes: &[u8]) -> Result<Option<(LockMode, UnixMillis)>, MalformedXml> {
    let root = parse_document(bytes)?;
    if root.name != "Retention" {
        return Err(MalformedXml);
    }
    let fields = leaves(&root, &["Mode", "RetainUntilDate"])?;
    match (leaf(&fields, "Mode"), leaf(&fields, "RetainUntilDate")) {
        (None, None) => Ok(None),
        (Some(mode), Some(date)) => {
            let mode = LockMode::parse(mode).ok_or(MalformedXml)?;
            let until = parse_iso8601(date).ok_or(MalformedXml)?;
            Ok(Some((mode, until)))
        }
        _ => Err(MalformedXml),
    }
}

/// Retention as GetObjectRetention answers it.
pub fn retention(retention: &Retention) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("Retention");
    w.element("Mode", retention.mode.as_str());
    w.element("RetainUntilDate", &iso8601(retention.until));
    w.close("Retention");
    w.finish()
}

/// A LegalHold body: Status ON or OFF.
pub fn parse_legal_hold(bytes: &[u8]) -> Result<bool, MalformedXml> {
    let root = parse_document(bytes)?;
    if root.name != "LegalHold" {
        return Err(MalformedXml);
    }
    match leaf(&leaves(&root, &["Status"])?, "Status") {
        Some("ON") => Ok(true),
        Some("OFF") => Ok(false),
        _ => Err(MalformedXml),
    }
}

/// The Status of a legal hold as S3 writes it.
pub fn legal_hold_status(on: bool) -> &'static str {
    if on {
        "ON"
    } else {
        "OFF"
    }
}

/// LegalHold as GetObjectLegalHold answers it.
pub fn legal_hold(on: bool) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("LegalHold");
    w.element("Status", legal_hold_status(on));
    w.close("LegalHold");
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(body: &str) -> Result<ObjectLock, LockConfigurationError> {
        parse_object_lock_configuration(body.as_bytes())
    }

    #[test]
    fn lock_configurations() {
        let enabled = "<ObjectLockEnabled>Enabled</ObjectLockEnabled>";
        let with_rule = |rule: &str| {
            format!("<ObjectLockConfiguration>{enabled}<Rule><DefaultRetention>{rule}</DefaultRetention></Rule></ObjectLockConfiguration>")
        };
        assert_eq!(
            config(&format!(
                "<ObjectLockConfiguration>{enabled}</ObjectLockConfiguration>"
            )),
            Ok(ObjectLock::default())
        );
        let parsed = config(&with_rule("<Mode>GOVERNANCE</Mode><Days>3</Days>")).unwrap();
        assert_eq!(
            parsed.default_retention,
            Some(DefaultRetention {
                mode: LockMode::Governance,
                period: RetentionPeriod::Days(3)
            })
        );
        let written = String::from_utf8(object_lock_configuration(&parsed)).unwrap();
        assert!(written.contains(&format!("{enabled}<Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>3</Days></DefaultRetention></Rule>")), "{written}");
        assert_eq!(config(&written), Ok(parsed));
        for bad in [
            with_rule("<Mode>GOVERNANCE</Mode><Days>3</Days><Years>1</Years>"),
            with_rule("<Mode>GOVERNANCE</Mode>"),
            with_rule("<Mode>governance</Mode><Days>3</Days>"),
            with_rule("<Days>3</Days>"),
            with_rule("<Mode>COMPLIANCE</Mode><Days>x</Days>"),
            "<ObjectLockConfiguration><ObjectLockEnabled>Disabled</ObjectLockEnabled></ObjectLockConfiguration>".into(),
            "<ObjectLockConfiguration></ObjectLockConfiguration>".into(),
            "<ObjectLock><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLock>".into(),
        ] {
            assert_eq!(config(&bad), Err(LockConfigurationError::Malformed), "{bad}");
        }
        for bad in [
            with_rule("<Mode>GOVERNANCE</Mode><Days>0</Days>"),
            with_rule("<Mode>GOVERNANCE</Mode><Years>-1</Years>"),
            with_rule("<Mode>GOVERNANCE</Mode><Days>36501</Days>"),
            with_rule("<Mode>GOVERNANCE</Mode><Years>101</Years>"),
        ] {
            assert_eq!(
                config(&bad),
                Err(LockConfigurationError::InvalidPeriod),
                "{bad}"
            );
        }
        assert!(config(&with_rule("<Mode>COMPLIANCE</Mode><Years>100</Years>")).is_ok());
    }

    #[test]
    fn retentions_and_legal_holds() {
        let body = "<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>2030-01-01T00:00:00Z</RetainUntilDate></Retention>";
        let until = parse_iso8601("2030-01-01T00:00:00Z").unwrap();
        assert_eq!(
            parse_retention(body.as_bytes()),
            Ok(Some((LockMode::Compliance, until)))
        );
        assert_eq!(parse_retention(b"<Retention/>"), Ok(None));
        for bad in [
            "<Retention><Mode>COMPLIANCE</Mode></Retention>",
            "<Retention><RetainUntilDate>2030-01-01T00:00:00Z</RetainUntilDate></Retention>",
            "<Retention><Mode>compliance</Mode><RetainUntilDate>2030-01-01T00:00:00Z</RetainUntilDate></Retention>",
            "<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>soon</RetainUntilDate></Retention>",
            "<Other/>",
        ] {
            assert_eq!(parse_retention(bad.as_bytes()), Err(MalformedXml), "{bad}");
        }
        let written = String::from_utf8(retention(&Retention {
            mode: LockMode::Compliance,
            until,
        }))
        .unwrap();
        assert!(written.contains(
            "<Mode>COMPLIANCE</Mode><RetainUntilDate>2030-01-01T00:00:00.000Z</RetainUntilDate>"
        ));
        assert_eq!(
            parse_legal_hold(b"<LegalHold><Status>ON</Status></LegalHold>"),
            Ok(true)
        );
        assert_eq!(
            parse_legal_hold(b"<LegalHold><Status>OFF</Status></LegalHold>"),
            Ok(false)
        );
        for bad in [
            "<LegalHold><Status>on</Status></LegalHold>",
            "<LegalHold/>",
            "<Hold><Status>ON</Status></Hold>",
        ] {
            assert_eq!(parse_legal_hold(bad.as_bytes()), Err(MalformedXml), "{bad}");
        }
        assert!(String::from_utf8(legal_hold(true))
            .unwrap()
            .contains("<Status>ON</Status>"));
    }
}
