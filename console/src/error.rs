//! Why a console request failed, and the page (or upload answer) that says
//! so (drawn inside the navigation by [`crate::framing`]).

use crate::document;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use maud::{html, Markup};
use meta_api::MetaError;
use std::fmt;

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
    /// A bucket that S3 would not delete (BucketNotEmpty), with what it
    /// still holds.
    #[error("{0}")]
    BucketNotEmpty(Leftovers),
    /// An address that names no page of the console.
    #[error("there is no page at this address")]
    NoSuchPage,
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

/// What a bucket that S3 would not delete still holds, as far as one page
/// of each listing shows (none of it when the user may not list it).
#[derive(Debug, Default)]
pub(crate) struct Leftovers {
    /// The bucket.
    pub(crate) bucket: String,
    /// Versions of objects, the current ones included (in a bucket that
    /// never had versioning, its objects).
    pub(crate) versions: usize,
    /// Delete markers.
    pub(crate) delete_markers: usize,
    /// Whether a version has an id of its own: the bucket has had versioning.
    pub(crate) versioned: bool,
    /// A listing had more than its page: the counts are lower bounds.
    pub(crate) more: bool,
}

/// `n` of `what`, with the plural `s` when not one.
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl Leftovers {
    /// The view that lists what is left, and its label.
    fn where_to_look(&self) -> Option<(String, String)> {
        let bucket = &self.bucket;
        if self.versioned || self.delete_markers > 0 {
            Some((
                format!("/buckets/{bucket}?versions=1"),
                format!("Show every version in {bucket}"),
            ))
        } else if self.versions > 0 {
            Some((
                format!("/buckets/{bucket}"),
                format!("Show the objects in {bucket}"),
            ))
        } else {
            None
        }
    }
}

impl fmt::Display for Leftovers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut held = Vec::new();
        if self.versioned || self.delete_markers > 0 {
            if self.versions > 0 {
                held.push(count(self.versions, "object version"));
            }
            if self.delete_markers > 0 {
                held.push(count(self.delete_markers, "delete marker"));
            }
        } else if self.versions > 0 {
            held.push(count(self.versions, "object"));
        }
        let bucket = &self.bucket;
        let Some((last, rest)) = held.split_last() else {
            return write!(
                f,
                "bucket {bucket} is not empty: delete its objects, their versions and delete \
                 markers first, then delete the bucket"
            );
        };
        let list = match rest {
            [] => last.clone(),
            _ => format!("{} and {last}", rest.join(", ")),
        };
        let at_least = if self.more { "at least " } else { "" };
        let them = if rest.is_empty() && last.starts_with("1 ") {
            "it"
        } else {
            "them"
        };
        write!(
            f,
            "bucket {bucket} still holds {at_least}{list}; delete {them} first, then delete the bucket"
        )
    }
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
            ConsoleError::BucketNotEmpty(_) => StatusCode::CONFLICT,
            ConsoleError::NoSuchPage => StatusCode::NOT_FOUND,
            ConsoleError::TooManySignIns(_) => StatusCode::TOO_MANY_REQUESTS,
            ConsoleError::NotAdmin | ConsoleError::NoKeys | ConsoleError::Forged => {
                StatusCode::FORBIDDEN
            }
        }
    }

    fn page(&self) -> ErrorPage {
        match self {
            ConsoleError::BucketNotEmpty(leftovers) => ErrorPage {
                heading: format!("Bucket {} is not empty", leftovers.bucket),
                text: self.to_string(),
                next_step: leftovers.where_to_look(),
            },
            _ => ErrorPage::plain(self.to_string()),
        }
    }
}

/// What an error page says; kept in the answer's extensions so that
/// [`crate::framing::framed`] can draw it again inside the navigation.
#[derive(Clone, Debug)]
pub(crate) struct ErrorPage {
    heading: String,
    text: String,
    /// A link to where the user can act on the error, and its label.
    next_step: Option<(String, String)>,
}

impl ErrorPage {
    /// A page that says `text` under a generic heading.
    pub(crate) fn plain(text: String) -> Self {
        Self {
            heading: "Something went wrong".into(),
            text,
            next_step: None,
        }
    }

    /// The page's content, to go inside a document.
    pub(crate) fn body(&self) -> Markup {
        html! {
            h1 { (self.heading) }
            p.error role="alert" { (self.text) }
            @if let Some((href, label)) = &self.next_step {
                p { a.button href=(href) { (label) } }
            }
            p { a href="/buckets" { "Back to the buckets" } }
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = self.status();
        let page = self.page();
        let mut response = (status, document::bare("Error", page.body())).into_response();
        // Header values are visible ASCII: anything else is replaced.
        let header: String = page
            .text
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
        response.extensions_mut().insert(page);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(versions: usize, delete_markers: usize, versioned: bool) -> Leftovers {
        Leftovers {
            bucket: "bk".into(),
            versions,
            delete_markers,
            versioned,
            ..Leftovers::default()
        }
    }

    #[test]
    fn a_bucket_that_is_not_empty_says_what_it_holds_and_where_to_see_it() {
        let versioned = leftovers(2, 1, true);
        assert_eq!(
            versioned.to_string(),
            "bucket bk still holds 2 object versions and 1 delete marker; delete them first, then delete the bucket"
        );
        assert_eq!(
            versioned.where_to_look().unwrap().0,
            "/buckets/bk?versions=1"
        );
        let plain = leftovers(1, 0, false);
        assert_eq!(
            plain.to_string(),
            "bucket bk still holds 1 object; delete it first, then delete the bucket"
        );
        assert_eq!(plain.where_to_look().unwrap().0, "/buckets/bk");
        let many = Leftovers {
            more: true,
            ..leftovers(1000, 0, true)
        };
        assert!(
            many.to_string()
                .starts_with("bucket bk still holds at least 1000 object versions;"),
            "{many}"
        );
        let unknown = leftovers(0, 0, false);
        assert!(unknown.to_string().contains("is not empty"), "{unknown}");
        assert!(unknown.where_to_look().is_none());
    }

    #[test]
    fn an_error_page_links_to_its_next_step() {
        let error = ConsoleError::BucketNotEmpty(leftovers(2, 1, true));
        assert_eq!(error.status(), StatusCode::CONFLICT);
        let html = error.page().body().into_string();
        assert!(html.contains("<h1>Bucket bk is not empty</h1>"), "{html}");
        assert!(
            html.contains(r#"<a class="button" href="/buckets/bk?versions=1">"#),
            "{html}"
        );
    }
}
