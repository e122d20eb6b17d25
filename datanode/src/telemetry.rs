//! The datanode's metrics, named in one place. Gauges carry the datanode's
//! id (label `id`): one process may run several datanodes (`tessera server`),
//! and a gauge without it would hold whichever one wrote last.

use proto::telemetry::Metric;
use proto::DatanodeId;

pub(crate) const BYTES_WRITTEN: Metric = Metric::counter(
    "tessera_datanode_bytes_written_total",
    "Bytes of block data accepted by writes",
);
pub(crate) const BYTES_READ: Metric = Metric::counter(
    "tessera_datanode_bytes_read_total",
    "Bytes of block data sent by reads",
);
pub(crate) const SENT_BYTES: Metric = Metric::counter(
    "tessera_datanode_sent_bytes_total",
    "Bytes of read replies' data sent, by how they were sent (label `mode`: `sendfile` or `copy`); shows which path serves the reads",
);
pub(crate) const SEND_WAITS: Metric = Metric::counter(
    "tessera_datanode_send_waits_total",
    "Times a sendfile reply found the client's socket full and waited for it to drain (the client reads slower than the disk and network deliver)",
);
pub(crate) const CORRUPT_READS: Metric = Metric::counter(
    "tessera_datanode_corrupt_reads_total",
    "Reads refused because the block data on disk failed its CRCs (verify-on-read): bit rot or a damaged disk",
);
pub(crate) const CHUNKS_REJECTED: Metric = Metric::counter(
    "tessera_datanode_chunks_rejected_total",
    "Chunks refused on arrival because their CRC did not match",
);
pub(crate) const REQUESTS: Metric = Metric::counter(
    "tessera_datanode_requests_total",
    "Requests served, by operation and outcome",
);
pub(crate) const PROTOCOL_ERRORS: Metric = Metric::counter(
    "tessera_datanode_protocol_errors_total",
    "Frames that could not be decoded (the connection was closed)",
);
pub(crate) const TOKEN_REFUSALS: Metric = Metric::counter(
    "tessera_datanode_token_refusals_total",
    "Block requests refused for want of a valid block token, by reason (label `reason`: missing, expired, bad_signature...)",
);
pub(crate) const LOCAL_PEERS_REFUSED: Metric = Metric::counter(
    "tessera_datanode_local_peers_refused_total",
    "Short-circuit connections refused because the peer runs as another user",
);
pub(crate) const TLS_REFUSALS: Metric = Metric::counter(
    "tessera_datanode_tls_refusals_total",
    "Connections refused for want of mutual TLS: no certificate of the cluster CA, no TLS at all, a handshake that did not finish in time, or clear text from another host",
);
pub(crate) const BLOCKS: Metric = Metric::gauge(
    "tessera_datanode_store_blocks",
    "Committed blocks, by datanode id",
);
pub(crate) const USED_BYTES: Metric = Metric::gauge(
    "tessera_datanode_store_used_bytes",
    "Bytes of committed block data, by datanode id",
);
pub(crate) const PACKED_BLOCKS: Metric = Metric::gauge(
    "tessera_datanode_store_packed_blocks",
    "Committed blocks packed into volumes, by datanode id",
);
pub(crate) const GARBAGE_BYTES: Metric = Metric::gauge(
    "tessera_datanode_store_garbage_bytes",
    "Bytes of deleted records still held by the volumes, by datanode id",
);
pub(crate) const VOLUMES_COMPACTED: Metric = Metric::counter(
    "tessera_datanode_volumes_compacted_total",
    "Volumes rewritten without their deleted records",
);
pub(crate) const COMPACTED_BYTES: Metric = Metric::counter(
    "tessera_datanode_compacted_bytes_total",
    "Bytes of live records compaction copied",
);
pub(crate) const COMPACTION_FREED_BYTES: Metric = Metric::counter(
    "tessera_datanode_compaction_freed_bytes_total",
    "Bytes of volumes compaction removed (live and dead)",
);
pub(crate) const VOLUME_COMMITS: Metric = Metric::counter(
    "tessera_datanode_volume_commits_total",
    "Group commits of the volume writers: each one write and one fdatasync per file it touched, shared by every append and delete waiting then",
);
pub(crate) const VOLUME_JOBS: Metric = Metric::counter(
    "tessera_datanode_volume_jobs_total",
    "Appends and deletes the group commits served (divided by `VOLUME_COMMITS`: how many shared each sync)",
);
pub(crate) const DISKS_FAILED: Metric = Metric::counter(
    "tessera_datanode_disks_failed_total",
    "Disks taken out of service (an I/O error meaning the device fails, or a failed probe)",
);
pub(crate) const DISK_BLOCKS: Metric = Metric::gauge(
    "tessera_datanode_disk_blocks",
    "Committed blocks on each disk (labels `id`, `disk`: its folder)",
);
pub(crate) const DISK_USED_BYTES: Metric = Metric::gauge(
    "tessera_datanode_disk_used_bytes",
    "Bytes of committed block data on each disk",
);
pub(crate) const DISK_AVAILABLE_BYTES: Metric = Metric::gauge(
    "tessera_datanode_disk_available_bytes",
    "Bytes each disk's filesystem can still take",
);
pub(crate) const DISK_FAILED: Metric = Metric::gauge(
    "tessera_datanode_disk_failed",
    "1 for a disk out of service, 0 for one serving",
);

pub(crate) const VOLUME_APPEND_SECONDS: Metric = Metric::histogram(
    "tessera_datanode_volume_append_seconds",
    "Time from a commit's append to a volume to its acknowledgement: the wait for the writer and its group commit (write and fdatasync)",
);

pub(crate) const REPAIRS: Metric = Metric::counter(
    "tessera_datanode_repairs_total",
    "Repairs this datanode ran, by result",
);
pub(crate) const REPAIR_READ_BYTES: Metric = Metric::counter(
    "tessera_datanode_repair_read_bytes_total",
    "Bytes repairs read from other datanodes to rebuild block files",
);
pub(crate) const SCRUBBED_BYTES: Metric = Metric::counter(
    "tessera_datanode_scrubbed_bytes_total",
    "Bytes of block files the scrubber read and checked",
);
pub(crate) const DAMAGED_BLOCKS: Metric = Metric::counter(
    "tessera_datanode_damaged_blocks_total",
    "Block files the scrubber found damaged and quarantined",
);

/// Every metric the datanode records.
pub const METRICS: &[Metric] = &[
    REPAIRS,
    REPAIR_READ_BYTES,
    SCRUBBED_BYTES,
    DAMAGED_BLOCKS,
    BYTES_WRITTEN,
    BYTES_READ,
    SENT_BYTES,
    SEND_WAITS,
    CORRUPT_READS,
    CHUNKS_REJECTED,
    REQUESTS,
    PROTOCOL_ERRORS,
    TOKEN_REFUSALS,
    LOCAL_PEERS_REFUSED,
    TLS_REFUSALS,
    BLOCKS,
    USED_BYTES,
    PACKED_BLOCKS,
    GARBAGE_BYTES,
    VOLUMES_COMPACTED,
    COMPACTED_BYTES,
    COMPACTION_FREED_BYTES,
    VOLUME_COMMITS,
    VOLUME_JOBS,
    DISKS_FAILED,
    DISK_BLOCKS,
    DISK_USED_BYTES,
    DISK_AVAILABLE_BYTES,
    DISK_FAILED,
    VOLUME_APPEND_SECONDS,
];

pub(crate) fn bytes_written(n: u64) {
    metrics::counter!(BYTES_WRITTEN.name).increment(n);
}

pub(crate) fn bytes_read(n: u64) {
    metrics::counter!(BYTES_READ.name).increment(n);
}

/// `mode` is the send mode's label (`sendfile` or `copy`).
pub(crate) fn bytes_sent(mode: &'static str, n: u64) {
    metrics::counter!(SENT_BYTES.name, "mode" => mode).increment(n);
}

pub(crate) fn send_wait() {
    metrics::counter!(SEND_WAITS.name).increment(1);
}

pub(crate) fn corrupt_read() {
    metrics::counter!(CORRUPT_READS.name).increment(1);
}

pub(crate) fn chunk_rejected() {
    metrics::counter!(CHUNKS_REJECTED.name).increment(1);
}

pub(crate) fn request(op: &'static str, outcome: &'static str) {
    metrics::counter!(REQUESTS.name, "op" => op, "outcome" => outcome).increment(1);
}

pub(crate) fn protocol_error() {
    metrics::counter!(PROTOCOL_ERRORS.name).increment(1);
}

pub(crate) fn tls_refusal() {
    metrics::counter!(TLS_REFUSALS.name).increment(1);
}

pub(crate) fn token_refused(reason: &'static str) {
    metrics::counter!(TOKEN_REFUSALS.name, "reason" => reason).increment(1);
}

pub(crate) fn local_peer_refused() {
    metrics::counter!(LOCAL_PEERS_REFUSED.name).increment(1);
}

pub(crate) fn compacted(copied: u64, freed: u64) {
    metrics::counter!(VOLUMES_COMPACTED.name).increment(1);
    metrics::counter!(COMPACTED_BYTES.name).increment(copied);
    metrics::counter!(COMPACTION_FREED_BYTES.name).increment(freed);
}

pub(crate) fn disk_failed() {
    metrics::counter!(DISKS_FAILED.name).increment(1);
}

/// One disk's gauges: its `blocks`, `used` and `available` bytes, and
/// whether it `failed`.
pub(crate) fn disk_gauges(
    id: &DatanodeId,
    disk: &str,
    blocks: u64,
    used: u64,
    available: u64,
    failed: bool,
) {
    let labels = [("id", id.0.clone()), ("disk", disk.to_string())];
    metrics::gauge!(DISK_BLOCKS.name, &labels).set(blocks as f64);
    metrics::gauge!(DISK_USED_BYTES.name, &labels).set(used as f64);
    metrics::gauge!(DISK_AVAILABLE_BYTES.name, &labels).set(available as f64);
    metrics::gauge!(DISK_FAILED.name, &labels).set(if failed { 1.0 } else { 0.0 });
}

pub(crate) fn volume_append(took: std::time::Duration) {
    metrics::histogram!(VOLUME_APPEND_SECONDS.name).record(took.as_secs_f64());
}

pub(crate) fn volume_commit(jobs: usize) {
    metrics::counter!(VOLUME_COMMITS.name).increment(1);
    metrics::counter!(VOLUME_JOBS.name).increment(jobs as u64);
}

/// The store's committed `blocks` (`packed` of them in volumes), their
/// `used` bytes, and the volumes' `garbage` bytes.
pub(crate) fn store_gauges(id: &DatanodeId, blocks: u64, packed: u64, used: u64, garbage: u64) {
    metrics::gauge!(BLOCKS.name, "id" => id.0.clone()).set(blocks as f64);
    metrics::gauge!(USED_BYTES.name, "id" => id.0.clone()).set(used as f64);
    metrics::gauge!(PACKED_BLOCKS.name, "id" => id.0.clone()).set(packed as f64);
    metrics::gauge!(GARBAGE_BYTES.name, "id" => id.0.clone()).set(garbage as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_of_datanodes_in_one_process_stay_apart() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            store_gauges(&DatanodeId("dn-a".into()), 3, 0, 300, 0);
            store_gauges(&DatanodeId("dn-b".into()), 5, 0, 500, 0);
        });
        let text = handle.render();
        for line in [
            "tessera_datanode_store_blocks{id=\"dn-a\"} 3",
            "tessera_datanode_store_blocks{id=\"dn-b\"} 5",
            "tessera_datanode_store_used_bytes{id=\"dn-a\"} 300",
            "tessera_datanode_store_used_bytes{id=\"dn-b\"} 500",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing in:\n{text}"
            );
        }
    }
}
