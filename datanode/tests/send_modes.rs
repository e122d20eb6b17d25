//! Read replies sent by sendfile, by copy, and by copy after verifying the
//! CRCs against the disk: real datanodes (`datanode::start_with`) on port 0,
//! real block files, raw protocol frames over real TCP.

use bytes::{Bytes, BytesMut};
use datanode::{DatanodeConfig, HeartbeatTarget, RunningDatanode, SendMode};
use meta_api::{DatanodeReport, HeartbeatReply, MetaError};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use proto::checksum;
use proto::wire::{self, ErrorCode, ReadData, Reply, Request};
use proto::BlockKey;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;
use test_support::node::{data, heartbeat_reply, key, pool, token, BPC};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

/// A meta that accepts every heartbeat and deletes nothing.
#[derive(Clone)]
struct QuietMeta;

impl HeartbeatTarget for QuietMeta {
    async fn heartbeat(&self, _report: DatanodeReport) -> Result<HeartbeatReply, MetaError> {
        Ok(heartbeat_reply(Vec::new()))
    }
}

/// How a node under test sends its read replies.
#[derive(Clone, Copy, Debug)]
struct Mode {
    send_mode: SendMode,
    verify_on_read: bool,
}

const SENDFILE: Mode = Mode {
    send_mode: SendMode::Sendfile,
    verify_on_read: false,
};
const COPY: Mode = Mode {
    send_mode: SendMode::Copy,
    verify_on_read: false,
};
/// verify_on_read with sendfile asked: verification must win (copy mode).
const VERIFY: Mode = Mode {
    send_mode: SendMode::Sendfile,
    verify_on_read: true,
};

async fn start(dir: &Path, mode: Mode) -> RunningDatanode {
    let config = DatanodeConfig {
        data_dirs: vec![dir.to_path_buf()],
        fsync: false,
        heartbeat_interval: Duration::from_millis(200),
        send_mode: mode.send_mode,
        verify_on_read: mode.verify_on_read,
        ..DatanodeConfig::default()
    };
    datanode::start_with(config, QuietMeta).await.unwrap()
}

async fn put_block(node: &RunningDatanode, k: BlockKey, body: &Bytes) {
    let addr = node.addr().to_string();
    let pool = pool();
    pool.write_chunks(&addr, k, token(k).as_ref(), 0, body.clone())
        .await
        .unwrap();
    pool.commit_block(&addr, k, token(k).as_ref(), body.len() as u64)
        .await
        .unwrap();
}

/// Asks for `[offset, offset + length)` of `k` and returns the reply with its data.
async fn read(stream: &mut TcpStream, k: BlockKey, offset: u64, length: u64) -> (Reply, Bytes) {
    let request = Request::ReadBlock {
        key: k,
        offset,
        length,
    };
    wire::write_request(stream, 7, &request, token(request.key()).as_ref(), &[])
        .await
        .unwrap();
    let incoming = wire::read_reply(stream).await.unwrap();
    assert_eq!(incoming.request_id, 7);
    let mut payload = BytesMut::with_capacity(incoming.payload_len as usize);
    wire::read_payload_into(stream, incoming.payload_len, &mut payload)
        .await
        .unwrap();
    (incoming.message, payload.freeze())
}

fn read_data(reply: Reply) -> ReadData {
    match reply {
        Reply::ReadData(header) => header,
        other => panic!("expected read data, got {other:?}"),
    }
}

/// The value of one counter line (`name{labels}`) in a Prometheus rendering; 0 when absent.
fn counter(recorder: &PrometheusRecorder, series: &str) -> u64 {
    let text = recorder.handle().render();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0, |value| value.trim().parse().unwrap())
}

const SENT_SENDFILE: &str = "tessera_datanode_sent_bytes_total{mode=\"sendfile\"}";
const SENT_COPY: &str = "tessera_datanode_sent_bytes_total{mode=\"copy\"}";

// Metrics go to a recorder local to the test's thread: the datanodes run on
// the same single-threaded runtime, so each test sees only its own counts.
// A reply is counted once its last byte is out, which may be after the
// client has it: counts are checked after the next request on the same
// connection, or after shutdown (which waits for requests in flight).

#[tokio::test]
async fn every_mode_sends_the_same_bytes_and_crcs() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let bpc = u64::from(BPC);
    let block_len = 5 * 1024 * 1024 + 12_345;
    let body = data(block_len as usize, 42);
    let k = key(1, 0);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    for (dir, mode) in dirs.iter().zip([SENDFILE, COPY, VERIFY]) {
        let node = start(dir.path(), mode).await;
        put_block(&node, k, &body).await;
        nodes.push(node);
    }
    let mut streams = Vec::new();
    for node in &nodes {
        streams.push(TcpStream::connect(node.addr()).await.unwrap());
    }
    let ranges = [
        (0, block_len),               // whole block
        (0, 1),                       // one byte
        (1, 1),                       // one unaligned byte
        (bpc, bpc),                   // one aligned chunk
        (bpc - 1, 2),                 // across a chunk boundary
        (3 * bpc + 7, 2 * bpc + 100), // unaligned both ends
        (12_345, 1_000_000),          // many chunks
        (block_len - 100, 100),       // in the short last chunk
        (block_len - 1, 1),           // the last byte
        (block_len - 12_345 - 5, 5),  // just before the last chunk
        (0, 0),                       // nothing
    ];
    let mut sent = 0;
    for (offset, length) in ranges {
        let mut replies = Vec::new();
        for stream in &mut streams {
            let (reply, payload) = read(stream, k, offset, length).await;
            replies.push((read_data(reply), payload));
        }
        let (header, payload) = &replies[0];
        // The reply covers whole chunks around the range, and its CRCs are the data's.
        let (start, end) = checksum::aligned_span(offset, length, block_len, BPC);
        assert_eq!((header.offset, header.length), (start, end - start));
        assert_eq!(payload, &body[start as usize..end as usize]);
        assert_eq!(header.crcs, checksum::compute(payload, BPC));
        for (mode, other) in [COPY, VERIFY].iter().zip(&replies[1..]) {
            assert_eq!(other, &replies[0], "{mode:?} differs at {offset}+{length}");
        }
        sent += end - start;
    }
    for node in nodes {
        node.shutdown().await;
    }
    // The two copy nodes add up in the copy series.
    assert_eq!(counter(&recorder, SENT_SENDFILE), sent);
    assert_eq!(counter(&recorder, SENT_COPY), 2 * sent);
}

/// Flips one byte of block `k`'s file on disk, at block offset `at`.
fn flip_byte(node: &RunningDatanode, k: BlockKey, at: u64) {
    let (path, base) = node.store().stored_at(k).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(base + at)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(base + at)).unwrap();
    file.write_all(&[byte[0] ^ 0x40]).unwrap();
    file.sync_all().unwrap();
}

#[tokio::test]
async fn verify_on_read_answers_a_byte_flipped_on_disk_with_a_checksum_error() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let bpc = u64::from(BPC);
    let body = data(10 * BPC as usize + 77, 3);
    let k = key(2, 1);
    let (verify_dir, sendfile_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let verifying = start(verify_dir.path(), VERIFY).await;
    let trusting = start(sendfile_dir.path(), SENDFILE).await;
    let bad = 4 * bpc + 1000;
    for node in [&verifying, &trusting] {
        put_block(node, k, &body).await;
        flip_byte(node, k, bad);
    }

    let mut stream = TcpStream::connect(verifying.addr()).await.unwrap();
    let (reply, payload) = read(&mut stream, k, 3 * bpc + 5, 3 * bpc).await;
    match reply {
        Reply::Error(e) => {
            assert_eq!(e.code, ErrorCode::ChecksumMismatch);
            assert_eq!(e.offset, Some(4 * bpc), "names the bad chunk");
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert!(payload.is_empty(), "no corrupt data after the error");
    assert_eq!(
        counter(&recorder, "tessera_datanode_corrupt_reads_total"),
        1
    );
    // The connection stays usable, and the chunks around the bad one still read.
    let (reply, payload) = read(&mut stream, k, 0, 4 * bpc).await;
    assert_eq!(read_data(reply).length, 4 * bpc);
    assert_eq!(payload, body.slice(..4 * BPC as usize));
    let (reply, payload) = read(&mut stream, k, 5 * bpc, body.len() as u64 - 5 * bpc).await;
    assert_eq!(read_data(reply).offset, 5 * bpc);
    assert_eq!(payload, body.slice(5 * BPC as usize..));
    assert_eq!(counter(&recorder, SENT_SENDFILE), 0);

    // Without verification the flipped byte goes out, and only the CRCs,
    // still those of the good data, let the client notice.
    let mut stream = TcpStream::connect(trusting.addr()).await.unwrap();
    let (reply, payload) = read(&mut stream, k, 3 * bpc + 5, 3 * bpc).await;
    let header = read_data(reply);
    // The range widens to chunks 3 to 6.
    assert_eq!((header.offset, header.length), (3 * bpc, 4 * bpc));
    assert_ne!(payload, body.slice(3 * BPC as usize..7 * BPC as usize));
    let err = checksum::verify(&payload, header.offset, BPC, &header.crcs).unwrap_err();
    assert!(matches!(err, checksum::ChecksumError::Mismatch { offset, .. } if offset == 4 * bpc));

    verifying.shutdown().await;
    trusting.shutdown().await;
    assert_eq!(counter(&recorder, SENT_SENDFILE), 4 * bpc);
}

#[tokio::test]
async fn sendfile_delivers_a_large_read_to_a_slow_client() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), SENDFILE).await;
    let body = data(40 * 1024 * 1024, 9);
    let k = key(3, 0);
    put_block(&node, k, &body).await;

    // A small receive buffer and a reader that naps: the datanode's socket
    // fills up over and over, and sendfile must wait for it to drain.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    let mut stream = socket.connect(node.addr()).await.unwrap();
    let request = Request::ReadBlock {
        key: k,
        offset: 0,
        length: body.len() as u64,
    };
    wire::write_request(&mut stream, 1, &request, token(request.key()).as_ref(), &[])
        .await
        .unwrap();
    let incoming = wire::read_reply(&mut stream).await.unwrap();
    let header = read_data(incoming.message);
    assert_eq!(header.length, body.len() as u64);
    let mut got = Vec::with_capacity(body.len());
    let mut piece = vec![0u8; 64 * 1024];
    while got.len() < body.len() {
        let want = piece.len().min(body.len() - got.len());
        let n = stream.read(&mut piece[..want]).await.unwrap();
        assert!(n > 0, "connection closed after {} bytes", got.len());
        got.extend_from_slice(&piece[..n]);
        if got.len() % (1024 * 1024) < n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(got == body, "the bytes received differ from the block");
    assert_eq!(header.crcs, checksum::compute(&got, BPC));

    // The connection is still in step for the next request.
    let (reply, payload) = read(&mut stream, k, 100, 10).await;
    assert_eq!(read_data(reply).offset, 0);
    assert_eq!(payload, body.slice(..BPC as usize));
    node.shutdown().await;
    assert_eq!(
        counter(&recorder, SENT_SENDFILE),
        body.len() as u64 + u64::from(BPC)
    );
    assert!(
        counter(&recorder, "tessera_datanode_send_waits_total") > 0,
        "the slow client never filled the socket"
    );
}
