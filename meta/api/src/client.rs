//! A handle on meta that hides where meta runs: in this process or across
//! the network, both behind [`MetaTransport`].

use crate::error::MetaError;
use crate::failover::GroupClient;
use crate::requests::MetaRequest;
use crate::transport::MetaTransport;
use std::sync::Arc;

/// A handle on meta, in-process or remote; cheap to clone.
#[derive(Clone)]
pub struct MetaClient {
    transport: Arc<dyn MetaTransport>,
}

impl std::fmt::Debug for MetaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaClient").finish_non_exhaustive()
    }
}

impl MetaClient {
    /// A client over `transport`.
    pub fn new(transport: Arc<dyn MetaTransport>) -> Self {
        Self { transport }
    }

    /// A client of the meta at `addr` (host:port) presenting `token` (see
    /// [`RemoteMeta::new`]), over mutual TLS when `tls` is set. A list of
    /// addresses separated by commas names the members of a meta group; the
    /// client follows the leader any member names ([`GroupClient`]).
    pub fn remote(addr: &str, token: &str, tls: Option<Arc<tls::ClusterTls>>) -> Self {
        let addrs: Vec<&str> = addr
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        Self::new(Arc::new(GroupClient::new(&addrs, token, tls)))
    }

    /// Sends `request` and waits for its answer.
    pub async fn call<R: MetaRequest>(&self, request: R) -> Result<R::Response, MetaError> {
        let answer = self.transport.send(request.into_any()).await?;
        R::response_of(answer).map_err(|other| {
            MetaError::Protocol(format!(
                "meta answered {} with the answer to {other}",
                R::NAME
            ))
        })
    }
}
