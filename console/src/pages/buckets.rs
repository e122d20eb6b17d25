//! The bucket list: every bucket the user may see, a new bucket with its
//! options, and deleting an empty one (or saying what keeps one from it).

use crate::error::{ConsoleError, Leftovers};
use crate::gateway::{Keys, S3Request};
use crate::layout::{self, csrf_field};
use crate::named::Named;
use crate::pages::listing::if_allowed;
use crate::pages::settings::{self, DefaultEncryption};
use crate::session::SignedIn;
use crate::xml;
use crate::Console;
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::{HeaderName, Method};
use maud::{html, Markup};
use serde::Deserialize;
use std::sync::Arc;

/// A bucket as ListBuckets names it.
struct BucketEntry {
    name: String,
    created: String,
}

/// GET /buckets
pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
) -> Result<Markup, ConsoleError> {
    let buckets = match &session.keys {
        Some(keys) => {
            let answer = console
                .gateway
                .call(keys, S3Request::service(Method::GET))
                .await?;
            xml::elements(&answer.body, &["Bucket"])
                .map_err(ConsoleError::Gateway)?
                .into_iter()
                .map(|(_, fields)| BucketEntry {
                    name: fields.get("Name").cloned().unwrap_or_default(),
                    created: fields.get("CreationDate").cloned().unwrap_or_default(),
                })
                .collect()
        }
        None => Vec::new(),
    };
    Ok(layout::page(
        "Buckets",
        &session,
        html! {
            h1 { "Buckets" }
            @if session.keys.is_none() {
                p { (ConsoleError::NoKeys.to_string()) }
            } @else {
                @if buckets.is_empty() {
                    p { "No buckets yet." }
                } @else {
                    div.table-wrap {
                        table {
                            thead { tr { th scope="col" { "Name" } th scope="col" { "Created" } th scope="col" { "Settings" } } }
                            tbody {
                                @for bucket in &buckets {
                                    tr {
                                        td { a href={ "/buckets/" (bucket.name) } { (bucket.name) } }
                                        td { (bucket.created) }
                                        td { a href={ "/buckets/" (bucket.name) "/settings" } { "Settings" span.muted { " of " (bucket.name) } } }
                                    }
                                }
                            }
                        }
                    }
                }
                (create_form(&session))
            }
        },
    ))
}

fn create_form(session: &crate::session::Session) -> Markup {
    html! {
        h2 { "New bucket" }
        form.card method="post" action="/buckets" {
            (csrf_field(session))
            label for="name" { "Name" }
            input #name type="text" name="name" required minlength="3" maxlength="63"
                pattern="[a-z0-9][a-z0-9.\\-]{1,61}[a-z0-9]" autocapitalize="off" spellcheck="false"
                aria-describedby="name-help";
            p #name-help .muted { "3 to 63 lowercase letters, digits, dots and hyphens." }
            label.inline { input type="checkbox" name="versioning" value="on"; "Keep every version of each object" }
            label.inline { input type="checkbox" name="object_lock" value="on"; "Object lock (turns versioning on; it cannot be turned off)" }
            (settings::encryption_fields(&DefaultEncryption::default()))
            p { button type="submit" { "Create bucket" } }
        }
    }
}

/// The new bucket form.
#[derive(Deserialize)]
pub(crate) struct CreateForm {
    name: String,
    #[serde(default)]
    versioning: Option<String>,
    #[serde(default)]
    object_lock: Option<String>,
    #[serde(flatten)]
    encryption: settings::EncryptionForm,
}

/// The header that makes a bucket with object lock.
const OBJECT_LOCK_HEADER: &str = "x-amz-bucket-object-lock-enabled";

/// POST /buckets: CreateBucket, then its versioning and default encryption.
pub(crate) async fn create(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Form(form): Form<CreateForm>,
) -> Result<Response, ConsoleError> {
    let keys = session.keys()?;
    let name = form.name.trim();
    // Checked before the bucket is made, so a bad choice leaves no bucket
    // half set up.
    let encryption = form.encryption.parse()?;
    let mut request = S3Request::bucket(Method::PUT, name);
    if form.object_lock.is_some() {
        request = request.header(HeaderName::from_static(OBJECT_LOCK_HEADER), "true");
    }
    console.gateway.call(keys, request).await?;
    if form.versioning.is_some() && form.object_lock.is_none() {
        settings::put_versioning(&console, keys, name, true).await?;
    }
    if encryption != DefaultEncryption::None {
        settings::put_encryption(&console, keys, name, &encryption).await?;
    }
    Ok(Redirect::to(&format!("/buckets/{name}")).into_response())
}

/// The most entries of each kind counted to say what a bucket still holds.
const LEFTOVERS_COUNTED: usize = 1000;

/// POST /buckets/{bucket}/delete: DeleteBucket. S3 refuses a bucket that
/// still holds objects, versions or delete markers (uploads in progress go
/// with it); the page then says how many and where to see them.
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
) -> Result<Response, ConsoleError> {
    let keys = session.keys()?;
    match console
        .gateway
        .call(keys, S3Request::bucket(Method::DELETE, &bucket))
        .await
    {
        Ok(_) => Ok(Redirect::to("/buckets").into_response()),
        Err(ConsoleError::S3 { code, .. }) if code == "BucketNotEmpty" => Err(
            ConsoleError::BucketNotEmpty(leftovers(&console, keys, bucket).await?),
        ),
        Err(e) => Err(e),
    }
}

/// What `bucket` still holds, from the first page of its versions
/// (nothing of what the user may not list).
async fn leftovers(
    console: &Console,
    keys: &Keys,
    bucket: String,
) -> Result<Leftovers, ConsoleError> {
    let mut leftovers = Leftovers::default();
    let page = LEFTOVERS_COUNTED.to_string();
    let versions = S3Request::bucket(Method::GET, &bucket)
        .query("versions", "")
        .query("max-keys", page.as_str());
    if let Some(answer) = if_allowed(console, keys, versions).await? {
        let found = xml::elements(
            &answer.body,
            &["ListVersionsResult", "Version", "DeleteMarker"],
        )
        .map_err(ConsoleError::Gateway)?;
        for (name, fields) in found {
            match name.as_str() {
                "ListVersionsResult" => {
                    leftovers.more |= fields.get("IsTruncated").map(String::as_str) == Some("true");
                }
                "DeleteMarker" => leftovers.delete_markers += 1,
                _ => {
                    leftovers.versions += 1;
                    leftovers.versioned |=
                        fields.get("VersionId").map(String::as_str) != Some("null");
                }
            }
        }
    }
    leftovers.bucket = bucket;
    Ok(leftovers)
}
