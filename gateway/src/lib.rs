//! Tessera's S3 gateway: an axum service that parses each request into one
//! endpoint, checks its SigV4 signature and the caller's access, and serves it
//! from the metadata service and the block store client.
//!
//! Request path: `telemetry` (request id, span, metrics) -> `endpoint` (the
//! table of endpoints, routed with `router`) -> `auth` (signature) -> the
//! endpoint's access check (`handlers::access`) -> its handler -> the block
//! client and meta.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod body_rate;
pub mod conditional;
pub mod dates;
pub mod download;
pub mod encryption;
pub mod endpoint;
pub mod error;
pub mod handlers;
pub mod headers;
pub mod host_style;
pub mod keep_alive;
pub mod listener;
pub mod object_checksum;
pub mod params;
pub mod planted;
pub mod policies;
pub mod range;
pub mod readers;
pub mod request_body;
pub mod router;
pub mod state;
pub mod tags;
pub mod telemetry;
pub mod tls;
pub mod upload_slots;
pub mod xml;

use block_client::StoreClient;
use meta_api::MetaClient;
use std::sync::Arc;

/// Settings of the S3 gateway.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The region SigV4 scopes must name and GetBucketLocation reports (e.g. us-east-1).
    pub region: String,
    /// Base domain for virtual-hosted-style requests (`bucket.domain`); path
    /// style only when None.
    pub domain: Option<String>,
    /// Object bodies streamed at once (see [`upload_slots`]); 0: no bound.
    pub max_concurrent_uploads: usize,
    /// Longest a PUT waits for a slot before a 503.
    pub upload_slot_wait: std::time::Duration,
    /// The least rate of every request body.
    pub body_rate: body_rate::BodyRateLimit,
    /// Bytes all GET bodies may hold at once.
    pub get_memory: u64,
    /// Whether SigV2 signatures are accepted (headers, presigned URLs, forms).
    pub sigv2: bool,
    /// Whether SSE-C keys are taken over plain HTTP (TLS ends in front of
    /// the gateway); otherwise only over HTTPS, as S3 takes them.
    pub sse_c_over_http: bool,
    /// Objects of at most this many stored bytes live in their meta record
    /// instead of blocks (0: none); at most `meta_api::MAX_INLINE_BODY`.
    pub inline_max: usize,
    /// Object ownership of a bucket created without
    /// `x-amz-object-ownership`: AWS's BucketOwnerEnforced (ACLs off) by
    /// default; ObjectWriter or BucketOwnerPreferred for applications that
    /// still set ACLs.
    pub default_ownership: access::ObjectOwnership,
    /// Whether a new bucket starts with every public access block flag on,
    /// as in AWS; off, public ACLs and policies work from the start.
    pub default_block_public_access: bool,
}

/// Default [`GatewayConfig::inline_max`]: 16 KiB.
pub const DEFAULT_INLINE_MAX: usize = 16 * 1024;

impl GatewayConfig {
    /// Settings for `region`, path style only, the default upload bound.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            domain: None,
            max_concurrent_uploads: upload_slots::UploadSlots::default_max(),
            upload_slot_wait: upload_slots::DEFAULT_SLOT_WAIT,
            body_rate: body_rate::BodyRateLimit::default(),
            get_memory: download::DEFAULT_GET_MEMORY,
            sigv2: true,
            sse_c_over_http: false,
            inline_max: DEFAULT_INLINE_MAX,
            default_ownership: access::ObjectOwnership::BucketOwnerEnforced,
            default_block_public_access: true,
        }
    }

    /// What signatures are checked against.
    pub fn realm(&self) -> auth::Realm<'_> {
        auth::Realm {
            region: &self.region,
            domain: self.domain.as_deref(),
            sigv2: self.sigv2,
        }
    }
}

/// The S3 service: every path and method goes through one handler that routes
/// by endpoint, wrapped in the request-id middleware.
pub fn router(meta: MetaClient, store: StoreClient, config: GatewayConfig) -> axum::Router {
    let uploads =
        upload_slots::UploadSlots::new(config.max_concurrent_uploads, config.upload_slot_wait);
    let get_memory = download::GetMemory::new(config.get_memory, config.upload_slot_wait);
    let body_rate = config.body_rate;
    let state = Arc::new(state::AppState {
        credentials: auth::cache::Credentials::new(meta.clone()),
        meta,
        store,
        config,
        readers: readers::ReaderCache::default(),
        uploads,
        get_memory,
        bucket_policies: Default::default(),
        user_policies: Default::default(),
        key_policies: Default::default(),
    });
    axum::Router::new()
        .fallback(endpoint::serve)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            body_rate,
            body_rate::hold_to_rate_floor,
        ))
        .layer(axum::middleware::from_fn(
            keep_alive::close_after_refused_body,
        ))
        .layer(axum::middleware::from_fn(telemetry::track))
}
