//! The block server: a TCP listener (mutual TLS over it when the cluster has
//! a CA), one task per connection serving its requests one after the other,
//! and a graceful shutdown that stops accepting and lets each request in
//! flight finish.

use crate::access::TokenGate;
use crate::error::StoreError;
use crate::payload_buffers;
use crate::peer::{Peer, TlsPeer};
use crate::send::open_blocks::{OpenBlocks, DEFAULT_OPEN_BLOCKS};
use crate::send::{self, ReadSettings, SendError};
use crate::store::BlockStore;
use crate::telemetry;
use proto::recycled::BufferRecycler;
use proto::wire::{self, ErrorCode, ErrorReply, Incoming, ProtocolError, Reply, Request};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tls::ClusterTls;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long shutdown waits for requests in flight before cutting them off.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Pause after a failed accept (e.g. out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Default [`ServerLimits::frame_read_timeout`].
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Limits that protect the server from slow or stalled peers.
#[derive(Clone, Copy, Debug)]
pub struct ServerLimits {
    /// Longest time a request frame (headers and payload) may take to arrive
    /// once its first byte did; a peer that stalls mid-frame is cut off so
    /// that it does not hold a connection and its buffer for ever. Idle
    /// connections between frames are not limited.
    pub frame_read_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            frame_read_timeout: FRAME_READ_TIMEOUT,
        }
    }
}

/// Serves the block protocol on `listener` from `store`, each request
/// checked against `gate`'s token keys, until `shutdown` completes; then
/// stops accepting, closes idle connections, and waits (up to a grace
/// period) for requests in flight. Nothing is accepted before `gate` holds
/// a key.
pub async fn serve(
    listener: TcpListener,
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_limits(listener, store, gate, shutdown, ServerLimits::default()).await
}

/// [`serve`] with explicit [`ServerLimits`].
pub async fn serve_with_limits(
    listener: TcpListener,
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ServerLimits,
) -> std::io::Result<()> {
    serve_with_settings(
        listener,
        store,
        gate,
        shutdown,
        limits,
        ReadSettings::default(),
        None,
    )
    .await
}

/// [`serve`] with explicit [`ServerLimits`], [`ReadSettings`] (how read
/// replies reach the socket) and, with `tls`, mutual TLS with the cluster CA
/// on every connection.
pub async fn serve_with_settings(
    listener: TcpListener,
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ServerLimits,
    read: ReadSettings,
    tls: Option<Arc<ClusterTls>>,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    // Without a key every request would be refused: the first heartbeat
    // answer brings them, and connections wait in the backlog till then.
    tokio::select! {
        () = &mut shutdown => return Ok(()),
        () = gate.ready() => {}
    }
    let shared = Arc::new(Shared {
        open_blocks: OpenBlocks::new(&store, DEFAULT_OPEN_BLOCKS),
        store,
        gate,
        payloads: BufferRecycler::new(payload_buffers::MAX_IDLE),
        limits,
        read,
    });
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // A read reply is its headers, then its data (often by
                    // sendfile): neither may wait on a delayed ACK.
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::warn!(%peer, error = %e, "could not set TCP_NODELAY");
                    }
                    connections.spawn(open_connection(stream, peer, tls.clone(), shared.clone(), stop_rx.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(finished) = connections.join_next(), if !connections.is_empty() => {
                if let Err(e) = finished {
                    tracing::error!(error = %e, "a datanode connection task failed");
                }
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = async {
        while let Some(finished) = connections.join_next().await {
            if let Err(e) = finished {
                tracing::error!(error = %e, "a datanode connection task failed");
            }
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!("requests still running after the shutdown grace period; cutting them off");
        connections.shutdown().await;
    }
    Ok(())
}

/// What every connection of one server shares.
struct Shared {
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    open_blocks: Arc<OpenBlocks>,
    /// Buffers that write payloads are received into, reused once written.
    payloads: BufferRecycler,
    limits: ServerLimits,
    read: ReadSettings,
}

/// Why a connection must close.
enum Close {
    /// The peer went away or the stream failed; nothing more to say.
    Quietly,
    /// The peer sent something undecodable or cut a frame short (it may have
    /// only half-closed): tell it, then close.
    WithError(ProtocolError),
    /// The peer started a frame and did not finish it in time.
    Stalled,
}

/// Serves a new connection: as is when it comes from this host, or once its
/// peer proved a certificate of the cluster CA (within the frame read
/// timeout) when `tls` is set.
async fn open_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<ClusterTls>>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(tls) = tls else {
        if tls::link::clear_text_allowed(&peer) {
            return serve_connection(tcp, peer, shared, stop).await;
        }
        // Block tokens and data would cross the network readable.
        telemetry::tls_refusal();
        tracing::warn!(%peer, "clear-text connection from another host refused: links off this host need mutual TLS (--cluster-ca, --cluster-cert, --cluster-key)");
        return;
    };
    let handshake = tokio::time::timeout(shared.limits.frame_read_timeout, tls.accept(tcp));
    let accepted = tokio::select! {
        accepted = handshake => accepted,
        _ = stop.wait_for(|stopped| *stopped) => return,
    };
    match accepted {
        Ok(Ok(stream)) => {
            let stream: TlsPeer = tokio::io::BufReader::new(stream);
            serve_connection(stream, peer, shared, stop).await;
        }
        Ok(Err(e)) => {
            telemetry::tls_refusal();
            tracing::warn!(%peer, error = %e, "TLS handshake refused");
        }
        Err(_elapsed) => {
            telemetry::tls_refusal();
            tracing::warn!(%peer, "TLS handshake not finished in time");
        }
    }
}

async fn serve_connection<P: Peer>(
    mut stream: P,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let limits = shared.limits;
    loop {
        // Between requests, and only there, shutdown closes the connection.
        let started = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            started = stream.frame_started() => started,
        };
        if !started {
            return;
        }
        // The frame has started: all of it must arrive by this deadline.
        let deadline = Instant::now() + limits.frame_read_timeout;
        let read = tokio::time::timeout_at(deadline, wire::read_request(&mut stream)).await;
        let close = match read {
            Ok(Ok(Some(incoming))) => {
                match serve_request(&mut stream, &shared, incoming, deadline).await {
                    Ok(()) => continue,
                    Err(close) => close,
                }
            }
            Ok(Ok(None)) => return,
            Ok(Err(e)) => classify(e),
            Err(_elapsed) => Close::Stalled,
        };
        if let Close::Stalled = close {
            telemetry::protocol_error();
            tracing::warn!(%peer, timeout = ?limits.frame_read_timeout, "request frame not received in time; closing the connection");
            return;
        }
        if let Close::WithError(e) = close {
            telemetry::protocol_error();
            if matches!(e, ProtocolError::Truncated(_)) {
                tracing::debug!(%peer, error = %e, "frame cut short; closing the connection");
            } else {
                tracing::warn!(%peer, error = %e, "undecodable frame; closing the connection");
            }
            let reply = Reply::Error(ErrorReply {
                code: ErrorCode::Protocol,
                offset: None,
                message: e.to_string(),
            });
            // Best effort: the request id is unknown, and the peer may be gone.
            let _ = wire::write_reply(&mut stream, 0, &reply).await;
        }
        return;
    }
}

fn classify(e: ProtocolError) -> Close {
    match e {
        ProtocolError::Io(_) | ProtocolError::Closed => Close::Quietly,
        other => Close::WithError(other),
    }
}

fn op_name(request: &Request) -> &'static str {
    match request {
        Request::WriteChunks(_) => "write",
        Request::CommitBlock { .. } => "commit",
        Request::ReadBlock { .. } => "read",
        Request::DeleteBlock { .. } => "delete",
        Request::LocalInfo => "local_info",
    }
}

/// Serves one request; an `Err` means the connection must close.
async fn serve_request<P: Peer>(
    stream: &mut P,
    shared: &Shared,
    incoming: Incoming<Request>,
    deadline: Instant,
) -> Result<(), Close> {
    let (store, open_blocks, read_settings) = (&*shared.store, &*shared.open_blocks, &shared.read);
    let Incoming {
        request_id,
        message: request,
        token,
        payload_len,
    } = incoming;
    let op = op_name(&request);
    let key = request.key();
    if let Err(denied) = shared.gate.authorize(&request, token.as_ref(), store) {
        skip_payload(stream, payload_len, deadline).await?;
        return answer(stream, request_id, op, key, Err(denied)).await;
    }
    let result = match request {
        Request::WriteChunks(w) => {
            let read = payload_buffers::read_payload(&shared.payloads, stream, payload_len);
            let data = tokio::time::timeout_at(deadline, read)
                .await
                .map_err(|_| Close::Stalled)?
                .map_err(classify)?;
            store
                .write_chunks(w.key, w.offset, w.bytes_per_checksum, w.crcs, data)
                .await
        }
        Request::CommitBlock { key, length } => store.commit(key, length).await,
        Request::DeleteBlock { key } => store.delete(key).await.map(|_| ()),
        Request::LocalInfo => {
            telemetry::request(op, "ok");
            let reply = crate::local::info_reply(store);
            return wire::write_reply(stream, request_id, &reply)
                .await
                .map_err(|_| Close::Quietly);
        }
        Request::ReadBlock {
            key,
            offset,
            length,
        } => match open_blocks.open_range(store, key, offset, length).await {
            Ok(range) => {
                match send::send_range_to_peer(stream, request_id, key, range, read_settings).await
                {
                    Ok(()) => {
                        telemetry::request(op, "ok");
                        return Ok(());
                    }
                    // Nothing was sent: answered like any refusal below.
                    Err(SendError::Refused(e)) => Err(e),
                    Err(e) => {
                        telemetry::request(op, "failed");
                        tracing::warn!(block = %key, error = %e, "read reply cut short; closing the connection");
                        return Err(Close::Quietly);
                    }
                }
            }
            Err(e) => Err(e),
        },
    };
    answer(stream, request_id, op, key, result).await
}

/// Reads and drops the payload of a refused request, so that the connection
/// stays in sync and the client reads the refusal.
async fn skip_payload<P: Peer>(
    stream: &mut P,
    payload_len: u32,
    deadline: Instant,
) -> Result<(), Close> {
    let mut payload = tokio::io::AsyncReadExt::take(&mut *stream, u64::from(payload_len));
    let mut sink = tokio::io::sink();
    let skip = tokio::io::copy(&mut payload, &mut sink);
    let skipped = tokio::time::timeout_at(deadline, skip)
        .await
        .map_err(|_| Close::Stalled)?
        .map_err(|_| Close::Quietly)?;
    if skipped < u64::from(payload_len) {
        return Err(Close::Quietly);
    }
    Ok(())
}

/// Sends the reply to a request that returns no data.
async fn answer<P: Peer>(
    stream: &mut P,
    request_id: u64,
    op: &'static str,
    key: proto::BlockKey,
    result: Result<(), StoreError>,
) -> Result<(), Close> {
    let reply = match result {
        Ok(()) => {
            telemetry::request(op, "ok");
            Reply::Ok
        }
        Err(e) => {
            log_refusal(op, key, &e);
            telemetry::request(op, "refused");
            Reply::Error(e.to_reply())
        }
    };
    wire::write_reply(stream, request_id, &reply)
        .await
        .map_err(|_| Close::Quietly)
}

fn log_refusal(op: &'static str, key: proto::BlockKey, e: &StoreError) {
    if e.is_local_failure() {
        tracing::error!(op, block = %key, error = %e, "block request failed");
    } else {
        tracing::debug!(op, block = %key, error = %e, "block request refused");
    }
}
