//! The datanode's wire protocol as a stranger sends it: whole byte streams
//! read as request frames, message headers of every kind, short-circuit
//! frames and block tokens. Each decodes or fails, never panics, and what
//! decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto::token::BlockToken;
use proto::wire::local::{self, LocalReply, LocalRequest, LOCAL_HEADER_LEN};
use proto::wire::{self, FrameHeader, FrameKind, Reply, Request, FRAME_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 5 {
        0 => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut stream = rest;
                while let Ok(Some(incoming)) = wire::read_request(&mut stream).await {
                    let mut sink = bytes::BytesMut::new();
                    let payload =
                        wire::read_payload_into(&mut stream, incoming.payload_len, &mut sink);
                    if payload.await.is_err() {
                        break;
                    }
                }
                let _ = wire::read_reply(&mut &rest[..]).await;
            });
        }
        1 => {
            if rest.len() < 5 {
                return;
            }
            let Some(kind) = FrameKind::from_u8(rest[0]) else {
                return;
            };
            let payload_len = u32::from_be_bytes(rest[1..5].try_into().unwrap());
            let header = &rest[5..];
            if let Ok(request) = Request::decode(kind, header, payload_len) {
                let mut again = Vec::new();
                request.encode_header(&mut again);
                assert_eq!(again, header);
            }
            if let Ok(reply) = Reply::decode(kind, header, payload_len) {
                let mut again = Vec::new();
                reply.encode_header(&mut again);
                assert_eq!(Reply::decode(kind, &again, payload_len).unwrap(), reply);
            }
        }
        2 => {
            if let Ok(bytes) = <[u8; FRAME_HEADER_LEN]>::try_from(rest) {
                if let Ok(header) = FrameHeader::decode(&bytes) {
                    assert_eq!(header.encode(), bytes);
                }
            }
        }
        3 => {
            let Some((&kind, body)) = rest.split_first() else {
                return;
            };
            if let Ok(header) = <[u8; LOCAL_HEADER_LEN]>::try_from(body) {
                let _ = local::decode_header(&header);
            }
            if let Ok(request) = LocalRequest::decode(kind, body) {
                assert_eq!(&request.encode()[LOCAL_HEADER_LEN..], body);
            }
            if let Ok(reply) = LocalReply::decode(kind, body) {
                let frame = reply.encode();
                let again = LocalReply::decode(kind, &frame[LOCAL_HEADER_LEN..]).unwrap();
                assert_eq!(again, reply);
            }
        }
        _ => {
            if let Ok(token) = BlockToken::decode(rest) {
                assert_eq!(&token.encode()[..], rest);
            }
        }
    }
});
