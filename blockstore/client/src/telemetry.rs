//! The block client's metrics, each named and described once: recorded by
//! name where they happen, described by [`METRICS`] when the process starts.

use proto::telemetry::Metric;

pub(crate) const BAD_REPLICAS_REPORTED: Metric = Metric::counter(
    "tessera_client_bad_replicas_reported_total",
    "Corrupt or missing block files this client reported to meta",
);
pub(crate) const BUFFER_POOL_TAKES: Metric = Metric::counter(
    "tessera_client_buffer_pool_takes_total",
    "Buffers taken from the pool of stripe buffers",
);
pub(crate) const COPIED_BYTES: Metric = Metric::counter(
    "tessera_client_copied_bytes_total",
    "Bytes read through a copy into a buffer (not sent straight from the datanode)",
);
pub(crate) const DEGRADED_READS: Metric = Metric::counter(
    "tessera_client_degraded_reads_total",
    "Reads that rebuilt data from parity because a block file was missing or bad",
);
pub(crate) const INLINE_KEY_BYTES: Metric = Metric::counter(
    "tessera_client_inline_key_bytes_total",
    "Bytes of objects kept inline in meta's records",
);
pub(crate) const INLINE_KEYS: Metric = Metric::counter(
    "tessera_client_inline_keys_total",
    "Objects kept inline in meta's records",
);
pub(crate) const INLINE_READ_BYTES: Metric = Metric::counter(
    "tessera_client_inline_read_bytes_total",
    "Bytes read from objects kept inline in meta",
);
pub(crate) const READ_BYTES: Metric = Metric::counter(
    "tessera_client_read_bytes_total",
    "Bytes of object data read from datanodes",
);
pub(crate) const SHORT_CIRCUIT_FALLBACKS: Metric = Metric::counter(
    "tessera_client_short_circuit_fallbacks_total",
    "Short-circuit reads that fell back to the datanode's port",
);
pub(crate) const SHORT_CIRCUIT_READS: Metric = Metric::counter(
    "tessera_client_short_circuit_reads_total",
    "Reads served by opening the block file directly (short-circuit)",
);
pub(crate) const STRIPES_WRITTEN: Metric = Metric::counter(
    "tessera_client_stripes_written_total",
    "Erasure-coded stripes written",
);
pub(crate) const SUSPECT_MARKS: Metric = Metric::counter(
    "tessera_client_suspect_marks_total",
    "Datanodes marked suspect after a failed request (avoided for a while)",
);
pub(crate) const WRITE_BYTES: Metric = Metric::counter(
    "tessera_client_write_bytes_total",
    "Bytes of object data written to datanodes",
);
pub(crate) const WRITE_FAILOVERS: Metric = Metric::counter(
    "tessera_client_write_failovers_total",
    "Writes moved to another datanode after one failed",
);

/// Every metric the block client records.
pub const METRICS: &[Metric] = &[
    BAD_REPLICAS_REPORTED,
    BUFFER_POOL_TAKES,
    COPIED_BYTES,
    DEGRADED_READS,
    INLINE_KEY_BYTES,
    INLINE_KEYS,
    INLINE_READ_BYTES,
    READ_BYTES,
    SHORT_CIRCUIT_FALLBACKS,
    SHORT_CIRCUIT_READS,
    STRIPES_WRITTEN,
    SUSPECT_MARKS,
    WRITE_BYTES,
    WRITE_FAILOVERS,
];
