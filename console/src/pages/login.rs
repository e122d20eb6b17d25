//! Signing in (an access key and its secret, or the admin token) and out.

use crate::csrf;
use crate::document;
use crate::error::ConsoleError;
use crate::gateway::{Keys, S3Request};
use crate::session::{over_https, SignedIn, SESSION_COOKIE};
use crate::Console;
use axum::extract::{ConnectInfo, Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, SignedCookieJar};
use http::{HeaderMap, Method, StatusCode};
use maud::html;
use meta_api::{GetAccessKey, GetUser};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use subtle::ConstantTimeEq;

/// The sign-in form's fields.
#[derive(Deserialize)]
pub(crate) struct SignInForm {
    #[serde(default)]
    access_key: String,
    secret_key: String,
}

/// GET /login: the form, with a fresh token in a cookie beside it.
pub(crate) async fn form(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let jar = console.jar(&headers);
    if console.sessions.of_jar(&jar).is_some() {
        return Redirect::to("/buckets").into_response();
    }
    sign_in_page(jar, over_https(&headers), StatusCode::OK, None)
}

fn sign_in_page(
    jar: SignedCookieJar,
    https: bool,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
    let (cookie, token) = csrf::login_cookie(https);
    let page = document::bare(
        "Sign in",
        html! {
            h1 { "Tessera console" }
            @if let Some(error) = error {
                p.error role="alert" { (error) }
            }
            form.card method="post" action=(csrf::LOGIN_PATH) {
                input type="hidden" name=(csrf::FIELD) value=(token);
                label for="access_key" { "Access key" }
                input #access_key type="text" name="access_key" autocomplete="username"
                    autocapitalize="off" spellcheck="false";
                label for="secret_key" { "Secret key" }
                input #secret_key type="password" name="secret_key" required
                    autocomplete="current-password";
                p.muted { "To reach only the admin pages with the admin token, leave the access key empty and give the token as the secret." }
                button type="submit" { "Sign in" }
            }
        },
    );
    (status, jar.add(cookie), page).into_response()
}

/// POST /login: checks the keys with a signed ListBuckets through the
/// gateway (the same check any S3 client meets), or the admin token.
pub(crate) async fn sign_in(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Result<Response, ConsoleError> {
    // Counted before the check, so that guesses sent at once all count;
    // forgiven when the keys are right.
    let now = Instant::now();
    if let Some(wait) = console.sign_ins.wait(peer.ip(), now) {
        return Err(ConsoleError::TooManySignIns(wait.as_secs().max(1)));
    }
    console.sign_ins.failed(peer.ip(), now);
    let jar = console.jar(&headers);
    let https = over_https(&headers);
    let access_key = form.access_key.trim().to_string();
    let (keys, name, admin) = if access_key.is_empty() {
        let token_matches = console
            .admin_token
            .as_deref()
            .is_some_and(|token| bool::from(token.as_bytes().ct_eq(form.secret_key.as_bytes())));
        if !token_matches {
            return Ok(refused(jar, https));
        }
        (None, "admin token".to_string(), true)
    } else {
        if !plausible_access_key(&access_key) {
            return Ok(refused(jar, https));
        }
        let keys = Keys::new(access_key.clone(), form.secret_key);
        match console
            .gateway
            .call(&keys, S3Request::service(Method::GET))
            .await
        {
            // A user whose policy does not allow ListAllMyBuckets has
            // keys that are right all the same.
            Ok(_) => {}
            Err(ConsoleError::S3 { code, .. }) if code == "AccessDenied" => {}
            Err(ConsoleError::S3 { status, .. }) if status == StatusCode::FORBIDDEN => {
                return Ok(refused(jar, https));
            }
            Err(e) => return Err(e),
        }
        let key = console
            .meta
            .call(GetAccessKey { access_key })
            .await?
            .ok_or_else(|| ConsoleError::BadInput("the access key was deleted".into()))?;
        let is_root = console
            .meta
            .call(GetUser {
                name: key.user.clone(),
            })
            .await?
            .is_some_and(|u| u.is_root);
        // A root key limited to some buckets is not the root user's whole
        // power: it gets no admin page (which could mint unlimited keys).
        let admin = is_root && key.bucket_grants.is_none();
        (Some(keys), key.user, admin)
    };
    console.sign_ins.succeeded(peer.ip());
    let session = console.sessions.start(keys, name, admin, https);
    let jar = jar
        .remove(Cookie::build(csrf::LOGIN_COOKIE).path(csrf::LOGIN_PATH))
        .add(session);
    Ok((jar, Redirect::to("/buckets")).into_response())
}

/// Whether `key` can be an access key: letters and digits, as every S3
/// access key is (anything else could not even go in a header).
fn plausible_access_key(key: &str) -> bool {
    (1..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn refused(jar: SignedCookieJar, https: bool) -> Response {
    sign_in_page(
        jar,
        https,
        StatusCode::FORBIDDEN,
        Some("Wrong access key or secret key."),
    )
}

/// POST /logout: ends the session here and forgets the cookie.
pub(crate) async fn sign_out(
    State(console): State<Arc<Console>>,
    _: SignedIn,
    headers: HeaderMap,
) -> Response {
    let jar = console.jar(&headers);
    if let Some(cookie) = jar.get(SESSION_COOKIE) {
        console.sessions.end(cookie.value());
    }
    let jar = jar.remove(Cookie::build(SESSION_COOKIE).path("/"));
    (jar, Redirect::to("/login")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_keys_are_letters_and_digits() {
        assert!(plausible_access_key("AKIAIOSFODNN7EXAMPLE"));
        assert!(!plausible_access_key(""));
        assert!(!plausible_access_key("a\u{1}b"));
        assert!(!plausible_access_key("a b"));
        assert!(!plausible_access_key(&"a".repeat(129)));
    }
}
