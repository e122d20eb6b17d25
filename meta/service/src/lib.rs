//! The metadata service: the namespace (buckets, objects, multipart uploads),
//! users and access keys, block allocation and the datanode registry, kept in
//! an embedded ACID store (redb), served in process and over TCP.
//!
//! Modules point down: `store` at the bottom (the database, its tables and
//! key encodings), then the in-memory parts (`registry`, `placement`,
//! `orphans`, `decoded`, `credentials`, `kms`, `object_keys`, `tokens`, `authentication`,
//! `redundancy`, `repair`, `balance`), `state` over them, `ops` (one
//! handler per request) over the state, the `lifecycle` worker beside the
//! operations, `service` over them and `rpc` on top.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod authentication;
mod balance;
mod clock;
mod config;
mod credentials;
mod decoded;
mod entropy;
mod group;
mod kms;
mod lifecycle;
mod object_keys;
mod ops;
mod orphans;
mod placement;
mod redundancy;
mod registry;
mod repair;
pub mod rpc;
mod service;
mod state;
mod store;
pub mod telemetry;
mod tokens;

pub use authentication::Refusal;
pub use balance::{
    DEFAULT_BANDWIDTH as DEFAULT_BALANCE_BANDWIDTH,
    DEFAULT_THRESHOLD_PERCENT as DEFAULT_BALANCE_THRESHOLD_PERCENT,
};
pub use config::{
    Clock, LifecycleSettings, MetaConfig, DEFAULT_DEAD_AFTER, DEFAULT_DELETION_DELAY,
    DEFAULT_LIFECYCLE_BATCH, DEFAULT_ORPHAN_GRACE, DEFAULT_STALE_AFTER,
};
pub use credentials::{
    generate_admin_token, load_or_create_credential_key, RootCredentials, ADMIN_TOKEN_FILE,
    CREDENTIAL_KEY_FILE, ROOT_CREDENTIALS_FILE, ROOT_USER,
};
pub use group::{fetch_secrets, GroupSettings};
pub use object_keys::MASTER_KEY_FILE;
pub use ops::bad_replicas::BadReplicaReport;
pub use repair::RepairSettings;
pub use rpc::serve;
pub use service::MetaService;
pub use store::group_commit::Commits;
pub use store::DATABASE_FILE;
