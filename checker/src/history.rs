//! A history: every operation the clients ran, with when it was invoked,
//! when it completed and what it returned.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// A value written to a key: unique across the whole run, so a read names
/// the one write it saw. 0 is never written.
pub type Value = u64;

/// What a client asked for, on one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// PutObject.
    Put { value: Value },
    /// PutObject with `If-None-Match: *`.
    PutIfAbsent { value: Value },
    /// PutObject with `If-Match` the ETag of `expected`.
    PutIfMatch { expected: Value, value: Value },
    /// DeleteObject.
    Delete,
    /// GetObject.
    Get,
    /// ListObjectsV2 of a prefix, as it showed this key: its entry (the
    /// ETag names the value) or its absence. A read of the key.
    List,
    /// ListObjectVersions of the key: the latest version is the read, and
    /// [`Operation::versions`] holds every version listed.
    ListVersions,
    /// GetObject of one version (`versionId`): [`Operation::versions`]
    /// holds the id and the value read (None for 404). It says nothing of
    /// the latest version, so only the versions check looks at it.
    GetVersion,
}

impl Op {
    /// Whether the operation reads the key's latest object (GET or a
    /// listing).
    pub fn reads(&self) -> bool {
        matches!(self, Op::Get | Op::List | Op::ListVersions)
    }

    /// The value this operation writes, if any.
    pub fn written(&self) -> Option<Value> {
        match *self {
            Op::Put { value } | Op::PutIfAbsent { value } | Op::PutIfMatch { value, .. } => {
                Some(value)
            }
            Op::Delete | Op::Get | Op::List | Op::ListVersions | Op::GetVersion => None,
        }
    }
}

/// What the client heard back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The write or delete succeeded.
    Done,
    /// 412 PreconditionFailed: the condition did not hold; nothing changed.
    PreconditionFailed,
    /// 404 NoSuchKey from a conditional write: no object to match.
    NotFound,
    /// Definitely changed nothing: a 409 ConditionalRequestConflict, or a
    /// request that never reached the server (connection refused).
    Refused,
    /// A read's answer: the value read, or None for 404 (or a key a
    /// listing did not show, or whose latest version is a delete marker).
    Read { value: Option<Value> },
    /// No answer (timeout, dropped connection, 5xx): the operation may or
    /// may not have taken effect, at any moment after its invocation.
    Unknown,
}

/// One operation as a client saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// The client process that ran it. A client whose operation ended
    /// [`Outcome::Unknown`] goes on as a new process, as in Jepsen: a
    /// process has at most one operation in flight.
    pub process: u32,
    /// The object key.
    pub key: String,
    /// What was asked.
    #[serde(flatten)]
    pub op: Op,
    /// When the request was sent, nanoseconds from the run's start.
    pub invoked_ns: u64,
    /// When its answer arrived (or the client gave up).
    pub completed_ns: u64,
    /// What came back.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Whether the write went as a multipart upload (create, one part,
    /// then CompleteMultipartUpload carrying the precondition): the times
    /// and the outcome are the Complete's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multipart: bool,
    /// Every version a [`Op::ListVersions`] listed, oldest first, or the
    /// one a [`Op::GetVersion`] read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<Version>>,
}

impl Operation {
    /// A single-request operation that lists no versions.
    pub fn new(
        process: u32,
        key: String,
        op: Op,
        invoked_ns: u64,
        completed_ns: u64,
        outcome: Outcome,
    ) -> Self {
        Self {
            process,
            key,
            op,
            invoked_ns,
            completed_ns,
            outcome,
            multipart: false,
            versions: None,
        }
    }
}

/// One version of a key as a listing showed it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Version {
    /// Its version id.
    pub id: String,
    /// The value it holds; None for a delete marker.
    pub value: Option<Value>,
}

/// Why a history file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Reading or writing the file.
    #[error("history file: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not an operation.
    #[error("history line {line}: {error}")]
    Parse {
        /// The line's number, from 1.
        line: usize,
        /// Why it did not parse.
        error: serde_json::Error,
    },
}

/// Every operation of a run, in the order they completed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The operations.
    pub operations: Vec<Operation>,
}

impl History {
    /// Writes one JSON object per line.
    pub fn save(&self, out: impl Write) -> Result<(), HistoryError> {
        let mut out = std::io::BufWriter::new(out);
        for operation in &self.operations {
            serde_json::to_writer(&mut out, operation).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(())
    }

    /// Reads what [`History::save`] wrote.
    pub fn load(input: impl std::io::Read) -> Result<Self, HistoryError> {
        let mut operations = Vec::new();
        for (i, line) in std::io::BufReader::new(input).lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let operation = serde_json::from_str(&line)
                .map_err(|error| HistoryError::Parse { line: i + 1, error })?;
            operations.push(operation);
        }
        Ok(Self { operations })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_survives_a_file() {
        let history = History {
            operations: vec![
                Operation::new(
                    3,
                    "k1".into(),
                    Op::PutIfMatch {
                        expected: 4,
                        value: 9,
                    },
                    10,
                    20,
                    Outcome::PreconditionFailed,
                ),
                Operation::new(
                    4,
                    "k1".into(),
                    Op::Get,
                    15,
                    25,
                    Outcome::Read { value: None },
                ),
                Operation {
                    multipart: true,
                    ..Operation::new(5, "k1".into(), Op::Put { value: 10 }, 16, 30, Outcome::Done)
                },
                Operation {
                    versions: Some(vec![
                        Version {
                            id: "v1".into(),
                            value: Some(10),
                        },
                        Version {
                            id: "v2".into(),
                            value: None,
                        },
                    ]),
                    ..Operation::new(
                        6,
                        "k1".into(),
                        Op::ListVersions,
                        31,
                        40,
                        Outcome::Read { value: None },
                    )
                },
            ],
        };
        let mut bytes = Vec::new();
        history.save(&mut bytes).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(r#""op":"put_if_match""#), "{text}");
        assert_eq!(text.matches("multipart").count(), 1, "{text}");
        assert_eq!(text.matches(r#""versions":["#).count(), 1, "{text}");
        assert_eq!(History::load(bytes.as_slice()).unwrap(), history);
        assert!(matches!(
            History::load(&b"{\"op\":\"get\"}\n"[..]),
            Err(HistoryError::Parse { line: 1, .. })
        ));
    }
}
