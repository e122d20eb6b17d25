//! Error answers drawn as pages of the console: inside the navigation for
//! a signed-in browser, whatever made them (a handler's [`crate::error::ConsoleError`],
//! an extractor's or the router's plain-text refusal).

use crate::document;
use crate::error::{ErrorPage, ERROR_HEADER};
use crate::layout;
use crate::Console;
use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header;
use std::sync::Arc;

/// The most of a plain-text refusal (axum's extractors and router) read to
/// show it on a page.
const MAX_REFUSAL_TEXT: usize = 16 * 1024;

/// Draws every error page inside the navigation when the browser is signed
/// in (handlers and extractors return a [`crate::error::ConsoleError`] and know nothing of
/// the layout), and gives the plain-text refusals of axum's extractors and
/// router (a malformed query, an unknown method) a page of their own.
/// Pages with a body of their own (the sign-in form's refusal) pass as
/// they are.
pub(crate) async fn framed(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    let jar = console.jar(request.headers());
    let response = next.run(request).await;
    let status = response.status();
    if !status.is_client_error() && !status.is_server_error() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let session = console.sessions.of_jar(&jar);
    let page = match (parts.extensions.remove::<ErrorPage>(), &session) {
        (Some(page), Some(_)) => page,
        (Some(_), None) => return Response::from_parts(parts, body),
        (None, _) => {
            let plain = parts.headers.get(header::CONTENT_TYPE).is_none_or(|kind| {
                kind.to_str()
                    .is_ok_and(|kind| kind.starts_with("text/plain"))
            });
            if !plain {
                return Response::from_parts(parts, body);
            }
            let text = to_bytes(body, MAX_REFUSAL_TEXT)
                .await
                .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
                .unwrap_or_default();
            if text.is_empty() {
                ErrorPage::plain(status.canonical_reason().unwrap_or("Error").to_string())
            } else {
                ErrorPage::plain(text)
            }
        }
    };
    let html = match &session {
        Some(session) => layout::page("Error", session, page.body()),
        None => document::bare("Error", page.body()),
    };
    let mut response = (status, html).into_response();
    if let Some(value) = parts.headers.get(ERROR_HEADER) {
        response.headers_mut().insert(ERROR_HEADER, value.clone());
    }
    response
}
