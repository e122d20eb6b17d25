//! A bucket's settings: versioning, default encryption, and its CORS,
//! policy and lifecycle documents, edited as S3 takes them.

use crate::error::ConsoleError;
use crate::gateway::{Keys, S3Request};
use crate::layout::{self, csrf_field};
use crate::named::Named;
use crate::session::SignedIn;
use crate::xml;
use crate::Console;
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::{Method, StatusCode};
use maud::{html, Markup};
use quick_xml::escape::escape;
use serde::Deserialize;
use std::sync::Arc;

/// A bucket's default encryption.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum DefaultEncryption {
    /// Objects are stored as sent, unless a request asks otherwise.
    #[default]
    None,
    /// SSE-S3.
    S3,
    /// SSE-KMS under this key (the default `aws/s3` key when None).
    Kms(Option<String>),
}

/// The encryption fields of a form.
#[derive(Deserialize)]
pub(crate) struct EncryptionForm {
    #[serde(default)]
    encryption: String,
    #[serde(default)]
    kms_key: String,
}

impl EncryptionForm {
    pub(crate) fn parse(&self) -> Result<DefaultEncryption, ConsoleError> {
        let key = self.kms_key.trim();
        match self.encryption.as_str() {
            "" | "none" => Ok(DefaultEncryption::None),
            "AES256" => Ok(DefaultEncryption::S3),
            "aws:kms" => Ok(DefaultEncryption::Kms(
                (!key.is_empty()).then(|| key.to_string()),
            )),
            other => Err(ConsoleError::BadInput(format!(
                "unknown encryption {other:?}"
            ))),
        }
    }
}

/// The encryption choice in a form, set to `current`.
pub(crate) fn encryption_fields(current: &DefaultEncryption) -> Markup {
    let kms_key = match current {
        DefaultEncryption::Kms(Some(key)) => key.as_str(),
        _ => "",
    };
    html! {
        label for="encryption" { "Default encryption" }
        select #encryption name="encryption" {
            option value="none" selected[*current == DefaultEncryption::None] { "None" }
            option value="AES256" selected[*current == DefaultEncryption::S3] { "SSE-S3 (AES256)" }
            option value="aws:kms" selected[matches!(current, DefaultEncryption::Kms(_))] { "SSE-KMS" }
        }
        label for="kms_key" { "KMS key (for SSE-KMS; empty for the default aws/s3 key)" }
        input #kms_key type="text" name="kms_key" value=(kms_key) autocapitalize="off" spellcheck="false";
    }
}

/// The bucket documents edited as text.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DocumentKind {
    Cors,
    Policy,
    Lifecycle,
}

impl DocumentKind {
    const ALL: [DocumentKind; 3] = [
        DocumentKind::Cors,
        DocumentKind::Policy,
        DocumentKind::Lifecycle,
    ];

    fn subresource(self) -> &'static str {
        match self {
            DocumentKind::Cors => "cors",
            DocumentKind::Policy => "policy",
            DocumentKind::Lifecycle => "lifecycle",
        }
    }

    fn title(self) -> &'static str {
        match self {
            DocumentKind::Cors => "CORS rules (XML)",
            DocumentKind::Policy => "Bucket policy (JSON)",
            DocumentKind::Lifecycle => "Lifecycle rules (XML)",
        }
    }
}

async fn current_encryption(
    console: &Console,
    keys: &Keys,
    bucket: &str,
) -> Result<DefaultEncryption, ConsoleError> {
    let request = S3Request::bucket(Method::GET, bucket).query("encryption", "");
    let Some(answer) = console
        .gateway
        .call_unless(keys, request, StatusCode::NOT_FOUND)
        .await?
    else {
        return Ok(DefaultEncryption::None);
    };
    let rule = xml::first(&answer.body, "ApplyServerSideEncryptionByDefault")
        .map_err(ConsoleError::Gateway)?;
    Ok(match rule.get("SSEAlgorithm").map(String::as_str) {
        Some("aws:kms") => DefaultEncryption::Kms(rule.get("KMSMasterKeyID").cloned()),
        Some(_) => DefaultEncryption::S3,
        None => DefaultEncryption::None,
    })
}

/// GET /buckets/{bucket}/settings
pub(crate) async fn show(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
) -> Result<Markup, ConsoleError> {
    let keys = session.keys()?;
    let versioning = console
        .gateway
        .call(
            keys,
            S3Request::bucket(Method::GET, &bucket).query("versioning", ""),
        )
        .await?;
    let status = xml::first(&versioning.body, "VersioningConfiguration")
        .map_err(ConsoleError::Gateway)?
        .get("Status")
        .cloned()
        .unwrap_or_else(|| "Off".into());
    let encryption = current_encryption(&console, keys, &bucket).await?;
    let lock = console
        .gateway
        .call_unless(
            keys,
            S3Request::bucket(Method::GET, &bucket).query("object-lock", ""),
            StatusCode::NOT_FOUND,
        )
        .await?
        .is_some();
    let mut documents = Vec::new();
    for kind in DocumentKind::ALL {
        let request = S3Request::bucket(Method::GET, &bucket).query(kind.subresource(), "");
        let text = console
            .gateway
            .call_unless(keys, request, StatusCode::NOT_FOUND)
            .await?
            .map(|answer| String::from_utf8_lossy(&answer.body).into_owned())
            .unwrap_or_default();
        documents.push((kind, text));
    }
    let base = format!("/buckets/{bucket}/settings");
    Ok(layout::page(
        &format!("Settings of {bucket}"),
        &session,
        html! {
            nav aria-label="Breadcrumbs" { ol.breadcrumbs { li { a href="/buckets" { "Buckets" } } li { a href={ "/buckets/" (bucket) } { (bucket) } } li aria-current="page" { "Settings" } } }
            h1 { "Settings of " (bucket) }
            section.card {
                h2 { "Versioning" }
                p { "Status: " strong #versioning-status { (status) } @if lock { " (object lock is on: versioning stays enabled)" } }
                form method="post" action={ (base) "/versioning" } {
                    (csrf_field(&session))
                    @if status == "Enabled" {
                        input type="hidden" name="status" value="Suspended";
                        button type="submit" disabled[lock] { "Suspend versioning" }
                    } @else {
                        input type="hidden" name="status" value="Enabled";
                        button type="submit" { "Enable versioning" }
                    }
                }
            }
            section.card {
                h2 { "Default encryption" }
                form method="post" action={ (base) "/encryption" } {
                    (csrf_field(&session))
                    (encryption_fields(&encryption))
                    p { button type="submit" { "Save encryption" } }
                }
            }
            @for (kind, text) in &documents {
                section.card {
                    h2 { (kind.title()) }
                    form method="post" action={ (base) "/document" } {
                        (csrf_field(&session))
                        input type="hidden" name="kind" value=(kind.subresource());
                        label for={ "doc-" (kind.subresource()) } { (kind.title()) " (empty removes it)" }
                        textarea #{ "doc-" (kind.subresource()) } name="text" spellcheck="false" { (text) }
                        p { button type="submit" { "Save" } }
                    }
                }
            }
            section.card {
                h2 { "Delete the bucket" }
                p {
                    "S3 deletes only an empty bucket, with no versions or delete markers either: "
                    a href={ "/buckets/" (bucket) "?versions=1" } { "every version in " (bucket) } "."
                }
                form method="post" action={ "/buckets/" (bucket) "/delete" }
                    data-confirm={ "Delete bucket " (bucket) "? This cannot be undone." } {
                    (csrf_field(&session))
                    button.danger type="submit" { "Delete bucket " (bucket) }
                }
            }
        },
    ))
}

/// PutBucketVersioning.
pub(crate) async fn put_versioning(
    console: &Console,
    keys: &Keys,
    bucket: &str,
    enabled: bool,
) -> Result<(), ConsoleError> {
    let status = if enabled { "Enabled" } else { "Suspended" };
    let body = format!(
        "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Status>{status}</Status></VersioningConfiguration>"
    );
    let request = S3Request::bucket(Method::PUT, bucket)
        .query("versioning", "")
        .document(body);
    console.gateway.call(keys, request).await.map(drop)
}

/// PutBucketEncryption, or DeleteBucketEncryption for none.
pub(crate) async fn put_encryption(
    console: &Console,
    keys: &Keys,
    bucket: &str,
    encryption: &DefaultEncryption,
) -> Result<(), ConsoleError> {
    let rule = match encryption {
        DefaultEncryption::None => {
            let request = S3Request::bucket(Method::DELETE, bucket).query("encryption", "");
            return console.gateway.call(keys, request).await.map(drop);
        }
        DefaultEncryption::S3 => "<SSEAlgorithm>AES256</SSEAlgorithm>".to_string(),
        DefaultEncryption::Kms(None) => "<SSEAlgorithm>aws:kms</SSEAlgorithm>".to_string(),
        DefaultEncryption::Kms(Some(key)) => format!(
            "<SSEAlgorithm>aws:kms</SSEAlgorithm><KMSMasterKeyID>{}</KMSMasterKeyID>",
            escape(key)
        ),
    };
    let body = format!(
        "<ServerSideEncryptionConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Rule><ApplyServerSideEncryptionByDefault>{rule}</ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>"
    );
    let request = S3Request::bucket(Method::PUT, bucket)
        .query("encryption", "")
        .document(body);
    console.gateway.call(keys, request).await.map(drop)
}

fn back_to_settings(bucket: &str) -> Response {
    Redirect::to(&format!("/buckets/{bucket}/settings")).into_response()
}

/// The versioning form.
#[derive(Deserialize)]
pub(crate) struct VersioningForm {
    status: String,
}

/// POST /buckets/{bucket}/settings/versioning
pub(crate) async fn versioning(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Form(form): Form<VersioningForm>,
) -> Result<Response, ConsoleError> {
    let enabled = match form.status.as_str() {
        "Enabled" => true,
        "Suspended" => false,
        other => {
            return Err(ConsoleError::BadInput(format!(
                "unknown versioning status {other:?}"
            )))
        }
    };
    put_versioning(&console, session.keys()?, &bucket, enabled).await?;
    Ok(back_to_settings(&bucket))
}

/// POST /buckets/{bucket}/settings/encryption
pub(crate) async fn encryption(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Form(form): Form<EncryptionForm>,
) -> Result<Response, ConsoleError> {
    put_encryption(&console, session.keys()?, &bucket, &form.parse()?).await?;
    Ok(back_to_settings(&bucket))
}

/// A document form.
#[derive(Deserialize)]
pub(crate) struct DocumentForm {
    kind: DocumentKind,
    #[serde(default)]
    text: String,
}

/// POST /buckets/{bucket}/settings/document: puts the document, or deletes
/// it when the text is empty.
pub(crate) async fn document(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Form(form): Form<DocumentForm>,
) -> Result<Response, ConsoleError> {
    let keys = session.keys()?;
    let text = form.text.trim();
    let request = if text.is_empty() {
        S3Request::bucket(Method::DELETE, &bucket).query(form.kind.subresource(), "")
    } else {
        S3Request::bucket(Method::PUT, &bucket)
            .query(form.kind.subresource(), "")
            .document(text.to_string())
    };
    console.gateway.call(keys, request).await?;
    Ok(back_to_settings(&bucket))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(encryption: &str, kms_key: &str) -> EncryptionForm {
        EncryptionForm {
            encryption: encryption.into(),
            kms_key: kms_key.into(),
        }
    }

    #[test]
    fn encryption_choices_parse() {
        assert_eq!(form("none", "k").parse().unwrap(), DefaultEncryption::None);
        assert_eq!(form("", "").parse().unwrap(), DefaultEncryption::None);
        assert_eq!(form("AES256", "").parse().unwrap(), DefaultEncryption::S3);
        assert_eq!(
            form("aws:kms", " ").parse().unwrap(),
            DefaultEncryption::Kms(None)
        );
        assert_eq!(
            form("aws:kms", "alias/x").parse().unwrap(),
            DefaultEncryption::Kms(Some("alias/x".into()))
        );
        assert!(form("DES", "").parse().is_err());
    }

    #[test]
    fn the_encryption_fields_show_the_current_choice() {
        let html =
            encryption_fields(&DefaultEncryption::Kms(Some("alias/<k>".into()))).into_string();
        assert!(
            html.contains(r#"<option value="aws:kms" selected>"#),
            "{html}"
        );
        assert!(
            !html.contains(r#"<option value="AES256" selected>"#),
            "{html}"
        );
        assert!(html.contains("alias/&lt;k&gt;"), "{html}");
    }
}
