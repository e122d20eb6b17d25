//! Names taken from a page's path (a bucket, a user, an access key), checked
//! before any handler builds a link, a form action or a redirect from them.

use crate::error::ConsoleError;
use axum::extract::{FromRequestParts, Path};
use axum::response::{IntoResponse, Response};
use http::request::Parts;

/// A bucket, user or access key name from the path: letters, digits, `.`,
/// `-` and `_`, as meta allows in each of them.
pub(crate) struct Named(pub(crate) String);

fn valid(name: &str) -> bool {
    (1..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

impl<S: Send + Sync> FromRequestParts<S> for Named {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if !valid(&name) {
            let why = format!("{name:?} is not a bucket, user or access key name");
            return Err(ConsoleError::BadInput(why).into_response());
        }
        Ok(Named(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for name in ["photos", "my.bucket-1", "alice_2", "AKIAIOSFODNN7EXAMPLE"] {
            assert!(valid(name), "{name}");
        }
        for name in ["", "a\nb", "a/b", "a b", "a%0A", "<x>", &"a".repeat(256)] {
            assert!(!valid(name), "{name:?}");
        }
    }
}
