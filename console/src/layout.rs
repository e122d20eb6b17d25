//! The frame of a signed-in user's pages: the navigation, who is signed
//! in, sign out.

use crate::csrf;
use crate::document::document;
use crate::session::Session;
use maud::{html, Markup};

/// A page for a signed-in user: navigation, who is signed in, sign out.
pub(crate) fn page(title: &str, session: &Session, body: Markup) -> Markup {
    let nav = html! {
        header.top {
            nav aria-label="Main" {
                a href="/buckets" { "Buckets" }
                @if session.admin {
                    a href="/cluster" { "Cluster" }
                    a href="/users" { "Users" }
                }
            }
            form.signout method="post" action="/logout" {
                (csrf_field(session))
                span { "Signed in as " strong { (session.name) } }
                button type="submit" { "Sign out" }
            }
        }
    };
    document(title, Some(&session.csrf), html! { (nav) main { (body) } })
}

/// The hidden field that carries the session's token in a form.
pub(crate) fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name=(csrf::FIELD) value=(session.csrf); }
}
