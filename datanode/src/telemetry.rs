//! The datanode's metrics, named in one place. Gauges carry the datanode's
//! id (label `id`): one process may run several datanodes (`tessera server`),
//! and a gauge without it would hold whichever one wrote last.

use proto::DatanodeId;

/// Bytes of block data accepted by writes.
pub const BYTES_WRITTEN: &str = "tessera_datanode_bytes_written_total";
/// Bytes of block data sent by reads.
pub const BYTES_READ: &str = "tessera_datanode_bytes_read_total";
/// Bytes of read replies' data sent, by how they were sent (label `mode`:
/// `sendfile` or `copy`); shows which path serves the reads.
pub const SENT_BYTES: &str = "tessera_datanode_sent_bytes_total";
/// Times a sendfile reply found the client's socket full and waited for it
/// to drain (the client reads slower than the disk and network deliver).
pub const SEND_WAITS: &str = "tessera_datanode_send_waits_total";
/// Reads refused because the block data on disk failed its CRCs
/// (verify-on-read): bit rot or a damaged disk.
pub const CORRUPT_READS: &str = "tessera_datanode_corrupt_reads_total";
/// Chunks refused on arrival because their CRC did not match.
pub const CHUNKS_REJECTED: &str = "tessera_datanode_chunks_rejected_total";
/// Requests served, by operation and outcome.
pub const REQUESTS: &str = "tessera_datanode_requests_total";
/// Frames that could not be decoded (the connection was closed).
pub const PROTOCOL_ERRORS: &str = "tessera_datanode_protocol_errors_total";
/// Block requests refused for want of a valid block token, by reason
/// (label `reason`: missing, expired, bad_signature...).
pub const TOKEN_REFUSALS: &str = "tessera_datanode_token_refusals_total";
/// Short-circuit connections refused because the peer runs as another user.
pub const LOCAL_PEERS_REFUSED: &str = "tessera_datanode_local_peers_refused_total";
/// Connections refused for want of mutual TLS: no certificate of the cluster
/// CA, no TLS at all, a handshake that did not finish in time, or clear text
/// from another host.
pub const TLS_REFUSALS: &str = "tessera_datanode_tls_refusals_total";
/// Committed blocks, by datanode id.
pub const BLOCKS: &str = "tessera_datanode_store_blocks";
/// Bytes of committed block data, by datanode id.
pub const USED_BYTES: &str = "tessera_datanode_store_used_bytes";
/// Committed blocks packed into volumes, by datanode id.
pub const PACKED_BLOCKS: &str = "tessera_datanode_store_packed_blocks";
/// Bytes of deleted records still held by the volumes, by datanode id.
pub const GARBAGE_BYTES: &str = "tessera_datanode_store_garbage_bytes";
/// Volumes rewritten without their deleted records.
pub const VOLUMES_COMPACTED: &str = "tessera_datanode_volumes_compacted_total";
/// Bytes of live records compaction copied.
pub const COMPACTED_BYTES: &str = "tessera_datanode_compacted_bytes_total";
/// Bytes of volumes compaction removed (live and dead).
pub const COMPACTION_FREED_BYTES: &str = "tessera_datanode_compaction_freed_bytes_total";
/// Group commits of the volume writers: each one write and one fdatasync
/// per file it touched, shared by every append and delete waiting then.
pub const VOLUME_COMMITS: &str = "tessera_datanode_volume_commits_total";
/// Appends and deletes the group commits served (divided by
/// `VOLUME_COMMITS`: how many shared each sync).
pub const VOLUME_JOBS: &str = "tessera_datanode_volume_jobs_total";
/// Disks taken out of service (an I/O error meaning the device fails, or a
/// failed probe).
pub const DISKS_FAILED: &str = "tessera_datanode_disks_failed_total";
/// Committed blocks on each disk (labels `id`, `disk`: its folder).
pub const DISK_BLOCKS: &str = "tessera_datanode_disk_blocks";
/// Bytes of committed block data on each disk.
pub const DISK_USED_BYTES: &str = "tessera_datanode_disk_used_bytes";
/// Bytes each disk's filesystem can still take.
pub const DISK_AVAILABLE_BYTES: &str = "tessera_datanode_disk_available_bytes";
/// 1 for a disk out of service, 0 for one serving.
pub const DISK_FAILED: &str = "tessera_datanode_disk_failed";

/// Time from a commit's append to a volume to its acknowledgement: the wait
/// for the writer and its group commit (write and fdatasync).
pub const VOLUME_APPEND_SECONDS: &str = "tessera_datanode_volume_append_seconds";

pub(crate) fn bytes_written(n: u64) {
    metrics::counter!(BYTES_WRITTEN).increment(n);
}

pub(crate) fn bytes_read(n: u64) {
    metrics::counter!(BYTES_READ).increment(n);
}

/// `mode` is the send mode's label (`sendfile` or `copy`).
pub(crate) fn bytes_sent(mode: &'static str, n: u64) {
    metrics::counter!(SENT_BYTES, "mode" => mode).increment(n);
}

pub(crate) fn send_wait() {
    metrics::counter!(SEND_WAITS).increment(1);
}

pub(crate) fn corrupt_read() {
    metrics::counter!(CORRUPT_READS).increment(1);
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

pub(crate) fn tls_refusal() {
    metrics::counter!(TLS_REFUSALS).increment(1);
}

pub(crate) fn token_refused(reason: &'static str) {
    metrics::counter!(TOKEN_REFUSALS, "reason" => reason).increment(1);
}

pub(crate) fn local_peer_refused() {
    metrics::counter!(LOCAL_PEERS_REFUSED).increment(1);
}

pub(crate) fn compacted(copied: u64, freed: u64) {
    metrics::counter!(VOLUMES_COMPACTED).increment(1);
    metrics::counter!(COMPACTED_BYTES).increment(copied);
    metrics::counter!(COMPACTION_FREED_BYTES).increment(freed);
}

pub(crate) fn disk_failed() {
    metrics::counter!(DISKS_FAILED).increment(1);
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
    metrics::gauge!(DISK_BLOCKS, &labels).set(blocks as f64);
    metrics::gauge!(DISK_USED_BYTES, &labels).set(used as f64);
    metrics::gauge!(DISK_AVAILABLE_BYTES, &labels).set(available as f64);
    metrics::gauge!(DISK_FAILED, &labels).set(if failed { 1.0 } else { 0.0 });
}

pub(crate) fn volume_append(took: std::time::Duration) {
    metrics::histogram!(VOLUME_APPEND_SECONDS).record(took.as_secs_f64());
}

pub(crate) fn volume_commit(jobs: usize) {
    metrics::counter!(VOLUME_COMMITS).increment(1);
    metrics::counter!(VOLUME_JOBS).increment(jobs as u64);
}

/// The store's committed `blocks` (`packed` of them in volumes), their
/// `used` bytes, and the volumes' `garbage` bytes.
pub(crate) fn store_gauges(id: &DatanodeId, blocks: u64, packed: u64, used: u64, garbage: u64) {
    metrics::gauge!(BLOCKS, "id" => id.0.clone()).set(blocks as f64);
    metrics::gauge!(USED_BYTES, "id" => id.0.clone()).set(used as f64);
    metrics::gauge!(PACKED_BLOCKS, "id" => id.0.clone()).set(packed as f64);
    metrics::gauge!(GARBAGE_BYTES, "id" => id.0.clone()).set(garbage as f64);
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
