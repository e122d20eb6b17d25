//! Property tests of every decoder a peer's bytes reach (frames, messages,
//! short-circuit frames, block tokens): whatever the bytes, decoding returns
//! a value or an error, never panics; what decodes encodes back to the same
//! bytes; and a token altered anywhere fails its check.

use proptest::prelude::*;
use proto::token::{BlockToken, Modes, TokenKey, TokenKeys};
use proto::wire::local::{self, LocalReply, LocalRequest, LOCAL_HEADER_LEN};
use proto::wire::{self, FrameHeader, FrameKind, Reply, Request, FRAME_HEADER_LEN};
use proto::{BlockId, BlockKey};

fn any_kind() -> impl Strategy<Value = FrameKind> {
    let kinds: Vec<FrameKind> = (0u8..=255).filter_map(FrameKind::from_u8).collect();
    prop::sample::select(kinds)
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn frame_headers_decode_or_fail_and_round_trip(bytes in prop::array::uniform24(any::<u8>())) {
        if let Ok(header) = FrameHeader::decode(&bytes) {
            prop_assert_eq!(header.encode(), bytes);
        }
    }

    #[test]
    fn messages_decode_or_fail_and_round_trip(
        kind in any_kind(),
        header in prop::collection::vec(any::<u8>(), 0..200),
        payload_len in prop_oneof![0u32..70_000, any::<u32>()],
    ) {
        if let Ok(request) = Request::decode(kind, &header, payload_len) {
            let mut again = Vec::new();
            request.encode_header(&mut again);
            prop_assert_eq!(&again, &header);
            prop_assert_eq!(request.kind(), kind);
        }
        if let Ok(reply) = Reply::decode(kind, &header, payload_len) {
            let mut again = Vec::new();
            reply.encode_header(&mut again);
            prop_assert_eq!(Reply::decode(kind, &again, payload_len).unwrap(), reply);
        }
    }

    /// Whole streams of bytes, as a stranger would send them: each read
    /// ends in a frame or an error.
    #[test]
    fn streams_of_any_bytes_read_as_frames_or_errors(
        mut bytes in prop::collection::vec(any::<u8>(), 0..400),
        plausible_start in any::<bool>(),
    ) {
        if plausible_start && bytes.len() >= FRAME_HEADER_LEN {
            // Past the magic and the version, garbage.
            bytes[..4].copy_from_slice(&wire::MAGIC);
            bytes[4] = wire::VERSION;
        }
        run(async {
            let mut r = bytes.as_slice();
            while let Ok(Some(incoming)) = wire::read_request(&mut r).await {
                let mut sink = bytes::BytesMut::new();
                if wire::read_payload_into(&mut r, incoming.payload_len, &mut sink).await.is_err() {
                    break;
                }
            }
            let _ = wire::read_reply(&mut bytes.as_slice()).await;
        });
    }

    #[test]
    fn short_circuit_frames_decode_or_fail(
        header in prop::array::uniform12(any::<u8>()),
        kind in any::<u8>(),
        body in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let header: [u8; LOCAL_HEADER_LEN] = header;
        let _ = local::decode_header(&header);
        if let Ok(request) = LocalRequest::decode(kind, &body) {
            prop_assert_eq!(&request.encode()[LOCAL_HEADER_LEN..], &body[..]);
        }
        if let Ok(reply) = LocalReply::decode(kind, &body) {
            let frame = reply.encode();
            prop_assert_eq!(LocalReply::decode(frame[5], &frame[LOCAL_HEADER_LEN..]).unwrap(), reply);
        }
    }

    /// Any change to a signed token's bytes, anywhere, makes it fail its
    /// check (or not decode at all).
    #[test]
    fn altered_tokens_fail_their_check(
        block in 1u64..1_000_000,
        index in 0u8..16,
        at in 0usize..BlockToken::LEN,
        flip in 1u8..=255,
    ) {
        let key = TokenKey { id: 4, secret: [9; 32], retire_at: u64::MAX };
        let keys = TokenKeys::new(vec![key.clone()]);
        let all = Modes::READ.with(Modes::WRITE).with(Modes::DELETE);
        let token = BlockToken::sign(&key, BlockId(block), 1 << index, all, u64::MAX);
        let target = BlockKey::new(BlockId(block), index);
        prop_assert!(keys.check(Some(&token), target, Modes::READ, 0).is_ok());
        let mut bytes = token.encode();
        bytes[at] ^= flip;
        if let Ok(altered) = BlockToken::decode(&bytes) {
            prop_assert!(keys.check(Some(&altered), target, Modes::READ, 0).is_err());
        }
    }

    #[test]
    fn token_bytes_of_any_length_decode_or_fail(bytes in prop::collection::vec(any::<u8>(), 0..130)) {
        match BlockToken::decode(&bytes) {
            Ok(token) => prop_assert_eq!(&token.encode()[..], &bytes[..]),
            Err(_) => prop_assert_ne!(bytes.len(), BlockToken::LEN),
        }
    }
}
