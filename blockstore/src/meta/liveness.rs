//! The datanode registry: heartbeats register and refresh datanodes, and each
//! datanode's state (healthy, stale, dead) follows from the time since its last
//! heartbeat, computed whenever it is asked.

use super::api::MetaError;
use super::service::Inner;
use super::store::{
    block_key_of_deletion, decode, deletion_key, deletions_prefix, encode, prefix_end, DATANODES,
    DELETIONS,
};
use super::types::{BlockGroup, DatanodeRecord, DatanodeReport, DatanodeState, UnixMillis};
use crate::ids::{BlockKey, DatanodeId};
use parking_lot::RwLock;
use redb::ReadableTable;
use std::collections::HashMap;
use std::time::Duration;

/// Most deletions handed to one datanode per heartbeat.
pub(super) const MAX_DELETIONS_PER_HEARTBEAT: usize = 1000;

/// State of a datanode last heard from at `last_heartbeat`, at time `now`.
pub(super) fn state_at(
    last_heartbeat: UnixMillis,
    now: UnixMillis,
    stale_after: Duration,
    dead_after: Duration,
) -> DatanodeState {
    let silent = now.saturating_sub(last_heartbeat).max(0) as u128;
    if silent >= dead_after.as_millis() {
        DatanodeState::Dead
    } else if silent >= stale_after.as_millis() {
        DatanodeState::Stale
    } else {
        DatanodeState::Healthy
    }
}

/// One registered datanode as placement sees it.
#[derive(Clone, Debug)]
pub(super) struct RegisteredNode {
    pub(super) record: DatanodeRecord,
    /// Blocks allocated on it since its last heartbeat (its `used` does not show them yet).
    pub(super) pending: u64,
}

/// In-memory mirror of the `DATANODES` table, so that address lookups and
/// placement never touch the disk.
#[derive(Default)]
pub(super) struct Registry {
    nodes: RwLock<HashMap<DatanodeId, RegisteredNode>>,
}

impl Registry {
    /// Loads every stored datanode record.
    pub(super) fn load(records: Vec<DatanodeRecord>) -> Self {
        let nodes = records
            .into_iter()
            .map(|record| (record.id.clone(), RegisteredNode { record, pending: 0 }))
            .collect();
        Self {
            nodes: RwLock::new(nodes),
        }
    }

    /// Records a heartbeat; a late-arriving older one never overwrites a newer one.
    pub(super) fn upsert(&self, record: DatanodeRecord) {
        let mut nodes = self.nodes.write();
        match nodes.get_mut(&record.id) {
            Some(node) if node.record.last_heartbeat > record.last_heartbeat => {}
            Some(node) => {
                node.record = record;
                node.pending = 0;
            }
            None => {
                nodes.insert(record.id.clone(), RegisteredNode { record, pending: 0 });
            }
        }
    }

    /// Every datanode with its state at `now`, sorted by id.
    pub(super) fn snapshot(
        &self,
        now: UnixMillis,
        stale_after: Duration,
        dead_after: Duration,
    ) -> Vec<RegisteredNode> {
        let mut out: Vec<RegisteredNode> = self
            .nodes
            .read()
            .values()
            .cloned()
            .map(|mut node| {
                node.record.state =
                    state_at(node.record.last_heartbeat, now, stale_after, dead_after);
                node
            })
            .collect();
        out.sort_by(|a, b| a.record.id.cmp(&b.record.id));
        out
    }

    /// Counts a fresh allocation against each of `ids` until their next heartbeat.
    pub(super) fn note_allocated<'a>(&self, ids: impl Iterator<Item = &'a DatanodeId>) {
        let mut nodes = self.nodes.write();
        for id in ids {
            if let Some(node) = nodes.get_mut(id) {
                node.pending += 1;
            }
        }
    }

    /// Sets each replica's address to the datanode's current one.
    pub(super) fn refresh_addrs(&self, groups: &mut [BlockGroup]) {
        let nodes = self.nodes.read();
        for replica in groups.iter_mut().flat_map(|g| g.replicas.iter_mut()) {
            if let Some(node) = nodes.get(&replica.datanode) {
                if node.record.addr != replica.addr {
                    replica.addr.clone_from(&node.record.addr);
                }
            }
        }
    }

    /// Publishes the number of datanodes in each state.
    pub(super) fn publish_gauges(
        &self,
        now: UnixMillis,
        stale_after: Duration,
        dead_after: Duration,
    ) {
        let (mut healthy, mut stale, mut dead) = (0u32, 0u32, 0u32);
        for node in self.nodes.read().values() {
            match state_at(node.record.last_heartbeat, now, stale_after, dead_after) {
                DatanodeState::Healthy => healthy += 1,
                DatanodeState::Stale => stale += 1,
                DatanodeState::Dead => dead += 1,
            }
        }
        metrics::gauge!("tessera_meta_datanodes", "state" => "healthy").set(healthy);
        metrics::gauge!("tessera_meta_datanodes", "state" => "stale").set(stale);
        metrics::gauge!("tessera_meta_datanodes", "state" => "dead").set(dead);
    }
}

impl Inner {
    /// Registers or refreshes a datanode, drops the deletions it acknowledges,
    /// and returns the ones still queued for it (repeated until acknowledged,
    /// so a datanode must treat deleting a missing block as done).
    pub(super) fn heartbeat(
        &self,
        report: DatanodeReport,
        now: UnixMillis,
    ) -> Result<Vec<BlockKey>, MetaError> {
        if report.id.0.is_empty() || report.id.0.len() > 256 {
            return Err(MetaError::InvalidRequest(
                "datanode id must be 1 to 256 bytes".into(),
            ));
        }
        if report.addr.is_empty() {
            return Err(MetaError::InvalidRequest(
                "datanode address is empty".into(),
            ));
        }
        let record = DatanodeRecord {
            id: report.id.clone(),
            addr: report.addr,
            local_socket: report.local_socket,
            capacity: report.capacity,
            used: report.used,
            blocks: report.blocks,
            last_heartbeat: now,
            state: DatanodeState::Healthy,
        };
        let pending = self.store.write(|txn| {
            let mut datanodes = txn.open_table(DATANODES)?;
            if let Some(old) = datanodes.get(record.id.0.as_str())? {
                let old: DatanodeRecord = decode(old.value())?;
                if old.addr != record.addr {
                    tracing::info!(datanode = %record.id, old = %old.addr, new = %record.addr, "datanode moved");
                }
            } else {
                tracing::info!(datanode = %record.id, addr = %record.addr, "datanode registered");
            }
            datanodes.insert(record.id.0.as_str(), encode(&record)?.as_slice())?;
            let mut deletions = txn.open_table(DELETIONS)?;
            for key in &report.deleted {
                deletions.remove(deletion_key(&report.id, *key).as_slice())?;
            }
            let prefix = deletions_prefix(&report.id);
            let end = prefix_end(&prefix)
                .ok_or_else(|| MetaError::Store("datanode id has no upper bound".into()))?;
            let mut pending = Vec::new();
            for entry in deletions
                .range::<&[u8]>(prefix.as_slice()..end.as_slice())?
                .take(MAX_DELETIONS_PER_HEARTBEAT)
            {
                let (key, _) = entry?;
                pending.push(block_key_of_deletion(key.value())?);
            }
            Ok(pending)
        })?;
        self.registry.upsert(record);
        self.registry
            .publish_gauges(now, self.config.stale_after, self.config.dead_after);
        Ok(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_follows_silence() {
        let stale = Duration::from_secs(10);
        let dead = Duration::from_secs(60);
        assert_eq!(state_at(1_000, 1_000, stale, dead), DatanodeState::Healthy);
        assert_eq!(state_at(1_000, 10_999, stale, dead), DatanodeState::Healthy);
        assert_eq!(state_at(1_000, 11_000, stale, dead), DatanodeState::Stale);
        assert_eq!(state_at(1_000, 61_000, stale, dead), DatanodeState::Dead);
        // A clock that went backwards is not silence.
        assert_eq!(state_at(5_000, 1_000, stale, dead), DatanodeState::Healthy);
    }
}
