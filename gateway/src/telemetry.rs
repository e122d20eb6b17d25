//! The request-id middleware: gives every request an id, runs it inside a
//! tracing span, stamps `x-amz-request-id` and `x-amz-id-2` on every
//! response (errors included), and records the S3 metrics.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::HeaderValue;
use proto::telemetry::Metric;
use rand::RngCore;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// The random id of one request, as S3 shows it (16 upper-case hex digits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// A fresh random id.
    pub fn random() -> Self {
        let mut bytes = [0u8; 8];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self(hex::encode_upper(bytes).into())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Response extension: the S3 operation, for the `op` metric label.
#[derive(Clone, Copy, Debug)]
pub struct OperationLabel(pub &'static str);

/// Response extension: the S3 error code of an error response.
#[derive(Clone, Copy, Debug)]
pub struct ErrorCodeLabel(pub &'static str);

/// The `x-amz-id-2` of this gateway: random once per process (as MinIO
/// gives one per node), so every response does not pay for 32 random bytes
/// and their base64.
fn host_id() -> &'static HeaderValue {
    static HOST_ID: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();
    HOST_ID.get_or_init(|| {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        HeaderValue::from_str(&STANDARD.encode(bytes)).expect("base64 is a valid header value")
    })
}

/// The status label of the request metrics, without formatting the common ones.
fn status_label(status: http::StatusCode) -> metrics::SharedString {
    let label = match status.as_u16() {
        200 => "200",
        204 => "204",
        206 => "206",
        304 => "304",
        400 => "400",
        403 => "403",
        404 => "404",
        409 => "409",
        412 => "412",
        416 => "416",
        500 => "500",
        501 => "501",
        503 => "503",
        other => return other.to_string().into(),
    };
    metrics::SharedString::const_str(label)
}

/// Counts body bytes received (PutObject, UploadPart, small XML bodies).
pub fn count_bytes_in(n: usize) {
    metrics::counter!(S3_BYTES_IN.name).increment(n as u64);
}

/// Counts body bytes sent (GetObject).
pub fn count_bytes_out(n: usize) {
    metrics::counter!(S3_BYTES_OUT.name).increment(n as u64);
}

/// Counts an object written with cells fitted to it (smaller than its
/// layout's stripe).
pub fn count_fitted_object() {
    metrics::counter!(S3_FITTED_CELL_OBJECTS.name).increment(1);
}

/// One stage of an object write, for `tessera_s3_put_stage_seconds`: where
/// a PUT's time goes (which queue a saturated write path waits in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutStage {
    /// Waiting for an upload slot's shares.
    Slot,
    /// Streaming the body into block files, up to their commits.
    Body,
    /// Meta's commit of the object record.
    Commit,
}

impl PutStage {
    fn label(self) -> &'static str {
        match self {
            Self::Slot => "slot",
            Self::Body => "body",
            Self::Commit => "commit",
        }
    }
}

/// Records how long a PUT spent in `stage`.
pub fn put_stage(stage: PutStage, took: std::time::Duration) {
    metrics::histogram!(S3_PUT_STAGE_SECONDS.name, "stage" => stage.label())
        .record(took.as_secs_f64());
}

pub(crate) const S3_REQUESTS: Metric = Metric::counter(
    "tessera_s3_requests_total",
    "S3 requests by operation and status",
);
pub(crate) const S3_REQUEST_SECONDS: Metric = Metric::histogram(
    "tessera_s3_request_seconds",
    "Time to the response head of S3 requests, by operation",
);
pub(crate) const S3_PUT_STAGE_SECONDS: Metric = Metric::histogram(
    "tessera_s3_put_stage_seconds",
    "Time object writes spent in each stage: slot (waiting for an upload slot), body (block files written and committed), commit (meta's commit)",
);
pub(crate) const S3_ERRORS: Metric = Metric::counter(
    "tessera_s3_errors_total",
    "S3 error responses by error code",
);
pub(crate) const S3_BYTES_IN: Metric =
    Metric::counter("tessera_s3_bytes_in_total", "Request body bytes");
pub(crate) const S3_BYTES_OUT: Metric =
    Metric::counter("tessera_s3_bytes_out_total", "Response body bytes");
pub(crate) const S3_FITTED_CELL_OBJECTS: Metric = Metric::counter(
    "tessera_s3_fitted_cell_objects_total",
    "EC objects smaller than a stripe, written with cells fitted to them",
);
pub(crate) const AUTH_FAILURES: Metric = Metric::counter(
    "tessera_gateway_auth_failures_total",
    "Requests refused by authentication, by reason",
);
pub(crate) const CONNECTIONS_REFUSED: Metric = Metric::counter(
    "tessera_gateway_connections_refused_total",
    "Connections refused at the connection limit",
);
pub(crate) const CREDENTIAL_CACHE_HITS: Metric = Metric::counter(
    "tessera_gateway_credential_cache_hits_total",
    "Signatures checked with a cached secret (no meta request)",
);
pub(crate) const GET_MEMORY_WAITS_EXCEEDED: Metric = Metric::counter(
    "tessera_gateway_get_memory_waits_exceeded_total",
    "GETs that waited too long for read buffer memory and were refused",
);
pub(crate) const HEADER_TIMEOUTS: Metric = Metric::counter(
    "tessera_gateway_header_timeouts_total",
    "Connections closed because request headers did not arrive in time",
);
pub(crate) const OPEN_CONNECTIONS: Metric = Metric::gauge(
    "tessera_gateway_open_connections",
    "Client connections open",
);
pub(crate) const READER_CACHE_HITS: Metric = Metric::counter(
    "tessera_gateway_reader_cache_hits_total",
    "GETs that reused a cached object reader",
);
pub(crate) const SLOW_BODIES: Metric = Metric::counter(
    "tessera_gateway_slow_bodies_total",
    "Requests whose body arrived slower than the minimum rate and were cut",
);
pub(crate) const UPLOAD_SLOT_TIMEOUTS: Metric = Metric::counter(
    "tessera_gateway_upload_slot_timeouts_total",
    "Uploads refused after waiting too long for an upload slot",
);

/// Every metric the gateway records, S3's and its own.
pub const METRICS: &[Metric] = &[
    S3_REQUESTS,
    S3_REQUEST_SECONDS,
    S3_PUT_STAGE_SECONDS,
    S3_ERRORS,
    S3_BYTES_IN,
    S3_BYTES_OUT,
    S3_FITTED_CELL_OBJECTS,
    AUTH_FAILURES,
    CONNECTIONS_REFUSED,
    CREDENTIAL_CACHE_HITS,
    GET_MEMORY_WAITS_EXCEEDED,
    HEADER_TIMEOUTS,
    OPEN_CONNECTIONS,
    READER_CACHE_HITS,
    SLOW_BODIES,
    UPLOAD_SLOT_TIMEOUTS,
];

/// The middleware itself (`axum::middleware::from_fn(track)`).
pub async fn track(mut request: Request, next: Next) -> Response {
    let id = RequestId::random();
    request.extensions_mut().insert(id.clone());
    // Only the id: the fmt layer formats a span's fields when the span is
    // made, for every request; method, path and operation go in the
    // debug event at the end.
    let span = tracing::info_span!("s3", request_id = %id);
    let (method, path) = tracing::enabled!(tracing::Level::DEBUG)
        .then(|| (request.method().clone(), request.uri().path().to_string()))
        .unzip();
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed().as_secs_f64();

    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        headers.insert("x-amz-request-id", value);
    }
    headers.insert("x-amz-id-2", host_id().clone());
    let op = response
        .extensions()
        .get::<OperationLabel>()
        .map_or("Unknown", |l| l.0);
    let status = response.status().as_u16();
    metrics::counter!(S3_REQUESTS.name, "op" => op, "status" => status_label(response.status()))
        .increment(1);
    metrics::histogram!(S3_REQUEST_SECONDS.name, "op" => op).record(elapsed);
    if let Some(code) = response.extensions().get::<ErrorCodeLabel>() {
        metrics::counter!(S3_ERRORS.name, "code" => code.0).increment(1);
    }
    if let (Some(method), Some(path)) = (method, path) {
        span.in_scope(|| tracing::debug!(%method, path, op, status, elapsed, "request done"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_hex_and_distinct() {
        let a = RequestId::random();
        let b = RequestId::random();
        assert_eq!(a.as_str().len(), 16);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
