//! Users and their access keys (root user and admin token): create,
//! delete, a user's policy. A new key's secret is shown once, on the page
//! that made it.

use crate::error::ConsoleError;
use crate::layout::{self, csrf_field};
use crate::named::Named;
use crate::session::{Admin, Session};
use crate::Console;
use axum::extract::{Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use meta_api::{
    AccessKeyRecord, CreateKey, CreateUser, DeleteKey, DeleteUser, ListKeys, ListUsers,
    SetUserPolicy,
};
use serde::Deserialize;
use std::sync::Arc;

/// GET /users
pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    Admin(session): Admin,
) -> Result<Markup, ConsoleError> {
    users_page(&console, &session, None).await
}

async fn users_page(
    console: &Console,
    session: &Session,
    new_key: Option<AccessKeyRecord>,
) -> Result<Markup, ConsoleError> {
    let users = console.meta.call(ListUsers).await?;
    let keys = console.meta.call(ListKeys { user: None }).await?;
    Ok(layout::page(
        "Users",
        session,
        html! {
            h1 { "Users and access keys" }
            @if let Some(key) = &new_key {
                section.card role="status" {
                    h2 { "New access key for " (key.user) }
                    p { "The secret key is shown only now: keep it somewhere safe." }
                    dl.details {
                        dt { "Access key" } dd #new-access-key { (key.access_key) }
                        dt { "Secret key" } dd #new-secret-key { (key.secret_key) }
                    }
                }
            }
            @for user in &users {
                section.card {
                    h2 { (user.name) @if user.is_root { " " span.badge { "root" } } }
                    div.table-wrap { table {
                        thead { tr { th scope="col" { "Access key" } th scope="col" { "Buckets" } th scope="col" { "" } } }
                        tbody {
                            @for key in keys.iter().filter(|k| k.user == user.name) {
                                tr {
                                    td { (key.access_key) }
                                    td { @match &key.bucket_grants {
                                        None => "all the user's",
                                        Some(grants) => {
                                            @for grant in grants { (grant.bucket) " (" (format!("{:?}", grant.right)) ") " }
                                        }
                                    } }
                                    td { form method="post" action={ "/keys/" (key.access_key) "/delete" }
                                        data-confirm={ "Delete access key " (key.access_key) " of user " (user.name) "? Every request signed with it is refused from then on." } {
                                        (csrf_field(session))
                                        button.danger type="submit" aria-label={ "Delete access key " (key.access_key) } { "Delete" }
                                    } }
                                }
                            }
                        }
                    } }
                    div.actions {
                        form method="post" action={ "/users/" (user.name) "/keys" } {
                            (csrf_field(session))
                            button type="submit" { "New access key" }
                        }
                        @if !user.is_root {
                            form method="post" action={ "/users/" (user.name) "/delete" }
                                data-confirm=(delete_user_question(&keys, &user.name)) {
                                (csrf_field(session))
                                button.danger type="submit" { "Delete user " (user.name) }
                            }
                        }
                    }
                    @if !user.is_root {
                        form method="post" action={ "/users/" (user.name) "/policy" } {
                            (csrf_field(session))
                            label for={ "policy-" (user.name) } { "Policy (IAM JSON; empty: none)" }
                            textarea #{ "policy-" (user.name) } name="policy" spellcheck="false" {
                                (user.policy.as_deref().unwrap_or(""))
                            }
                            p { button type="submit" { "Save policy" } }
                        }
                    }
                }
            }
            h2 { "New user" }
            form.card method="post" action="/users" {
                (csrf_field(session))
                label for="user-name" { "Name" }
                input #user-name type="text" name="name" required autocapitalize="off" spellcheck="false";
                p { button type="submit" { "Create user and key" } }
            }
        },
    ))
}

/// What a confirmation asks before `user` is deleted with its keys.
fn delete_user_question(keys: &[AccessKeyRecord], user: &str) -> String {
    match keys.iter().filter(|k| k.user == user).count() {
        0 => format!("Delete user {user}? It has no access keys."),
        1 => format!(
            "Delete user {user} and its access key? Every request signed with it is refused from then on."
        ),
        n => format!(
            "Delete user {user} and its {n} access keys? Every request signed with them is refused from then on."
        ),
    }
}

/// The new user form.
#[derive(Deserialize)]
pub(crate) struct NewUser {
    name: String,
}

/// POST /users: a user and its first access key.
pub(crate) async fn create(
    State(console): State<Arc<Console>>,
    Admin(session): Admin,
    Form(form): Form<NewUser>,
) -> Result<Markup, ConsoleError> {
    let name = form.name.trim().to_string();
    console.meta.call(CreateUser { name: name.clone() }).await?;
    let key = console.meta.call(CreateKey { user: name }).await?;
    users_page(&console, &session, Some(key)).await
}

/// POST /users/{user}/keys
pub(crate) async fn create_key(
    State(console): State<Arc<Console>>,
    Admin(session): Admin,
    Named(user): Named,
) -> Result<Markup, ConsoleError> {
    let key = console.meta.call(CreateKey { user }).await?;
    users_page(&console, &session, Some(key)).await
}

/// POST /users/{user}/delete
pub(crate) async fn delete(
    State(console): State<Arc<Console>>,
    _: Admin,
    Named(name): Named,
) -> Result<Response, ConsoleError> {
    console.meta.call(DeleteUser { name }).await?;
    Ok(Redirect::to("/users").into_response())
}

/// POST /keys/{key}/delete
pub(crate) async fn delete_key(
    State(console): State<Arc<Console>>,
    _: Admin,
    Named(access_key): Named,
) -> Result<Response, ConsoleError> {
    console.meta.call(DeleteKey { access_key }).await?;
    Ok(Redirect::to("/users").into_response())
}

/// The policy form.
#[derive(Deserialize)]
pub(crate) struct PolicyForm {
    #[serde(default)]
    policy: String,
}

/// POST /users/{user}/policy: checked as `tessera admin user policy` checks it.
pub(crate) async fn set_policy(
    State(console): State<Arc<Console>>,
    _: Admin,
    Named(name): Named,
    Form(form): Form<PolicyForm>,
) -> Result<Response, ConsoleError> {
    let text = form.policy.trim();
    let policy = if text.is_empty() {
        None
    } else {
        access::Policy::parse_user(text)
            .map_err(|e| ConsoleError::BadInput(format!("not a user policy: {e}")))?;
        Some(text.to_string())
    };
    console.meta.call(SetUserPolicy { name, policy }).await?;
    Ok(Redirect::to("/users").into_response())
}
