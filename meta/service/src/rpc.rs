//! The meta RPC server over TCP (framing in [`meta_api::frame`]): each
//! connection opens with mutual TLS when the cluster has a CA, then with a
//! handshake whose secret sets the principal every request on it acts as,
//! then carries one request at a time.

use crate::service::MetaService;
use meta_api::frame::{self, FrameError, Handshake, MAX_FRAME, MAX_HANDSHAKE_FRAME, RPC_VERSION};
use meta_api::{AnyRequest, AnyResponse, MetaError, Principal};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tls::{ClusterTls, Link};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long the server waits for the rest of a frame once its length arrived.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves meta on `listener` until `shutdown` completes; then stops accepting,
/// lets every connection finish the request it is serving, and returns.
/// With `tls`, a connection is served only once its peer proved a
/// certificate of the cluster CA.
pub async fn serve(
    listener: TcpListener,
    service: Arc<MetaService>,
    tls: Option<Arc<ClusterTls>>,
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
                    connections.spawn(serve_connection(stream, tls.clone(), service.clone(), stop_rx.clone()));
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

/// Reads the handshake and checks its secret; answers it either way. Returns
/// the principal it proves when the connection may go on.
async fn authenticate(stream: &mut Link, service: &MetaService) -> Option<Principal> {
    let read = tokio::time::timeout(
        FRAME_TIMEOUT,
        frame::read_frame(stream, MAX_HANDSHAKE_FRAME),
    );
    let payload = match read.await {
        Ok(Ok(payload)) => payload,
        Ok(Err(FrameError::TooLarge(..))) => Vec::new(),
        Ok(Err(_)) | Err(_) => return None,
    };
    let verdict = match frame::decode::<Handshake>(&payload) {
        Ok(h) if h.version != RPC_VERSION => Err(if h.version < RPC_VERSION {
            "the client speaks an older meta RPC version: upgrade it to this meta's release"
                .to_string()
        } else {
            "the client speaks a newer meta RPC version: upgrade meta first".to_string()
        }),
        Ok(h) if h.token.is_empty() => {
            Err("no credential given (--credential-file or TESSERA_CREDENTIAL)".to_string())
        }
        Ok(h) => match service.authenticate(&h.token) {
            Ok(Ok(principal)) => Ok(principal),
            Ok(Err(refusal)) => Err(refusal.to_string()),
            // The store failed: the peer may try again.
            Err(e) => Err(format!("meta cannot check credentials now: {e}")),
        },
        Err(_) => Err(
            "the first frame must be the credential handshake (client too old, or no credential)"
                .to_string(),
        ),
    };
    let reply: Result<Principal, MetaError> = verdict.map_err(|reason| {
        metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED.name).increment(1);
        tracing::warn!(peer = ?stream.tcp().peer_addr().ok(), reason, "meta RPC connection refused");
        MetaError::Unauthenticated(reason)
    });
    let frame = frame::encode_frame(&reply).ok()?;
    send(stream, &frame).await.ok()?;
    reply.ok()
}

/// Writes a whole frame and pushes it out (TLS keeps records until flushed).
async fn send(stream: &mut Link, frame: &[u8]) -> std::io::Result<()> {
    stream.write_all(frame).await?;
    stream.flush().await
}

/// Serves requests on one connection until the peer closes it, it breaks, or
/// shutdown is signalled between requests.
async fn serve_connection(
    tcp: TcpStream,
    tls: Option<Arc<ClusterTls>>,
    service: Arc<MetaService>,
    mut stop: watch::Receiver<bool>,
) {
    let peer = tcp.peer_addr().ok();
    let accepted = tokio::select! {
        accepted = Link::accept(tcp, tls.as_deref(), FRAME_TIMEOUT) => accepted,
        _ = stop.wait_for(|stop| *stop) => return,
    };
    let mut stream = match accepted {
        Ok(stream) => stream,
        Err(e) => {
            metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED.name).increment(1);
            tracing::warn!(?peer, error = %e, "meta RPC connection refused");
            return;
        }
    };
    let principal = tokio::select! {
        principal = authenticate(&mut stream, &service) => principal,
        _ = stop.wait_for(|stop| *stop) => None,
    };
    let Some(principal) = principal else {
        return;
    };
    loop {
        let len = tokio::select! {
            len = stream.read_u32() => match len {
                Ok(len) => len,
                // EOF or reset between requests: the peer is gone.
                Err(_) => return,
            },
            _ = stop.wait_for(|stop| *stop) => return,
        };
        let read = frame::read_payload(&mut stream, len, MAX_FRAME);
        let payload = match tokio::time::timeout(FRAME_TIMEOUT, read).await {
            Ok(Ok(payload)) => payload,
            Ok(Err(e @ FrameError::TooLarge(..))) => {
                let reply: Result<AnyResponse, MetaError> = Err(MetaError::Protocol(e.to_string()));
                if let Ok(frame) = frame::encode_frame(&reply) {
                    let _ = send(&mut stream, &frame).await;
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
        let reply = match frame::decode::<AnyRequest>(&payload) {
            Ok(request) => service.serve(request, &principal).await,
            Err(e) => Err(MetaError::Protocol(e.to_string())),
        };
        let frame = match frame::encode_frame(&reply) {
            Ok(frame) => frame,
            Err(e) => {
                let refusal: Result<AnyResponse, MetaError> =
                    Err(MetaError::Protocol(format!("reply not sent: {e}")));
                match frame::encode_frame(&refusal) {
                    Ok(frame) => frame,
                    Err(_) => return,
                }
            }
        };
        if send(&mut stream, &frame).await.is_err() {
            return;
        }
        if *stop.borrow() {
            return;
        }
    }
}
