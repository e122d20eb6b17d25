//! Every page and action of the console, in one table, and the checks every
//! request passes first (the Host, the CSRF token, the security headers);
//! every error answer becomes a page with the navigation ([`framing::framed`]).
//! Forms and JSON bodies keep axum's 2 MB bound; uploads stream their body
//! to the gateway as it arrives and hold none of it.

use crate::error::ConsoleError;
use crate::framing;
use crate::pages::{buckets, cluster, login, objects, settings, uploads, users};
use crate::{assets, csrf, Console};
use axum::middleware;
use axum::response::{Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use http::{header, HeaderValue};
use std::sync::Arc;

/// Scripts, styles and forms only from this console; no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/buckets") }))
        .route("/login", get(login::form).post(login::sign_in))
        .route("/logout", post(login::sign_out))
        .route("/buckets", get(buckets::list).post(buckets::create))
        .route("/buckets/{bucket}", get(objects::browse))
        .route("/buckets/{bucket}/delete", post(buckets::delete))
        .route("/buckets/{bucket}/object", get(objects::details))
        .route("/buckets/{bucket}/download", get(objects::download))
        .route("/buckets/{bucket}/share", post(objects::share))
        .route("/buckets/{bucket}/delete-objects", post(objects::delete))
        .route("/buckets/{bucket}/upload", post(uploads::put))
        .route("/buckets/{bucket}/multipart/start", post(uploads::start))
        .route(
            "/buckets/{bucket}/multipart/complete",
            post(uploads::complete),
        )
        .route("/buckets/{bucket}/multipart/abort", post(uploads::abort))
        .route("/buckets/{bucket}/settings", get(settings::show))
        .route(
            "/buckets/{bucket}/settings/versioning",
            post(settings::versioning),
        )
        .route(
            "/buckets/{bucket}/settings/encryption",
            post(settings::encryption),
        )
        .route(
            "/buckets/{bucket}/settings/document",
            post(settings::document),
        )
        .route("/cluster", get(cluster::show))
        .route("/users", get(users::list).post(users::create))
        .route("/users/{user}/delete", post(users::delete))
        .route("/users/{user}/keys", post(users::create_key))
        .route("/users/{user}/policy", post(users::set_policy))
        .route("/keys/{key}/delete", post(users::delete_key))
        .route("/static/console.css", get(assets::stylesheet))
        .route("/static/console.js", get(assets::script))
        .fallback(|| async { ConsoleError::NoSuchPage })
        .layer(middleware::from_fn_with_state(console.clone(), csrf::check))
        .layer(middleware::from_fn_with_state(
            console.clone(),
            framing::framed,
        ))
        .layer(middleware::from_fn_with_state(
            console.clone(),
            csrf::check_host,
        ))
        .layer(middleware::map_response(security_headers))
        .with_state(console)
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        // Pages show what one user may see: never kept by a shared cache.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
