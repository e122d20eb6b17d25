//! What the object browser and its versions view share: where the browser
//! is (prefix, page, view), links, breadcrumbs, and the listings a user may
//! not be allowed.

use crate::error::ConsoleError;
use crate::gateway::{Answer, Keys, S3Request};
use crate::Console;
use maud::{html, Markup};
use serde::Deserialize;

/// Entries on one page of the browser.
pub(crate) const PAGE_SIZE: usize = 100;

/// The link to `path` with these query parameters.
pub(crate) fn link(path: &str, params: &[(&str, &str)]) -> String {
    let params: Vec<&(&str, &str)> = params.iter().filter(|(_, v)| !v.is_empty()).collect();
    if params.is_empty() {
        return path.to_string();
    }
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(params).unwrap_or_default()
    )
}

/// Where the browser is: a prefix, a page, and whether it shows every
/// version (`versions=1`) or the current objects.
#[derive(Deserialize, Default)]
pub(crate) struct BrowseQuery {
    #[serde(default)]
    pub(crate) prefix: String,
    /// The continuation token of the objects' page.
    #[serde(default)]
    pub(crate) token: String,
    #[serde(default)]
    pub(crate) versions: String,
    /// Where the versions' page starts, as ListObjectVersions names it.
    #[serde(default, rename = "key-marker")]
    pub(crate) key_marker: String,
    #[serde(default, rename = "version-id-marker")]
    pub(crate) version_marker: String,
}

impl BrowseQuery {
    /// Whether the versions view is asked for.
    pub(crate) fn shows_versions(&self) -> bool {
        self.versions == "1"
    }
}

/// The breadcrumbs of `prefix` in `bucket`: each folder links to itself.
pub(crate) fn breadcrumbs(bucket: &str, prefix: &str, last: Option<&str>) -> Markup {
    let base = format!("/buckets/{bucket}");
    let mut folders = Vec::new();
    let mut at = 0;
    for (i, _) in prefix.match_indices('/') {
        folders.push((&prefix[at..i], &prefix[..=i]));
        at = i + 1;
    }
    html! {
        nav aria-label="Breadcrumbs" {
            ol.breadcrumbs {
                li { a href="/buckets" { "Buckets" } }
                li { a href=(base) { (bucket) } }
                @for (name, path) in &folders {
                    li { a href=(link(&base, &[("prefix", path)])) { (name) } }
                }
                @if let Some(last) = last {
                    li aria-current="page" { (last) }
                }
            }
        }
    }
}

/// The answer to a request the user may not be allowed (a tag set, the
/// versions), or None when the gateway says AccessDenied: the page shows the
/// rest.
pub(crate) async fn if_allowed(
    console: &Console,
    keys: &Keys,
    request: S3Request<'_>,
) -> Result<Option<Answer>, ConsoleError> {
    console
        .gateway
        .call_unless(keys, request, http::StatusCode::FORBIDDEN)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_encode_their_parameters_and_skip_empty_ones() {
        assert_eq!(link("/b", &[]), "/b");
        assert_eq!(link("/b", &[("prefix", "")]), "/b");
        assert_eq!(
            link("/b/object", &[("key", "a b/c&d=é"), ("version", "")]),
            "/b/object?key=a+b%2Fc%26d%3D%C3%A9"
        );
    }

    #[test]
    fn breadcrumbs_link_every_folder() {
        let html = breadcrumbs("bk", "a/b c/", Some("f.txt")).into_string();
        assert!(html.contains(r#"<a href="/buckets/bk">bk</a>"#), "{html}");
        assert!(
            html.contains(r#"<a href="/buckets/bk?prefix=a%2F">a</a>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<a href="/buckets/bk?prefix=a%2Fb+c%2F">b c</a>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<li aria-current="page">f.txt</li>"#),
            "{html}"
        );
    }
}
