//! The request-id middleware: gives every request an id, runs it inside a
//! tracing span, stamps `x-amz-request-id` and `x-amz-id-2` on every
//! response (errors included), and records the S3 metrics.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::HeaderValue;
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
    metrics::counter!("tessera_s3_bytes_in_total").increment(n as u64);
}

/// Counts body bytes sent (GetObject).
pub fn count_bytes_out(n: usize) {
    metrics::counter!("tessera_s3_bytes_out_total").increment(n as u64);
}

/// Counts an object written with cells fitted to it (smaller than its
/// layout's stripe).
pub fn count_fitted_object() {
    metrics::counter!("tessera_s3_fitted_cell_objects_total").increment(1);
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
    metrics::histogram!("tessera_s3_put_stage_seconds", "stage" => stage.label())
        .record(took.as_secs_f64());
}

/// Registers the descriptions of the S3 metrics with the installed recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "tessera_s3_requests_total",
        "S3 requests by operation and status"
    );
    metrics::describe_histogram!(
        "tessera_s3_request_seconds",
        metrics::Unit::Seconds,
        "Time to the response head of S3 requests, by operation"
    );
    metrics::describe_histogram!(
        "tessera_s3_put_stage_seconds",
        metrics::Unit::Seconds,
        "Time object writes spent in each stage: slot (waiting for an upload slot), body (block files written and committed), commit (meta's commit)"
    );
    metrics::describe_counter!(
        "tessera_s3_errors_total",
        "S3 error responses by error code"
    );
    metrics::describe_counter!(
        "tessera_s3_bytes_in_total",
        metrics::Unit::Bytes,
        "Request body bytes"
    );
    metrics::describe_counter!(
        "tessera_s3_bytes_out_total",
        metrics::Unit::Bytes,
        "Response body bytes"
    );
    metrics::describe_counter!(
        "tessera_s3_fitted_cell_objects_total",
        "EC objects smaller than a stripe, written with cells fitted to them"
    );
}

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
    metrics::counter!("tessera_s3_requests_total", "op" => op, "status" => status_label(response.status()))
        .increment(1);
    metrics::histogram!("tessera_s3_request_seconds", "op" => op).record(elapsed);
    if let Some(code) = response.extensions().get::<ErrorCodeLabel>() {
        metrics::counter!("tessera_s3_errors_total", "code" => code.0).increment(1);
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
