//! The console's pages, one module per family: signing in, buckets and
//! their settings, the object browser and its versions view, uploads, and
//! the admin pages.

pub(crate) mod buckets;
pub(crate) mod cluster;
pub(crate) mod listing;
pub(crate) mod login;
pub(crate) mod objects;
pub(crate) mod settings;
pub(crate) mod uploads;
pub(crate) mod users;
pub(crate) mod versions;
