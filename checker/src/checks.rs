//! Every check over a whole history, and what it found.

use crate::history::{History, Op, Operation, Outcome, Value};
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
    format!("{} {}", name(op, "op"), outcome)
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

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} operations on {} keys", self.operations, self.keys)?;
        for (kind, count) in &self.outcomes {
            writeln!(f, "  {kind:<36} {count:>8}")?;
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
                "PASSED: every key linearizable, one winner per precondition"
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
        Operation {
            process,
            key: key.into(),
            op,
            invoked_ns: at * 1_000_000,
            completed_ns: at * 1_000_000 + 500_000,
            outcome,
        }
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
        assert!(text.contains("read nothing (404)"), "{text}");
        assert!(text.ends_with("FAILED: 2 anomalies\n"), "{text}");
    }
}
