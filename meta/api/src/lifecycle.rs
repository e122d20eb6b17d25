//! Bucket lifecycle rules as S3's LifecycleConfiguration states them, and
//! when each action falls due. Meta's lifecycle worker applies them; the
//! gateway tells a writer or reader when the object will expire
//! (`x-amz-expiration`). Both read the dates from the functions here, so
//! that what a client is told is what the worker does.

use crate::time::UnixMillis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// One rule of a bucket's lifecycle configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleRule {
    /// The rule's ID (S3 makes one up when the rule has none).
    pub id: String,
    /// Status Enabled; a Disabled rule is kept but never applied.
    pub enabled: bool,
    /// Which objects and uploads it applies to.
    pub filter: LifecycleFilter,
    /// Expiration of current versions, or of lone delete markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Expiration>,
    /// Removal of noncurrent versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncurrent_expiration: Option<NoncurrentExpiration>,
    /// Days after its initiation an incomplete multipart upload is aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_incomplete_upload_days: Option<u32>,
}

/// How a rule's filter was written, so that it is answered as it was put.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterShape {
    /// The deprecated `Prefix` beside the rule's other elements.
    RulePrefix,
    /// A `Filter` with at most one condition.
    Single,
    /// A `Filter` whose conditions are inside `And`.
    And,
}

/// The objects a rule applies to: every condition given must hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleFilter {
    /// How the filter was written.
    pub shape: FilterShape,
    /// Keys start with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Tags the object has, each with this value (in the order given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<(String, String)>,
    /// Objects larger than this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_greater_than: Option<u64>,
    /// Objects smaller than this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_less_than: Option<u64>,
}

impl LifecycleFilter {
    /// A filter that every object passes, written as an empty `Filter`.
    pub fn everything() -> Self {
        Self {
            shape: FilterShape::Single,
            prefix: None,
            tags: Vec::new(),
            size_greater_than: None,
            size_less_than: None,
        }
    }

    /// Whether a key passes the prefix condition.
    pub fn matches_key(&self, key: &str) -> bool {
        self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
    }

    /// Whether a version with this key, these tags and this size passes.
    pub fn matches(&self, key: &str, tags: &BTreeMap<String, String>, size: u64) -> bool {
        self.matches_key(key)
            && self
                .tags
                .iter()
                .all(|(k, v)| tags.get(k).is_some_and(|have| have == v))
            && self.size_greater_than.is_none_or(|min| size > min)
            && self.size_less_than.is_none_or(|max| size < max)
    }

    /// Whether the filter looks at anything but the key (tags or size).
    pub fn reads_object(&self) -> bool {
        !self.tags.is_empty() || self.size_greater_than.is_some() || self.size_less_than.is_some()
    }

    fn matches_subject(&self, subject: &Subject<'_>) -> bool {
        self.matches(subject.key, subject.tags, subject.size)
    }
}

/// What rules look at in a version (`ObjectRecord::lifecycle_subject`). A
/// delete marker has no tags and a size of 0.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    /// Its key.
    pub key: &'a str,
    /// Its tags.
    pub tags: &'a BTreeMap<String, String>,
    /// Its size in bytes.
    pub size: u64,
    /// When it was written.
    pub created: UnixMillis,
    /// Whether it is a delete marker.
    pub delete_marker: bool,
}

/// When current versions expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expiration {
    /// This many days after their creation (at the next day boundary).
    Days(u32),
    /// On this date (midnight UTC), whenever they were made.
    Date(UnixMillis),
    /// No date: only delete markers left alone (every older version of
    /// their key gone) are removed when this is true.
    ExpiredObjectDeleteMarker(bool),
}

/// When noncurrent versions are removed for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoncurrentExpiration {
    /// Days after a version became noncurrent (its successor was made).
    pub days: u32,
    /// How many newer noncurrent versions are kept whatever their age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer_versions: Option<u32>,
}

/// The length of a lifecycle "day": 24 hours, or less so that tests see
/// rules act in seconds. Due times are rounded up to a whole number of
/// days since the epoch, which for 24-hour days is S3's "next midnight UTC".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifecycleDay(i64);

impl LifecycleDay {
    /// A day of 24 hours.
    pub const REAL: LifecycleDay = LifecycleDay(24 * 3600 * 1000);

    /// A day lasting `length` (at least a millisecond).
    pub fn new(length: Duration) -> Self {
        Self(i64::try_from(length.as_millis()).unwrap_or(i64::MAX).max(1))
    }

    /// The day's length.
    pub fn length(self) -> Duration {
        Duration::from_millis(self.0 as u64)
    }

    /// The first day boundary at least `days` days after `from`.
    pub fn after(self, from: UnixMillis, days: u32) -> UnixMillis {
        let at = from.saturating_add(self.0.saturating_mul(i64::from(days)));
        let over = at.rem_euclid(self.0);
        if over == 0 {
            at
        } else {
            at.saturating_add(self.0 - over)
        }
    }
}

/// When a rule expires current version `record`, if it does.
fn expiry(rule: &LifecycleRule, record: Subject<'_>, day: LifecycleDay) -> Option<UnixMillis> {
    if !rule.enabled || record.delete_marker || !rule.filter.matches_subject(&record) {
        return None;
    }
    match rule.expiration? {
        Expiration::Days(days) => Some(day.after(record.created, days)),
        Expiration::Date(date) => Some(date),
        Expiration::ExpiredObjectDeleteMarker(_) => None,
    }
}

/// The earliest expiry of current version `record` among `rules`, with the
/// rule that sets it: what `x-amz-expiration` tells, and when the worker
/// expires the version.
pub fn current_expiry<'r>(
    rules: &'r [LifecycleRule],
    record: Subject<'_>,
    day: LifecycleDay,
) -> Option<(UnixMillis, &'r str)> {
    rules
        .iter()
        .filter_map(|rule| Some((expiry(rule, record, day)?, rule.id.as_str())))
        .min_by_key(|(at, _)| *at)
}

/// Whether a rule removes `marker`, a delete marker that is the only
/// version of its key, at `now`: ExpiredObjectDeleteMarker at once, an
/// expiration by Days once the marker is that many days old (S3 cleans such
/// markers up as well). A marker has no tags and no size (0).
pub fn removes_lone_marker(
    rules: &[LifecycleRule],
    marker: Subject<'_>,
    day: LifecycleDay,
    now: UnixMillis,
) -> bool {
    rules.iter().any(|rule| {
        rule.enabled
            && rule.filter.matches_subject(&marker)
            && match rule.expiration {
                Some(Expiration::ExpiredObjectDeleteMarker(on)) => on,
                Some(Expiration::Days(days)) => day.after(marker.created, days) <= now,
                _ => false,
            }
    })
}

/// A noncurrent version as the worker judges it.
#[derive(Clone, Copy, Debug)]
pub struct Noncurrent<'a> {
    /// The version.
    pub record: Subject<'a>,
    /// When it became noncurrent: its successor's creation.
    pub since: UnixMillis,
    /// How many noncurrent versions of its key are newer.
    pub newer: u32,
}

/// Whether a rule removes noncurrent version `version` at `now`.
pub fn noncurrent_due(
    rules: &[LifecycleRule],
    version: Noncurrent<'_>,
    day: LifecycleDay,
    now: UnixMillis,
) -> bool {
    let record = version.record;
    rules.iter().any(|rule| {
        let Some(expiration) = rule.noncurrent_expiration.filter(|_| rule.enabled) else {
            return false;
        };
        // A delete marker passes as an object without tags of size 0.
        rule.filter.matches_subject(&record)
            && day.after(version.since, expiration.days) <= now
            && expiration
                .newer_versions
                .is_none_or(|keep| version.newer >= keep)
    })
}

/// When a rule aborts an upload of `key` begun at `created`, if one does,
/// with that rule: the earliest among them.
pub fn upload_abort<'r>(
    rules: &'r [LifecycleRule],
    key: &str,
    created: UnixMillis,
    day: LifecycleDay,
) -> Option<(UnixMillis, &'r str)> {
    rules
        .iter()
        .filter(|rule| rule.enabled && rule.filter.matches_key(key))
        .filter_map(|rule| {
            let days = rule.abort_incomplete_upload_days?;
            Some((day.after(created, days), rule.id.as_str()))
        })
        .min_by_key(|(at, _)| *at)
}

/// What a lifecycle pass (one walk over every bucket that has rules) did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecyclePass {
    /// When it started.
    pub started: UnixMillis,
    /// When it ended; None while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<UnixMillis>,
    /// The bucket it is in, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// Keys and uploads looked at.
    pub examined: u64,
    /// Current versions expired (deleted, or hidden by a delete marker).
    pub expired: u64,
    /// Noncurrent versions and delete markers removed for good.
    pub removed: u64,
    /// Incomplete multipart uploads aborted.
    pub aborted: u64,
    /// Versions a rule would have removed that object lock kept.
    pub locked: u64,
    /// How often it went on where it was after meta restarted.
    pub resumed: u32,
}

/// The lifecycle worker's passes, for `tessera admin status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleStatus {
    /// The pass under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<LifecyclePass>,
    /// The last pass that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LifecyclePass>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600 * 1000;

    static NO_TAGS: BTreeMap<String, String> = BTreeMap::new();

    fn object(key: &str, size: u64, created: UnixMillis) -> Subject<'_> {
        Subject {
            key,
            tags: &NO_TAGS,
            size,
            created,
            delete_marker: false,
        }
    }

    fn rule(id: &str, filter: LifecycleFilter) -> LifecycleRule {
        LifecycleRule {
            id: id.into(),
            enabled: true,
            filter,
            expiration: None,
            noncurrent_expiration: None,
            abort_incomplete_upload_days: None,
        }
    }

    #[test]
    fn days_end_at_the_next_boundary() {
        let day = LifecycleDay::REAL;
        assert_eq!(day.after(0, 1), DAY);
        assert_eq!(day.after(1, 1), 2 * DAY);
        assert_eq!(day.after(DAY - 1, 1), 2 * DAY);
        assert_eq!(day.after(5 * DAY, 0), 5 * DAY);
        assert_eq!(day.after(5 * DAY + 1, 0), 6 * DAY);
        let short = LifecycleDay::new(Duration::from_secs(2));
        assert_eq!(short.after(2_500, 3), 10_000);
        assert_eq!(short.length(), Duration::from_secs(2));
        assert_eq!(LifecycleDay::new(Duration::ZERO).after(7, 1), 8);
    }

    #[test]
    fn filters_need_every_condition() {
        let mut tags = BTreeMap::new();
        tags.insert("k".to_string(), "v".to_string());
        let filter = LifecycleFilter {
            shape: FilterShape::And,
            prefix: Some("logs/".into()),
            tags: vec![("k".into(), "v".into())],
            size_greater_than: Some(10),
            size_less_than: Some(20),
        };
        assert!(filter.matches("logs/a", &tags, 11));
        assert!(filter.matches("logs/a", &tags, 19));
        assert!(!filter.matches("logs/a", &tags, 10), "greater is strict");
        assert!(!filter.matches("logs/a", &tags, 20), "less is strict");
        assert!(!filter.matches("log/a", &tags, 15));
        assert!(!filter.matches("logs/a", &BTreeMap::new(), 15));
        let mut other = tags.clone();
        other.insert("k".into(), "w".into());
        assert!(!filter.matches("logs/a", &other, 15));
        assert!(filter.reads_object());
        assert!(LifecycleFilter::everything().matches("", &BTreeMap::new(), 0));
        assert!(!LifecycleFilter::everything().reads_object());
    }

    #[test]
    fn the_earliest_enabled_expiry_wins() {
        let mut by_days = rule("days", LifecycleFilter::everything());
        by_days.expiration = Some(Expiration::Days(3));
        let mut by_date = rule("date", LifecycleFilter::everything());
        by_date.expiration = Some(Expiration::Date(2 * DAY));
        let record = object("a", 1, 10);
        let rules = [by_days.clone(), by_date.clone()];
        assert_eq!(
            current_expiry(&rules, record, LifecycleDay::REAL),
            Some((2 * DAY, "date"))
        );
        by_date.enabled = false;
        let rules = [by_days.clone(), by_date];
        assert_eq!(
            current_expiry(&rules, record, LifecycleDay::REAL),
            Some((4 * DAY, "days"))
        );
        let mut marker = record;
        marker.delete_marker = true;
        assert_eq!(current_expiry(&rules, marker, LifecycleDay::REAL), None);
        let mut markers_only = rule("m", LifecycleFilter::everything());
        markers_only.expiration = Some(Expiration::ExpiredObjectDeleteMarker(true));
        assert_eq!(
            current_expiry(&[markers_only.clone()], record, LifecycleDay::REAL),
            None
        );
        let real = LifecycleDay::REAL;
        assert!(removes_lone_marker(
            &[markers_only.clone()],
            marker,
            real,
            10
        ));
        assert!(!removes_lone_marker(
            &[by_days.clone()],
            marker,
            real,
            4 * DAY - 1
        ));
        assert!(removes_lone_marker(&[by_days], marker, real, 4 * DAY));
        markers_only.expiration = Some(Expiration::ExpiredObjectDeleteMarker(false));
        assert!(!removes_lone_marker(&[markers_only], marker, real, 10));
    }

    #[test]
    fn noncurrent_versions_by_age_and_count() {
        let mut keep_two = rule("nc", LifecycleFilter::everything());
        keep_two.noncurrent_expiration = Some(NoncurrentExpiration {
            days: 1,
            newer_versions: Some(2),
        });
        let rules = [keep_two];
        let record = object("a", 1, 0);
        let at = |newer, now| {
            noncurrent_due(
                &rules,
                Noncurrent {
                    record,
                    since: 10,
                    newer,
                },
                LifecycleDay::REAL,
                now,
            )
        };
        assert!(!at(2, 2 * DAY - 1), "not old enough");
        assert!(at(2, 2 * DAY), "old enough, two newer kept");
        assert!(!at(1, 5 * DAY), "one of the two newest noncurrent");
        let mut marker = object("a", 0, 0);
        marker.delete_marker = true;
        let mut tagged = rules[0].clone();
        tagged.filter.tags = vec![("k".into(), "v".into())];
        let version = Noncurrent {
            record: marker,
            since: 0,
            newer: 5,
        };
        assert!(noncurrent_due(&rules, version, LifecycleDay::REAL, DAY));
        assert!(!noncurrent_due(&[tagged], version, LifecycleDay::REAL, DAY));
    }

    #[test]
    fn uploads_abort_by_prefix() {
        let mut abort = rule(
            "abort",
            LifecycleFilter {
                prefix: Some("tmp/".into()),
                ..LifecycleFilter::everything()
            },
        );
        abort.abort_incomplete_upload_days = Some(2);
        let rules = [abort];
        assert_eq!(
            upload_abort(&rules, "tmp/x", 1, LifecycleDay::REAL),
            Some((3 * DAY, "abort"))
        );
        assert_eq!(upload_abort(&rules, "keep/x", 1, LifecycleDay::REAL), None);
    }
}
