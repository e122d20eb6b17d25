//! LifecycleConfiguration documents: read with the checks and messages of
//! S3's PutBucketLifecycleConfiguration, and written back as they were put
//! (a rule's filter keeps the form it was given in).

use super::parse::{parse_document, Element};
use super::{MalformedXml, XmlWriter};
use crate::dates::{iso8601, parse_iso8601};
use meta_api::lifecycle::{
    Expiration, FilterShape, LifecycleFilter, LifecycleRule, NoncurrentExpiration,
};

/// Most rules one configuration may have.
pub const MAX_RULES: usize = 1000;
/// Longest rule ID.
const MAX_ID_LEN: usize = 255;
/// Length of the IDs made for rules put without one.
const MADE_ID_LEN: usize = 20;
/// Largest object size a size filter may name (1,000 TiB).
const MAX_FILTER_SIZE: u64 = 1_099_511_627_776_000;
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Why a LifecycleConfiguration was refused, as S3 answers it.
#[derive(Debug, PartialEq, Eq)]
pub enum LifecycleError {
    /// Not a document S3's schema allows: MalformedXML.
    Malformed,
    /// InvalidArgument with this message, about this argument (and value).
    InvalidArgument {
        /// S3's message.
        message: &'static str,
        /// The argument, when S3 names it.
        name: Option<&'static str>,
        /// Its value, when S3 quotes it.
        value: Option<String>,
    },
    /// InvalidRequest with this message.
    InvalidRequest(&'static str),
    /// A transition to another storage class, which Tessera does not have.
    Transition,
}

impl From<MalformedXml> for LifecycleError {
    fn from(_: MalformedXml) -> Self {
        Self::Malformed
    }
}

fn invalid_argument(message: &'static str) -> LifecycleError {
    LifecycleError::InvalidArgument {
        message,
        name: None,
        value: None,
    }
}

/// The only child called `name`, if any; MalformedXML when repeated.
fn optional<'a>(element: &'a Element, name: &str) -> Result<Option<&'a Element>, LifecycleError> {
    let mut found = element.children.iter().filter(|c| c.name == name);
    match (found.next(), found.next()) {
        (one, None) => Ok(one),
        _ => Err(LifecycleError::Malformed),
    }
}

/// Trimmed text of a leaf; MalformedXML when it has children.
fn text(element: &Element) -> Result<&str, LifecycleError> {
    if element.children.is_empty() {
        Ok(element.text.trim())
    } else {
        Err(LifecycleError::Malformed)
    }
}

/// The text of the optional leaf `name`.
fn leaf<'a>(element: &'a Element, name: &str) -> Result<Option<&'a str>, LifecycleError> {
    optional(element, name)?.map(text).transpose()
}

/// MalformedXML when `element` has a child not in `allowed`.
fn only(element: &Element, allowed: &[&str]) -> Result<(), LifecycleError> {
    if element
        .children
        .iter()
        .all(|c| allowed.contains(&c.name.as_str()))
    {
        Ok(())
    } else {
        Err(LifecycleError::Malformed)
    }
}

/// A whole number of days that must be positive: `message` when it is not.
fn positive_days(text: &str, message: &'static str) -> Result<u32, LifecycleError> {
    let days: i64 = text.parse().map_err(|_| LifecycleError::Malformed)?;
    u32::try_from(days)
        .ok()
        .filter(|d| *d > 0)
        .ok_or_else(|| invalid_argument(message))
}

/// A PutBucketLifecycleConfiguration body.
pub fn parse_lifecycle_configuration(bytes: &[u8]) -> Result<Vec<LifecycleRule>, LifecycleError> {
    let root = parse_document(bytes)?;
    if root.name != "LifecycleConfiguration" {
        return Err(LifecycleError::Malformed);
    }
    only(&root, &["Rule"])?;
    if root.children.is_empty() {
        return Err(LifecycleError::Malformed);
    }
    if root.children.len() > MAX_RULES {
        return Err(LifecycleError::InvalidRequest(
            "The number of lifecycle rules must not exceed the allowed limit of 1000 rules.",
        ));
    }
    let rules = root
        .children
        .iter()
        .map(parse_rule)
        .collect::<Result<Vec<_>, _>>()?;
    for (n, rule) in rules.iter().enumerate() {
        if rules[..n].iter().any(|earlier| earlier.id == rule.id) {
            return Err(invalid_argument(
                "Rule ID must be unique. Found same ID for more than one rule",
            ));
        }
    }
    Ok(rules)
}

fn parse_rule(rule: &Element) -> Result<LifecycleRule, LifecycleError> {
    if rule
        .children
        .iter()
        .any(|c| c.name == "Transition" || c.name == "NoncurrentVersionTransition")
    {
        return Err(LifecycleError::Transition);
    }
    only(
        rule,
        &[
            "ID",
            "Prefix",
            "Filter",
            "Status",
            "Expiration",
            "NoncurrentVersionExpiration",
            "AbortIncompleteMultipartUpload",
        ],
    )?;
    let id = match leaf(rule, "ID")? {
        Some(id) if id.len() > MAX_ID_LEN => {
            return Err(invalid_argument(
                "ID length should not exceed allowed limit of 255",
            ))
        }
        Some(id) if !id.is_empty() => id.to_string(),
        _ => made_id(),
    };
    let enabled = match leaf(rule, "Status")? {
        Some("Enabled") => true,
        Some("Disabled") => false,
        _ => return Err(LifecycleError::Malformed),
    };
    let filter = match (leaf(rule, "Prefix")?, optional(rule, "Filter")?) {
        (Some(prefix), None) => LifecycleFilter {
            shape: FilterShape::RulePrefix,
            prefix: Some(prefix.to_string()),
            ..LifecycleFilter::everything()
        },
        (None, Some(filter)) => parse_filter(filter)?,
        _ => return Err(LifecycleError::Malformed),
    };
    let expiration = optional(rule, "Expiration")?
        .map(parse_expiration)
        .transpose()?;
    let noncurrent_expiration = optional(rule, "NoncurrentVersionExpiration")?
        .map(parse_noncurrent_expiration)
        .transpose()?;
    let abort_incomplete_upload_days = match optional(rule, "AbortIncompleteMultipartUpload")? {
        None => None,
        Some(abort) => {
            only(abort, &["DaysAfterInitiation"])?;
            let days = leaf(abort, "DaysAfterInitiation")?.ok_or(LifecycleError::Malformed)?;
            Some(positive_days(
                days,
                "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer",
            )?)
        }
    };
    if expiration.is_none()
        && noncurrent_expiration.is_none()
        && abort_incomplete_upload_days.is_none()
    {
        return Err(LifecycleError::InvalidRequest(
            "At least one action needs to be specified in a rule",
        ));
    }
    let sized = filter.size_greater_than.is_some() || filter.size_less_than.is_some();
    if matches!(expiration, Some(Expiration::ExpiredObjectDeleteMarker(_))) {
        if !filter.tags.is_empty() {
            return Err(LifecycleError::InvalidRequest(
                "ExpiredObjectDeleteMarker cannot be specified with Tags.",
            ));
        }
        if sized {
            return Err(LifecycleError::InvalidRequest(
                "ExpiredObjectDeleteMarker cannot be specified with Object Size.",
            ));
        }
    }
    if abort_incomplete_upload_days.is_some() {
        if !filter.tags.is_empty() {
            return Err(LifecycleError::InvalidRequest(
                "AbortIncompleteMultipartUpload cannot be specified with Tags.",
            ));
        }
        if sized {
            return Err(LifecycleError::InvalidRequest(
                "AbortIncompleteMultipartUpload cannot be specified with Object Size.",
            ));
        }
    }
    Ok(LifecycleRule {
        id,
        enabled,
        filter,
        expiration,
        noncurrent_expiration,
        abort_incomplete_upload_days,
    })
}

/// An ID for a rule put without one, as S3 makes one up.
fn made_id() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), MADE_ID_LEN)
}

/// A `Filter`: empty, one condition, or an `And` of several.
fn parse_filter(filter: &Element) -> Result<LifecycleFilter, LifecycleError> {
    match filter.children.as_slice() {
        [] => Ok(LifecycleFilter::everything()),
        [and] if and.name == "And" => {
            let mut parsed = conditions(and)?;
            parsed.shape = FilterShape::And;
            Ok(parsed)
        }
        [_] => conditions(filter),
        _ => Err(LifecycleError::Malformed),
    }
}

/// The conditions that are children of `element`.
fn conditions(element: &Element) -> Result<LifecycleFilter, LifecycleError> {
    only(
        element,
        &[
            "Prefix",
            "Tag",
            "ObjectSizeGreaterThan",
            "ObjectSizeLessThan",
        ],
    )?;
    let size = |name| -> Result<Option<u64>, LifecycleError> {
        leaf(element, name)?
            .map(|text| {
                let size: u64 = text.parse().map_err(|_| LifecycleError::Malformed)?;
                if size > MAX_FILTER_SIZE {
                    return Err(LifecycleError::InvalidRequest(
                        "'ObjectSizeLessThan' should be between 1 and 1099511627776000.",
                    ));
                }
                Ok(size)
            })
            .transpose()
    };
    let mut tags: Vec<(String, String)> = Vec::new();
    for tag in element.children.iter().filter(|c| c.name == "Tag") {
        only(tag, &["Key", "Value"])?;
        let key = leaf(tag, "Key")?.ok_or(LifecycleError::Malformed)?;
        let value = leaf(tag, "Value")?.unwrap_or("");
        if tags.iter().any(|(k, _)| k == key) {
            return Err(LifecycleError::InvalidRequest(
                "Duplicate Tag Keys are not allowed.",
            ));
        }
        tags.push((key.to_string(), value.to_string()));
    }
    let filter = LifecycleFilter {
        shape: FilterShape::Single,
        prefix: leaf(element, "Prefix")?.map(str::to_string),
        tags,
        size_greater_than: size("ObjectSizeGreaterThan")?,
        size_less_than: size("ObjectSizeLessThan")?,
    };
    if let (Some(more), Some(less)) = (filter.size_greater_than, filter.size_less_than) {
        if more >= less {
            return Err(LifecycleError::InvalidRequest(
                "'ObjectSizeLessThan' has to be a value greater than 'ObjectSizeGreaterThan'.",
            ));
        }
    }
    Ok(filter)
}

fn parse_expiration(expiration: &Element) -> Result<Expiration, LifecycleError> {
    only(expiration, &["Days", "Date", "ExpiredObjectDeleteMarker"])?;
    let (days, date, marker) = (
        leaf(expiration, "Days")?,
        leaf(expiration, "Date")?,
        leaf(expiration, "ExpiredObjectDeleteMarker")?,
    );
    match (days, date, marker) {
        (Some(days), None, None) => Ok(Expiration::Days(positive_days(
            days,
            "'Days' for Expiration action must be a positive integer",
        )?)),
        (None, Some(date), None) => {
            let at = parse_iso8601(date).ok_or(LifecycleError::Malformed)?;
            if at.rem_euclid(DAY_MS) != 0 {
                return Err(LifecycleError::InvalidArgument {
                    message: "'Date' must be at midnight GMT",
                    name: Some("Date"),
                    value: Some(date.to_string()),
                });
            }
            Ok(Expiration::Date(at))
        }
        (None, None, Some(marker)) => match marker {
            "true" => Ok(Expiration::ExpiredObjectDeleteMarker(true)),
            "false" => Ok(Expiration::ExpiredObjectDeleteMarker(false)),
            _ => Err(LifecycleError::Malformed),
        },
        _ => Err(LifecycleError::Malformed),
    }
}

fn parse_noncurrent_expiration(element: &Element) -> Result<NoncurrentExpiration, LifecycleError> {
    only(element, &["NoncurrentDays", "NewerNoncurrentVersions"])?;
    if element.children.is_empty() {
        return Err(LifecycleError::Malformed);
    }
    let days_message =
        "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer";
    let days = leaf(element, "NoncurrentDays")?.ok_or_else(|| invalid_argument(days_message))?;
    let newer_versions = leaf(element, "NewerNoncurrentVersions")?
        .map(|n| {
            positive_days(
                n,
                "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a positive integer",
            )
        })
        .transpose()?;
    Ok(NoncurrentExpiration {
        days: positive_days(days, days_message)?,
        newer_versions,
    })
}

/// The configuration as GetBucketLifecycleConfiguration answers it.
pub fn lifecycle_configuration(rules: &[LifecycleRule]) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("LifecycleConfiguration");
    for rule in rules {
        w.open("Rule");
        w.element("ID", &rule.id);
        write_filter(&mut w, &rule.filter);
        w.element("Status", if rule.enabled { "Enabled" } else { "Disabled" });
        if let Some(expiration) = rule.expiration {
            w.open("Expiration");
            match expiration {
                Expiration::Days(days) => w.number("Days", u64::from(days)),
                Expiration::Date(at) => w.element("Date", &iso8601(at)),
                Expiration::ExpiredObjectDeleteMarker(on) => w.element(
                    "ExpiredObjectDeleteMarker",
                    if on { "true" } else { "false" },
                ),
            }
            w.close("Expiration");
        }
        if let Some(noncurrent) = rule.noncurrent_expiration {
            w.open("NoncurrentVersionExpiration");
            w.number("NoncurrentDays", u64::from(noncurrent.days));
            if let Some(newer) = noncurrent.newer_versions {
                w.number("NewerNoncurrentVersions", u64::from(newer));
            }
            w.close("NoncurrentVersionExpiration");
        }
        if let Some(days) = rule.abort_incomplete_upload_days {
            w.open("AbortIncompleteMultipartUpload");
            w.number("DaysAfterInitiation", u64::from(days));
            w.close("AbortIncompleteMultipartUpload");
        }
        w.close("Rule");
    }
    w.close("LifecycleConfiguration");
    w.finish()
}

fn write_filter(w: &mut XmlWriter, filter: &LifecycleFilter) {
    if filter.shape == FilterShape::RulePrefix {
        w.element("Prefix", filter.prefix.as_deref().unwrap_or(""));
        return;
    }
    w.open("Filter");
    if filter.shape == FilterShape::And {
        w.open("And");
    }
    if let Some(prefix) = &filter.prefix {
        w.element("Prefix", prefix);
    }
    for (key, value) in &filter.tags {
        w.open("Tag");
        w.element("Key", key);
        w.element("Value", value);
        w.close("Tag");
    }
    if let Some(size) = filter.size_greater_than {
        w.number("ObjectSizeGreaterThan", size);
    }
    if let Some(size) = filter.size_less_than {
        w.number("ObjectSizeLessThan", size);
    }
    if filter.shape == FilterShape::And {
        w.close("And");
    }
    w.close("Filter");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(rules: &str) -> Result<Vec<LifecycleRule>, LifecycleError> {
        parse_lifecycle_configuration(
            format!("<LifecycleConfiguration>{rules}</LifecycleConfiguration>").as_bytes(),
        )
    }

    fn one(rule: &str) -> Result<LifecycleRule, LifecycleError> {
        parse(&format!("<Rule>{rule}</Rule>")).map(|mut rules| rules.remove(0))
    }

    const ON: &str = "<Status>Enabled</Status>";

    #[test]
    fn every_filter_form_round_trips() {
        let bodies = [
            "<ID>a</ID><Filter></Filter><Status>Enabled</Status><Expiration><Days>3</Days></Expiration>",
            "<ID>b</ID><Prefix>logs/</Prefix><Status>Disabled</Status><Expiration><Date>2030-01-01T00:00:00.000Z</Date></Expiration>",
            "<ID>c</ID><Filter><Prefix></Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>3</NewerNoncurrentVersions></NoncurrentVersionExpiration>",
            "<ID>d</ID><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>",
            "<ID>e</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value></Value></Tag><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>20</ObjectSizeLessThan></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>",
            "<ID>f</ID><Filter><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration>",
            "<ID>g</ID><Filter><Prefix>tmp/</Prefix></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration><AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation></AbortIncompleteMultipartUpload>",
        ];
        let all: String = bodies.iter().map(|b| format!("<Rule>{b}</Rule>")).collect();
        let rules = parse(&all).unwrap();
        assert_eq!(rules.len(), bodies.len());
        let written = String::from_utf8(lifecycle_configuration(&rules)).unwrap();
        for body in bodies {
            let body = body
                .replace("<Value></Value>", "<Value/>")
                .replace("<Prefix></Prefix>", "<Prefix/>");
            assert!(
                written.contains(&format!("<Rule>{body}</Rule>")),
                "{body}\n{written}"
            );
        }
        assert_eq!(
            parse_lifecycle_configuration(&written.into_bytes()),
            Ok(rules.clone())
        );
        assert_eq!(rules[4].filter.shape, FilterShape::And);
        assert_eq!(rules[4].filter.tags.len(), 2);
        assert_eq!(rules[1].filter.shape, FilterShape::RulePrefix);
        assert!(!rules[1].enabled);
        assert_eq!(rules[3].filter.shape, FilterShape::Single);
    }

    #[test]
    fn rules_without_an_id_get_one() {
        let a = one(&format!(
            "<Filter/>{ON}<Expiration><Days>1</Days></Expiration>"
        ))
        .unwrap();
        let b = one(&format!(
            "<Filter/>{ON}<Expiration><Days>1</Days></Expiration>"
        ))
        .unwrap();
        assert_eq!(a.id.len(), MADE_ID_LEN);
        assert_ne!(a.id, b.id);
    }

    #[test]
    fn refusals_match_s3() {
        use LifecycleError::*;
        let days = |d: &str| format!("<Expiration><Days>{d}</Days></Expiration>");
        let malformed = [
            format!("<ID>x</ID>{ON}{}", days("1")),
            format!("<Prefix/><Filter/>{ON}{}", days("1")),
            format!("<Filter/><Status>enabled</Status>{}", days("1")),
            format!("<Filter/>{}", days("1")),
            format!("<Filter/>{ON}<Expiration/>"),
            format!("<Filter/>{ON}<Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>"),
            format!("<Filter/>{ON}<Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"),
            format!("<Filter/>{ON}<Expiration><Days>x</Days></Expiration>"),
            format!("<Filter/>{ON}<NoncurrentVersionExpiration/>"),
            format!("<Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>{ON}{}", days("1")),
            format!("<Filter><And><Prefix>a</Prefix></And><Prefix>b</Prefix></Filter>{ON}{}", days("1")),
            format!("<Filter><Unknown/></Filter>{ON}{}", days("1")),
            format!("<Filter/>{ON}{}<Other/>", days("1")),
        ];
        for body in malformed {
            assert_eq!(one(&body), Err(Malformed), "{body}");
        }
        assert_eq!(parse(""), Err(Malformed));
        let argument = |message| InvalidArgument {
            message,
            name: None,
            value: None,
        };
        let cases = [
            (
                format!("<Filter/>{ON}{}", days("0")),
                argument("'Days' for Expiration action must be a positive integer"),
            ),
            (
                format!("<ID>{}</ID><Filter/>{ON}{}", "i".repeat(256), days("1")),
                argument("ID length should not exceed allowed limit of 255"),
            ),
            (
                format!("<Filter/>{ON}<NoncurrentVersionExpiration><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration>"),
                argument("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer"),
            ),
            (
                format!("<Filter/>{ON}<AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
                argument("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer"),
            ),
            (
                format!("<Filter/>{ON}<Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration>"),
                InvalidArgument {
                    message: "'Date' must be at midnight GMT",
                    name: Some("Date"),
                    value: Some("2030-01-01T10:00:00Z".into()),
                },
            ),
            (
                format!("<Filter/>{ON}"),
                InvalidRequest("At least one action needs to be specified in a rule"),
            ),
            (
                format!("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>{ON}<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"),
                InvalidRequest("ExpiredObjectDeleteMarker cannot be specified with Tags."),
            ),
            (
                format!("<Filter><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan></Filter>{ON}<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"),
                InvalidRequest("ExpiredObjectDeleteMarker cannot be specified with Object Size."),
            ),
            (
                format!("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>{ON}<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
                InvalidRequest("AbortIncompleteMultipartUpload cannot be specified with Tags."),
            ),
            (
                format!("<Filter><ObjectSizeLessThan>9</ObjectSizeLessThan></Filter>{ON}<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
                InvalidRequest("AbortIncompleteMultipartUpload cannot be specified with Object Size."),
            ),
            (
                format!("<Filter><And><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>k</Key><Value>w</Value></Tag></And></Filter>{ON}{}", days("1")),
                InvalidRequest("Duplicate Tag Keys are not allowed."),
            ),
            (
                format!("<Filter><And><ObjectSizeGreaterThan>9</ObjectSizeGreaterThan><ObjectSizeLessThan>9</ObjectSizeLessThan></And></Filter>{ON}{}", days("1")),
                InvalidRequest("'ObjectSizeLessThan' has to be a value greater than 'ObjectSizeGreaterThan'."),
            ),
            (
                format!("<Filter/>{ON}<Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition>"),
                Transition,
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(one(&body), Err(expected), "{body}");
        }
        let twice = format!("<Rule><ID>same</ID><Filter/>{ON}{}</Rule>", days("1"));
        assert_eq!(
            parse(&twice.repeat(2)),
            Err(argument(
                "Rule ID must be unique. Found same ID for more than one rule"
            ))
        );
        let many = format!("<Rule><Filter/>{ON}{}</Rule>", days("1")).repeat(MAX_RULES + 1);
        assert!(matches!(parse(&many), Err(InvalidRequest(_))));
    }
}
