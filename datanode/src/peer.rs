//! A block client's connection as the server sees it: plain TCP, whose
//! read replies may go out by sendfile, or mutual TLS over TCP, whose bytes
//! must pass through rustls and so are always copied.

use std::future::Future;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::net::TcpStream;

/// A connection the block server serves frames on.
pub(crate) trait Peer: AsyncRead + AsyncWrite + Unpin + Send {
    /// Waits for the first byte of the next frame without taking it: true
    /// once it is there, false when the peer closed or the link broke.
    fn frame_started(&mut self) -> impl Future<Output = bool> + Send;

    /// The TCP socket itself when nothing stands between it and the peer,
    /// so that read replies may be sent from the page cache by sendfile.
    fn plain_socket(&mut self) -> Option<&mut TcpStream>;
}

impl Peer for TcpStream {
    async fn frame_started(&mut self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.peek(&mut probe).await, Ok(n) if n > 0)
    }

    fn plain_socket(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
}

/// A TLS connection, buffered so that a frame's first byte can be waited
/// for without taking it (reads larger than the buffer bypass it).
pub(crate) type TlsPeer = BufReader<tls::AcceptedTls>;

impl Peer for TlsPeer {
    async fn frame_started(&mut self) -> bool {
        matches!(self.fill_buf().await, Ok(buffered) if !buffered.is_empty())
    }

    fn plain_socket(&mut self) -> Option<&mut TcpStream> {
        None
    }
}
