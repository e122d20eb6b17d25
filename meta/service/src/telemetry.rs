//! Meta's metrics, each named and described once: recorded by name where
//! they happen, described by [`METRICS`] when the process starts.

use proto::telemetry::Metric;

pub(crate) const BAD_REPLICAS: Metric = Metric::counter(
    "tessera_meta_bad_replicas_total",
    "Corrupt or missing block files reported by clients and datanodes",
);
pub(crate) const BALANCE_MOVED_BYTES: Metric = Metric::counter(
    "tessera_meta_balance_moved_bytes_total",
    "Bytes of block files the balancer moved",
);
pub(crate) const BALANCE_MOVES_PLANNED: Metric = Metric::counter(
    "tessera_meta_balance_moves_planned_total",
    "Block file moves the balancer planned",
);
pub(crate) const BALANCE_MOVES: Metric = Metric::counter(
    "tessera_meta_balance_moves_total",
    "Block file moves the balancer finished",
);
pub(crate) const BLOCK_FILES_MOVED: Metric = Metric::counter(
    "tessera_meta_block_files_moved_total",
    "Block files moved to another datanode, by reason (balance, misplaced, decommission)",
);
pub(crate) const BLOCK_GROUPS: Metric = Metric::gauge(
    "tessera_meta_block_groups",
    "Block groups by state (healthy, degraded, at_risk, lost) at the last redundancy scan",
);
pub(crate) const BLOCKS_ALLOCATED: Metric = Metric::counter(
    "tessera_meta_blocks_allocated_total",
    "Block groups allocated for writes",
);
pub(crate) const BLOCKS_QUEUED_FOR_DELETION: Metric = Metric::counter(
    "tessera_meta_blocks_queued_for_deletion_total",
    "Blocks of removed objects queued for deletion on their datanodes",
);
pub(crate) const COMMITS: Metric = Metric::counter(
    "tessera_meta_commits_total",
    "Writes committed by the store's group commit",
);
pub(crate) const CONNECTIONS_REFUSED: Metric = Metric::counter(
    "tessera_meta_connections_refused_total",
    "Connections to meta's RPC port refused (no mutual TLS, too many)",
);
pub(crate) const DATANODES: Metric = Metric::gauge(
    "tessera_meta_datanodes",
    "Datanodes known to meta, by state",
);
pub(crate) const DATANODE_CAPACITY_BYTES: Metric = Metric::gauge(
    "tessera_datanode_capacity_bytes",
    "Bytes each datanode's disks hold in all, as it last reported",
);
pub(crate) const DATANODE_STATE: Metric = Metric::gauge(
    "tessera_datanode_state",
    "1 for each datanode's current state (label state), as meta sees it",
);
pub(crate) const DECODED_CACHE_HITS: Metric = Metric::counter(
    "tessera_meta_decoded_cache_hits_total",
    "Object records served from the cache of decoded records",
);
pub(crate) const DECODED_CACHE_MISSES: Metric = Metric::counter(
    "tessera_meta_decoded_cache_misses_total",
    "Object records decoded from the store",
);
pub(crate) const ERRORS: Metric = Metric::counter(
    "tessera_meta_errors_total",
    "Meta requests that failed, by error kind",
);
pub(crate) const FLUSHES: Metric = Metric::counter(
    "tessera_meta_flushes_total",
    "Durable flushes of the store's group commit",
);
pub(crate) const LOG_ENTRIES: Metric = Metric::counter(
    "tessera_meta_log_entries_total",
    "Entries appended to the meta group's Raft log",
);
pub(crate) const LOG_SYNCS: Metric = Metric::counter(
    "tessera_meta_log_syncs_total",
    "fdatasyncs of the meta group's Raft log",
);
pub(crate) const MISPLACED_BLOCK_GROUPS: Metric = Metric::gauge(
    "tessera_meta_misplaced_block_groups",
    "Block groups a failure domain holds too much of, at the last scan",
);
pub(crate) const OBJECTS_COMMITTED: Metric = Metric::counter(
    "tessera_meta_objects_committed_total",
    "Objects committed (PUTs, copies and completed multipart uploads)",
);
pub(crate) const ORPHAN_BLOCKS: Metric = Metric::counter(
    "tessera_meta_orphan_blocks_total",
    "Block files datanodes hold that no object names, queued for deletion",
);
pub(crate) const REPAIR_QUEUE: Metric = Metric::gauge(
    "tessera_meta_repair_queue",
    "Block groups waiting for repair",
);
pub(crate) const REPAIRED_BYTES: Metric = Metric::counter(
    "tessera_meta_repaired_bytes_total",
    "Bytes of block files rebuilt by repairs",
);
pub(crate) const REPAIRS_STARTED: Metric = Metric::counter(
    "tessera_meta_repairs_started_total",
    "Repairs handed to datanodes",
);
pub(crate) const REPAIRS: Metric =
    Metric::counter("tessera_meta_repairs_total", "Repairs finished, by outcome");
pub(crate) const REQUESTS: Metric = Metric::counter(
    "tessera_meta_requests_total",
    "Meta requests served, by request",
);
pub(crate) const SHORT_GROUPS_ALLOCATED: Metric = Metric::counter(
    "tessera_meta_short_groups_allocated_total",
    "Block groups allocated on fewer datanodes than their layout wants (queued for repair)",
);
pub(crate) const STORE_FAILED: Metric = Metric::gauge(
    "tessera_meta_store_failed",
    "1 while meta's store cannot write (disk full or failing)",
);
pub(crate) const UNAUTHORIZED: Metric = Metric::counter(
    "tessera_meta_unauthorized_total",
    "Meta requests refused for want of a valid credential",
);

/// Every metric meta records.
pub const METRICS: &[Metric] = &[
    BAD_REPLICAS,
    BALANCE_MOVED_BYTES,
    BALANCE_MOVES_PLANNED,
    BALANCE_MOVES,
    BLOCK_FILES_MOVED,
    BLOCK_GROUPS,
    BLOCKS_ALLOCATED,
    BLOCKS_QUEUED_FOR_DELETION,
    COMMITS,
    CONNECTIONS_REFUSED,
    DATANODES,
    DATANODE_CAPACITY_BYTES,
    DATANODE_STATE,
    DECODED_CACHE_HITS,
    DECODED_CACHE_MISSES,
    ERRORS,
    FLUSHES,
    LOG_ENTRIES,
    LOG_SYNCS,
    MISPLACED_BLOCK_GROUPS,
    OBJECTS_COMMITTED,
    ORPHAN_BLOCKS,
    REPAIR_QUEUE,
    REPAIRED_BYTES,
    REPAIRS_STARTED,
    REPAIRS,
    REQUESTS,
    SHORT_GROUPS_ALLOCATED,
    STORE_FAILED,
    UNAUTHORIZED,
];
