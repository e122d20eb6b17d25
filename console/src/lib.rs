//! The web console: buckets, objects and the cluster's health in a browser.
//!
//! Every bucket and object action is an S3 request to the gateway signed
//! with the signed-in user's own keys, so the console can do exactly what
//! that user may do through S3, checked by the same code. Meta is asked
//! directly (as the admin) only for who a key belongs to and for the admin
//! pages, which the root user and the admin token reach.
//!
//! Pages are rendered on the server ([`maud`]); the only script is the
//! upload queue (drag and drop, multipart with progress), a copy button,
//! "select all" and the question asked before a destructive form is sent.
//! Every error is a page with the navigation for a signed-in browser.
//! Sessions live in this process's memory behind a signed, HttpOnly,
//! SameSite=Strict cookie, and every form carries a per-session token
//! ([`csrf`]).

#![forbid(unsafe_code)]

mod assets;
mod charts;
mod csrf;
mod document;
mod error;
mod framing;
mod gateway;
mod layout;
mod limiter;
mod named;
mod pages;
mod routes;
mod session;
mod xml;

pub use charts::MetricsSource;

use axum_extra::extract::cookie::{Key, SignedCookieJar};
use meta_api::MetaClient;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How often the charts sample the metrics, unless told otherwise.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// What the console needs to know about the cluster.
pub struct ConsoleConfig {
    /// The S3 gateway every bucket and object request goes to
    /// (`http://host:port` or `https://host:port`).
    pub gateway: String,
    /// The certificates (PEM) an `https` gateway is trusted by.
    pub gateway_ca: Option<std::path::PathBuf>,
    /// The gateway's address as browsers reach it, named by share links;
    /// the gateway's own when None.
    pub public_endpoint: Option<String>,
    /// The region requests are signed for.
    pub region: String,
    /// Meta, as the admin.
    pub meta: MetaClient,
    /// The admin token: signing in with it reaches the admin pages only.
    pub admin_token: Option<String>,
    /// Where the charts' samples come from.
    pub metrics: MetricsSource,
    /// How often to sample them ([`SAMPLE_EVERY`] in production).
    pub sample_every: Duration,
    /// Host names browsers reach the console by, beside IP addresses and
    /// localhost (a proxy in front that passes its Host on).
    pub host_names: Vec<String>,
}

/// Why the console could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleStartError {
    /// The gateway or public endpoint is not an `http://host:port` URL.
    #[error("bad endpoint {0:?}: expected http://host:port or https://host:port")]
    BadEndpoint(String),
    /// The gateway's certificates to trust could not be read or used.
    #[error("TLS to the gateway: {0}")]
    Tls(String),
    /// The charts cannot be sampled every zero seconds.
    #[error("the metrics sample interval must be above zero")]
    NoSampleInterval,
}

/// The console's shared state: the gateway client, the sessions, the key
/// that signs cookies, meta and the chart samples.
pub(crate) struct Console {
    gateway: gateway::Gateway,
    sessions: session::Sessions,
    cookie_key: Key,
    meta: MetaClient,
    admin_token: Option<String>,
    charts: charts::Samples,
    sign_ins: limiter::SignInLimiter,
    host_names: Vec<String>,
}

impl Console {
    /// The request's cookies, those signed with this console's key readable.
    pub(crate) fn jar(&self, headers: &http::HeaderMap) -> SignedCookieJar {
        SignedCookieJar::from_headers(headers, self.cookie_key.clone())
    }
}

/// A console ready to serve: its configuration was checked.
pub struct ConsoleApp {
    console: Arc<Console>,
    metrics: MetricsSource,
}

impl ConsoleApp {
    /// Checks `config` (the endpoints) and makes the console.
    pub fn new(config: ConsoleConfig) -> Result<Self, ConsoleStartError> {
        if config.sample_every.is_zero() {
            return Err(ConsoleStartError::NoSampleInterval);
        }
        let gateway = gateway::Gateway::new(
            &config.gateway,
            config.gateway_ca.as_deref(),
            config.public_endpoint.as_deref(),
            &config.region,
        )?;
        let console = Arc::new(Console {
            gateway,
            sessions: session::Sessions::default(),
            cookie_key: Key::generate(),
            meta: config.meta,
            admin_token: config.admin_token,
            charts: charts::Samples::new(config.sample_every),
            sign_ins: limiter::SignInLimiter::default(),
            host_names: config.host_names,
        });
        Ok(Self {
            console,
            metrics: config.metrics,
        })
    }

    /// Serves the console on `listener` until `shutdown` completes, sampling
    /// the metrics meanwhile.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let sampler = tokio::spawn(charts::sample_forever(self.console.clone(), self.metrics));
        let app = routes::router(self.console)
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
        sampler.abort();
        served
    }
}
