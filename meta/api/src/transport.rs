//! How requests reach meta: one trait for every way there is (in process,
//! over TCP), so that callers hold a [`crate::MetaClient`] and never know which.

use crate::error::MetaError;
use crate::requests::{AnyRequest, AnyResponse};
use futures::future::BoxFuture;

/// Carries requests to meta and brings back the answers. The service
/// implements it in process; [`crate::RemoteMeta`] over TCP.
pub trait MetaTransport: Send + Sync + 'static {
    /// Sends one request and waits for its answer.
    fn send(&self, request: AnyRequest) -> BoxFuture<'_, Result<AnyResponse, MetaError>>;
}
