//! Framing of the meta RPC, shared by the server and [`crate::RemoteMeta`]:
//! each frame is a u32 big-endian payload length then a JSON payload. A
//! request frame holds an [`crate::AnyRequest`], its reply a
//! `Result<AnyResponse, MetaError>`; one request at a time per connection.
//!
//! Each connection opens with a [`Handshake`] frame carrying a secret (the
//! admin token or a [`crate::Credential`]); meta answers with the
//! [`crate::Principal`] the connection acts as, or refuses with
//! `MetaError::Unauthenticated` and closes the connection, before reading any
//! request.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest payload either side accepts; checked before allocating.
pub const MAX_FRAME: u32 = 64 * 1024 * 1024;
/// Largest handshake frame: an unauthenticated peer gets no bigger buffer.
pub const MAX_HANDSHAKE_FRAME: u32 = 4096;

/// The version of the RPC this code speaks: requests and answers as the
/// typed envelopes of [`crate::requests`], the handshake answered with a
/// principal. 4: object records may carry their body (`ObjectRecord::inline`),
/// which an older peer would drop.
pub const RPC_VERSION: u32 = 4;

/// The first frame of every connection.
#[derive(Serialize, Deserialize)]
pub struct Handshake {
    /// The admin token or a datanode's or gateway's credential.
    pub token: String,
    /// The client's [`RPC_VERSION`]; absent (1) from clients before versions.
    #[serde(default = "first_version")]
    pub version: u32,
}

fn first_version() -> u32 {
    1
}

/// Why one exchange on a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer announced a frame over the limit (the frame's length, the limit).
    #[error("frame of {0} bytes exceeds the {1} byte limit")]
    TooLarge(u64, u32),
    /// The payload is not the JSON expected.
    #[error("undecodable frame: {0}")]
    Decode(serde_json::Error),
    /// The peer did not answer in time.
    #[error("no reply in time")]
    TimedOut,
}

/// Encodes `value` as one frame (length included).
pub fn encode_frame(value: &impl Serialize) -> Result<Vec<u8>, FrameError> {
    let mut frame = vec![0u8; 4];
    serde_json::to_writer(&mut frame, value).map_err(FrameError::Decode)?;
    let len = (frame.len() - 4) as u64;
    if len > u64::from(MAX_FRAME) {
        return Err(FrameError::TooLarge(len, MAX_FRAME));
    }
    frame[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(frame)
}

/// Reads the payload of a frame whose length was read, refusing one over `limit`.
pub async fn read_payload(
    stream: &mut (impl AsyncRead + Unpin),
    len: u32,
    limit: u32,
) -> Result<Vec<u8>, FrameError> {
    if len > limit {
        return Err(FrameError::TooLarge(u64::from(len), limit));
    }
    let mut payload = vec![0u8; len as usize];
    stream.read_exact(&mut payload).await?;
    Ok(payload)
}

/// Reads one whole frame (length, then payload of at most `limit` bytes).
pub async fn read_frame(
    stream: &mut (impl AsyncRead + Unpin),
    limit: u32,
) -> Result<Vec<u8>, FrameError> {
    let len = stream.read_u32().await?;
    read_payload(stream, len, limit).await
}

/// Decodes a payload.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload).map_err(FrameError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_ones_are_refused_before_reading() {
        let hello = Handshake {
            token: "t".into(),
            version: RPC_VERSION,
        };
        let frame = encode_frame(&hello).unwrap();
        let mut reader = &frame[..];
        let payload = read_frame(&mut reader, MAX_HANDSHAKE_FRAME).await.unwrap();
        assert_eq!(decode::<Handshake>(&payload).unwrap().token, "t");

        let mut huge = (MAX_FRAME + 1).to_be_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        let mut reader = &huge[..];
        assert!(matches!(
            read_frame(&mut reader, MAX_FRAME).await,
            Err(FrameError::TooLarge(n, MAX_FRAME)) if n == u64::from(MAX_FRAME) + 1
        ));
    }
}
