//! Block tokens at the datanode: real TCP, raw frames. Every block frame
//! without a token meta could have signed for that block and operation is
//! refused with an access-denied error frame, counted, and changes nothing;
//! the connection stays in step for the next request.

use bytes::Bytes;
use datanode::access::TokenGate;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use proto::checksum;
use proto::token::{index_mask, BlockToken, Modes, TokenKey};
use proto::wire::{self, ErrorCode, Reply, Request, WriteChunks};
use proto::BlockKey;
use std::time::Duration;
use test_support::node::{data, key, pool, token, token_key, TestNode, BPC};
use tokio::net::{TcpListener, TcpStream};

const ALL: Modes = Modes::READ.with(Modes::WRITE).with(Modes::DELETE);

/// A token for `k` allowing `modes` until `expires`, signed with `signer`.
fn signed(signer: &TokenKey, k: BlockKey, modes: Modes, expires: u64) -> Option<BlockToken> {
    Some(BlockToken::sign(
        signer,
        k.block,
        index_mask([k.index]),
        modes,
        expires,
    ))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Sends `request` with `token` (and a payload for writes) and returns the reply.
async fn ask(stream: &mut TcpStream, request: &Request, token: Option<BlockToken>) -> Reply {
    let payload = match request {
        Request::WriteChunks(w) => data(w.crcs.len() * BPC as usize, 5),
        _ => Bytes::new(),
    };
    wire::write_request(stream, 9, request, token.as_ref(), &payload)
        .await
        .unwrap();
    let reply = wire::read_reply(stream).await.unwrap();
    assert_eq!(reply.request_id, 9);
    let mut data = bytes::BytesMut::new();
    wire::read_payload_into(stream, reply.payload_len, &mut data)
        .await
        .unwrap();
    reply.message
}

fn denied(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(e) if e.code == ErrorCode::AccessDenied)
}

fn counter(recorder: &PrometheusRecorder, reason: &str) -> u64 {
    let series = format!("tessera_datanode_token_refusals_total{{reason=\"{reason}\"}} ");
    recorder
        .handle()
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0, |v| v.trim().parse().unwrap())
}

// Metrics go to a recorder local to the test's thread, where the node runs
// (a current-thread runtime).
#[tokio::test]
async fn block_frames_without_a_valid_token_are_refused_and_change_nothing() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let (stored, fresh) = (key(1, 0), key(2, 0));
    let body = data(3 * BPC as usize, 1);
    let pool = pool();
    pool.write_chunks(&node.addr, stored, token(stored).as_ref(), 0, body.clone())
        .await
        .unwrap();
    pool.commit_block(
        &node.addr,
        stored,
        token(stored).as_ref(),
        body.len() as u64,
    )
    .await
    .unwrap();

    let requests = [
        Request::WriteChunks(WriteChunks {
            key: fresh,
            offset: 0,
            bytes_per_checksum: BPC,
            crcs: checksum::compute(&data(2 * BPC as usize, 5), BPC),
        }),
        Request::CommitBlock {
            key: stored,
            length: 1,
        },
        Request::ReadBlock {
            key: stored,
            offset: 0,
            length: 10,
        },
        Request::DeleteBlock { key: stored },
    ];
    let forger = TokenKey {
        secret: [0x77; 32],
        ..token_key()
    };
    let stranger = TokenKey {
        id: 99,
        ..token_key()
    };
    let mut stream = TcpStream::connect(&node.addr).await.unwrap();
    for request in &requests {
        let k = request.key();
        let other_block = BlockKey::new(proto::BlockId(k.block.0 + 7), k.index);
        let other_index = BlockKey::new(k.block, k.index + 1);
        let wrong_mode = match request {
            Request::ReadBlock { .. } => Modes::WRITE.with(Modes::DELETE),
            _ => Modes::READ,
        };
        let bad_tokens = [
            ("missing", None),
            ("bad_signature", signed(&forger, k, ALL, u64::MAX)),
            ("unknown_key", signed(&stranger, k, ALL, u64::MAX)),
            ("expired", signed(&token_key(), k, ALL, now_ms() - 1)),
            (
                "wrong_block",
                signed(&token_key(), other_block, ALL, u64::MAX),
            ),
            (
                "wrong_block",
                signed(&token_key(), other_index, ALL, u64::MAX),
            ),
            ("wrong_mode", signed(&token_key(), k, wrong_mode, u64::MAX)),
        ];
        for (why, bad) in bad_tokens {
            let reply = ask(&mut stream, request, bad).await;
            assert!(denied(&reply), "{request:?} with a {why} token: {reply:?}");
        }
    }
    for (reason, times) in [
        ("missing", 4),
        ("bad_signature", 4),
        ("unknown_key", 4),
        ("expired", 4),
        ("wrong_block", 8),
        ("wrong_mode", 4),
    ] {
        assert_eq!(counter(&recorder, reason), times, "{reason}");
    }
    // Nothing changed: the block reads back whole, the refused write left
    // no upload, and the same connection serves a request with a token.
    assert_eq!(node.store.open_uploads(), 0);
    assert!(node.store.block(fresh).is_none());
    let read = Request::ReadBlock {
        key: stored,
        offset: 0,
        length: body.len() as u64,
    };
    assert!(matches!(
        ask(&mut stream, &read, token(stored)).await,
        Reply::ReadData(_)
    ));
    let got = pool
        .read_block(
            &node.addr,
            stored,
            token(stored).as_ref(),
            0,
            body.len() as u64,
        )
        .await
        .unwrap();
    assert_eq!(got, body);
    node.stop().await;
}

#[tokio::test]
async fn a_write_token_drops_uploads_but_not_committed_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = pool();
    let write_only = |k| signed(&token_key(), k, Modes::WRITE, u64::MAX);
    let (open, done) = (key(3, 0), key(4, 0));
    for k in [open, done] {
        pool.write_chunks(&node.addr, k, write_only(k).as_ref(), 0, data(100, 3))
            .await
            .unwrap();
    }
    pool.commit_block(&node.addr, done, write_only(done).as_ref(), 100)
        .await
        .unwrap();
    // A writer abandons its upload with the token it wrote it with.
    pool.delete_block(&node.addr, open, write_only(open).as_ref())
        .await
        .unwrap();
    assert_eq!(node.store.open_uploads(), 0);
    // A committed block takes a delete token.
    let refused = pool
        .delete_block(&node.addr, done, write_only(done).as_ref())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("access denied"), "{refused}");
    assert!(node.store.block(done).is_some());
    let delete_only = signed(&token_key(), done, Modes::DELETE, u64::MAX);
    pool.delete_block(&node.addr, done, delete_only.as_ref())
        .await
        .unwrap();
    assert!(node.store.block(done).is_none());
    node.stop().await;
}

#[tokio::test]
async fn a_datanode_serves_nothing_before_it_has_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = datanode::BlockStore::open(dir.path(), BPC, false)
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = TokenGate::new();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(datanode::server::serve(
        listener,
        store,
        gate.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    let mut stream = TcpStream::connect(addr).await.unwrap();
    wire::write_request(&mut stream, 1, &Request::LocalInfo, None, &[])
        .await
        .unwrap();
    let early = tokio::time::timeout(Duration::from_millis(300), wire::read_reply(&mut stream));
    assert!(early.await.is_err(), "answered before holding any key");
    gate.set_keys(vec![token_key()]);
    let reply = tokio::time::timeout(Duration::from_secs(10), wire::read_reply(&mut stream))
        .await
        .expect("answered once the keys came")
        .unwrap();
    assert_eq!(reply.request_id, 1);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
