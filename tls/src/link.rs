//! A connection between two cluster processes: plain TCP, or TLS over it
//! when the cluster runs mutual TLS. Both read and write the same way, so
//! the meta RPC and the block protocol run over either unchanged.
//!
//! Credentials, S3 secrets, token keys and block tokens travel on these
//! links, so clear text is spoken only within one host: a clear-text link
//! whose other end is not a loopback address is refused on both ends
//! ([`clear_text_allowed`]).

use crate::cluster::ClusterTls;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

/// A link to or from another process of the cluster.
#[derive(Debug)]
pub enum Link {
    /// Clear text, for clusters on one trusted host.
    Plain(TcpStream),
    /// Mutual TLS with the cluster CA.
    Tls(Box<TlsStream<TcpStream>>),
}

/// Why a link could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// Connecting (and the TLS handshake) took longer than allowed.
    #[error("connect timed out")]
    TimedOut,
    /// The TCP connection failed.
    #[error("connect: {0}")]
    Connect(io::Error),
    /// The TLS handshake failed: a peer of another CA, a certificate that
    /// does not name the host dialled, or a peer that speaks no TLS.
    #[error("TLS handshake: {0}")]
    Handshake(io::Error),
    /// Clear text with a peer on another host: its secrets would cross the
    /// network readable.
    #[error(
        "{0} is not on this host, and links off this host must run mutual TLS \
         (--cluster-ca, --cluster-cert, --cluster-key)"
    )]
    ClearTextOffHost(SocketAddr),
}

/// Whether a clear-text link with `peer` is allowed: only when it is on this
/// host (a loopback address, IPv4-mapped ones included).
pub fn clear_text_allowed(peer: &SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

/// `Ok` when `tcp` may carry clear text (see [`clear_text_allowed`]).
fn check_clear_text(tcp: &TcpStream) -> Result<(), DialError> {
    let peer = tcp.peer_addr().map_err(DialError::Connect)?;
    if clear_text_allowed(&peer) {
        Ok(())
    } else {
        Err(DialError::ClearTextOffHost(peer))
    }
}

impl Link {
    /// Connects to `addr` (`host:port`) with TCP_NODELAY (every exchange is
    /// a request then its reply), then TLS when `tls` is set; all of it
    /// within `timeout`.
    pub async fn dial(
        addr: &str,
        tls: Option<&ClusterTls>,
        timeout: Duration,
    ) -> Result<Link, DialError> {
        let open = async {
            let tcp = TcpStream::connect(addr).await.map_err(DialError::Connect)?;
            tcp.set_nodelay(true).map_err(DialError::Connect)?;
            match tls {
                None => {
                    check_clear_text(&tcp)?;
                    Ok(Link::Plain(tcp))
                }
                Some(tls) => {
                    let stream = tls.connect(tcp, addr).await.map_err(DialError::Handshake)?;
                    Ok(Link::Tls(Box::new(stream.into())))
                }
            }
        };
        tokio::time::timeout(timeout, open)
            .await
            .map_err(|_| DialError::TimedOut)?
    }

    /// Accepts an incoming connection: as is when it comes from this host,
    /// or after the TLS handshake (bounded by `timeout`) when `tls` is set.
    pub async fn accept(
        tcp: TcpStream,
        tls: Option<&ClusterTls>,
        timeout: Duration,
    ) -> Result<Link, DialError> {
        let Some(tls) = tls else {
            check_clear_text(&tcp)?;
            return Ok(Link::Plain(tcp));
        };
        let stream = tokio::time::timeout(timeout, tls.accept(tcp))
            .await
            .map_err(|_| DialError::TimedOut)?
            .map_err(DialError::Handshake)?;
        Ok(Link::Tls(Box::new(stream.into())))
    }

    /// The TCP connection beneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Link::Plain(tcp) => tcp,
            Link::Tls(tls) => tls.get_ref().0,
        }
    }
}

impl AsyncRead for Link {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Link::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Link {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Link::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Link::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Link::Plain(s) => s.is_write_vectored(),
            Link::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_flush(cx),
            Link::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Link::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
