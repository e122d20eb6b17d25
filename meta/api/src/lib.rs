//! The metadata service's API: the records it keeps, one type per request
//! with the type of its answer, the errors it answers with, and
//! [`MetaClient`], which reaches meta in this process or over TCP. The
//! gateway, the datanodes and the admin tool depend on this crate only,
//! never on how meta stores its tables.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod error;
pub mod failover;
pub mod frame;
pub mod lifecycle;
pub mod location;
pub mod naming;
pub mod principal;
pub mod records;
pub mod remote;
pub mod requests;
pub mod time;
pub mod transport;

pub use client::MetaClient;
pub use error::MetaError;
pub use failover::GroupClient;
pub use location::{Location, LocationError};
pub use principal::{Credential, CredentialKey, Principal};
pub use records::*;
pub use remote::RemoteMeta;
pub use requests::*;
pub use transport::MetaTransport;
