//! Cross-site request forgery: every POST must carry the token of the
//! session it acts for, in a form's `csrf` field or (from the upload
//! script) the `x-csrf-token` header, and must not come from another
//! origin. The sign-in form, which has no session yet, carries the token of
//! a signed cookie set with the form instead.
//!
//! The check runs in one place, before any handler, so a handler cannot
//! forget it.

use crate::error::ConsoleError;
use crate::session::random_token;
use crate::Console;
use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_extra::extract::cookie::{Cookie, SameSite};
use http::{header, Method};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The form field that carries the token.
pub(crate) const FIELD: &str = "csrf";
/// The header that carries the token.
pub(crate) const HEADER: &str = "x-csrf-token";
/// The cookie carrying the sign-in form's token.
pub(crate) const LOGIN_COOKIE: &str = "tessera_console_login";
/// The path of the sign-in form.
pub(crate) const LOGIN_PATH: &str = "/login";
/// The largest form read to find its token (bucket documents are edited in
/// forms; S3 takes policies up to 20 KiB and lifecycle rules a little more).
const MAX_FORM: usize = 1 << 20;

/// A cookie with a fresh token for the sign-in form, and the token.
pub(crate) fn login_cookie(https: bool) -> (Cookie<'static>, String) {
    let token = random_token();
    let cookie = Cookie::build((LOGIN_COOKIE, token.clone()))
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(https)
        .path(LOGIN_PATH)
        .build();
    (cookie, token)
}

fn same(a: &str, b: &str) -> bool {
    !a.is_empty() && a.as_bytes().ct_eq(b.as_bytes()).into()
}

fn header_text<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|h| h.to_str().ok())
}

/// Whether the request's `Origin`, when it has one, is this console: the
/// `Host` it was sent to, or the one a proxy in front says the browser used
/// (`X-Forwarded-Host`, which no page of another site can set).
fn same_origin(request: &Request) -> bool {
    let Some(origin) = header_text(request, "origin") else {
        return request.headers().get(header::ORIGIN).is_none();
    };
    let Some((_, origin_host)) = origin.split_once("://") else {
        return false;
    };
    ["host", "x-forwarded-host"]
        .iter()
        .filter_map(|name| header_text(request, name))
        .any(|host| host.eq_ignore_ascii_case(origin_host))
}

/// Whether `host` (a Host header) names the console: an IP address or
/// localhost, with any port, or one of the names it was told. A page of
/// another site that rebinds its own name to this address is refused, so it
/// cannot reach even the sign-in form.
fn known_host(host: &str, names: &[String]) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>().is_ok()
        || bare.eq_ignore_ascii_case("localhost")
        || names.iter().any(|n| n.eq_ignore_ascii_case(bare))
}

/// Refuses a request whose `Host` is not the console's (421).
pub(crate) async fn check_host(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    match header_text(&request, "host") {
        Some(host) if known_host(host, &console.host_names) => next.run(request).await,
        _ => ConsoleError::UnknownHost.into_response(),
    }
}

/// The token a form body carries.
fn form_token(body: &[u8]) -> Option<String> {
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(body).ok()?;
    fields
        .into_iter()
        .find(|(name, _)| name == FIELD)
        .map(|(_, value)| value)
}

/// Refuses a POST without the right token; lets everything else through.
pub(crate) async fn check(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let jar = console.jar(request.headers());
    if !same_origin(&request) {
        return ConsoleError::Forged.into_response();
    }
    let expected = if request.uri().path() == LOGIN_PATH {
        match jar.get(LOGIN_COOKIE) {
            Some(cookie) => cookie.value().to_string(),
            None => return ConsoleError::Forged.into_response(),
        }
    } else {
        match console.sessions.of_jar(&jar) {
            Some(session) => session.csrf.clone(),
            // No session: the handler's extractor sends the browser to sign in.
            None => return next.run(request).await,
        }
    };
    if let Some(sent) = request.headers().get(HEADER) {
        if same(sent.to_str().unwrap_or(""), &expected) {
            return next.run(request).await;
        }
        return ConsoleError::Forged.into_response();
    }
    let is_form = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return ConsoleError::Forged.into_response();
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_FORM).await else {
        return ConsoleError::BadInput("the form is too large".into()).into_response();
    };
    match form_token(&bytes) {
        Some(sent) if same(&sent, &expected) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        _ => ConsoleError::Forged.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::post("/buckets");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn only_this_consoles_origin_may_post() {
        assert!(same_origin(&request(&[("host", "127.0.0.1:9881")])));
        assert!(same_origin(&request(&[
            ("host", "127.0.0.1:9881"),
            ("origin", "http://127.0.0.1:9881")
        ])));
        assert!(!same_origin(&request(&[
            ("host", "127.0.0.1:9881"),
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&request(&[(
            "origin",
            "http://127.0.0.1:9881"
        )])));
        assert!(!same_origin(&request(&[
            ("host", "127.0.0.1:9881"),
            ("origin", "null")
        ])));
    }

    #[test]
    fn a_proxy_may_name_the_host_the_browser_used() {
        assert!(same_origin(&request(&[
            ("host", "127.0.0.1:9882"),
            ("x-forwarded-host", "console.example.com"),
            ("origin", "https://console.example.com")
        ])));
        assert!(!same_origin(&request(&[
            ("host", "127.0.0.1:9882"),
            ("x-forwarded-host", "console.example.com"),
            ("origin", "https://evil.example")
        ])));
    }

    #[test]
    fn only_addresses_localhost_and_named_hosts_are_the_console() {
        let names = vec!["console.example.com".to_string()];
        for host in [
            "127.0.0.1:9882",
            "127.0.0.1",
            "[::1]:9882",
            "10.1.2.3:80",
            "localhost:9882",
            "LOCALHOST",
            "console.example.com",
            "Console.Example.com:443",
        ] {
            assert!(known_host(host, &names), "{host}");
        }
        for host in [
            "evil.example:9882",
            "127.0.0.1.evil.example",
            "",
            "console.example.com.evil",
        ] {
            assert!(!known_host(host, &names), "{host}");
        }
    }

    #[test]
    fn the_token_is_read_from_the_form() {
        assert_eq!(form_token(b"name=a&csrf=t%2B1"), Some("t+1".into()));
        assert_eq!(form_token(b"name=a"), None);
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("", ""));
    }
}
