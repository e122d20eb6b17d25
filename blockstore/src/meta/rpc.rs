//! The meta RPC over TCP: each frame is a u32 big-endian payload length then a
//! JSON payload; a request is a `MetaRequest`, its reply a
//! `Result<MetaResponse, MetaError>`. One request at a time per connection;
//! clients keep a small pool of idle connections.
//!
//! Each connection opens with a [`Handshake`] frame carrying the cluster
//! token (or the admin token); meta answers `Ok(Done)`, or refuses with
//! `MetaError::Unauthenticated` and closes the connection, before reading any
//! request.

use super::api::{MetaError, MetaRequest, MetaResponse};
use super::service::MetaService;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Largest payload either side accepts; checked before allocating.
pub const MAX_FRAME: u32 = 64 * 1024 * 1024;
/// How long a client waits to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client waits for a reply once its request is sent.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server waits for the rest of a frame once its length arrived.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections a client keeps.
const MAX_IDLE: usize = 16;
/// Largest handshake frame: an unauthenticated peer gets no bigger buffer.
const MAX_HANDSHAKE_FRAME: u32 = 4096;

/// The first frame of every connection.
#[derive(Serialize, serde::Deserialize)]
struct Handshake {
    /// The cluster token (or the admin token).
    token: String,
}

/// Whether `token` is one of `accepted`, comparing in constant time
/// (whatever the position of the first difference).
fn token_accepted(token: &str, accepted: &[&str]) -> bool {
    accepted.iter().fold(false, |ok, a| {
        ok | bool::from(token.as_bytes().ct_eq(a.as_bytes()))
    })
}

/// Why one exchange on a connection failed.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {0} bytes exceeds the {MAX_FRAME} byte limit")]
    TooLarge(u64),
    #[error("undecodable frame: {0}")]
    Decode(serde_json::Error),
    #[error("no reply within {REPLY_TIMEOUT:?}")]
    TimedOut,
}

/// Encodes `value` as one frame (length included).
fn encode_frame(value: &impl Serialize) -> Result<Vec<u8>, FrameError> {
    let mut frame = vec![0u8; 4];
    serde_json::to_writer(&mut frame, value).map_err(FrameError::Decode)?;
    let len = (frame.len() - 4) as u64;
    if len > MAX_FRAME as u64 {
        return Err(FrameError::TooLarge(len));
    }
    frame[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(frame)
}

/// Reads the payload of a frame whose length was read.
async fn read_payload(stream: &mut TcpStream, len: u32) -> Result<Vec<u8>, FrameError> {
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len as u64));
    }
    let mut payload = vec![0u8; len as usize];
    stream.read_exact(&mut payload).await?;
    Ok(payload)
}

fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload).map_err(FrameError::Decode)
}

/// Serves meta on `listener` until `shutdown` completes; then stops accepting,
/// lets every connection finish the request it is serving, and returns.
pub async fn serve(
    listener: TcpListener,
    service: Arc<MetaService>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!(%peer, error = %e, "TCP_NODELAY refused");
                    }
                    connections.spawn(serve_connection(stream, service.clone(), stop_rx.clone()));
                }
                Err(e) => {
                    // Out of descriptors and the like: pause instead of spinning.
                    tracing::warn!(error = %e, "meta accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Ignored when no connection is left to hear it.
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    tracing::info!("meta RPC server stopped");
    Ok(())
}

/// Reads the handshake and checks its token; answers it either way. Returns
/// whether the connection may go on.
async fn authenticate(stream: &mut TcpStream, service: &MetaService) -> bool {
    let read = async {
        let len = stream.read_u32().await?;
        if len > MAX_HANDSHAKE_FRAME {
            return Err(FrameError::TooLarge(u64::from(len)));
        }
        read_payload(stream, len).await
    };
    let payload = match tokio::time::timeout(FRAME_TIMEOUT, read).await {
        Ok(Ok(payload)) => payload,
        Ok(Err(FrameError::TooLarge(_))) => Vec::new(),
        Ok(Err(_)) | Err(_) => return false,
    };
    let verdict = match decode::<Handshake>(&payload) {
        Ok(h) if h.token.is_empty() => {
            Err("no cluster token given (--cluster-token or TESSERA_CLUSTER_TOKEN)")
        }
        Ok(h) if token_accepted(&h.token, &[service.cluster_token(), service.admin_token()]) => {
            Ok(())
        }
        Ok(_) => Err("wrong cluster token"),
        Err(_) => {
            Err("the first frame must be the cluster token handshake (client too old, or no token)")
        }
    };
    let reply: Result<MetaResponse, MetaError> = match verdict {
        Ok(()) => Ok(MetaResponse::Done),
        Err(reason) => {
            metrics::counter!("tessera_meta_connections_refused_total").increment(1);
            tracing::warn!(peer = ?stream.peer_addr().ok(), reason, "meta RPC connection refused");
            Err(MetaError::Unauthenticated(reason.to_string()))
        }
    };
    let accepted = reply.is_ok();
    match encode_frame(&reply) {
        Ok(frame) => stream.write_all(&frame).await.is_ok() && accepted,
        Err(_) => false,
    }
}

/// Serves requests on one connection until the peer closes it, it breaks, or
/// shutdown is signalled between requests.
async fn serve_connection(
    mut stream: TcpStream,
    service: Arc<MetaService>,
    mut stop: watch::Receiver<bool>,
) {
    let authenticated = tokio::select! {
        ok = authenticate(&mut stream, &service) => ok,
        _ = stop.wait_for(|stop| *stop) => false,
    };
    if !authenticated {
        return;
    }
    loop {
        let len = tokio::select! {
            len = stream.read_u32() => match len {
                Ok(len) => len,
                // EOF or reset between requests: the peer is gone.
                Err(_) => return,
            },
            _ = stop.wait_for(|stop| *stop) => return,
        };
        let payload =
            match tokio::time::timeout(FRAME_TIMEOUT, read_payload(&mut stream, len)).await {
                Ok(Ok(payload)) => payload,
                Ok(Err(e @ FrameError::TooLarge(_))) => {
                    let reply: Result<MetaResponse, MetaError> =
                        Err(MetaError::Protocol(e.to_string()));
                    if let Ok(frame) = encode_frame(&reply) {
                        let _ = stream.write_all(&frame).await;
                    }
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "meta connection broke mid-frame");
                    return;
                }
                Err(_) => {
                    tracing::debug!("meta connection stalled mid-frame");
                    return;
                }
            };
        let reply = match decode::<MetaRequest>(&payload) {
            Ok(request) => service.handle(request).await,
            Err(e) => Err(MetaError::Protocol(e.to_string())),
        };
        let frame = match encode_frame(&reply) {
            Ok(frame) => frame,
            Err(e) => {
                let refusal: Result<MetaResponse, MetaError> =
                    Err(MetaError::Protocol(format!("reply not sent: {e}")));
                match encode_frame(&refusal) {
                    Ok(frame) => frame,
                    Err(_) => return,
                }
            }
        };
        if stream.write_all(&frame).await.is_err() {
            return;
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// A client of a remote meta: connects lazily, keeps a few idle connections,
/// and reconnects when one broke.
pub struct RemoteMeta {
    addr: String,
    token: String,
    idle: Mutex<Vec<TcpStream>>,
}

impl std::fmt::Debug for RemoteMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteMeta")
            .field("addr", &self.addr)
            .finish()
    }
}

impl RemoteMeta {
    /// A client of the meta at `addr` (host:port) presenting no token: meta
    /// refuses it with `MetaError::Unauthenticated` (tests of the refusal).
    pub fn connect(addr: &str) -> RemoteMeta {
        Self::connect_with_token(addr, "")
    }

    /// A client of the meta at `addr` (host:port) presenting `token` (the
    /// cluster token, or the admin token) on each connection; no I/O until
    /// the first call.
    pub fn connect_with_token(addr: &str, token: &str) -> RemoteMeta {
        RemoteMeta {
            addr: addr.to_string(),
            token: token.to_string(),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The address this client talks to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one request and waits for its answer. An idle connection that
    /// turns out broken is replaced once by a fresh one; an unreachable meta
    /// gives `MetaError::Transport`.
    pub async fn call(&self, request: MetaRequest) -> Result<MetaResponse, MetaError> {
        let frame = encode_frame(&request).map_err(|e| MetaError::Protocol(e.to_string()))?;
        let pooled = self.idle.lock().pop();
        if let Some(stream) = pooled {
            match self.exchange(stream, &frame).await {
                Err(FrameError::Io(e)) => {
                    tracing::debug!(addr = %self.addr, error = %e, "idle meta connection broke, redialling");
                }
                other => return self.finish(other),
            }
        }
        let stream = self.dial().await?;
        let result = self.exchange(stream, &frame).await;
        self.finish(result)
    }

    /// Presents the token on a fresh connection; meta's refusal comes back as is.
    async fn handshake(&self, stream: &mut TcpStream) -> Result<(), MetaError> {
        let hello = Handshake {
            token: self.token.clone(),
        };
        let frame = encode_frame(&hello).map_err(|e| MetaError::Protocol(e.to_string()))?;
        let reply = tokio::time::timeout(REPLY_TIMEOUT, async {
            stream.write_all(&frame).await?;
            let len = stream.read_u32().await?;
            read_payload(stream, len).await
        })
        .await
        .map_err(|_| FrameError::TimedOut)
        .and_then(|r| r);
        let reply: Result<MetaResponse, MetaError> = match reply {
            Ok(payload) => decode(&payload).map_err(|e| self.finish_error(e))?,
            Err(e) => return Err(self.finish_error(e)),
        };
        match reply? {
            MetaResponse::Done => Ok(()),
            other => Err(MetaError::Protocol(format!(
                "{}: unexpected handshake answer {other:?}",
                self.addr
            ))),
        }
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
        result: Result<Result<MetaResponse, MetaError>, FrameError>,
    ) -> Result<MetaResponse, MetaError> {
        match result {
            Ok(reply) => reply,
            Err(e) => Err(self.finish_error(e)),
        }
    }

    async fn dial(&self) -> Result<TcpStream, MetaError> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.addr))
            .await
            .map_err(|_| MetaError::Transport(format!("{}: connect timed out", self.addr)))?
            .map_err(|e| MetaError::Transport(format!("{}: {e}", self.addr)))?;
        stream
            .set_nodelay(true)
            .map_err(|e| MetaError::Transport(format!("{}: {e}", self.addr)))?;
        let mut stream = stream;
        self.handshake(&mut stream).await?;
        Ok(stream)
    }

    /// Sends `frame` and reads the reply; the connection goes back to the
    /// pool only after a complete exchange.
    async fn exchange(
        &self,
        mut stream: TcpStream,
        frame: &[u8],
    ) -> Result<Result<MetaResponse, MetaError>, FrameError> {
        let reply = tokio::time::timeout(REPLY_TIMEOUT, async {
            stream.write_all(frame).await?;
            let len = stream.read_u32().await?;
            read_payload(&mut stream, len).await
        })
        .await
        .map_err(|_| FrameError::TimedOut)??;
        let reply = decode(&reply)?;
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(stream);
        }
        Ok(reply)
    }
}

#[cfg(test)]
#[path = "rpc_tests.rs"]
mod tests;
