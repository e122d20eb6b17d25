//! A TCP proxy that can stop forwarding, to stall a datanode (or any peer)
//! by real means: its connections stay open and silent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A TCP proxy in front of one datanode that can stop forwarding (both
/// ways) and counts the bytes clients sent through it.
pub struct StallProxy {
    addr: String,
    stalled: watch::Sender<bool>,
    /// Bytes received from clients (forwarded or held).
    received: Arc<AtomicU64>,
    /// Bytes passed on to the datanode.
    forwarded: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl StallProxy {
    /// A proxy on a fresh port of 127.0.0.1 forwarding to `target`.
    pub async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::start_on(listener, target)
    }

    /// A proxy accepting on `listener` (bound before `target` existed, so that
    /// a datanode can advertise the proxy's address) and forwarding to `target`.
    pub fn start_on(listener: TcpListener, target: &str) -> Self {
        let addr = listener.local_addr().unwrap().to_string();
        let (stalled, _) = watch::channel(false);
        let received = Arc::new(AtomicU64::new(0));
        let forwarded = Arc::new(AtomicU64::new(0));
        let target = target.to_string();
        let accept = {
            let stalled = stalled.clone();
            let (received, forwarded) = (received.clone(), forwarded.clone());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&target).await else {
                        continue;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::spawn(pump(
                        client_read,
                        server_write,
                        stalled.subscribe(),
                        Some((received.clone(), forwarded.clone())),
                    ));
                    tokio::spawn(pump(server_read, client_write, stalled.subscribe(), None));
                }
            })
        };
        Self {
            addr,
            stalled,
            received,
            forwarded,
            accept,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Stops forwarding: bytes are read and held.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again, held bytes first.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }

    /// Bytes clients sent, forwarded or held.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    /// Bytes passed on to the target.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.stalled.send_replace(false);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
    counters: Option<(Arc<AtomicU64>, Arc<AtomicU64>)>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((received, _)) = &counters {
            received.fetch_add(n as u64, Ordering::SeqCst);
        }
        if stalled.wait_for(|s| !*s).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        if let Some((_, forwarded)) = &counters {
            forwarded.fetch_add(n as u64, Ordering::SeqCst);
        }
    }
    let _ = to.shutdown().await;
}
