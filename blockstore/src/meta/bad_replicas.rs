//! Block files that clients found corrupt (a checksum mismatch on read).
//!
//! A reader that meets a bad cell or replica still answers from the others;
//! it reports the bad one here so the damage is visible (log, counter, table)
//! instead of being silently worked around on every read.

use super::api::MetaError;
use super::service::Inner;
use super::store::{all_json, encode, BAD_REPLICAS};
use super::types::UnixMillis;
use crate::ids::{BlockKey, DatanodeId};
use redb::ReadableTable;
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
fn report_key(block: BlockKey, datanode: &DatanodeId) -> String {
    format!("{block}/{datanode}")
}

impl Inner {
    /// Records (or refreshes) a report of a corrupt block file.
    pub(super) fn report_bad_replica(
        &self,
        block: BlockKey,
        datanode: DatanodeId,
        reason: String,
        now: UnixMillis,
    ) -> Result<(), MetaError> {
        tracing::warn!(%block, %datanode, %reason, "client reported a corrupt block file");
        metrics::counter!("tessera_meta_bad_replicas_total").increment(1);
        let key = report_key(block, &datanode);
        self.store.write(|txn| {
            let mut table = txn.open_table(BAD_REPLICAS)?;
            let count = match table.get(key.as_str())? {
                Some(old) => super::store::decode::<BadReplicaReport>(old.value())?.count,
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
        })
    }

    /// Every report kept.
    pub(super) fn bad_replicas(&self) -> Result<Vec<BadReplicaReport>, MetaError> {
        self.store
            .read(|txn| all_json(&txn.open_table(BAD_REPLICAS)?))
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::{MetaClient, MetaRequest, MetaResponse};
    use super::super::test_support::{call, dn, open, T0};
    use crate::ids::{BlockId, BlockKey};

    #[tokio::test]
    async fn reports_are_kept_per_block_file_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let meta = open(dir.path());
        let key = BlockKey::new(BlockId(7), 2);
        for reason in ["crc at 0", "crc at 16384"] {
            let request = MetaRequest::ReportBadReplica {
                block: key,
                datanode: dn("a"),
                reason: reason.into(),
            };
            assert!(matches!(call(&meta, request).await, Ok(MetaResponse::Done)));
        }
        MetaClient::Local(meta.clone())
            .report_bad_replica(BlockKey::new(BlockId(7), 0), dn("b"), "x".into())
            .await
            .unwrap();
        let reports = meta.bad_replicas().unwrap();
        assert_eq!(reports.len(), 2, "{reports:?}");
        let a = reports.iter().find(|r| r.datanode == dn("a")).unwrap();
        assert_eq!(
            (a.block, a.count, a.reason.as_str()),
            (key, 2, "crc at 16384")
        );
        assert_eq!(a.reported, T0);
    }
}
