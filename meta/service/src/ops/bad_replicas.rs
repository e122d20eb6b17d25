//! Block files that clients found corrupt (a checksum mismatch on read).
//!
//! A reader that meets a bad cell or replica still answers from the others;
//! it reports the bad one here so the damage is visible (log, counter, table)
//! instead of being silently worked around on every read, and so that
//! the redundancy scan counts the block file as missing and has it rebuilt.

use crate::state::MetaState;
use crate::store::db::{all_json, decode, encode, StoreError};
use crate::store::tables::BAD_REPLICAS;
use crate::store::Store;
use meta_api::{Handle, MetaError, ReportBadReplica, UnixMillis};
use proto::{BlockKey, DatanodeId};
use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

/// One report of a corrupt block file; a later report of the same block file
/// on the same datanode replaces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadReplicaReport {
    /// The corrupt block file.
    pub block: BlockKey,
    /// The datanode that holds it.
    pub datanode: DatanodeId,
    /// What the reporting client saw.
    pub reason: String,
    /// When the last report arrived.
    pub reported: UnixMillis,
    /// How many reports arrived for this block file.
    pub count: u64,
}

/// Key of a report: one entry per (block file, datanode).
pub(crate) fn report_key(block: BlockKey, datanode: &DatanodeId) -> String {
    format!("{block}/{datanode}")
}

impl Handle<ReportBadReplica> for MetaState {
    /// Records (or refreshes) a report of a corrupt block file.
    fn handle(&self, request: ReportBadReplica, now: UnixMillis) -> Result<(), MetaError> {
        let ReportBadReplica {
            block,
            datanode,
            reason,
        } = request;
        tracing::warn!(%block, %datanode, %reason, "client reported a corrupt block file");
        metrics::counter!(crate::telemetry::BAD_REPLICAS.name).increment(1);
        self.store
            .write(|txn| record_bad_replica(txn, block, datanode, reason, now))?;
        // The block file counts as missing from now on: the next redundancy
        // check scans for its group and queues it for repair.
        self.repairs.request_scan();
        Ok(())
    }
}

/// Records (or refreshes) a report of corrupt block file `block` on
/// `datanode`, from a client's read or the datanode's own scrubber.
pub(crate) fn record_bad_replica(
    txn: &WriteTransaction,
    block: BlockKey,
    datanode: DatanodeId,
    reason: String,
    now: UnixMillis,
) -> Result<(), StoreError> {
    let key = report_key(block, &datanode);
    let mut table = txn.open_table(BAD_REPLICAS)?;
    let count = match table.get(key.as_str())? {
        Some(old) => decode::<BadReplicaReport>(old.value())?.count,
        None => 0,
    };
    let report = BadReplicaReport {
        block,
        datanode,
        reason,
        reported: now,
        count: count + 1,
    };
    table.insert(key.as_str(), encode(&report)?.as_slice())?;
    Ok(())
}

/// Every report kept, in block order.
pub(crate) fn bad_replicas(store: &Store) -> Result<Vec<BadReplicaReport>, MetaError> {
    store.read(|txn| all_json(&txn.open_table(BAD_REPLICAS)?))
}
