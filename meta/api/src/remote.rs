//! The client side of the meta RPC over TCP (framing in [`crate::frame`]):
//! connects lazily (over mutual TLS when the cluster has a CA), presents its
//! token on each new connection, keeps a few idle connections, and
//! reconnects when one broke.

use crate::error::MetaError;
use crate::frame::{self, FrameError, Handshake, MAX_FRAME, MAX_HANDSHAKE_FRAME, RPC_VERSION};
use crate::principal::Principal;
use crate::requests::{Access, AnyRequest, AnyResponse};
use crate::transport::MetaTransport;
use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;
use tls::{ClusterTls, Link};
use tokio::io::AsyncWriteExt;

/// How long a client waits to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client waits for a reply once its request is sent.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle connections a client keeps.
const MAX_IDLE: usize = 16;

/// A client of a remote meta.
pub struct RemoteMeta {
    addr: String,
    token: String,
    tls: Option<Arc<ClusterTls>>,
    idle: Mutex<Vec<Link>>,
}

impl std::fmt::Debug for RemoteMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteMeta")
            .field("addr", &self.addr)
            .finish()
    }
}

impl RemoteMeta {
    /// A client of the meta at `addr` (host:port) presenting `token` (a
    /// datanode's or gateway's credential, or the admin token) on each
    /// connection; no I/O until
    /// the first call. An empty token is refused by meta with
    /// `MetaError::Unauthenticated`.
    pub fn new(addr: &str, token: &str) -> RemoteMeta {
        RemoteMeta {
            addr: addr.to_string(),
            token: token.to_string(),
            tls: None,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The same client over mutual TLS with the cluster CA of `tls` (meta
    /// must then present a certificate naming the host of its address).
    pub fn with_tls(mut self, tls: Option<Arc<ClusterTls>>) -> RemoteMeta {
        self.tls = tls;
        self
    }

    /// The address this client talks to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Connections kept open for the next calls.
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().len()
    }

    /// Sends one request and waits for its answer. An idle connection that
    /// turns out broken is replaced once by a fresh one; an unreachable meta
    /// gives `MetaError::Transport`.
    pub async fn call(&self, request: &AnyRequest) -> Result<AnyResponse, MetaError> {
        self.attempt(request).await.map_err(Failure::into_error)
    }

    /// [`RemoteMeta::call`], telling a request that never reached meta from
    /// one whose answer was lost (what a client of several metas needs to
    /// know before it sends a write elsewhere).
    pub async fn attempt(&self, request: &AnyRequest) -> Result<AnyResponse, Failure> {
        let frame = frame::encode_frame(request)
            .map_err(|e| Failure::Answered(MetaError::Protocol(e.to_string())))?;
        if let Some(stream) = self.live_idle_connection() {
            match self.exchange(stream, &frame).await {
                // A connection that broke mid-request: meta may have applied
                // it, so only a request that changes nothing is sent again.
                Err(FrameError::Io(e)) if request.access() != Access::Write => {
                    tracing::debug!(addr = %self.addr, error = %e, "idle meta connection broke, redialling");
                }
                other => return self.finish(other).map_err(Failure::sent),
            }
        }
        let stream = self.dial().await.map_err(Failure::Unreached)?;
        let result = self.exchange(stream, &frame).await;
        self.finish(result).map_err(Failure::sent)
    }

    /// An idle connection that meta has not closed (one it closed shows as
    /// readable at end of stream; an open idle one has nothing to read).
    fn live_idle_connection(&self) -> Option<Link> {
        loop {
            let stream = self.idle.lock().pop()?;
            let mut byte = [0u8; 1];
            match stream.tcp().peek(&mut byte).now_or_never() {
                None => return Some(stream),
                Some(_) => {
                    tracing::debug!(addr = %self.addr, "idle meta connection closed by meta, dropped");
                }
            }
        }
    }

    /// Presents the token on a fresh connection; meta's refusal comes back as is.
    async fn handshake(&self, stream: &mut Link) -> Result<Principal, MetaError> {
        let hello = Handshake {
            token: self.token.clone(),
            version: RPC_VERSION,
        };
        let frame = frame::encode_frame(&hello).map_err(|e| MetaError::Protocol(e.to_string()))?;
        let reply = tokio::time::timeout(REPLY_TIMEOUT, async {
            stream.write_all(&frame).await?;
            stream.flush().await?;
            frame::read_frame(stream, MAX_HANDSHAKE_FRAME).await
        })
        .await
        .map_err(|_| FrameError::TimedOut)
        .and_then(|r| r);
        let reply: Result<Principal, MetaError> = match reply {
            Ok(payload) => frame::decode(&payload).map_err(|e| self.finish_error(e))?,
            Err(FrameError::TooLarge(len, _)) if self.tls.is_none() && is_tls_alert(len) => {
                return Err(MetaError::Transport(format!(
                    "{}: meta answered with a TLS alert: it runs mutual TLS, so pass \
                     --cluster-ca, --cluster-cert and --cluster-key",
                    self.addr
                )))
            }
            Err(e) => return Err(self.finish_error(e)),
        };
        reply
    }

    fn finish_error(&self, e: FrameError) -> MetaError {
        match e {
            e @ (FrameError::Io(_) | FrameError::TimedOut) => {
                MetaError::Transport(format!("{}: {e}", self.addr))
            }
            e => MetaError::Protocol(format!("{}: {e}", self.addr)),
        }
    }

    fn finish(
        &self,
        result: Result<Result<AnyResponse, MetaError>, FrameError>,
    ) -> Result<AnyResponse, MetaError> {
        match result {
            Ok(reply) => reply,
            Err(e) => Err(self.finish_error(e)),
        }
    }

    async fn dial(&self) -> Result<Link, MetaError> {
        let mut stream = Link::dial(&self.addr, self.tls.as_deref(), CONNECT_TIMEOUT)
            .await
            .map_err(|e| MetaError::Transport(format!("{}: {e}", self.addr)))?;
        self.handshake(&mut stream).await?;
        Ok(stream)
    }

    /// Sends `frame` and reads the reply; the connection goes back to the
    /// pool only after a complete exchange.
    async fn exchange(
        &self,
        mut stream: Link,
        frame: &[u8],
    ) -> Result<Result<AnyResponse, MetaError>, FrameError> {
        let reply = tokio::time::timeout(REPLY_TIMEOUT, async {
            stream.write_all(frame).await?;
            stream.flush().await?;
            frame::read_frame(&mut stream, MAX_FRAME).await
        })
        .await
        .map_err(|_| FrameError::TimedOut)??;
        let reply = frame::decode(&reply)?;
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(stream);
        }
        Ok(reply)
    }
}

/// Why a call to one meta failed.
#[derive(Debug)]
pub enum Failure {
    /// No connection: the request never left.
    Unreached(MetaError),
    /// Sent, and no answer came back: it may have been applied.
    Lost(MetaError),
    /// Meta answered with this refusal.
    Answered(MetaError),
}

impl Failure {
    /// The failure of a request that was sent.
    fn sent(e: MetaError) -> Failure {
        if matches!(e, MetaError::Transport(_)) {
            Failure::Lost(e)
        } else {
            Failure::Answered(e)
        }
    }

    /// The error a caller of one meta sees.
    pub fn into_error(self) -> MetaError {
        match self {
            Failure::Unreached(e) | Failure::Lost(e) | Failure::Answered(e) => e,
        }
    }
}

/// Whether a frame length is the first four bytes of a TLS alert record
/// (content type 21, version 3.x), which is what a TLS server sends a
/// clear-text client before it hangs up.
fn is_tls_alert(frame_len: u64) -> bool {
    frame_len >> 16 == 0x1503
}

impl MetaTransport for RemoteMeta {
    fn send(&self, request: AnyRequest) -> BoxFuture<'_, Result<AnyResponse, MetaError>> {
        Box::pin(async move { self.call(&request).await })
    }
}
