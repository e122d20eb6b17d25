//! The object browser: prefixes as folders with breadcrumbs, pages of a
//! large listing, an object's details and versions, downloads, share links
//! and deleting one or many objects or versions (the versions view is in
//! [`versions`]).

use crate::document::size;
use crate::error::ConsoleError;
use crate::gateway::{S3Request, MAX_LINK_LIFETIME};
use crate::layout::{self, csrf_field};
use crate::named::Named;
use crate::pages::listing::{breadcrumbs, if_allowed, link, BrowseQuery, PAGE_SIZE};
use crate::pages::versions;
use crate::session::{Session, SignedIn};
use crate::xml::{self, Fields};
use crate::Console;
use axum::body::Body;
use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::{header, HeaderMap, HeaderName, Method};
use maud::{html, Markup};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// GET /buckets/{bucket}?prefix=&token= (and `versions=1`: the versions
/// view)
pub(crate) async fn browse(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<BrowseQuery>,
) -> Result<Markup, ConsoleError> {
    if query.shows_versions() {
        return versions::browse(&console, &session, &bucket, &query).await;
    }
    let keys = session.keys()?;
    let mut request = S3Request::bucket(Method::GET, &bucket)
        .query("list-type", "2")
        .query("delimiter", "/")
        .query("max-keys", PAGE_SIZE.to_string())
        .query("prefix", query.prefix.as_str());
    if !query.token.is_empty() {
        request = request.query("continuation-token", query.token.as_str());
    }
    let answer = console.gateway.call(keys, request).await?;
    let found = xml::elements(
        &answer.body,
        &["ListBucketResult", "Contents", "CommonPrefixes"],
    )
    .map_err(ConsoleError::Gateway)?;
    let mut listing = Fields::new();
    let (mut folders, mut objects) = (Vec::new(), Vec::new());
    for (name, fields) in found {
        match name.as_str() {
            "ListBucketResult" => listing = fields,
            "CommonPrefixes" => folders.push(fields.get("Prefix").cloned().unwrap_or_default()),
            _ => objects.push(fields),
        }
    }
    let next = (listing.get("IsTruncated").map(String::as_str) == Some("true"))
        .then(|| listing.get("NextContinuationToken").cloned())
        .flatten();
    let base = format!("/buckets/{bucket}");
    let prefix = query.prefix.as_str();
    let versioning = versions::versioning(&console, keys, &bucket).await?;
    let empty = folders.is_empty() && objects.is_empty();
    // An empty page of a versioned bucket may hide old versions and delete
    // markers, which would keep the bucket from being deleted.
    let hidden_versions = empty
        && query.token.is_empty()
        && versions::any_under(&console, keys, &bucket, prefix).await?;
    let versions_link = link(&base, &[("versions", "1"), ("prefix", prefix)]);
    let title = format!("{bucket}/{prefix}");
    Ok(layout::page(
        &title,
        &session,
        html! {
            (breadcrumbs(&bucket, prefix, None))
            h1 { (title) }
            div.actions {
                @if versioning.keeps_versions() || hidden_versions {
                    a.button.secondary #show-versions href=(versions_link) { "Show versions" }
                }
                a.button.secondary href={ (base) "/settings" } { "Bucket settings" }
            }
            (upload_form(&bucket, prefix))
            form method="post" action={ (base) "/delete-objects" } data-confirm=(versions::delete_question(&bucket, versioning)) {
                (csrf_field(&session))
                input type="hidden" name="prefix" value=(prefix);
                @if empty && hidden_versions {
                    p #hidden-versions {
                        "No current objects here, but older versions or delete markers remain. "
                        a href=(versions_link) { "Show the versions" }
                    }
                } @else if empty {
                    p { "Nothing here yet." }
                } @else {
                    div.table-wrap {
                        table {
                            thead { tr {
                                th scope="col" { input.select-all type="checkbox" aria-label="Select every object" hidden; }
                                th scope="col" { "Name" }
                                th.num scope="col" { "Size" }
                                th scope="col" { "Last modified" }
                                th scope="col" { "Download" }
                            } }
                            tbody {
                                @for folder in &folders {
                                    tr {
                                        td {}
                                        td { a href=(link(&base, &[("prefix", folder)])) { (folder.strip_prefix(prefix).unwrap_or(folder)) } }
                                        td.num { "folder" }
                                        td {} td {}
                                    }
                                }
                                @for object in &objects {
                                    @let key = object.get("Key").map(String::as_str).unwrap_or("");
                                    @let name = key.strip_prefix(prefix).unwrap_or(key);
                                    tr {
                                        td { input type="checkbox" name="key" value=(key) aria-label={ "Select " (name) }; }
                                        td { a href=(link(&format!("{base}/object"), &[("key", key)])) { (name) } }
                                        td.num { (size(object.get("Size").and_then(|s| s.parse().ok()).unwrap_or(0))) }
                                        td { (object.get("LastModified").map(String::as_str).unwrap_or("")) }
                                        td { a href=(link(&format!("{base}/download"), &[("key", key)])) aria-label={ "Download " (name) } { "Download" } }
                                    }
                                }
                            }
                        }
                    }
                    div.actions {
                        @if !objects.is_empty() {
                            button.danger type="submit" { "Delete selected" }
                        }
                        @if !query.token.is_empty() {
                            a.button.secondary href=(link(&base, &[("prefix", prefix)])) { "First page" }
                        }
                        @if let Some(next) = &next {
                            a.button.secondary rel="next" href=(link(&base, &[("prefix", prefix), ("token", next)])) { "Next page" }
                        }
                    }
                }
            }
        },
    ))
}

fn upload_form(bucket: &str, prefix: &str) -> Markup {
    html! {
        form.upload.card data-bucket=(bucket) data-prefix=(prefix) {
            h2 { "Upload" }
            div.drop {
                label for="files" { "Choose files, or drop them here" }
                input #files type="file" multiple;
            }
            noscript { p.error { "Uploading needs JavaScript." } }
            ul.queue aria-label="Uploads" {}
            p.upload-status aria-live="polite" {}
        }
    }
}

/// Names an object, and maybe one of its versions.
#[derive(Deserialize)]
pub(crate) struct ObjectQuery {
    key: String,
    #[serde(default)]
    version: String,
}

impl ObjectQuery {
    /// The object key; an empty one would name the bucket itself.
    fn key(&self) -> Result<&str, ConsoleError> {
        object_key(&self.key)
    }

    fn version(&self) -> Option<&str> {
        (!self.version.is_empty()).then_some(self.version.as_str())
    }
}

/// `key` when it can name an object: an empty key would make a request on
/// the bucket itself (a DELETE of it, a listing).
fn object_key(key: &str) -> Result<&str, ConsoleError> {
    if key.is_empty() {
        return Err(ConsoleError::BadInput("no object key given".into()));
    }
    Ok(key)
}

fn object_request<'a>(
    method: Method,
    bucket: &'a str,
    query: &'a ObjectQuery,
) -> Result<S3Request<'a>, ConsoleError> {
    let request = S3Request::object(method, bucket, query.key()?);
    Ok(match query.version() {
        Some(version) => request.query("versionId", version),
        None => request,
    })
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// GET /buckets/{bucket}/object?key=&version=
pub(crate) async fn details(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<ObjectQuery>,
) -> Result<Markup, ConsoleError> {
    details_page(&console, &session, &bucket, &query, None).await
}

async fn details_page(
    console: &Console,
    session: &Session,
    bucket: &str,
    query: &ObjectQuery,
    shared: Option<(String, Duration)>,
) -> Result<Markup, ConsoleError> {
    let keys = session.keys()?;
    let head = object_request(Method::HEAD, bucket, query)?
        .header(HeaderName::from_static("x-amz-checksum-mode"), "ENABLED");
    let headers = console.gateway.call(keys, head).await?.headers;
    let tagging = object_request(Method::GET, bucket, query)?.query("tagging", "");
    let tags = match if_allowed(console, keys, tagging).await? {
        Some(answer) => xml::elements(&answer.body, &["Tag"]).map_err(ConsoleError::Gateway)?,
        None => Vec::new(),
    };
    let listing = S3Request::bucket(Method::GET, bucket)
        .query("versions", "")
        .query("prefix", query.key.as_str())
        .query("max-keys", "50");
    let versions: Vec<(String, Fields)> = match if_allowed(console, keys, listing).await? {
        Some(answer) => xml::elements(&answer.body, &["Version", "DeleteMarker"])
            .map_err(ConsoleError::Gateway)?
            .into_iter()
            .filter(|(_, fields)| fields.get("Key") == Some(&query.key))
            .collect(),
        None => Vec::new(),
    };
    let versioning = versions::versioning(console, keys, bucket).await?;
    let meta: Vec<(&str, &str)> = headers
        .iter()
        .filter_map(|(name, value)| {
            let name = name.as_str();
            let value = value.to_str().ok()?;
            (name.starts_with("x-amz-meta-") || name.starts_with("x-amz-checksum-"))
                .then_some((name, value))
        })
        .filter(|(name, _)| *name != "x-amz-checksum-type")
        .collect();
    let base = format!("/buckets/{bucket}");
    let (folder, name) = match query.key.rfind('/') {
        Some(i) => (&query.key[..=i], &query.key[i + 1..]),
        None => ("", query.key.as_str()),
    };
    let version_param = query.version.as_str();
    let download = link(
        &format!("{base}/download"),
        &[("key", &query.key), ("version", version_param)],
    );
    Ok(layout::page(
        &query.key,
        session,
        html! {
            (breadcrumbs(bucket, folder, Some(name)))
            h1 { (query.key) }
            div.actions {
                a.button href=(download) { "Download" }
            }
            dl.details {
                dt { "Size" } dd #object-size { (size(header_text(&headers, "content-length").parse().unwrap_or(0))) " (" (header_text(&headers, "content-length")) " bytes)" }
                dt { "ETag" } dd #object-etag { (header_text(&headers, "etag")) }
                dt { "Content type" } dd { (header_text(&headers, "content-type")) }
                dt { "Last modified" } dd { (header_text(&headers, "last-modified")) }
                @if headers.contains_key("x-amz-version-id") {
                    dt { "Version" } dd { (header_text(&headers, "x-amz-version-id")) }
                }
                @if headers.contains_key("x-amz-server-side-encryption") {
                    dt { "Encryption" } dd { (header_text(&headers, "x-amz-server-side-encryption")) }
                }
                @for (name, value) in &meta {
                    dt { (name) } dd { (value) }
                }
                dt { "Tags" }
                dd {
                    @if tags.is_empty() { span.muted { "none" } }
                    @for (_, tag) in &tags {
                        span.badge { (tag.get("Key").map(String::as_str).unwrap_or("")) "=" (tag.get("Value").map(String::as_str).unwrap_or("")) } " "
                    }
                }
            }
            section.card {
                h2 { "Share" }
                @if let Some((url, lifetime)) = &shared {
                    p.ok { "Anyone with this link can download the object for " (humanize(*lifetime)) ":" }
                    label for="share-link" { "Link" }
                    input #share-link type="text" readonly value=(url);
                    button.copy.secondary type="button" data-target="share-link" hidden { "Copy link" }
                }
                form method="post" action={ (base) "/share" } {
                    (csrf_field(session))
                    input type="hidden" name="key" value=(query.key);
                    input type="hidden" name="version" value=(version_param);
                    label for="expires" { "Link valid for" }
                    select #expires name="expires" {
                        @for (seconds, label) in LINK_LIFETIMES {
                            option value=(seconds) selected[*seconds == 3600] { (label) }
                        }
                    }
                    p { button type="submit" { "Make a share link" } }
                }
            }
            @if !versions.is_empty() {
                section.card {
                    h2 { "Versions" }
                    div.table-wrap { table {
                        thead { tr { th scope="col" { "Version" } th scope="col" { "Latest" } th.num scope="col" { "Size" } th scope="col" { "Last modified" } th scope="col" { "" } } }
                        tbody {
                            @for (kind, version) in &versions {
                                @let id = version.get("VersionId").map(String::as_str).unwrap_or("");
                                tr {
                                    td { (id) }
                                    td { (version.get("IsLatest").map(String::as_str).unwrap_or("")) }
                                    td.num { @if kind == "DeleteMarker" { "delete marker" } @else { (size(version.get("Size").and_then(|s| s.parse().ok()).unwrap_or(0))) } }
                                    td { (version.get("LastModified").map(String::as_str).unwrap_or("")) }
                                    td { @if kind == "Version" {
                                        a href=(link(&format!("{base}/object"), &[("key", &query.key), ("version", id)])) { "Details" } " · "
                                        a href=(link(&format!("{base}/download"), &[("key", &query.key), ("version", id)])) { "Download" }
                                    } }
                                }
                            }
                        }
                    } }
                }
            }
            section.card {
                h2 { "Delete" }
                @if query.version().is_some() {
                    p { "Deleting this version removes it for good; the others stay." }
                }
                form method="post" action={ (base) "/delete-objects" }
                    data-confirm=(versions::delete_one_question(bucket, &query.key, query.version(), versioning)) {
                    (csrf_field(session))
                    input type="hidden" name="key" value=(query.key);
                    input type="hidden" name="version" value=(version_param);
                    input type="hidden" name="prefix" value=(folder);
                    button.danger type="submit" {
                        @if query.version().is_some() { "Delete this version of " (name) } @else { "Delete " (name) }
                    }
                }
            }
        },
    ))
}

/// The lifetimes a share link may be given, in seconds.
const LINK_LIFETIMES: &[(u64, &str)] = &[
    (900, "15 minutes"),
    (3600, "1 hour"),
    (86_400, "1 day"),
    (604_800, "7 days"),
];

fn humanize(lifetime: Duration) -> &'static str {
    LINK_LIFETIMES
        .iter()
        .find(|(seconds, _)| *seconds == lifetime.as_secs())
        .map_or("a while", |(_, label)| label)
}

/// GET /buckets/{bucket}/download?key=&version=: the object's bytes,
/// streamed from the gateway as they arrive, as an attachment.
pub(crate) async fn download(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<ObjectQuery>,
) -> Result<Response, ConsoleError> {
    let keys = session.keys()?;
    let response = console
        .gateway
        .send(keys, object_request(Method::GET, &bucket, &query)?)
        .await?;
    let (parts, body) = response.into_parts();
    if !parts.status.is_success() {
        use http_body_util::BodyExt;
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(crate::gateway::s3_error(parts.status, &body));
    }
    let name = query.key.rsplit('/').next().unwrap_or("download");
    let disposition = format!(
        "attachment; filename*=UTF-8''{}",
        utf8_percent_encode(name, NON_ALPHANUMERIC)
    );
    let mut answer = Response::new(Body::new(body));
    let headers = answer.headers_mut();
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::ETAG,
        header::LAST_MODIFIED,
    ] {
        if let Some(value) = parts.headers.get(&name) {
            headers.insert(name, value.clone());
        }
    }
    if let Ok(value) = disposition.parse() {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(answer)
}

/// The share form.
#[derive(Deserialize)]
pub(crate) struct ShareForm {
    key: String,
    #[serde(default)]
    version: String,
    expires: u64,
}

/// POST /buckets/{bucket}/share: the details page with a presigned link.
pub(crate) async fn share(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Form(form): Form<ShareForm>,
) -> Result<Markup, ConsoleError> {
    let lifetime = Duration::from_secs(form.expires);
    if lifetime.is_zero() || lifetime > MAX_LINK_LIFETIME {
        return Err(ConsoleError::BadInput(
            "a share link lives from one second to seven days".into(),
        ));
    }
    let query = ObjectQuery {
        key: form.key,
        version: form.version,
    };
    let url = console.gateway.presign(
        session.keys()?,
        &bucket,
        query.key()?,
        query.version(),
        lifetime,
    )?;
    details_page(&console, &session, &bucket, &query, Some((url, lifetime))).await
}

/// The values of the form's fields named `wanted`, in order.
fn form_values<'a>(
    fields: &'a [(String, String)],
    wanted: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    fields
        .iter()
        .filter(move |(name, _)| name == wanted)
        .map(|(_, value)| value.as_str())
}

/// POST /buckets/{bucket}/delete-objects: deletes every `key` of the form
/// (or its one `version`) and every version an `entry` names, then shows
/// the folder again, or its versions when `view` says so.
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Response, ConsoleError> {
    let keys = session.keys()?;
    let prefix = form_values(&fields, "prefix").next().unwrap_or("");
    let version = form_values(&fields, "version").find(|v| !v.is_empty());
    let objects: Vec<&str> = form_values(&fields, "key").collect();
    if version.is_some() && objects.len() != 1 {
        return Err(ConsoleError::BadInput("a version is deleted alone".into()));
    }
    // Every target is checked before the first is deleted.
    let mut targets: Vec<(&str, Option<&str>)> = Vec::new();
    for key in objects {
        targets.push((object_key(key)?, version));
    }
    for entry in form_values(&fields, "entry") {
        let (version, key) = versions::parse_entry(entry)?;
        targets.push((key, Some(version)));
    }
    for (key, version) in targets {
        let mut request = S3Request::object(Method::DELETE, &bucket, key);
        if let Some(version) = version {
            request = request.query("versionId", version);
        }
        console.gateway.call(keys, request).await?;
    }
    let base = format!("/buckets/{bucket}");
    let back = if form_values(&fields, "view").any(|view| view == versions::VIEW) {
        link(&base, &[("versions", "1"), ("prefix", prefix)])
    } else {
        link(&base, &[("prefix", prefix)])
    };
    Ok(Redirect::to(&back).into_response())
}
