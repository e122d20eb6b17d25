//! Opening the store: every table is created up front, so that read
//! transactions never meet a missing table, and tables of earlier versions
//! are migrated.

use super::db::Store;
use super::db::StoreError;
use super::group_commit::Commits;
use super::tables::*;
use super::{deletions, lifecycle_passes, repairs, upload_index};
use std::path::Path;

/// Opens (or creates) the store at `path`, with every table present.
#[cfg(test)]
pub(crate) fn open(path: &Path) -> Result<Store, StoreError> {
    open_committing(path, Commits::default())
}

/// [`open`], with writes committed as `commits` says.
pub(crate) fn open_committing(path: &Path, commits: Commits) -> Result<Store, StoreError> {
    prepare(Store::open_committing(path, commits)?)
}

/// A group member's store at `path` (see [`Store::open_replicated`]), with
/// every table present.
pub(crate) fn open_replicated(path: &Path) -> Result<Store, StoreError> {
    prepare(Store::open_replicated(path)?)
}

fn prepare(store: Store) -> Result<Store, StoreError> {
    store.write_local(|txn| {
        txn.open_table(BUCKETS)?;
        txn.open_table(OBJECTS)?;
        txn.open_table(VERSIONS)?;
        txn.open_table(UPLOADS)?;
        upload_index::prepare_tables(txn)?;
        txn.open_table(PARTS)?;
        txn.open_table(USERS)?;
        txn.open_table(ACCESS_KEYS)?;
        txn.open_table(DATANODES)?;
        txn.open_table(COUNTERS)?;
        txn.open_table(SETTINGS)?;
        txn.open_table(BLOCK_ID_RESERVATIONS)?;
        txn.open_table(BAD_REPLICAS)?;
        txn.open_table(TOKEN_KEYS)?;
        txn.open_table(CREDENTIAL_GENERATIONS)?;
        deletions::prepare_tables(txn)?;
        txn.open_table(repairs::REPAIR_QUEUE)?;
        txn.open_table(repairs::REPAIR_INDEX)?;
        txn.open_table(lifecycle_passes::LIFECYCLE)?;
        txn.open_table(KEY_CHECKS)?;
        txn.open_table(KMS_KEYS)?;
        txn.open_table(super::db::APPLIED)?;
        Ok(())
    })?;
    Ok(store)
}
