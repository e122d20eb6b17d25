//! The bottom layer of meta: the redb database file, its tables and key
//! encodings, and the structures kept in tables that several operations
//! share (the block deletion queue, the repair queue, the ordered upload
//! index, the versions of keys and where the lifecycle worker is). Nothing
//! here knows about requests.

/// Name of the redb file in the data folder.
pub const DATABASE_FILE: &str = "meta.redb";

pub(crate) mod db;
pub(crate) mod deletions;
pub(crate) mod group_commit;
pub(crate) mod lifecycle_passes;
pub(crate) mod repairs;
pub(crate) mod scan;
mod schema;
pub(crate) mod tables;
pub(crate) mod upload_index;
pub(crate) mod versions;

pub(crate) use db::{take_horizon_of, Store};
#[cfg(test)]
pub(crate) use schema::open;
pub(crate) use schema::{open_committing, open_replicated};
