//! Which connections may carry another request after this one.
//!
//! An error is often answered before the request body was read (a missing
//! upload, a refused signature): nothing of the body is wanted. A client that
//! sent `Expect: 100-continue` then never sends the body, one that did not is
//! still sending it, and what the connection holds next is ambiguous. hyper
//! closes such a connection, but without saying so, and a client that reuses
//! it in the meantime sees its next request fail in odd ways. So an error
//! answer to a request that declared a body says `Connection: close`: the
//! client opens a new connection for the next request (RFC 9110 §10.1.1).

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::HeaderMap;

/// True when the request announced a body (a non-zero length, or chunks).
fn declares_body(headers: &HeaderMap) -> bool {
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|len| len.as_bytes() != b"0")
}

/// The middleware (`axum::middleware::from_fn(close_after_refused_body)`).
pub async fn close_after_refused_body(request: Request, next: Next) -> Response {
    let had_body = declares_body(request.headers());
    let mut response = next.run(request).await;
    let status = response.status();
    if had_body && (status.is_client_error() || status.is_server_error()) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_declared_by_a_length_above_zero_or_by_chunks() {
        let mut headers = HeaderMap::new();
        assert!(!declares_body(&headers));
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
        assert!(!declares_body(&headers));
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("4"));
        assert!(declares_body(&headers));
        let mut chunked = HeaderMap::new();
        chunked.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        assert!(declares_body(&chunked));
    }
}
