//! The object browser's versions view: every version and delete marker
//! under a prefix, in pages, each version downloadable and any of them
//! deleted for good; and what the browser needs to know of a bucket's
//! versioning.

use crate::document::size;
use crate::error::ConsoleError;
use crate::gateway::{Keys, S3Request};
use crate::layout::{self, csrf_field};
use crate::pages::listing::{breadcrumbs, if_allowed, link, BrowseQuery, PAGE_SIZE};
use crate::session::Session;
use crate::xml::{self, Fields};
use crate::Console;
use http::Method;
use maud::{html, Markup};

/// The value of the `view` field that sends a delete back to this view.
pub(crate) const VIEW: &str = "versions";

/// A bucket's versioning, as GetBucketVersioning shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Versioning {
    /// Never turned on: every object is its one null version.
    Off,
    /// Every write makes a version; a delete, a delete marker.
    Enabled,
    /// Writes replace the null version; older versions stay.
    Suspended,
    /// The user may not ask.
    Unknown,
}

impl Versioning {
    /// Whether the bucket may hold versions besides its current objects.
    pub(crate) fn keeps_versions(self) -> bool {
        self != Versioning::Off
    }
}

/// The versioning of `bucket`, or Unknown when the user may not read it.
pub(crate) async fn versioning(
    console: &Console,
    keys: &Keys,
    bucket: &str,
) -> Result<Versioning, ConsoleError> {
    let request = S3Request::bucket(Method::GET, bucket).query("versioning", "");
    let Some(answer) = if_allowed(console, keys, request).await? else {
        return Ok(Versioning::Unknown);
    };
    let status = xml::first(&answer.body, "VersioningConfiguration")
        .map_err(ConsoleError::Gateway)?
        .get("Status")
        .cloned();
    Ok(match status.as_deref() {
        Some("Enabled") => Versioning::Enabled,
        Some("Suspended") => Versioning::Suspended,
        _ => Versioning::Off,
    })
}

impl Versioning {
    /// What deleting an object (its current version) loses.
    fn consequence(self) -> &'static str {
        match self {
            Versioning::Enabled => {
                "Versioning keeps what is deleted as an older version, behind a delete marker."
            }
            Versioning::Suspended => {
                "Versioning is suspended: a deleted object's null version is lost for good."
            }
            Versioning::Off => "The bucket keeps no versions: this cannot be undone.",
            Versioning::Unknown => "In an unversioned bucket this cannot be undone.",
        }
    }
}

/// What a confirmation asks before the browser deletes the ticked objects
/// of `bucket` (`{count}`: how many the script counts).
pub(crate) fn delete_question(bucket: &str, versioning: Versioning) -> String {
    format!(
        "Delete {{count}} of the listed objects from bucket {bucket}? {}",
        versioning.consequence()
    )
}

/// What a confirmation asks before the object `key` of `bucket` is deleted,
/// or its version `version` when given.
pub(crate) fn delete_one_question(
    bucket: &str,
    key: &str,
    version: Option<&str>,
    versioning: Versioning,
) -> String {
    match version {
        Some(version) => format!(
            "Delete version {version} of {key} from bucket {bucket} for good? This cannot be undone."
        ),
        None => format!(
            "Delete {key} from bucket {bucket}? {}",
            versioning.consequence()
        ),
    }
}

/// Whether any version or delete marker has a key under `prefix` (false
/// when the user may not list them).
pub(crate) async fn any_under(
    console: &Console,
    keys: &Keys,
    bucket: &str,
    prefix: &str,
) -> Result<bool, ConsoleError> {
    let request = S3Request::bucket(Method::GET, bucket)
        .query("versions", "")
        .query("prefix", prefix)
        .query("max-keys", "1");
    Ok(match if_allowed(console, keys, request).await? {
        Some(answer) => !xml::elements(&answer.body, &["Version", "DeleteMarker"])
            .map_err(ConsoleError::Gateway)?
            .is_empty(),
        None => false,
    })
}

/// The value of a version's checkbox: its id, a space, its key. A version
/// id never holds a space (S3's are URL-safe), so the first space ends it.
fn entry(version: &str, key: &str) -> String {
    format!("{version} {key}")
}

/// The version id and key a checkbox's value names.
pub(crate) fn parse_entry(entry: &str) -> Result<(&str, &str), ConsoleError> {
    match entry.split_once(' ') {
        Some((version, key)) if !version.is_empty() && !key.is_empty() => Ok((version, key)),
        _ => Err(ConsoleError::BadInput(format!(
            "{entry:?} names no version of an object"
        ))),
    }
}

/// One version or delete marker as ListObjectVersions shows it.
struct Entry {
    delete_marker: bool,
    fields: Fields,
}

impl Entry {
    fn field(&self, name: &str) -> &str {
        self.fields.get(name).map(String::as_str).unwrap_or("")
    }
}

/// GET /buckets/{bucket}?versions=1&prefix=&key-marker=&version-id-marker=
pub(crate) async fn browse(
    console: &Console,
    session: &Session,
    bucket: &str,
    query: &BrowseQuery,
) -> Result<Markup, ConsoleError> {
    let keys = session.keys()?;
    let prefix = query.prefix.as_str();
    let mut request = S3Request::bucket(Method::GET, bucket)
        .query("versions", "")
        .query("prefix", prefix)
        .query("max-keys", PAGE_SIZE.to_string());
    if !query.key_marker.is_empty() {
        request = request.query("key-marker", query.key_marker.as_str());
        if !query.version_marker.is_empty() {
            request = request.query("version-id-marker", query.version_marker.as_str());
        }
    }
    let answer = console.gateway.call(keys, request).await?;
    let found = xml::elements(
        &answer.body,
        &["ListVersionsResult", "Version", "DeleteMarker"],
    )
    .map_err(ConsoleError::Gateway)?;
    let mut listing = Fields::new();
    let mut entries = Vec::new();
    for (name, fields) in found {
        match name.as_str() {
            "ListVersionsResult" => listing = fields,
            kind => entries.push(Entry {
                delete_marker: kind == "DeleteMarker",
                fields,
            }),
        }
    }
    let truncated = listing.get("IsTruncated").map(String::as_str) == Some("true");
    let next = listing.get("NextKeyMarker").filter(|_| truncated);
    let next_version = listing
        .get("NextVersionIdMarker")
        .map(String::as_str)
        .unwrap_or("");
    let base = format!("/buckets/{bucket}");
    let first_page = link(&base, &[("versions", "1"), ("prefix", prefix)]);
    let title = format!("Versions in {bucket}/{prefix}");
    let question = format!(
        "Delete {{count}} of the listed versions and delete markers from bucket {bucket} for good? This cannot be undone."
    );
    Ok(layout::page(
        &title,
        session,
        html! {
            (breadcrumbs(bucket, prefix, Some("Versions")))
            h1 { (title) }
            div.actions {
                a.button.secondary href=(link(&base, &[("prefix", prefix)])) { "Show current objects only" }
                a.button.secondary href={ (base) "/settings" } { "Bucket settings" }
            }
            p.muted {
                "Every version and delete marker, the newest of each key first. Deleting one removes it for good; "
                "deleting a key's latest delete marker makes the version before it current again."
            }
            form #delete-versions method="post" action={ (base) "/delete-objects" } data-confirm=(question) {
                (csrf_field(session))
                input type="hidden" name="prefix" value=(prefix);
                input type="hidden" name="view" value=(VIEW);
                @if entries.is_empty() {
                    @if prefix.is_empty() && query.key_marker.is_empty() {
                        p #no-versions { "Nothing is left in this bucket: it can be deleted from its " a href={ (base) "/settings" } { "settings" } "." }
                    } @else {
                        p #no-versions { "No versions or delete markers here." }
                    }
                } @else {
                    div.table-wrap {
                        table #versions {
                            thead { tr {
                                th scope="col" { input.select-all type="checkbox" aria-label="Select every version" hidden; }
                                th scope="col" { "Key" }
                                th scope="col" { "Version" }
                                th scope="col" { "Latest" }
                                th scope="col" { "Delete marker" }
                                th.num scope="col" { "Size" }
                                th scope="col" { "Last modified" }
                                th scope="col" { "Download" }
                            } }
                            tbody {
                                @for version in &entries {
                                    @let key = version.field("Key");
                                    @let id = version.field("VersionId");
                                    @let what = if version.delete_marker { "delete marker" } else { "version" };
                                    tr {
                                        td { input type="checkbox" name="entry" value=(entry(id, key)) aria-label={ "Select " (what) " " (id) " of " (key) }; }
                                        td {
                                            @if version.delete_marker {
                                                (key)
                                            } @else {
                                                a href=(link(&format!("{base}/object"), &[("key", key), ("version", id)])) { (key) }
                                            }
                                        }
                                        td { code { (id) } }
                                        td { @if version.field("IsLatest") == "true" { "latest" } }
                                        td { @if version.delete_marker { "delete marker" } }
                                        td.num { @if !version.delete_marker { (size(version.field("Size").parse().unwrap_or(0))) } }
                                        td { (version.field("LastModified")) }
                                        td { @if !version.delete_marker {
                                            a href=(link(&format!("{base}/download"), &[("key", key), ("version", id)])) aria-label={ "Download version " (id) " of " (key) } { "Download" }
                                        } }
                                    }
                                }
                            }
                        }
                    }
                }
                div.actions {
                    @if !entries.is_empty() {
                        button.danger type="submit" { "Delete selected versions" }
                    }
                    @if !query.key_marker.is_empty() {
                        a.button.secondary href=(first_page) { "First page" }
                    }
                    @if let Some(next) = next {
                        a.button.secondary rel="next" href=(link(&base, &[("versions", "1"), ("prefix", prefix), ("key-marker", next), ("version-id-marker", next_version)])) { "Next page" }
                    }
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_entry_is_its_id_then_its_key() {
        let value = entry("3f9a", "dir/a b.txt");
        assert_eq!(parse_entry(&value).unwrap(), ("3f9a", "dir/a b.txt"));
        assert_eq!(parse_entry("null k").unwrap(), ("null", "k"));
        for bad in ["", "v", "v ", " k"] {
            assert!(parse_entry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_question_before_a_delete_says_what_is_lost() {
        let kept = delete_question("bk", Versioning::Enabled);
        assert!(kept.starts_with("Delete {count} of the listed objects from bucket bk?"));
        assert!(kept.contains("as an older version"), "{kept}");
        let lost = delete_one_question("bk", "a.txt", None, Versioning::Off);
        assert_eq!(
            lost,
            "Delete a.txt from bucket bk? The bucket keeps no versions: this cannot be undone."
        );
        let version = delete_one_question("bk", "a.txt", Some("v1"), Versioning::Enabled);
        assert!(
            version.starts_with("Delete version v1 of a.txt"),
            "{version}"
        );
    }
}
