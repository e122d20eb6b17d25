//! The metadata service: namespace (buckets, objects, multipart uploads),
//! users and access keys, block allocation and the datanode registry, kept in
//! an embedded ACID store (redb).

mod admin;
pub mod api;
pub mod bad_replicas;
pub mod block_reports;
mod buckets;
#[cfg(test)]
mod conditional_tests;
pub mod credentials;
mod decoded;
mod deletions;
mod listing;
mod liveness;
pub mod multipart;
pub mod naming;
mod objects;
mod placement;
pub mod rpc;
pub mod service;
mod store;
mod tagging;
#[cfg(test)]
mod test_support;
pub mod types;
pub mod upload_listing;

pub use api::{AdminOp, MetaClient, MetaError, MetaRequest, MetaResponse};
pub use block_reports::ReportedBlock;
pub use rpc::RemoteMeta;
pub use service::{MetaConfig, MetaService, RootCredentials};
pub use types::*;
pub use upload_listing::{UploadPage, UploadQuery};
