//! The operations: one [`meta_api::Handle`] implementation per request, in a
//! module per family, over [`crate::state::MetaState`] and the store below it.

pub(crate) mod bad_replicas;
mod balance;
mod buckets;
mod datanodes;
mod group;
mod group_records;
mod kms;
pub(crate) mod listing;
mod object_lock;
mod objects;
pub(crate) mod repairs;
mod upload_listing;
pub(crate) mod uploads;
mod users;
mod version_listing;
