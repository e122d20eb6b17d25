//! Sending a read reply: the frame and reply headers (CRCs included) first,
//! then the range's bytes straight from the block file.
//!
//! The data part is [`copy_region`]: today positioned reads on the blocking
//! pool, a piece at a time; it is the one place to change for sendfile(2),
//! since the data file holds only block bytes and the headers have already
//! gone out by then.

use crate::store::BlockRange;
use crate::telemetry;
use blockstore::protocol::{self, ProtocolError, Reply};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Largest piece read from disk and written to the socket at a time.
const PIECE: usize = 1024 * 1024;

/// Why a read reply could not be sent completely. Once its headers are out,
/// the reply cannot be replaced by an error reply: the connection must close.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    #[error("encoding the reply: {0}")]
    Encode(#[from] ProtocolError),
    #[error("reading the block file: {0}")]
    Disk(std::io::Error),
    #[error("writing to the client: {0}")]
    Socket(std::io::Error),
}

/// Sends `range` as the reply to request `request_id`.
pub(crate) async fn send_range<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    range: BlockRange,
) -> Result<(), SendError> {
    let BlockRange { header, file } = range;
    let (offset, length) = (header.offset, header.length);
    let head = protocol::encode_reply_head(request_id, &Reply::ReadData(header))?;
    w.write_all(&head).await.map_err(SendError::Socket)?;
    copy_region(w, Arc::new(file), offset, length).await?;
    w.flush().await.map_err(SendError::Socket)?;
    telemetry::bytes_read(length);
    Ok(())
}

/// Writes `len` bytes of `file` from `offset` to `w`.
async fn copy_region<W: AsyncWrite + Unpin>(
    w: &mut W,
    file: Arc<File>,
    offset: u64,
    len: u64,
) -> Result<(), SendError> {
    let mut buf = vec![0u8; PIECE.min(len as usize)];
    let mut done = 0u64;
    while done < len {
        let n = PIECE.min((len - done) as usize);
        let file = file.clone();
        let at = offset + done;
        let (filled, result) = tokio::task::spawn_blocking(move || {
            let result = file.read_exact_at(&mut buf[..n], at);
            (buf, result)
        })
        .await
        .map_err(|e| SendError::Disk(std::io::Error::other(e.to_string())))?;
        buf = filled;
        result.map_err(SendError::Disk)?;
        w.write_all(&buf[..n]).await.map_err(SendError::Socket)?;
        done += n as u64;
    }
    Ok(())
}
