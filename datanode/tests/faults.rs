//! Faults injected through real means: bad checksums on the wire, a byte
//! flipped on disk, restarts, and broken frames from a raw socket.

use block_client::{ClientConfig, ClientError, DatanodePool};
use proto::checksum;
use proto::wire::{self, ErrorCode, Reply, Request, WriteChunks, FRAME_HEADER_LEN};
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;
use test_support::node::{data, key, pool, token, TestNode, BPC};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn a_corrupted_chunk_crc_on_write_is_rejected_with_checksum_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = pool();
    let k = key(1, 2);
    let body = data(3 * BPC as usize + 10, 1);
    let mut crcs = checksum::compute(&body, BPC);
    crcs[2] ^= 0x10;
    let err = pool
        .write_chunks_with_checksums(&node.addr, k, token(k).as_ref(), 0, BPC, crcs, body.clone())
        .await
        .unwrap_err();
    match err {
        ClientError::Checksum { block, offset } => {
            assert_eq!(block, k);
            assert_eq!(offset, 2 * u64::from(BPC));
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    // The partial upload was discarded: nothing to commit, and it can start over.
    assert_eq!(node.store.open_uploads(), 0);
    assert!(pool
        .commit_block(&node.addr, k, token(k).as_ref(), body.len() as u64)
        .await
        .is_err());
    pool.write_chunks(&node.addr, k, token(k).as_ref(), 0, body.clone())
        .await
        .unwrap();
    pool.commit_block(&node.addr, k, token(k).as_ref(), body.len() as u64)
        .await
        .unwrap();
    assert_eq!(
        pool.read_block(&node.addr, k, token(k).as_ref(), 0, body.len() as u64)
            .await
            .unwrap(),
        body
    );
    node.stop().await;
}

#[tokio::test]
async fn the_checksum_mismatch_reply_names_code_and_offset_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let mut stream = TcpStream::connect(&node.addr).await.unwrap();
    let body = data(BPC as usize + 1, 2);
    let mut crcs = checksum::compute(&body, BPC);
    crcs[1] = !crcs[1];
    let request = Request::WriteChunks(WriteChunks {
        key: key(2, 0),
        offset: 0,
        bytes_per_checksum: BPC,
        crcs,
    });
    wire::write_request(
        &mut stream,
        41,
        &request,
        token(request.key()).as_ref(),
        &body,
    )
    .await
    .unwrap();
    let reply = wire::read_reply(&mut stream).await.unwrap();
    assert_eq!(reply.request_id, 41);
    let Reply::Error(e) = reply.message else {
        panic!("expected an error reply, got {:?}", reply.message);
    };
    assert_eq!(e.code, ErrorCode::ChecksumMismatch);
    assert_eq!(e.offset, Some(u64::from(BPC)));
    // A refusal does not close the connection.
    wire::write_request(
        &mut stream,
        42,
        &Request::DeleteBlock { key: key(2, 0) },
        token(key(2, 0)).as_ref(),
        &[],
    )
    .await
    .unwrap();
    let reply = wire::read_reply(&mut stream).await.unwrap();
    assert_eq!((reply.request_id, reply.message), (42, Reply::Ok));
    node.stop().await;
}

#[tokio::test]
async fn a_byte_flipped_on_disk_fails_the_read_with_a_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = pool();
    let k = key(3, 1);
    let body = data(5 * BPC as usize, 3);
    pool.write_chunks(&node.addr, k, token(k).as_ref(), 0, body.clone())
        .await
        .unwrap();
    pool.commit_block(&node.addr, k, token(k).as_ref(), body.len() as u64)
        .await
        .unwrap();

    let flipped_at = 3 * u64::from(BPC) + 123;
    let (path, base) = node.store.stored_at(k).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.seek(SeekFrom::Start(base + flipped_at)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(base + flipped_at)).unwrap();
    file.write_all(&[byte[0] ^ 0x01]).unwrap();
    file.sync_all().unwrap();

    for (offset, len) in [
        (0, body.len() as u64),
        (flipped_at, 1),
        (flipped_at - 100, 50),
    ] {
        let err = pool
            .read_block(&node.addr, k, token(k).as_ref(), offset, len)
            .await
            .unwrap_err();
        match err {
            ClientError::Checksum { block, offset } => {
                assert_eq!(block, k);
                assert_eq!(offset, 3 * u64::from(BPC));
            }
            other => panic!("expected a checksum error, got {other:?}"),
        }
    }
    // Chunks that were not touched still read fine.
    let bpc = BPC as u64;
    let got = pool
        .read_block(&node.addr, k, token(k).as_ref(), 0, 3 * bpc)
        .await
        .unwrap();
    assert_eq!(got, body.slice(..3 * BPC as usize));
    let got = pool
        .read_block(&node.addr, k, token(k).as_ref(), 4 * bpc, bpc)
        .await
        .unwrap();
    assert_eq!(got, body.slice(4 * BPC as usize..));
    node.stop().await;
}

#[tokio::test]
async fn a_restart_keeps_committed_blocks_and_removes_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    // Uploads held in memory for a volume make no temporary file.
    node.store.set_pack_max(0);
    let pool = pool();
    let body = data(100_000, 4);
    pool.write_chunks(
        &node.addr,
        key(4, 0),
        token(key(4, 0)).as_ref(),
        0,
        body.clone(),
    )
    .await
    .unwrap();
    pool.commit_block(
        &node.addr,
        key(4, 0),
        token(key(4, 0)).as_ref(),
        body.len() as u64,
    )
    .await
    .unwrap();
    pool.write_chunks(
        &node.addr,
        key(5, 0),
        token(key(5, 0)).as_ref(),
        0,
        data(2 * BPC as usize, 5),
    )
    .await
    .unwrap();
    let id = node.store.id().clone();
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        1
    );
    node.stop().await;

    let node = TestNode::start(dir.path()).await;
    assert_eq!(node.store.id(), &id);
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0
    );
    assert_eq!(node.store.committed_blocks(), vec![key(4, 0)]);
    // The pool's connection to the old server is stale; a fresh pool is not needed.
    let got = pool
        .read_block(
            &node.addr,
            key(4, 0),
            token(key(4, 0)).as_ref(),
            0,
            body.len() as u64,
        )
        .await
        .unwrap();
    assert_eq!(got, body);
    let err = pool
        .commit_block(
            &node.addr,
            key(5, 0),
            token(key(5, 0)).as_ref(),
            2 * u64::from(BPC),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Missing { .. }), "{err:?}");
    node.stop().await;
}

#[tokio::test]
async fn a_pooled_connection_closed_by_a_restart_on_the_same_port_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let addr = node.addr.clone();
    let pool = pool();
    pool.write_chunks(&addr, key(6, 0), token(key(6, 0)).as_ref(), 0, data(10, 6))
        .await
        .unwrap();
    pool.commit_block(&addr, key(6, 0), token(key(6, 0)).as_ref(), 10)
        .await
        .unwrap();
    assert_eq!(pool.idle_connections(&addr), 1);
    let (store, gate) = (node.store.clone(), node.gate.clone());
    node.stop().await;

    let listener = TcpListener::bind(&addr).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(datanode::server::serve(listener, store, gate, async move {
        let _ = stopped.await;
    }));
    let got = pool
        .read_block(&addr, key(6, 0), token(key(6, 0)).as_ref(), 0, 10)
        .await
        .unwrap();
    assert_eq!(got, data(10, 6));
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn delete_removes_blocks_and_tolerates_absent_ones() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = pool();
    pool.write_chunks(
        &node.addr,
        key(7, 0),
        token(key(7, 0)).as_ref(),
        0,
        data(1000, 7),
    )
    .await
    .unwrap();
    pool.commit_block(&node.addr, key(7, 0), token(key(7, 0)).as_ref(), 1000)
        .await
        .unwrap();
    pool.write_chunks(
        &node.addr,
        key(8, 0),
        token(key(8, 0)).as_ref(),
        0,
        data(1000, 8),
    )
    .await
    .unwrap();

    pool.delete_block(&node.addr, key(7, 0), token(key(7, 0)).as_ref())
        .await
        .unwrap();
    pool.delete_block(&node.addr, key(8, 0), token(key(8, 0)).as_ref())
        .await
        .unwrap();
    pool.delete_block(&node.addr, key(9, 0), token(key(9, 0)).as_ref())
        .await
        .unwrap();
    assert!(node.store.stored_at(key(7, 0)).is_none());
    assert!(node.store.committed_blocks().is_empty());
    assert_eq!(node.store.open_uploads(), 0);
    let err = pool
        .read_block(&node.addr, key(7, 0), token(key(7, 0)).as_ref(), 0, 1)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Missing { .. }), "{err:?}");
    node.stop().await;
}

/// Sends `bytes`, half-closes, and returns everything the server answers
/// before it closes the connection.
async fn send_raw(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server must close the connection")
        .ok();
    answer
}

async fn expect_protocol_error(addr: &str, bytes: &[u8]) {
    let answer = send_raw(addr, bytes).await;
    let reply = wire::read_reply(&mut answer.as_slice()).await.unwrap();
    match reply.message {
        Reply::Error(e) => assert_eq!(e.code, ErrorCode::Protocol, "{e:?}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test]
async fn broken_frames_get_an_error_and_do_not_hurt_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let body = data(300, 9);
    let request = Request::WriteChunks(WriteChunks {
        key: key(10, 0),
        offset: 0,
        bytes_per_checksum: BPC,
        crcs: checksum::compute(&body, BPC),
    });
    let mut frame = Vec::new();
    wire::write_request(
        &mut frame,
        1,
        &request,
        token(request.key()).as_ref(),
        &body,
    )
    .await
    .unwrap();

    // Cut at every byte: the server sees the stream end inside a frame,
    // says so, and closes.
    for cut in 1..frame.len() {
        expect_protocol_error(&node.addr, &frame[..cut]).await;
    }
    // Nothing at all is not an error.
    assert!(send_raw(&node.addr, &[]).await.is_empty());
    assert_eq!(node.store.open_uploads(), 0);

    let mut bad = frame.clone();
    bad[0] = b'X';
    expect_protocol_error(&node.addr, &bad).await;
    let mut bad = frame.clone();
    bad[4] = 9;
    expect_protocol_error(&node.addr, &bad).await;
    let mut bad = frame.clone();
    bad[5] = 0x80; // a reply kind sent as a request
    expect_protocol_error(&node.addr, &bad).await;
    let mut bad = frame[..FRAME_HEADER_LEN].to_vec();
    bad[20..24].copy_from_slice(&u32::MAX.to_be_bytes());
    expect_protocol_error(&node.addr, &bad).await;
    let mut bad = frame[..FRAME_HEADER_LEN].to_vec();
    bad[16..20].copy_from_slice(&u32::MAX.to_be_bytes());
    expect_protocol_error(&node.addr, &bad).await;
    // A message header that lies about its checksum count (after the
    // token, then the key, offset and chunk size).
    let count_at = FRAME_HEADER_LEN + proto::token::BlockToken::LEN + 21;
    let mut bad = frame.clone();
    bad[count_at..count_at + 4].copy_from_slice(&1000u32.to_be_bytes());
    expect_protocol_error(&node.addr, &bad).await;
    expect_protocol_error(&node.addr, &[0xAB; 100]).await;

    // The server still serves, the whole frame included.
    let answer = send_raw(&node.addr, &frame).await;
    let reply = wire::read_reply(&mut answer.as_slice()).await.unwrap();
    assert_eq!(reply.message, Reply::Ok);
    let pool = pool();
    pool.commit_block(&node.addr, key(10, 0), token(key(10, 0)).as_ref(), 300)
        .await
        .unwrap();
    assert_eq!(
        pool.read_block(&node.addr, key(10, 0), token(key(10, 0)).as_ref(), 0, 300)
            .await
            .unwrap(),
        body
    );
    node.stop().await;
}

#[tokio::test]
async fn a_silent_datanode_times_out_and_a_closed_port_is_an_io_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let silent = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(stream);
    });
    let pool = DatanodePool::new(ClientConfig {
        io_timeout: Duration::from_millis(200),
        ..ClientConfig::default()
    });
    let err = pool
        .read_block(&addr, key(1, 0), token(key(1, 0)).as_ref(), 0, 1)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    assert_eq!(pool.idle_connections(&addr), 0);
    silent.abort();

    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let err = pool
        .delete_block(&closed_addr, key(1, 0), token(key(1, 0)).as_ref())
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Io { .. }), "{err:?}");
}
