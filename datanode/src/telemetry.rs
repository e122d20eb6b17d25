//! The datanode's metrics, named in one place.

use crate::store::StoreStats;

/// Bytes of block data accepted by writes.
pub const BYTES_WRITTEN: &str = "tessera_datanode_bytes_written_total";
/// Bytes of block data sent by reads.
pub const BYTES_READ: &str = "tessera_datanode_bytes_read_total";
/// Chunks refused on arrival because their CRC did not match.
pub const CHUNKS_REJECTED: &str = "tessera_datanode_chunks_rejected_total";
/// Requests served, by operation and outcome.
pub const REQUESTS: &str = "tessera_datanode_requests_total";
/// Frames that could not be decoded (the connection was closed).
pub const PROTOCOL_ERRORS: &str = "tessera_datanode_protocol_errors_total";
/// Committed blocks.
pub const BLOCKS: &str = "tessera_datanode_blocks";
/// Bytes of committed block data.
pub const USED_BYTES: &str = "tessera_datanode_used_bytes";

pub(crate) fn bytes_written(n: u64) {
    metrics::counter!(BYTES_WRITTEN).increment(n);
}

pub(crate) fn bytes_read(n: u64) {
    metrics::counter!(BYTES_READ).increment(n);
}

pub(crate) fn chunk_rejected() {
    metrics::counter!(CHUNKS_REJECTED).increment(1);
}

pub(crate) fn request(op: &'static str, outcome: &'static str) {
    metrics::counter!(REQUESTS, "op" => op, "outcome" => outcome).increment(1);
}

pub(crate) fn protocol_error() {
    metrics::counter!(PROTOCOL_ERRORS).increment(1);
}

pub(crate) fn store_gauges(stats: StoreStats) {
    metrics::gauge!(BLOCKS).set(stats.blocks as f64);
    metrics::gauge!(USED_BYTES).set(stats.used as f64);
}
