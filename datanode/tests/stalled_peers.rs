//! Peers that stall or lie about sizes: a client that stops mid-frame is cut
//! off by the server, and a reply announcing more data than was asked for is
//! refused by the client before it reserves or waits for that data.

use block_client::{ClientConfig, ClientError, DatanodePool};
use datanode::server::ServerLimits;
use proto::checksum;
use proto::wire::{self, ReadData, Reply, Request, WriteChunks};
use std::time::Duration;
use test_support::node::{data, key, token, TestNode, BPC};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Waits for the server to close `stream` (end of stream or reset).
async fn expect_closed(stream: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 256];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("{what}: the server kept the connection open"));
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn a_frame_stalled_midway_is_cut_off_but_an_idle_connection_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        frame_read_timeout: Duration::from_millis(300),
    };
    let node = TestNode::start_with_limits(dir.path(), limits).await;
    let mut idle = TcpStream::connect(&node.addr).await.unwrap();

    let body = data(1 << 20, 3);
    let request = Request::WriteChunks(WriteChunks {
        key: key(1, 0),
        offset: 0,
        bytes_per_checksum: BPC,
        crcs: checksum::compute(&body, BPC),
    });
    let head =
        wire::encode_request_head(1, &request, token(request.key()).as_ref(), body.len()).unwrap();
    // Headers and a sliver of the megabyte announced, then silence.
    let mut stalled = TcpStream::connect(&node.addr).await.unwrap();
    stalled.write_all(&head).await.unwrap();
    stalled.write_all(&body[..1000]).await.unwrap();
    expect_closed(&mut stalled, "payload stalled").await;
    // Five bytes of a frame header, then silence.
    let mut half = TcpStream::connect(&node.addr).await.unwrap();
    half.write_all(&head[..5]).await.unwrap();
    expect_closed(&mut half, "header stalled").await;
    assert_eq!(node.store.open_uploads(), 0);

    // Silent between frames for longer than the frame timeout: still served.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let delete = Request::DeleteBlock { key: key(5, 0) };
    wire::write_request(&mut idle, 7, &delete, token(delete.key()).as_ref(), &[])
        .await
        .unwrap();
    let reply = wire::read_reply(&mut idle).await.unwrap();
    assert_eq!((reply.request_id, reply.message), (7, Reply::Ok));
    node.stop().await;
}

#[tokio::test]
async fn a_read_reply_longer_than_asked_is_refused_before_its_data() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let lying = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let incoming = wire::read_request(&mut stream).await.unwrap().unwrap();
        // 100 bytes asked, 48 MiB announced, and none of it ever sent.
        let length = 48 * 1024 * 1024;
        let reply = Reply::ReadData(ReadData {
            offset: 0,
            length,
            bytes_per_checksum: BPC,
            crcs: vec![0; (length / u64::from(BPC)) as usize],
        });
        wire::write_reply(&mut stream, incoming.request_id, &reply)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let pool = DatanodePool::new(ClientConfig {
        bytes_per_checksum: BPC,
        io_timeout: Duration::from_secs(5),
        ..ClientConfig::default()
    });
    let err = pool
        .read_block(&addr, key(1, 0), token(key(1, 0)).as_ref(), 0, 100)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Protocol { .. }), "{err:?}");
    lying.abort();
}
