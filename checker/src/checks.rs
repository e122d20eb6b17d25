//! Every check over a whole history, and what it found.

use crate::history::{History, Op, Operation, Outcome, Value, Version};
use crate::linearizable::{linearizability, shrink, Verdict, SEARCH_LIMIT};
use std::collections::BTreeMap;
use std::fmt;

/// Something the store did that it promised not to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// No order of the key's operations explains every answer: a stale or
    /// phantom read, a lost acknowledged write, a write taking effect
    /// after it was refused. `operations` is a smallest such part.
    NotLinearizable {
        /// The key.
        key: String,
        /// A smallest non-linearizable part of its history.
        operations: Vec<Operation>,
    },
    /// Two writes succeeded on the same `If-Match` precondition.
    TwoWinners {
        /// The key.
        key: String,
        /// The value both matched.
        expected: Value,
        /// The successful writes.
        operations: Vec<Operation>,
    },
    /// Listings of a key's versions that no single order of versions
    /// explains, or that lost an acknowledged write or showed one that
    /// never happened.
    Versions {
        /// The key.
        key: String,
        /// What went wrong.
        what: &'static str,
        /// The operations that show it.
        operations: Vec<Operation>,
    },
}

/// Anomalies a report prints in full; it counts the rest.
const SHOWN_ANOMALIES: usize = 10;

/// What the checks found over a history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Operations checked.
    pub operations: usize,
    /// Keys they touched.
    pub keys: usize,
    /// How many operations of each kind ended each way ("put_if_match
    /// precondition_failed": 12).
    pub outcomes: BTreeMap<String, usize>,
    /// Everything that went wrong; empty when the history passes.
    pub anomalies: Vec<Anomaly>,
    /// Keys whose search gave up: neither passed nor failed.
    pub undecided: Vec<String>,
}

impl Report {
    /// Whether every check passed on every key.
    pub fn passed(&self) -> bool {
        self.anomalies.is_empty() && self.undecided.is_empty()
    }
}

/// Runs every check over `history`.
pub fn check(history: &History) -> Report {
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    let mut outcomes = BTreeMap::new();
    for operation in &history.operations {
        by_key.entry(&operation.key).or_default().push(operation);
        *outcomes.entry(kind(operation)).or_insert(0) += 1;
    }
    let (mut anomalies, mut undecided) = (Vec::new(), Vec::new());
    for (key, ops) in &by_key {
        anomalies.extend(two_winners(key, ops));
        anomalies.extend(version_order(key, ops));
        match linearizability(ops) {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable => anomalies.push(Anomaly::NotLinearizable {
                key: key.to_string(),
                operations: shrink(ops).into_iter().cloned().collect(),
            }),
            Verdict::Undecided => undecided.push(key.to_string()),
        }
    }
    Report {
        operations: history.operations.len(),
        keys: by_key.len(),
        outcomes,
        anomalies,
        undecided,
    }
}

/// `If-Match` writes that succeeded on a value another one also replaced.
fn two_winners(key: &str, ops: &[&Operation]) -> Vec<Anomaly> {
    let mut winners: BTreeMap<Value, Vec<Operation>> = BTreeMap::new();
    for op in ops {
        if let (Op::PutIfMatch { expected, .. }, Outcome::Done) = (op.op, op.outcome) {
            winners.entry(expected).or_default().push((*op).clone());
        }
    }
    winners
        .into_iter()
        .filter(|(_, won)| won.len() > 1)
        .map(|(expected, operations)| Anomaly::TwoWinners {
            key: key.to_string(),
            expected,
            operations,
        })
        .collect()
}

/// What the listings of a key's versions show, checked against one
/// order: versions are only ever added (the workload removes none), so
/// every listing, oldest first, must be a prefix of the longest one (one
/// order for every reader, each version id holding one value); a listing
/// begun after another ended shows at least as much; one begun after a
/// write or delete was acknowledged shows its version or marker; no
/// listing shows a value no write could have made; and a GET of one
/// version reads what the listings show for it, once listed.
fn version_order(key: &str, ops: &[&Operation]) -> Vec<Anomaly> {
    let listings: Vec<(&Operation, &[Version])> = ops
        .iter()
        .filter(|op| op.op == Op::ListVersions)
        .filter_map(|op| Some((*op, op.versions.as_deref()?)))
        .collect();
    let Some(&(longest_op, longest)) = listings.iter().max_by_key(|(_, versions)| versions.len())
    else {
        return Vec::new();
    };
    let found = |what, operations: &[&Operation]| Anomaly::Versions {
        key: key.to_string(),
        what,
        operations: operations.iter().map(|op| (*op).clone()).collect(),
    };
    let mut anomalies = Vec::new();
    if let Some((op, _)) = listings
        .iter()
        .find(|(_, versions)| !longest.starts_with(versions))
    {
        anomalies.push(found(
            "two listings show versions in different orders",
            &[op, longest_op],
        ));
    }
    let ids: std::collections::HashSet<&str> = longest.iter().map(|v| v.id.as_str()).collect();
    if ids.len() < longest.len() {
        anomalies.push(found("a listing shows one version twice", &[longest_op]));
    }
    for &(later, versions) in &listings {
        let before = |op: &Operation| op.completed_ns < later.invoked_ns;
        if let Some((earlier, _)) = listings
            .iter()
            .find(|(op, shown)| before(op) && shown.len() > versions.len())
        {
            anomalies.push(found(
                "a listing lost versions an earlier one showed",
                &[earlier, later],
            ));
        }
        for write in ops.iter().filter(|op| before(op)) {
            if write.outcome != Outcome::Done {
                continue;
            }
            let Some(value) = write.op.written() else {
                continue;
            };
            if !versions.iter().any(|v| v.value == Some(value)) {
                anomalies.push(found(
                    "an acknowledged write is missing from a later listing",
                    &[write, later],
                ));
            }
        }
        let deletes = ops
            .iter()
            .filter(|op| before(op) && op.op == Op::Delete && op.outcome == Outcome::Done)
            .count();
        let markers = versions.iter().filter(|v| v.value.is_none()).count();
        if markers < deletes {
            anomalies.push(found(
                "acknowledged deletes left fewer delete markers",
                &[later],
            ));
        }
    }
    let possible: std::collections::HashSet<Value> = ops
        .iter()
        .filter(|op| matches!(op.outcome, Outcome::Done | Outcome::Unknown))
        .filter_map(|op| op.op.written())
        .collect();
    let made_by_nobody = |v: &Version| v.value.is_some_and(|value| !possible.contains(&value));
    if let Some((op, _)) = listings
        .iter()
        .find(|(_, versions)| versions.iter().any(made_by_nobody))
    {
        anomalies.push(found("a version holds a value no write made", &[op]));
    }
    for read in ops.iter().filter(|op| op.op == Op::GetVersion) {
        let Some([version]) = read.versions.as_deref() else {
            continue;
        };
        if made_by_nobody(version) {
            anomalies.push(found("a version holds a value no write made", &[read]));
        }
        let showing = listings.iter().filter_map(|(op, versions)| {
            Some((*op, versions.iter().find(|v| v.id == version.id)?))
        });
        for (listing, listed) in showing {
            if version.value.is_some() && version.value != listed.value {
                anomalies.push(found(
                    "a version read holds another value than listed",
                    &[listing, read],
                ));
            }
            if version.value.is_none() && listing.completed_ns < read.invoked_ns {
                anomalies.push(found(
                    "a version listed before could not be read",
                    &[listing, read],
                ));
            }
        }
    }
    // One example of each kind is enough to tell.
    let mut kinds = std::collections::HashSet::new();
    anomalies.retain(|a| matches!(a, Anomaly::Versions { what, .. } if kinds.insert(*what)));
    anomalies
}

/// "op outcome", as the report counts them.
fn kind(operation: &Operation) -> String {
    let op = serde_json::to_value(operation.op).ok();
    let outcome = serde_json::to_value(operation.outcome).ok();
    let name = |v: Option<serde_json::Value>, field: &str| {
        v.and_then(|v| v.get(field)?.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let outcome = match operation.outcome {
        Outcome::Read { value: None } => "not_found".to_string(),
        _ => name(outcome, "outcome"),
    };
    let via = if operation.multipart {
        " multipart"
    } else {
        ""
    };
    format!("{}{via} {}", name(op, "op"), outcome)
}

/// One operation on a line: process, interval in ms from the run's start,
/// what was asked and what came back.
pub struct Line<'a>(pub &'a Operation);

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        let ms = |ns: u64| ns as f64 / 1e6;
        let op = match o.op {
            Op::Put { value } => format!("put {value}"),
            Op::PutIfAbsent { value } => format!("put {value} if absent"),
            Op::PutIfMatch { expected, value } => format!("put {value} if {expected}"),
            Op::Delete => "delete".to_string(),
            Op::Get => "get".to_string(),
            Op::List => "list".to_string(),
            Op::GetVersion => match o.versions.as_deref() {
                Some([version]) => format!("get version {}", version.id),
                _ => "get version".to_string(),
            },
            Op::ListVersions => match &o.versions {
                Some(versions) => format!("list versions {}", Versions(versions)),
                None => "list versions".to_string(),
            },
        };
        let op = if o.multipart {
            format!("{op} (multipart)")
        } else {
            op
        };
        let outcome = match o.outcome {
            Outcome::Done => "ok".to_string(),
            Outcome::PreconditionFailed => "412 precondition failed".to_string(),
            Outcome::NotFound => "404 no such key".to_string(),
            Outcome::Refused => "409 refused".to_string(),
            Outcome::Read { value: Some(v) } => format!("read {v}"),
            Outcome::Read { value: None } => "read nothing (404)".to_string(),
            Outcome::Unknown => "no answer".to_string(),
        };
        write!(
            f,
            "process {:>3}  {:>10.3} .. {:>10.3} ms  {op:<22} -> {outcome}",
            o.process,
            ms(o.invoked_ns),
            ms(o.completed_ns)
        )
    }
}

/// Versions oldest first by value, `-` for a delete marker.
struct Versions<'a>(&'a [Version]);

impl fmt::Display for Versions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self
            .0
            .iter()
            .map(|v| v.value.map_or("-".to_string(), |value| value.to_string()))
            .collect();
        write!(f, "[{}]", shown.join(" "))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} operations on {} keys", self.operations, self.keys)?;
        for (kind, count) in &self.outcomes {
            writeln!(f, "  {kind:<46} {count:>8}")?;
        }
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for anomaly in &self.anomalies {
            let kind = match anomaly {
                Anomaly::NotLinearizable { .. } => "not linearizable",
                Anomaly::TwoWinners { .. } => "two writes won one If-Match",
                Anomaly::Versions { what, .. } => what,
            };
            *kinds.entry(kind).or_insert(0) += 1;
        }
        for (kind, count) in &kinds {
            writeln!(f, "  anomalies: {kind:<44} {count:>6}")?;
        }
        for anomaly in self.anomalies.iter().take(SHOWN_ANOMALIES) {
            let (title, operations) = match anomaly {
                Anomaly::NotLinearizable { key, operations } => (
                    format!("key {key}: not linearizable; a smallest failing part:"),
                    operations,
                ),
                Anomaly::TwoWinners {
                    key,
                    expected,
                    operations,
                } => (
                    format!(
                        "key {key}: {} writes won If-Match on {expected}:",
                        operations.len()
                    ),
                    operations,
                ),
                Anomaly::Versions {
                    key,
                    what,
                    operations,
                } => (format!("key {key}: {what}:"), operations),
            };
            writeln!(f, "ANOMALY {title}")?;
            for op in operations {
                writeln!(f, "  {}", Line(op))?;
            }
        }
        for key in &self.undecided {
            writeln!(
                f,
                "UNDECIDED key {key}: the search gave up after {SEARCH_LIMIT} states"
            )?;
        }
        if self.anomalies.len() > SHOWN_ANOMALIES {
            writeln!(f, "... and {} more", self.anomalies.len() - SHOWN_ANOMALIES)?;
        }
        match (self.anomalies.len(), self.undecided.len()) {
            (0, 0) => writeln!(
                f,
                "PASSED: every key linearizable, one winner per precondition, versions in one order"
            ),
            (0, n) => writeln!(f, "UNDECIDED: {n} keys"),
            (n, _) => writeln!(f, "FAILED: {n} anomalies"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(process: u32, key: &str, op: Op, at: u64, outcome: Outcome) -> Operation {
        Operation::new(
            process,
            key.into(),
            op,
            at * 1_000_000,
            at * 1_000_000 + 500_000,
            outcome,
        )
    }

    #[test]
    fn a_history_with_one_bad_key_names_that_key_alone() {
        let history = History {
            operations: vec![
                op(0, "a", Op::Put { value: 1 }, 0, Outcome::Done),
                op(1, "a", Op::Get, 1, Outcome::Read { value: Some(1) }),
                op(0, "b", Op::Put { value: 2 }, 2, Outcome::Done),
                op(1, "b", Op::Get, 3, Outcome::Read { value: None }),
                op(
                    2,
                    "b",
                    Op::PutIfMatch {
                        expected: 2,
                        value: 3,
                    },
                    4,
                    Outcome::Done,
                ),
                op(
                    3,
                    "b",
                    Op::PutIfMatch {
                        expected: 2,
                        value: 4,
                    },
                    5,
                    Outcome::Done,
                ),
            ],
        };
        let report = check(&history);
        assert!(!report.passed());
        assert_eq!(report.keys, 2);
        assert_eq!(report.outcomes["get not_found"], 1);
        assert_eq!(report.outcomes["put_if_match done"], 2);
        assert!(report
            .anomalies
            .iter()
            .all(|a| matches!(a, Anomaly::NotLinearizable { key, .. } | Anomaly::TwoWinners { key, .. } if key == "b")));
        assert!(report
            .anomalies
            .iter()
            .any(|a| matches!(a, Anomaly::TwoWinners { expected: 2, .. })));
        let text = report.to_string();
        assert!(text.contains("key b: not linearizable"), "{text}");
        assert!(
            text.contains("anomalies: two writes won one If-Match"),
            "{text}"
        );
        assert!(text.contains("read nothing (404)"), "{text}");
        assert!(text.ends_with("FAILED: 2 anomalies\n"), "{text}");
    }

    /// A listing of `key`'s versions at `at`, oldest first (None: a delete
    /// marker); the latest is the read.
    fn listed(key: &str, at: u64, values: &[Option<Value>]) -> Operation {
        let versions = values
            .iter()
            .enumerate()
            .map(|(i, value)| Version {
                id: value.map_or(format!("marker{i}"), |v| format!("id{v}")),
                value: *value,
            })
            .collect();
        let latest = values.last().copied().flatten();
        Operation {
            versions: Some(versions),
            ..op(
                9,
                key,
                Op::ListVersions,
                at,
                Outcome::Read { value: latest },
            )
        }
    }

    fn versions_anomalies(operations: Vec<Operation>) -> Vec<&'static str> {
        check(&History { operations })
            .anomalies
            .into_iter()
            .filter_map(|a| match a {
                Anomaly::Versions { what, .. } => Some(what),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn listings_of_versions_must_agree_on_one_order_and_keep_every_write() {
        let put = |at, value| op(0, "v", Op::Put { value }, at, Outcome::Done);
        let fine = vec![
            put(0, 1),
            listed("v", 1, &[Some(1)]),
            put(2, 2),
            op(0, "v", Op::Delete, 3, Outcome::Done),
            listed("v", 4, &[Some(1), Some(2), None]),
        ];
        assert_eq!(versions_anomalies(fine.clone()), Vec::<&str>::new());
        assert!(check(&History { operations: fine }).passed());

        let reordered = vec![
            put(0, 1),
            put(1, 2),
            listed("v", 2, &[Some(1), Some(2)]),
            listed("v", 3, &[Some(2), Some(1)]),
        ];
        assert_eq!(
            versions_anomalies(reordered),
            ["two listings show versions in different orders"]
        );

        let lost = vec![put(0, 1), put(1, 2), listed("v", 2, &[Some(2)])];
        assert_eq!(
            versions_anomalies(lost),
            ["an acknowledged write is missing from a later listing"]
        );

        let shrunk = vec![put(0, 1), listed("v", 1, &[Some(1)]), listed("v", 2, &[])];
        let found = versions_anomalies(shrunk);
        assert!(
            found.contains(&"a listing lost versions an earlier one showed"),
            "{found:?}"
        );

        let no_marker = vec![
            put(0, 1),
            op(0, "v", Op::Delete, 1, Outcome::Done),
            listed("v", 2, &[Some(1)]),
        ];
        assert_eq!(
            versions_anomalies(no_marker),
            ["acknowledged deletes left fewer delete markers"]
        );

        let refused = op(
            0,
            "v",
            Op::PutIfAbsent { value: 2 },
            1,
            Outcome::PreconditionFailed,
        );
        let phantom = vec![put(0, 1), refused, listed("v", 2, &[Some(1), Some(2)])];
        assert_eq!(
            versions_anomalies(phantom),
            ["a version holds a value no write made"]
        );

        let read_version = |at, id: &str, value| Operation {
            versions: Some(vec![Version {
                id: id.into(),
                value,
            }]),
            ..op(8, "v", Op::GetVersion, at, Outcome::Read { value })
        };
        let readable = vec![
            put(0, 1),
            put(1, 2),
            listed("v", 2, &[Some(1), Some(2)]),
            read_version(3, "id1", Some(1)),
        ];
        assert_eq!(versions_anomalies(readable.clone()), Vec::<&str>::new());
        assert!(check(&History {
            operations: readable
        })
        .passed());
        let swapped = vec![
            put(0, 1),
            put(1, 2),
            listed("v", 2, &[Some(1), Some(2)]),
            read_version(3, "id1", Some(2)),
        ];
        assert_eq!(
            versions_anomalies(swapped),
            ["a version read holds another value than listed"]
        );
        let vanished = vec![
            put(0, 1),
            listed("v", 1, &[Some(1)]),
            read_version(2, "id1", None),
        ];
        assert_eq!(
            versions_anomalies(vanished),
            ["a version listed before could not be read"]
        );

        let text = check(&History {
            operations: vec![put(0, 1), put(1, 2), listed("v", 2, &[Some(2)])],
        })
        .to_string();
        assert!(text.contains("list versions [2]"), "{text}");
    }
}
