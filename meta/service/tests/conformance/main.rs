//! The metadata conformance suite: every operation, its errors and edge
//! cases, each test run twice, against the service in process and through
//! its RPC server (`test_support::conformance!`), so that a gateway or a
//! datanode sees the same meta whichever way it reaches it.

mod bad_replicas;
mod conditional;
mod lifecycle;
mod listing;

mod orphans;
mod service;
mod tokens;
mod uploads;
mod versions;
