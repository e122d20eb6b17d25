//! `datanode::start_with` against a stand-in for meta: reports, deletions
//! acknowledged in the next heartbeat, failures retried, graceful shutdown.

use datanode::{DatanodeConfig, HeartbeatTarget};
use meta_api::{DatanodeReport, HeartbeatReply, MetaError};
use parking_lot::Mutex;
use proto::checksum;
use proto::wire::{self, Reply, Request, WriteChunks};
use proto::BlockKey;
use std::sync::Arc;
use std::time::Duration;
use test_support::node::{data, heartbeat_reply, key, pool, token, BPC};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Default)]
struct FakeMeta {
    reports: Mutex<Vec<DatanodeReport>>,
    /// Answered (once) to the next successful heartbeat.
    to_delete: Mutex<Vec<BlockKey>>,
    /// Heartbeats to fail before answering.
    failures: Mutex<usize>,
}

#[derive(Clone, Default)]
struct Meta(Arc<FakeMeta>);

impl HeartbeatTarget for Meta {
    async fn heartbeat(&self, report: DatanodeReport) -> Result<HeartbeatReply, MetaError> {
        self.0.reports.lock().push(report);
        {
            let mut failures = self.0.failures.lock();
            if *failures > 0 {
                *failures -= 1;
                return Err(MetaError::Transport("meta is down".into()));
            }
        }
        Ok(heartbeat_reply(std::mem::take(
            &mut *self.0.to_delete.lock(),
        )))
    }
}

impl Meta {
    async fn wait_for(&self, what: &str, pred: impl Fn(&[DatanodeReport]) -> bool) {
        for _ in 0..500 {
            if pred(&self.0.reports.lock()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }
}

fn config(dir: &std::path::Path) -> DatanodeConfig {
    DatanodeConfig {
        data_dirs: vec![dir.to_path_buf()],
        listen: "127.0.0.1:0".into(),
        fsync: false,
        heartbeat_interval: Duration::from_millis(20),
        ..DatanodeConfig::default()
    }
}

#[tokio::test]
async fn heartbeats_report_the_node_and_carry_out_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let meta = Meta::default();
    *meta.0.failures.lock() = 2;
    let node = datanode::start_with(config(dir.path()), meta.clone())
        .await
        .unwrap();
    let addr = node.addr().to_string();

    // Meta failing is retried, not fatal.
    meta.wait_for("a heartbeat after failures", |r| r.len() >= 3)
        .await;
    {
        let reports = meta.0.reports.lock();
        let first = &reports[0];
        assert_eq!(&first.id, node.id());
        assert_eq!(first.addr, addr);
        assert_eq!(first.local_socket, None);
        assert!(first.capacity > 0, "statvfs capacity");
        assert_eq!((first.blocks, first.used), (0, 0));
        assert!(first.deleted.is_empty());
    }

    let pool = pool();
    pool.write_chunks(
        &addr,
        key(1, 0),
        token(key(1, 0)).as_ref(),
        0,
        data(5000, 1),
    )
    .await
    .unwrap();
    pool.commit_block(&addr, key(1, 0), token(key(1, 0)).as_ref(), 5000)
        .await
        .unwrap();
    meta.wait_for("usage reported", |r| {
        r.last().is_some_and(|r| r.blocks == 1 && r.used == 5000)
    })
    .await;

    *meta.0.to_delete.lock() = vec![key(1, 0), key(2, 0)];
    meta.wait_for("deletions acknowledged", |r| {
        r.iter().any(|r| r.deleted == vec![key(1, 0), key(2, 0)])
    })
    .await;
    assert!(node.store().committed_blocks().is_empty());
    assert!(pool
        .read_block(&addr, key(1, 0), token(key(1, 0)).as_ref(), 0, 1)
        .await
        .is_err());
    // Acknowledged once, then no more.
    let count = meta.0.reports.lock().len();
    meta.wait_for("later heartbeats", |r| r.len() >= count + 2)
        .await;
    assert!(meta.0.reports.lock().last().unwrap().deleted.is_empty());

    let id = node.id().clone();
    tokio::time::timeout(Duration::from_secs(10), node.shutdown())
        .await
        .expect("shutdown must be prompt");

    // The identity survives a restart; advertise and capacity overrides are reported.
    let meta = Meta::default();
    let node = datanode::start_with(
        DatanodeConfig {
            advertise: Some("dn.example:7000".into()),
            capacity: Some(12345),
            ..config(dir.path())
        },
        meta.clone(),
    )
    .await
    .unwrap();
    assert_eq!(node.id(), &id);
    meta.wait_for("a heartbeat", |r| !r.is_empty()).await;
    {
        let reports = meta.0.reports.lock();
        assert_eq!(reports[0].addr, "dn.example:7000");
        assert_eq!(reports[0].capacity, 12345);
        assert_eq!(reports[0].id, id);
    }
    node.shutdown().await;
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish_and_closes_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let node = datanode::start_with(config(dir.path()), Meta::default())
        .await
        .unwrap();
    let addr = node.addr().to_string();
    let idle = TcpStream::connect(&addr).await.unwrap();
    let body = data(100_000, 3);
    let request = Request::WriteChunks(WriteChunks {
        key: key(3, 0),
        offset: 0,
        bytes_per_checksum: BPC,
        crcs: checksum::compute(&body, BPC),
    });
    let mut frame = Vec::new();
    wire::write_request(
        &mut frame,
        5,
        &request,
        token(request.key()).as_ref(),
        &body,
    )
    .await
    .unwrap();
    let mut busy = TcpStream::connect(&addr).await.unwrap();
    busy.write_all(&frame[..frame.len() / 2]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;

    let store = node.store().clone();
    let stopping = tokio::spawn(node.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !stopping.is_finished(),
        "shutdown must wait for the request"
    );
    // The idle connection was closed at once.
    let mut probe = [0u8; 1];
    let mut idle = idle;
    assert_eq!(idle.read(&mut probe).await.unwrap_or(0), 0);

    busy.write_all(&frame[frame.len() / 2..]).await.unwrap();
    let reply = wire::read_reply(&mut busy).await.unwrap();
    assert_eq!((reply.request_id, reply.message), (5, Reply::Ok));
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("shutdown ends once the request is answered")
        .unwrap();
    assert_eq!(store.open_uploads(), 1);
    assert!(TcpStream::connect(&addr).await.is_err());
}

#[tokio::test]
async fn invalid_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bad = DatanodeConfig {
        bytes_per_checksum: 3,
        ..config(dir.path())
    };
    assert!(matches!(
        datanode::start_with(bad, Meta::default()).await,
        Err(datanode::DatanodeError::Config(_))
    ));
    let bad = DatanodeConfig {
        listen: "not an address".into(),
        ..config(dir.path())
    };
    assert!(matches!(
        datanode::start_with(bad, Meta::default()).await,
        Err(datanode::DatanodeError::Listen { .. })
    ));
}
