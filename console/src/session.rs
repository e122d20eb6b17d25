//! Sessions: who is signed in, kept in this process's memory. The browser
//! holds only a random id in a signed, HttpOnly, SameSite=Strict cookie;
//! the keys it signed in with stay here.

use crate::error::ConsoleError;
use crate::gateway::Keys;
use crate::Console;
use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, SameSite, SignedCookieJar};
use http::request::Parts;
use parking_lot::Mutex;
use rand::RngCore;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The cookie naming the session.
pub(crate) const SESSION_COOKIE: &str = "tessera_console";
/// A session ends this long after sign-in, however busy.
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// A session ends after this long without a request.
const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// One signed-in browser.
pub(crate) struct Session {
    /// The user's S3 keys; None for the admin token, which has no user.
    pub(crate) keys: Option<Keys>,
    /// Who is signed in, as shown on every page.
    pub(crate) name: String,
    /// The root user or the admin token: the admin pages are open.
    pub(crate) admin: bool,
    /// The token every form and upload of this session must carry.
    pub(crate) csrf: String,
    started: Instant,
    last_seen: Mutex<Instant>,
}

impl Session {
    /// The user's keys, or a page saying the admin token has none.
    pub(crate) fn keys(&self) -> Result<&Keys, ConsoleError> {
        self.keys.as_ref().ok_or(ConsoleError::NoKeys)
    }
}

/// Every live session by id.
#[derive(Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Arc<Session>>>,
}

/// A random value for an id or a token: 256 bits, hex.
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

impl Sessions {
    /// Starts a session and returns the cookie that names it (`Secure` when
    /// the browser reached the console over HTTPS).
    pub(crate) fn start(
        &self,
        keys: Option<Keys>,
        name: String,
        admin: bool,
        https: bool,
    ) -> Cookie<'static> {
        let id = random_token();
        let now = Instant::now();
        let session = Session {
            keys,
            name,
            admin,
            csrf: random_token(),
            started: now,
            last_seen: Mutex::new(now),
        };
        let mut by_id = self.by_id.lock();
        by_id.retain(|_, s| s.live(now));
        by_id.insert(id.clone(), Arc::new(session));
        session_cookie(id, https)
    }

    /// The live session `id` names, marked as seen now.
    fn find(&self, id: &str) -> Option<Arc<Session>> {
        let now = Instant::now();
        let mut by_id = self.by_id.lock();
        let session = by_id.get(id)?.clone();
        if !session.live(now) {
            by_id.remove(id);
            return None;
        }
        *session.last_seen.lock() = now;
        Some(session)
    }

    /// Ends the session `id` names.
    pub(crate) fn end(&self, id: &str) {
        self.by_id.lock().remove(id);
    }

    /// The session of a request's cookie.
    pub(crate) fn of_jar(&self, jar: &SignedCookieJar) -> Option<Arc<Session>> {
        self.find(jar.get(SESSION_COOKIE)?.value())
    }
}

impl Session {
    fn live(&self, now: Instant) -> bool {
        now.duration_since(self.started) < SESSION_LIFETIME
            && now.duration_since(*self.last_seen.lock()) < SESSION_IDLE
    }
}

/// The session cookie: signed by the jar, never readable by scripts, never
/// sent with a request another site starts, and over HTTPS only when the
/// browser came that way.
fn session_cookie(id: String, https: bool) -> Cookie<'static> {
    Cookie::build((SESSION_COOKIE, id))
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(https)
        .path("/")
        .build()
}

/// Whether the browser reached the console over HTTPS: a TLS proxy in front
/// of it says so in `X-Forwarded-Proto`. (Anyone may send the header; it only
/// makes the cookies stricter.)
pub(crate) fn over_https(headers: &http::HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

/// A request from a signed-in browser; others are sent to the sign-in page.
pub(crate) struct SignedIn(pub(crate) Arc<Session>);

impl FromRequestParts<Arc<Console>> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        let jar = console.jar(&parts.headers);
        match console.sessions.of_jar(&jar) {
            Some(session) => Ok(SignedIn(session)),
            // A page goes to the sign-in form; a change (a form, an upload
            // from the script) is refused as it is, so nothing takes the
            // sign-in page for its answer.
            None if parts.method == http::Method::GET => {
                Err(Redirect::to("/login").into_response())
            }
            None => Err(ConsoleError::SignedOut.into_response()),
        }
    }
}

/// A request from the root user or the admin token.
pub(crate) struct Admin(pub(crate) Arc<Session>);

impl FromRequestParts<Arc<Console>> for Admin {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        let SignedIn(session) = SignedIn::from_request_parts(parts, console).await?;
        if !session.admin {
            return Err(ConsoleError::NotAdmin.into_response());
        }
        // The key must still be there, unlimited: a root key deleted or
        // limited since sign-in no longer opens the admin pages.
        if let Some(keys) = &session.keys {
            let key = console
                .meta
                .call(meta_api::GetAccessKey {
                    access_key: keys.access_key.clone(),
                })
                .await
                .map_err(|e| ConsoleError::from(e).into_response())?;
            if key.is_none_or(|k| k.bucket_grants.is_some()) {
                return Err(ConsoleError::NotAdmin.into_response());
            }
        }
        Ok(Admin(session))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_found_by_their_id_until_they_end() {
        let sessions = Sessions::default();
        let cookie = sessions.start(None, "admin".into(), true, false);
        let id = cookie.value().to_string();
        assert_eq!(id.len(), 64);
        let found = sessions.find(&id).expect("a live session");
        assert!(found.admin);
        assert_eq!(found.csrf.len(), 64);
        assert_ne!(found.csrf, id);
        assert!(sessions.find("0".repeat(64).as_str()).is_none());
        sessions.end(&id);
        assert!(sessions.find(&id).is_none());
    }

    #[test]
    fn the_cookie_is_http_only_and_same_site_strict() {
        let cookie = session_cookie("x".into(), false);
        assert_eq!(cookie.http_only(), Some(true));
        assert_eq!(cookie.same_site(), Some(SameSite::Strict));
        assert_eq!(cookie.path(), Some("/"));
        assert_eq!(cookie.secure(), Some(false));
        assert_eq!(session_cookie("x".into(), true).secure(), Some(true));
        let mut headers = http::HeaderMap::new();
        assert!(!over_https(&headers));
        headers.insert("x-forwarded-proto", "HTTPS".parse().unwrap());
        assert!(over_https(&headers));
        headers.insert("x-forwarded-proto", "http".parse().unwrap());
        assert!(!over_https(&headers));
    }

    #[test]
    fn idle_and_old_sessions_are_not_live() {
        let now = Instant::now();
        let session = Session {
            keys: None,
            name: "a".into(),
            admin: false,
            csrf: String::new(),
            started: now,
            last_seen: Mutex::new(now),
        };
        assert!(session.live(now));
        assert!(!session.live(now + SESSION_IDLE));
        *session.last_seen.lock() = now + SESSION_LIFETIME - Duration::from_secs(1);
        assert!(!session.live(now + SESSION_LIFETIME));
        assert!(session.live(now + SESSION_LIFETIME - Duration::from_secs(1)));
    }
}
