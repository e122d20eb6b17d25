//! Reading and writing frames over tokio streams.
//!
//! Payloads are never read by these helpers on their own: the caller reads a
//! frame's message first, then decides where its payload goes
//! ([`read_payload_into`]), and writes a read reply's data itself after
//! [`write_reply`] (today with positioned reads, later with sendfile).
//!
//! An announced payload length is only a claim: the payload buffer grows
//! with the bytes that actually arrive, so a peer that announces 64 MiB and
//! stalls pins little memory. A caller that trusts the length (it checked the
//! reply against its own request) reserves it first.

use super::frame::{FrameHeader, FLAG_TOKEN};
use super::message::{Reply, Request};
use super::{ProtocolError, FRAME_HEADER_LEN, MAX_HEADER_LEN, MAX_PAYLOAD_LEN};
use crate::token::BlockToken;
use bytes::BytesMut;
use std::io::{ErrorKind, IoSlice};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Most payload buffer [`read_payload_into`] reserves ahead of the bytes
/// received.
pub(crate) const PAYLOAD_READ_AHEAD: usize = 1024 * 1024;

/// A decoded message and what is left of its frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming<T> {
    /// The request id of the frame.
    pub request_id: u64,
    /// The decoded request or reply.
    pub message: T,
    /// The block token the request carried, if any (never on a reply).
    pub token: Option<BlockToken>,
    /// Bytes of payload still to be read from the stream.
    pub payload_len: u32,
}

/// Reads and checks one fixed frame header. `Ok(None)` when the stream ends
/// cleanly before its first byte (the peer closed between frames).
pub async fn read_frame_header<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<FrameHeader>, ProtocolError> {
    let mut buf = [0u8; FRAME_HEADER_LEN];
    let mut filled = 0;
    while filled < FRAME_HEADER_LEN {
        let n = r.read(&mut buf[filled..]).await?;
        if n == 0 {
            if filled == 0 {
                return Ok(None);
            }
            return Err(ProtocolError::Truncated("frame header"));
        }
        filled += n;
    }
    FrameHeader::decode(&buf).map(Some)
}

async fn read_message_header<R: AsyncRead + Unpin>(
    r: &mut R,
    len: u32,
) -> Result<Vec<u8>, ProtocolError> {
    // `len` was checked against MAX_HEADER_LEN by FrameHeader::decode.
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)
        .await
        .map_err(|e| truncated_or_io(e, "message header"))?;
    Ok(buf)
}

/// Reads the next request's frame header and message header; its payload
/// (`payload_len` bytes) is left on the stream. `Ok(None)` at a clean end of stream.
pub async fn read_request<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<Incoming<Request>>, ProtocolError> {
    let Some(frame) = read_frame_header(r).await? else {
        return Ok(None);
    };
    if !frame.kind.is_request() {
        return Err(ProtocolError::malformed(format!(
            "{:?} sent as a request",
            frame.kind
        )));
    }
    let header = read_message_header(r, frame.header_len).await?;
    let (token, header) = if frame.flags & FLAG_TOKEN != 0 {
        if header.len() < BlockToken::LEN {
            return Err(ProtocolError::malformed(
                "message header ends inside the block token",
            ));
        }
        let (token, rest) = header.split_at(BlockToken::LEN);
        let token =
            BlockToken::decode(token).map_err(|e| ProtocolError::malformed(e.to_string()))?;
        (Some(token), rest)
    } else {
        (None, &header[..])
    };
    let message = Request::decode(frame.kind, header, frame.payload_len)?;
    Ok(Some(Incoming {
        request_id: frame.request_id,
        message,
        token,
        payload_len: frame.payload_len,
    }))
}

/// Reads the next reply's frame header and message header; a read reply's
/// data (`payload_len` bytes) is left on the stream.
pub async fn read_reply<R: AsyncRead + Unpin>(r: &mut R) -> Result<Incoming<Reply>, ProtocolError> {
    let frame = read_frame_header(r).await?.ok_or(ProtocolError::Closed)?;
    if frame.kind.is_request() {
        return Err(ProtocolError::malformed(format!(
            "{:?} sent as a reply",
            frame.kind
        )));
    }
    if frame.flags != 0 {
        return Err(ProtocolError::malformed(format!(
            "flags {:#06x} on a reply",
            frame.flags
        )));
    }
    let header = read_message_header(r, frame.header_len).await?;
    let message = Reply::decode(frame.kind, &header, frame.payload_len)?;
    Ok(Incoming {
        request_id: frame.request_id,
        message,
        token: None,
        payload_len: frame.payload_len,
    })
}

/// Appends exactly `len` payload bytes from `r` to `dest`, reading straight
/// into its spare capacity without an intermediate buffer. When `dest` has
/// no spare capacity left, at most 1 MiB more is reserved
/// (`BytesMut` may round that up to double its size, so the buffer stays
/// within twice the bytes received): an unchecked `len` costs nothing until
/// its bytes arrive. A caller that trusts `len` reserves it beforehand and
/// gets one buffer, filled in place.
pub async fn read_payload_into<R: AsyncRead + Unpin>(
    r: &mut R,
    len: u32,
    dest: &mut BytesMut,
) -> Result<(), ProtocolError> {
    let len = len as usize;
    let target = dest.len() + len;
    // `take` keeps read_buf from consuming bytes of the next frame when
    // `dest` has more spare capacity than this payload.
    let mut limited = r.take(len as u64);
    while dest.len() < target {
        if dest.capacity() == dest.len() {
            dest.reserve((target - dest.len()).min(PAYLOAD_READ_AHEAD));
        }
        let n = limited.read_buf(dest).await?;
        if n == 0 {
            return Err(ProtocolError::Truncated("payload"));
        }
    }
    Ok(())
}

fn truncated_or_io(e: std::io::Error, what: &'static str) -> ProtocolError {
    if e.kind() == ErrorKind::UnexpectedEof {
        ProtocolError::Truncated(what)
    } else {
        ProtocolError::Io(e)
    }
}

fn frame_head(
    kind: super::FrameKind,
    request_id: u64,
    flags: u16,
    payload_len: u64,
    encode: impl FnOnce(&mut Vec<u8>),
) -> Result<Vec<u8>, ProtocolError> {
    if payload_len > u64::from(MAX_PAYLOAD_LEN) {
        return Err(ProtocolError::TooLarge {
            what: "payload",
            len: payload_len,
            max: u64::from(MAX_PAYLOAD_LEN),
        });
    }
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + 64);
    out.resize(FRAME_HEADER_LEN, 0);
    encode(&mut out);
    let header_len = out.len() - FRAME_HEADER_LEN;
    if header_len > MAX_HEADER_LEN as usize {
        return Err(ProtocolError::TooLarge {
            what: "message header",
            len: header_len as u64,
            max: u64::from(MAX_HEADER_LEN),
        });
    }
    let frame = FrameHeader {
        kind,
        flags,
        request_id,
        header_len: header_len as u32,
        payload_len: payload_len as u32,
    };
    out[..FRAME_HEADER_LEN].copy_from_slice(&frame.encode());
    Ok(out)
}

/// Frame header and message header of `request`, carrying `token`, with a
/// payload of `payload_len` bytes.
pub fn encode_request_head(
    request_id: u64,
    request: &Request,
    token: Option<&BlockToken>,
    payload_len: usize,
) -> Result<Vec<u8>, ProtocolError> {
    let flags = if token.is_some() { FLAG_TOKEN } else { 0 };
    frame_head(
        request.kind(),
        request_id,
        flags,
        payload_len as u64,
        |out| {
            if let Some(token) = token {
                out.extend_from_slice(&token.encode());
            }
            request.encode_header(out)
        },
    )
}

/// Frame header and message header of `reply` (a read reply's data excluded).
pub fn encode_reply_head(request_id: u64, reply: &Reply) -> Result<Vec<u8>, ProtocolError> {
    frame_head(reply.kind(), request_id, 0, reply.payload_len(), |out| {
        reply.encode_header(out)
    })
}

/// Writes `head` then `payload` with as few system calls as the stream allows
/// (vectored writes), then flushes.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    head: &[u8],
    payload: &[u8],
) -> std::io::Result<()> {
    let (mut head, mut payload) = (head, payload);
    while !head.is_empty() {
        let n = w
            .write_vectored(&[IoSlice::new(head), IoSlice::new(payload)])
            .await?;
        if n == 0 {
            return Err(ErrorKind::WriteZero.into());
        }
        if n < head.len() {
            head = &head[n..];
        } else {
            payload = &payload[n - head.len()..];
            head = &[];
        }
    }
    w.write_all(payload).await?;
    w.flush().await
}

/// Sends `request` carrying `token`, with `payload` (the data of a write,
/// else empty).
pub async fn write_request<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    request: &Request,
    token: Option<&BlockToken>,
    payload: &[u8],
) -> Result<(), ProtocolError> {
    let head = encode_request_head(request_id, request, token, payload.len())?;
    write_frame(w, &head, payload).await?;
    Ok(())
}

/// Sends `reply`'s frame and message headers. For a read reply the caller
/// must then send exactly `length` data bytes.
pub async fn write_reply<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    reply: &Reply,
) -> Result<(), ProtocolError> {
    let head = encode_reply_head(request_id, reply)?;
    write_frame(w, &head, &[]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::message::tests::{sample_replies, sample_requests};
    use super::super::message::{ReadData, WriteChunks};
    use super::super::{FrameKind, MAGIC};
    use super::*;

    fn payload(len: u32) -> Vec<u8> {
        (0..len).map(|i| (i % 253) as u8).collect()
    }

    /// A token for requests with odd ids, none for even ones.
    fn token_for(request_id: u64) -> Option<BlockToken> {
        use crate::token::{Modes, TokenKey};
        let key = TokenKey {
            id: 3,
            secret: [5; 32],
            retire_at: u64::MAX,
        };
        (request_id % 2 == 1)
            .then(|| BlockToken::sign(&key, crate::BlockId(request_id), 1, Modes::READ, 77))
    }

    async fn request_frame(request_id: u64, request: &Request, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let token = token_for(request_id);
        write_request(&mut out, request_id, request, token.as_ref(), payload)
            .await
            .unwrap();
        out
    }

    async fn reply_frame(request_id: u64, reply: &Reply) -> Vec<u8> {
        let mut out = Vec::new();
        write_reply(&mut out, request_id, reply).await.unwrap();
        out.extend(payload(reply.payload_len() as u32));
        out
    }

    #[tokio::test]
    async fn requests_round_trip_with_payload() {
        for (i, (request, len)) in sample_requests().into_iter().enumerate() {
            let data = payload(len);
            let frame = request_frame(i as u64, &request, &data).await;
            let mut r = frame.as_slice();
            let incoming = read_request(&mut r).await.unwrap().unwrap();
            assert_eq!(incoming.request_id, i as u64);
            assert_eq!(incoming.message, request);
            assert_eq!(incoming.token, token_for(i as u64));
            let mut dest = BytesMut::new();
            read_payload_into(&mut r, incoming.payload_len, &mut dest)
                .await
                .unwrap();
            assert_eq!(&dest[..], &data[..]);
            assert!(r.is_empty());
            assert!(read_request(&mut r).await.unwrap().is_none());
        }
    }

    #[tokio::test]
    async fn replies_round_trip_with_data() {
        for (i, reply) in sample_replies().into_iter().enumerate() {
            let frame = reply_frame(i as u64 + 100, &reply).await;
            let mut r = frame.as_slice();
            let incoming = read_reply(&mut r).await.unwrap();
            assert_eq!(incoming.request_id, i as u64 + 100);
            assert_eq!(incoming.message, reply);
            let mut dest = BytesMut::from(&b"prefix"[..]);
            read_payload_into(&mut r, incoming.payload_len, &mut dest)
                .await
                .unwrap();
            assert_eq!(&dest[6..], &payload(reply.payload_len() as u32)[..]);
            assert!(matches!(
                read_reply(&mut r).await,
                Err(ProtocolError::Closed)
            ));
        }
    }

    #[tokio::test]
    async fn consecutive_frames_stay_in_sync() {
        let mut stream = Vec::new();
        for (request, len) in sample_requests() {
            stream.extend(request_frame(9, &request, &payload(len)).await);
        }
        let mut r = stream.as_slice();
        for (request, len) in sample_requests() {
            let incoming = read_request(&mut r).await.unwrap().unwrap();
            assert_eq!(incoming.message, request);
            // Spare capacity larger than the payload must not swallow the next frame.
            let mut dest = BytesMut::with_capacity(1 << 16);
            read_payload_into(&mut r, incoming.payload_len, &mut dest)
                .await
                .unwrap();
            assert_eq!(dest.len(), len as usize);
        }
        assert!(r.is_empty());
    }

    #[tokio::test]
    async fn a_token_flag_needs_a_whole_token_and_replies_carry_none() {
        let request = Request::DeleteBlock {
            key: crate::BlockKey::new(crate::BlockId(1), 0),
        };
        // Flag set, message header shorter than a token.
        let mut frame = request_frame(2, &request, &[]).await;
        frame[6..8].copy_from_slice(&FLAG_TOKEN.to_be_bytes());
        let err = read_request(&mut frame.as_slice()).await.unwrap_err();
        assert!(err.to_string().contains("block token"), "{err}");
        // A token's bytes read as the request itself when the flag is missing.
        let mut frame = request_frame(1, &request, &[]).await;
        frame[6..8].copy_from_slice(&0u16.to_be_bytes());
        assert!(read_request(&mut frame.as_slice()).await.is_err());
        let mut reply = reply_frame(1, &Reply::Ok).await;
        reply[6..8].copy_from_slice(&FLAG_TOKEN.to_be_bytes());
        let err = read_reply(&mut reply.as_slice()).await.unwrap_err();
        assert!(err.to_string().contains("on a reply"), "{err}");
    }

    async fn read_whole_request(mut r: &[u8]) -> Result<Option<Request>, ProtocolError> {
        let Some(incoming) = read_request(&mut r).await? else {
            return Ok(None);
        };
        let mut dest = BytesMut::new();
        read_payload_into(&mut r, incoming.payload_len, &mut dest).await?;
        Ok(Some(incoming.message))
    }

    async fn read_whole_reply(mut r: &[u8]) -> Result<Reply, ProtocolError> {
        let incoming = read_reply(&mut r).await?;
        let mut dest = BytesMut::new();
        read_payload_into(&mut r, incoming.payload_len, &mut dest).await?;
        Ok(incoming.message)
    }

    #[tokio::test]
    async fn truncated_requests_fail_at_every_byte() {
        for (request, len) in sample_requests() {
            let frame = request_frame(1, &request, &payload(len)).await;
            assert!(read_whole_request(&[]).await.unwrap().is_none());
            for cut in 1..frame.len() {
                let err = read_whole_request(&frame[..cut]).await.unwrap_err();
                assert!(
                    matches!(err, ProtocolError::Truncated(_)),
                    "cut {cut} of {}: {err:?}",
                    frame.len()
                );
            }
            assert_eq!(read_whole_request(&frame).await.unwrap(), Some(request));
        }
    }

    #[tokio::test]
    async fn truncated_replies_fail_at_every_byte() {
        for reply in sample_replies() {
            let frame = reply_frame(1, &reply).await;
            assert!(matches!(
                read_whole_reply(&[]).await,
                Err(ProtocolError::Closed)
            ));
            for cut in 1..frame.len() {
                let err = read_whole_reply(&frame[..cut]).await.unwrap_err();
                assert!(
                    matches!(err, ProtocolError::Truncated(_)),
                    "cut {cut}: {err:?}"
                );
            }
            assert_eq!(read_whole_reply(&frame).await.unwrap(), reply);
        }
    }

    #[tokio::test]
    async fn corrupt_magic_and_version_are_refused() {
        let frame = request_frame(1, &sample_requests()[2].0, &[]).await;
        let mut bad = frame.clone();
        bad[1] ^= 0xff;
        assert!(matches!(
            read_whole_request(&bad).await,
            Err(ProtocolError::BadMagic(_))
        ));
        let mut bad = frame.clone();
        bad[4] = 0;
        assert!(matches!(
            read_whole_request(&bad).await,
            Err(ProtocolError::UnsupportedVersion(0))
        ));
    }

    #[tokio::test]
    async fn a_stalled_payload_pins_memory_only_for_bytes_received() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let sent = payload(300_000);
        client.write_all(&sent).await.unwrap();
        let mut dest = BytesMut::new();
        // 64 MiB announced, 300 kB sent, then silence.
        let read = read_payload_into(&mut server, MAX_PAYLOAD_LEN, &mut dest);
        let stalled = tokio::time::timeout(std::time::Duration::from_millis(200), read).await;
        assert!(stalled.is_err(), "the payload cannot be complete");
        assert_eq!(&dest[..], &sent[..]);
        assert!(
            dest.capacity() <= 2 * PAYLOAD_READ_AHEAD,
            "{} bytes reserved for {} received",
            dest.capacity(),
            dest.len()
        );
    }

    #[tokio::test]
    async fn a_payload_grows_its_buffer_as_it_arrives_and_a_reserved_one_in_place() {
        let len = 5 * PAYLOAD_READ_AHEAD as u32 + 17;
        let data = payload(len);
        let mut dest = BytesMut::new();
        read_payload_into(&mut data.as_slice(), len, &mut dest)
            .await
            .unwrap();
        assert_eq!(&dest[..], &data[..]);
        assert!(dest.capacity() <= 2 * len as usize);

        // A trusted length reserved first: filled in place, no reallocation.
        let mut dest = BytesMut::with_capacity(len as usize);
        let start = dest.as_ptr();
        read_payload_into(&mut data.as_slice(), len, &mut dest)
            .await
            .unwrap();
        assert_eq!(&dest[..], &data[..]);
        assert_eq!(dest.as_ptr(), start);
    }

    #[tokio::test]
    async fn a_payload_reserves_only_what_it_still_needs() {
        let data = payload(1000);
        let mut dest = BytesMut::new();
        read_payload_into(&mut data.as_slice(), 1000, &mut dest)
            .await
            .unwrap();
        assert_eq!(dest.capacity(), 1000);
        // Appended to a full buffer: room for the new bytes, not more.
        read_payload_into(&mut data.as_slice(), 1000, &mut dest)
            .await
            .unwrap();
        assert_eq!(dest.len(), 2000);
        assert!(dest.capacity() < 3000, "{} reserved", dest.capacity());
    }

    #[test]
    fn frames_up_to_the_limits_encode_and_larger_ones_do_not() {
        let write = sample_requests()
            .into_iter()
            .find(|(r, _)| matches!(r, Request::WriteChunks(_)))
            .unwrap()
            .0;
        let max = MAX_PAYLOAD_LEN as usize;
        assert!(encode_request_head(1, &write, None, max).is_ok());
        assert!(matches!(
            encode_request_head(1, &write, None, max + 1),
            Err(ProtocolError::TooLarge {
                what: "payload",
                ..
            })
        ));
        // A read reply's header: offset, length, chunk size, count, CRCs.
        let read = |crcs: usize| {
            Reply::ReadData(ReadData {
                offset: 0,
                length: 0,
                bytes_per_checksum: 512,
                crcs: vec![7; crcs],
            })
        };
        let fits = (MAX_HEADER_LEN as usize - 24) / 4;
        let head = encode_reply_head(1, &read(fits)).unwrap();
        assert_eq!(head.len(), FRAME_HEADER_LEN + MAX_HEADER_LEN as usize);
        assert!(matches!(
            encode_reply_head(1, &read(fits + 1)),
            Err(ProtocolError::TooLarge {
                what: "message header",
                ..
            })
        ));
    }

    /// A writer that takes at most 7 bytes per call, as a full socket may.
    struct Trickle(Vec<u8>);

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(7);
            self.0.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn frames_survive_short_writes() {
        for (i, (request, len)) in sample_requests().into_iter().enumerate() {
            let data = payload(len);
            let mut trickle = Trickle(Vec::new());
            let token = token_for(i as u64);
            write_request(&mut trickle, i as u64, &request, token.as_ref(), &data)
                .await
                .unwrap();
            assert_eq!(trickle.0, request_frame(i as u64, &request, &data).await);
        }
    }

    /// A reader that fails the test if anything past the frame header is read:
    /// an oversized length must be refused from the header alone.
    struct HeaderOnly(Vec<u8>);

    impl AsyncRead for HeaderOnly {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            assert!(!self.0.is_empty(), "read past the frame header");
            let n = buf.remaining().min(self.0.len());
            let head: Vec<u8> = self.0.drain(..n).collect();
            buf.put_slice(&head);
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn oversized_lengths_are_refused_before_allocating() {
        for (header_len, payload_len) in [(u32::MAX, 0), (MAX_HEADER_LEN + 1, 0), (9, u32::MAX)] {
            let mut head = Vec::from(MAGIC);
            head.extend([super::super::VERSION, FrameKind::DeleteBlock as u8, 0, 0]);
            head.extend(7u64.to_be_bytes());
            head.extend(header_len.to_be_bytes());
            head.extend(payload_len.to_be_bytes());
            let err = read_request(&mut HeaderOnly(head)).await.unwrap_err();
            assert!(matches!(err, ProtocolError::TooLarge { .. }), "{err:?}");
        }
    }

    #[tokio::test]
    async fn oversized_messages_are_refused_when_encoding() {
        let write = Request::WriteChunks(WriteChunks {
            key: sample_requests()[0].0.clone().key(),
            offset: 0,
            bytes_per_checksum: 512,
            crcs: vec![0; 1],
        });
        assert!(matches!(
            encode_request_head(1, &write, None, MAX_PAYLOAD_LEN as usize + 1),
            Err(ProtocolError::TooLarge { .. })
        ));
        let read = Reply::ReadData(ReadData {
            offset: 0,
            length: 512 * 300_000,
            bytes_per_checksum: 512,
            crcs: vec![0; 300_000],
        });
        assert!(matches!(
            encode_reply_head(1, &read),
            Err(ProtocolError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn direction_is_checked() {
        let frame = reply_frame(1, &Reply::Ok).await;
        assert!(matches!(
            read_whole_request(&frame).await,
            Err(ProtocolError::Malformed(_))
        ));
        let frame = request_frame(
            1,
            &Request::DeleteBlock {
                key: sample_requests()[0].0.clone().key(),
            },
            &[],
        )
        .await;
        assert!(matches!(
            read_whole_reply(&frame).await,
            Err(ProtocolError::Malformed(_))
        ));
    }
}
