//! A block file region to a non-blocking TCP socket with sendfile(2),
//! without ever blocking the executor.
//!
//! sendfile reads the file through the page cache: on a cold page it waits
//! for the disk. So the calls run on tokio's blocking pool, on a duplicate of
//! the socket's descriptor. The duplicate shares the socket's non-blocking
//! flag: when the send buffer is full the call returns EAGAIN, the blocking
//! task ends, and the async side waits for the socket to drain before the
//! next one. No thread ever sleeps on a slow client.
//!
//! Waiting is the subtle part. tokio tracks readiness from edge-triggered
//! events and does not see the EAGAIN of a call made on another descriptor,
//! so `writable()` alone could keep answering "ready" and spin. The wait
//! therefore asks the kernel (a zero-timeout poll) inside
//! [`TcpStream::try_io`], which clears tokio's readiness only when the
//! socket really is full, and only if no newer event arrived meanwhile.

use super::SendError;
use crate::telemetry;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Largest count passed to one sendfile call (Linux caps a call near 2 GiB).
const MAX_CALL: u64 = 1 << 30;

/// Sends `len` bytes of `file` from `offset` to `stream`. If the returned
/// future is dropped, a blocking call in flight still runs to its end (at
/// most until the socket is full) on its own duplicate of the socket.
pub(super) async fn send_region(
    stream: &TcpStream,
    file: Arc<File>,
    offset: u64,
    len: u64,
) -> Result<(), SendError> {
    let socket = Arc::new(
        stream
            .as_fd()
            .try_clone_to_owned()
            .map_err(SendError::Socket)?,
    );
    let end = offset + len;
    let mut at = offset;
    while at < end {
        let (socket, file) = (socket.clone(), file.clone());
        let reached = tokio::task::spawn_blocking(move || send_until_full(&socket, &file, at, end))
            .await
            .map_err(|e| SendError::Sendfile(std::io::Error::other(e.to_string())))??;
        if reached < end {
            telemetry::send_wait();
            wait_for_room(stream).await.map_err(SendError::Socket)?;
        }
        at = reached;
    }
    Ok(())
}

/// Calls sendfile until `[at, end)` of `file` is sent or the socket's send
/// buffer is full; returns the file offset reached.
fn send_until_full(socket: &OwnedFd, file: &File, mut at: u64, end: u64) -> Result<u64, SendError> {
    while at < end {
        let count = (end - at).min(MAX_CALL) as usize;
        match rustix::fs::sendfile(socket, file, Some(&mut at), count) {
            // The kernel moved `at` past the bytes sent.
            Ok(0) => return Err(SendError::ShortFile { at, end }),
            Ok(_) => {}
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return Ok(at),
            // The file system cannot feed sendfile (some FUSE file systems):
            // the caller copies the rest.
            Err(e @ (Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP)) => {
                return Err(SendError::SendfileUnsupported {
                    at,
                    source: e.into(),
                })
            }
            Err(e) => return Err(SendError::Sendfile(e.into())),
        }
    }
    Ok(at)
}

/// Waits until `stream`'s send buffer has room again.
async fn wait_for_room(stream: &TcpStream) -> std::io::Result<()> {
    loop {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || has_room(stream)) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Whether the kernel says `stream` is writable now; `WouldBlock` when not.
/// An error or hang-up on the socket counts as writable: the next sendfile
/// call reports it.
fn has_room(stream: &TcpStream) -> std::io::Result<()> {
    let mut fds = [PollFd::new(stream, PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut fds, Some(&now)) {
        Ok(_) => {}
        Err(Errno::INTR) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    if fds[0]
        .revents()
        .intersects(PollFlags::OUT | PollFlags::ERR | PollFlags::HUP)
    {
        Ok(())
    } else {
        Err(ErrorKind::WouldBlock.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (accepted.unwrap().0, client.unwrap())
    }

    fn file_of(data: &[u8]) -> Arc<File> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(data).unwrap();
        Arc::new(file)
    }

    #[tokio::test]
    async fn a_region_arrives_whole_and_in_order() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let file = file_of(&data);
        let (server, mut client) = pair().await;
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        send_region(&server, file, 1000, 2_000_000).await.unwrap();
        drop(server);
        assert_eq!(reader.await.unwrap(), &data[1000..2_001_000]);
    }

    #[tokio::test]
    async fn a_file_shorter_than_the_region_is_an_error() {
        let file = file_of(&[7u8; 5000]);
        let (server, _client) = pair().await;
        match send_region(&server, file, 1000, 8000).await {
            Err(SendError::ShortFile { at, end }) => assert_eq!((at, end), (5000, 9000)),
            other => panic!("expected a short file error, got {other:?}"),
        }
    }
}
