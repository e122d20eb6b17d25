//! Requests of datanodes: heartbeats (registration, liveness, deletions
//! handed back, block token keys), block reports (orphan detection) and the placement of new
//! block groups.

use crate::ops::bad_replicas::record_bad_replica;
use crate::placement::{choose, validate_replication, Candidate, ReservedIds};
use crate::state::MetaState;
use crate::store::db::{decode, encode, get_json};
use crate::store::deletions::DeletionQueue;
use crate::store::tables::DATANODES;
use meta_api::{
    AdminState, AllocateBlock, BlockGroup, BlockReport, DatanodeRecord, DatanodeState, Handle,
    Heartbeat, HeartbeatReply, Location, MetaError, ReplicaLocation, SetDatanodeAdminState,
    UnixMillis, MAX_REPORTED_BLOCKS,
};
use proto::token::Modes;
use proto::{BlockId, BlockKey, ReplicationConfig};
use redb::ReadableTable;

/// Most deletions handed to one datanode per heartbeat.
pub(crate) const MAX_DELETIONS_PER_HEARTBEAT: usize = 1000;

impl Handle<Heartbeat> for MetaState {
    /// Registers or refreshes a datanode, drops the deletions it acknowledges,
    /// and returns the ones queued for it whose grace period has passed
    /// (repeated until acknowledged, so a datanode must treat deleting a
    /// missing block as done).
    fn handle(&self, request: Heartbeat, now: UnixMillis) -> Result<HeartbeatReply, MetaError> {
        let report = request.report;
        let report_id = report.id.clone();
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
        let location = report
            .location
            .unwrap_or_else(|| Location::of_addr(&report.addr));
        let mut record = DatanodeRecord {
            id: report.id.clone(),
            location,
            addr: report.addr,
            local_socket: report.local_socket,
            capacity: report.capacity,
            used: report.used,
            garbage: report.garbage,
            blocks: report.blocks,
            last_heartbeat: now,
            state: DatanodeState::Healthy,
            scrub: report.scrub,
            admin: AdminState::InService,
            disks: report.disks,
        };
        let pending = self.store.write(|txn| {
            let mut datanodes = txn.open_table(DATANODES)?;
            if let Some(old) = datanodes.get(record.id.0.as_str())? {
                let old: DatanodeRecord = decode(old.value())?;
                // What an operator asked outlives heartbeats.
                record.admin = old.admin;
                if old.addr != record.addr {
                    tracing::info!(datanode = %record.id, old = %old.addr, new = %record.addr, "datanode moved");
                }
                if old.location != record.location {
                    tracing::info!(datanode = %record.id, old = %old.location, new = %record.location, "datanode relocated");
                    self.repairs.request_scan();
                }
            } else {
                tracing::info!(datanode = %record.id, addr = %record.addr, location = %record.location, "datanode registered");
                // Its place and its room count from the next scan on (the
                // balancer's next round among them).
                self.repairs.request_scan();
            }
            datanodes.insert(record.id.0.as_str(), encode(&record)?.as_slice())?;
            for damaged in &report.damaged {
                tracing::warn!(datanode = %record.id, block = %damaged.key, reason = %damaged.reason, "datanode found a damaged block file");
                record_bad_replica(txn, damaged.key, report.id.clone(), damaged.reason.clone(), now)?;
            }
            let mut deletions = DeletionQueue::open(txn)?;
            for key in &report.deleted {
                deletions.acknowledge(&report.id, *key)?;
            }
            deletions.due(&report.id, now, MAX_DELETIONS_PER_HEARTBEAT)
        })?;
        if !report.damaged.is_empty() {
            metrics::counter!(crate::telemetry::BAD_REPLICAS.name)
                .increment(report.damaged.len() as u64);
            self.repairs.request_scan();
        }
        self.registry.upsert(record);
        self.registry.publish_gauges();
        // Heartbeats are what carries keys to datanodes: the next key is
        // made here, ahead of its use.
        self.tokens.rotate(&self.store, now)?;
        Ok(HeartbeatReply {
            deletions: pending,
            token_keys: self.tokens.keys(now),
            repairs: self.repairs.take_commands(&report_id),
        })
    }
}

impl Handle<AllocateBlock> for MetaState {
    /// A fresh block (group) on `config.width()` distinct healthy datanodes with
    /// free space, none of `exclude`; on as few as `config.min_width()` when
    /// no more are available. Its id comes from the store's counter: a lone
    /// meta's allocations, and a group's applied as entries of their own.
    fn handle(&self, request: AllocateBlock, now: UnixMillis) -> Result<BlockGroup, MetaError> {
        self.place_block(request, now, || {
            let block = self.block_ids.next(&self.store)?;
            self.orphans.clock.note(block, now);
            Ok(block)
        })
    }
}

impl MetaState {
    /// [`AllocateBlock`] under the id `block_id` gives once datanodes are
    /// chosen: the store's counter, or a group leader's reserved range.
    pub(crate) fn place_block(
        &self,
        request: AllocateBlock,
        now: UnixMillis,
        block_id: impl FnOnce() -> Result<BlockId, MetaError>,
    ) -> Result<BlockGroup, MetaError> {
        let AllocateBlock { config, exclude } = request;
        validate_replication(&config)?;
        let block_size = self.config.block_size;
        let candidates: Vec<Candidate> = self
            .registry
            .snapshot()
            .into_iter()
            .filter(|n| n.record.state == DatanodeState::Healthy)
            .filter(|n| n.record.admin == AdminState::InService)
            .filter(|n| !exclude.contains(&n.record.id))
            // Capacity is what the datanode may still fill plus what it
            // uses; 0 (nothing measured) means full, never unlimited.
            .filter(|n| n.record.free() >= block_size)
            .map(|n| Candidate {
                load: n.record.used / block_size + n.pending,
                id: n.record.id,
                addr: n.record.addr,
                location: n.record.location,
            })
            .collect();
        // Short of datanodes, a group keeps one spare block file at least
        // and is queued for repair once committed; the data cells come first.
        let width = candidates.len().clamp(config.min_width(), config.width());
        if width < config.width() {
            metrics::counter!(crate::telemetry::SHORT_GROUPS_ALLOCATED.name).increment(1);
        }
        let chosen = crate::entropy::with_rng(|rng| choose(&[], candidates, width, &config, rng))?;
        let block = block_id()?;
        self.registry.note_allocated(chosen.iter().map(|c| &c.id));
        let replicas = chosen
            .into_iter()
            .enumerate()
            .map(|(i, c)| ReplicaLocation {
                index: match config {
                    // `validate_replication` keeps EC widths within u8.
                    ReplicationConfig::Ec(_) => u8::try_from(i).unwrap_or(u8::MAX),
                    ReplicationConfig::Replicated { .. } => 0,
                },
                datanode: c.id,
                addr: c.addr,
            })
            .collect();
        metrics::counter!(crate::telemetry::BLOCKS_ALLOCATED.name).increment(1);
        let mut group = BlockGroup {
            block,
            length: 0,
            replicas,
            token: None,
        };
        self.tokens.sign(&mut group, Modes::WRITE, now);
        Ok(group)
    }

    /// Reserves the next range of block ids for the group leader of `term`
    /// (an entry every member applies) and dates the ids below it for the
    /// orphan detector.
    pub(crate) fn reserve_block_ids(
        &self,
        term: u64,
        now: UnixMillis,
    ) -> Result<ReservedIds, MetaError> {
        let reserved = crate::placement::reserve(&self.store, term, now, self.config.orphan_grace)?;
        self.orphans.clock.note_below(reserved.start, now);
        Ok(reserved)
    }
}

impl Handle<BlockReport> for MetaState {
    /// Serves one piece of a block report: queues the orphans among
    /// `blocks` for deletion (due at once) and returns how many.
    fn handle(&self, request: BlockReport, now: UnixMillis) -> Result<u64, MetaError> {
        let (datanode, blocks) = (&request.datanode, request.blocks.as_slice());
        if blocks.len() > MAX_REPORTED_BLOCKS {
            return Err(MetaError::InvalidRequest(format!(
                "a block report piece lists {} blocks, the limit is {MAX_REPORTED_BLOCKS}",
                blocks.len()
            )));
        }
        if !self.registry.contains(datanode) {
            return Err(MetaError::InvalidRequest(format!(
                "block report from unregistered datanode {datanode}"
            )));
        }
        let snapshot = self.orphans.snapshot(&self.store, now)?;
        let grace = self.config.orphan_grace;
        let orphans: Vec<BlockKey> = blocks
            .iter()
            .filter(|b| snapshot.is_orphan(datanode, b, grace))
            .map(|b| b.key)
            .collect();
        if orphans.is_empty() {
            return Ok(0);
        }
        let queued = self.store.write(|txn| {
            let mut deletions = DeletionQueue::open(txn)?;
            let mut queued = 0u64;
            for key in &orphans {
                if deletions.queue_block(datanode, *key, now)? {
                    queued += 1;
                }
            }
            Ok(queued)
        })?;
        if queued > 0 {
            metrics::counter!(crate::telemetry::ORPHAN_BLOCKS.name).increment(queued);
            tracing::info!(%datanode, queued, "orphan block files queued for deletion");
        }
        Ok(queued)
    }
}

impl Handle<SetDatanodeAdminState> for MetaState {
    /// Records what an operator asks of a datanode; a decommission or its
    /// end makes the next redundancy check scan for the block files to move.
    fn handle(&self, request: SetDatanodeAdminState, _now: UnixMillis) -> Result<(), MetaError> {
        let SetDatanodeAdminState { datanode, state } = request;
        self.store.write(|txn| {
            let mut datanodes = txn.open_table(DATANODES)?;
            let mut record: DatanodeRecord = get_json(&datanodes, datanode.0.as_str())?
                .ok_or_else(|| MetaError::InvalidRequest(format!("no datanode {datanode}")))?;
            record.admin = state;
            datanodes.insert(datanode.0.as_str(), encode(&record)?.as_slice())?;
            Ok(())
        })?;
        self.registry.set_admin(&datanode, state);
        tracing::info!(%datanode, ?state, "datanode admin state set");
        self.repairs.request_scan();
        Ok(())
    }
}
