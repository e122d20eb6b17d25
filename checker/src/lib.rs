//! Consistency checking, as Jepsen does it: clients record every operation
//! they run against the store (what they asked, when they asked, when and
//! what they heard back, or that they never heard), and the checks here
//! decide whether some order of those operations, one at a time, explains
//! every answer.
//!
//! - [`history`]: the recorded operations, saved as JSON lines.
//! - [`model`]: what one S3 object key promises (a register with ETag
//!   preconditions), operation by operation.
//! - [`linearizable`]: whether each key's history is linearizable, and the
//!   smallest failing part of one that is not.
//! - [`checks`]: every check over a whole history, and its report.
#![forbid(unsafe_code)]

pub mod checks;
pub mod history;
pub mod linearizable;
pub mod model;

pub use checks::{check, Anomaly, Report};
pub use history::{History, Op, Operation, Outcome};
