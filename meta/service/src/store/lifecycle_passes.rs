//! Where the lifecycle worker is: the pass under way, stored with every
//! batch it commits so that it goes on after a restart, and the last pass
//! that ended (see `crate::lifecycle`).

use super::db::{encode, get_json, Store, StoreError};
use meta_api::lifecycle::{LifecyclePass, LifecycleStatus};
use meta_api::MetaError;
use redb::{TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

/// The pass under way (`RUNNING`, a [`StoredPass`]) and the last that ended
/// (`LAST`, a `LifecyclePass`).
pub(crate) const LIFECYCLE: TableDefinition<&str, &[u8]> = TableDefinition::new("lifecycle");
const RUNNING: &str = "running";
const LAST: &str = "last";

/// A pass as stored: what it did, and where it goes on.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StoredPass {
    pub(crate) progress: LifecyclePass,
    /// The next thing to look at; None: the pass has ended.
    pub(crate) cursor: Option<Cursor>,
}

/// Where a pass is: in one bucket, its keys or its uploads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Cursor {
    pub(crate) bucket: String,
    pub(crate) stage: Stage,
}

/// The part of a bucket a pass is in.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Stage {
    /// Keys after this one (from the first when None).
    Keys(Option<String>),
    /// Uploads after this `UPLOAD_ORDER` key (from the first when None).
    Uploads(Option<Vec<u8>>),
}

/// The pass under way and the last that ended.
type Passes = (Option<StoredPass>, Option<LifecyclePass>);

/// The passes as last committed.
pub(crate) fn load(store: &Store) -> Result<Passes, MetaError> {
    store.read(|txn| {
        let table = txn.open_table(LIFECYCLE)?;
        Ok((get_json(&table, RUNNING)?, get_json(&table, LAST)?))
    })
}

/// The passes as `txn` sees them.
pub(crate) fn load_for_write(txn: &WriteTransaction) -> Result<Passes, StoreError> {
    let table = txn.open_table(LIFECYCLE)?;
    Ok((get_json(&table, RUNNING)?, get_json(&table, LAST)?))
}

/// Stores `pass`: as the pass under way, or as the last when it has ended.
pub(crate) fn save(txn: &WriteTransaction, pass: &StoredPass) -> Result<(), StoreError> {
    let mut table = txn.open_table(LIFECYCLE)?;
    if pass.cursor.is_some() {
        table.insert(RUNNING, encode(pass)?.as_slice())?;
    } else {
        table.remove(RUNNING)?;
        table.insert(LAST, encode(&pass.progress)?.as_slice())?;
    }
    Ok(())
}

/// The passes, for the cluster status.
pub(crate) fn status(store: &Store) -> Result<LifecycleStatus, MetaError> {
    let (running, last) = load(store)?;
    Ok(LifecycleStatus {
        running: running.map(|pass| pass.progress),
        last,
    })
}

/// Counts a restart of meta in the pass under way, if there is one.
pub(crate) fn note_restart(store: &Store) -> Result<(), MetaError> {
    store.write(|txn| {
        if let (Some(mut pass), _) = load_for_write(txn)? {
            pass.progress.resumed += 1;
            tracing::info!(bucket = ?pass.progress.bucket, "lifecycle pass goes on after a restart");
            save(txn, &pass)?;
        }
        Ok(())
    })
}
