//! Why a console request failed, and the page (or upload answer) that says so.

use crate::document;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use maud::html;
use meta_api::MetaError;

/// The header that carries an error's text to the upload script.
pub(crate) const ERROR_HEADER: &str = "x-console-error";

/// Why a console request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsoleError {
    /// The gateway refused the request: its S3 code and message, shown as
    /// they are (an AccessDenied stays 403).
    #[error("{code}: {message}")]
    S3 {
        /// The answer's status.
        status: StatusCode,
        /// The S3 error code.
        code: String,
        /// The S3 error message.
        message: String,
    },
    /// The gateway could not be reached or answered with something unreadable.
    #[error("the S3 gateway could not be reached: {0}")]
    Gateway(String),
    /// Meta refused or could not be reached.
    #[error("the metadata service: {0}")]
    Meta(#[from] MetaError),
    /// A form field or parameter is not acceptable.
    #[error("{0}")]
    BadInput(String),
    /// An admin page asked for by someone else.
    #[error("this page is for the root user and the admin token")]
    NotAdmin,
    /// A bucket or object page asked for by the admin token, which has no keys.
    #[error("the admin token has no S3 keys: sign in with an access key to see buckets")]
    NoKeys,
    /// Too many failed sign-ins from this address: the seconds to wait.
    #[error("too many failed sign-ins from this address: try again in {0} seconds")]
    TooManySignIns(u64),
    /// A request whose Host is not one of the console's names.
    #[error("this console does not answer to that host name (see --console-host)")]
    UnknownHost,
    /// A change asked for by a browser whose session ended.
    #[error("your session has ended: sign in again")]
    SignedOut,
    /// A form without this session's token, or sent from another site.
    #[error("this form was not sent by this console's page (or the page is stale): reload it and try again")]
    Forged,
}

impl ConsoleError {
    fn status(&self) -> StatusCode {
        match self {
            // Anything but an error status from the gateway is no answer
            // the console can pass on.
            ConsoleError::S3 { status, .. }
                if status.is_client_error() || status.is_server_error() =>
            {
                *status
            }
            ConsoleError::S3 { .. } => StatusCode::BAD_GATEWAY,
            ConsoleError::UnknownHost => StatusCode::MISDIRECTED_REQUEST,
            ConsoleError::SignedOut => StatusCode::UNAUTHORIZED,
            ConsoleError::Gateway(_) | ConsoleError::Meta(_) => StatusCode::BAD_GATEWAY,
            ConsoleError::BadInput(_) => StatusCode::BAD_REQUEST,
            ConsoleError::TooManySignIns(_) => StatusCode::TOO_MANY_REQUESTS,
            ConsoleError::NotAdmin | ConsoleError::NoKeys | ConsoleError::Forged => {
                StatusCode::FORBIDDEN
            }
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = self.status();
        let text = self.to_string();
        let page = document::bare(
            "Error",
            html! {
                h1 { "Something went wrong" }
                p.error role="alert" { (text) }
                p { a href="/buckets" { "Back to the buckets" } }
            },
        );
        let mut response = (status, page).into_response();
        // Header values are visible ASCII: anything else is replaced.
        let header: String = text
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if let Ok(value) = HeaderValue::from_str(&header) {
            response.headers_mut().insert(ERROR_HEADER, value);
        }
        response
    }
}
