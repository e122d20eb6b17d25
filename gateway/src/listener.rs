//! The S3 port: connections accepted under a cap, each served as HTTP/1.1
//! with a deadline on request heads, until shutdown.
//!
//! A client that opens connections and sends nothing, or half a request head
//! and then waits, must not hold them for ever: hyper's header read timeout
//! bounds the time from a connection's start, or from the end of its last
//! response, to the end of the next request's head, so it is both the
//! header read timeout and the keep-alive idle timeout. Past
//! `max_connections` open connections, a new one is answered 503 SlowDown
//! and closed at once (counted in `tessera_gateway_connections_refused_total`)
//! rather than left in the accept queue. Slow bodies are cut by
//! [`crate::auth::BodyRate`]. With [`Tls`], every connection is HTTPS: its
//! handshake must end within the header read timeout too.

use crate::tls::Tls;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Default [`ConnectionLimits::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`ConnectionLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// How long shutdown waits for requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Pause after a failed accept (out of file descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Longest a refused connection is given to take its 503.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// What one client may hold of the S3 port.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Longest from a connection's start, or the end of its last response, to
    /// the end of the next request head; the connection is closed past it.
    pub header_read_timeout: Duration,
    /// Most connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The answer to a connection past the cap: S3's SlowDown, which SDKs retry
/// with backoff.
fn refusal() -> Vec<u8> {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                <Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
         Connection: close\r\nRetry-After: 1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Counts open connections; a [`Slot`] is one of them.
struct OpenConnections {
    open: AtomicUsize,
    max: usize,
}

struct Slot(Arc<OpenConnections>);

impl OpenConnections {
    fn try_open(self: &Arc<Self>) -> Option<Slot> {
        let mut open = self.open.load(Ordering::Relaxed);
        loop {
            if open >= self.max {
                return None;
            }
            match self.open.compare_exchange_weak(
                open,
                open + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    metrics::gauge!(crate::telemetry::OPEN_CONNECTIONS.name).increment(1.0);
                    return Some(Slot(self.clone()));
                }
                Err(now) => open = now,
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(crate::telemetry::OPEN_CONNECTIONS.name).decrement(1.0);
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes,
/// then stops accepting, lets requests in flight finish (up to a grace
/// period) and closes idle connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(OpenConnections {
        open: AtomicUsize::new(0),
        max: limits.max_connections.max(1),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let refused: Arc<[u8]> = refusal().into();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let slot = open.try_open();
                    if slot.is_none() {
                        metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED.name).increment(1);
                        tracing::debug!(%peer, "connection refused: too many open");
                    }
                    let (app, stop, refused) = (app.clone(), stop_rx.clone(), refused.clone());
                    let acceptor = tls.as_ref().map(|tls| tls.acceptor());
                    let client = ClientConnection {
                        peer,
                        secure: acceptor.is_some(),
                    };
                    let app = app.layer(axum::Extension(client));
                    connections.spawn(async move {
                        let Some(acceptor) = acceptor else {
                            return serve_or_refuse(stream, slot, app, limits, stop, refused).await;
                        };
                        let wait = match slot {
                            Some(_) => limits.header_read_timeout,
                            None => REFUSAL_WRITE_TIMEOUT,
                        };
                        if let Some(stream) = handshake(acceptor, stream, wait, peer).await {
                            serve_or_refuse(stream, slot, app, limits, stop, refused).await;
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!(
            "S3 requests still running after the shutdown grace period; cutting them off"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// Where a request came from, as each request of a connection carries it
/// (bucket policies test the address and whether TLS carried it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConnection {
    /// The client's address.
    pub peer: SocketAddr,
    /// Whether the connection is HTTPS.
    pub secure: bool,
}

/// Completes a connection's TLS handshake within `wait`; a handshake that
/// stalls is cut and counted like a late request head.
async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    wait: Duration,
    peer: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(wait, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            count_header_timeout();
            tracing::debug!(%peer, "TLS handshake not finished in time");
            None
        }
    }
}

fn count_header_timeout() {
    metrics::counter!(crate::telemetry::HEADER_TIMEOUTS.name).increment(1);
}

/// Serves a connection that got a slot; answers one past the cap with
/// SlowDown and closes it.
async fn serve_or_refuse<I>(
    io: I,
    slot: Option<Slot>,
    app: Router,
    limits: ConnectionLimits,
    stop: watch::Receiver<bool>,
    refused: Arc<[u8]>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match slot {
        Some(slot) => {
            serve_connection(io, app, limits, stop).await;
            drop(slot);
        }
        None => refuse(io, refused).await,
    }
}

/// Answers a connection past the cap with SlowDown and closes it.
async fn refuse(mut stream: impl AsyncWrite + Unpin, answer: Arc<[u8]>) {
    let write = async {
        stream.write_all(&answer).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, write).await;
}

/// Serves one connection until the client closes it, a limit closes it, or
/// shutdown asks it to finish its request in flight and close.
async fn serve_connection<I>(
    io: I,
    app: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let service = TowerToHyperService::new(app);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let stopping = async {
        let _ = stop.wait_for(|stopped| *stopped).await;
    };
    tokio::select! {
        result = connection.as_mut() => return log_end(result),
        () = stopping => {}
    }
    connection.as_mut().graceful_shutdown();
    log_end(connection.await);
}

fn log_end(result: Result<(), hyper::Error>) {
    match result {
        Ok(()) => {}
        Err(e) if e.is_timeout() => {
            count_header_timeout();
            tracing::debug!("connection closed: no complete request head in time");
        }
        Err(e) => tracing::debug!(error = %e, "connection ended with an error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_response() {
        let answer = refusal();
        let text = std::str::from_utf8(&answer).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), length);
        assert!(body.contains("<Code>SlowDown</Code>"));
    }

    #[test]
    fn connections_past_the_cap_get_no_slot() {
        let open = Arc::new(OpenConnections {
            open: AtomicUsize::new(0),
            max: 2,
        });
        let a = open.try_open().unwrap();
        let _b = open.try_open().unwrap();
        assert!(open.try_open().is_none());
        drop(a);
        assert!(open.try_open().is_some());
    }
}
