//! Short-circuit local reads against real datanodes (`datanode::start_with`
//! on port 0, a real Unix socket in a short temporary folder): same bytes as
//! TCP, checksums still enforced, fallback to TCP when the socket is missing,
//! and revocation of deleted blocks.

use block_client::{ClientConfig, ClientError, DatanodePool};
use bytes::Bytes;
use datanode::{DatanodeConfig, HeartbeatTarget, RunningDatanode};
use meta_api::{DatanodeReport, HeartbeatReply, MetaError};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use proto::BlockKey;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tempfile::TempDir;
use test_support::data::eventually;
use test_support::node::{data, heartbeat_reply, key, token, BPC};

/// Meta stand-in: accepts every heartbeat, never asks for deletions.
#[derive(Clone)]
struct NoMeta;

impl HeartbeatTarget for NoMeta {
    async fn heartbeat(&self, _report: DatanodeReport) -> Result<HeartbeatReply, MetaError> {
        Ok(heartbeat_reply(Vec::new()))
    }
}

/// An OpenBlock request with a valid token.
fn open_request(k: proto::BlockKey) -> proto::wire::local::LocalRequest {
    proto::wire::local::LocalRequest::OpenBlock(k, token(k).unwrap())
}

/// A folder under /tmp with a short name: Unix socket paths are limited to
/// 107 bytes.
fn short_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("sc")
        .tempdir_in("/tmp")
        .unwrap()
}

async fn start_datanode(dir: &Path, socket: Option<PathBuf>) -> RunningDatanode {
    let config = DatanodeConfig {
        data_dirs: vec![dir.join("dn")],
        listen: "127.0.0.1:0".into(),
        fsync: false,
        heartbeat_interval: Duration::from_secs(60),
        local_socket: socket,
        ..DatanodeConfig::default()
    };
    datanode::start_with(config, NoMeta).await.unwrap()
}

fn pool(short_circuit: bool) -> DatanodePool {
    DatanodePool::new(ClientConfig {
        bytes_per_checksum: BPC,
        io_timeout: Duration::from_secs(20),
        short_circuit,
        ..ClientConfig::default()
    })
}

async fn put(pool: &DatanodePool, addr: &str, key: BlockKey, bytes: &Bytes) {
    pool.write_chunks(addr, key, token(key).as_ref(), 0, bytes.clone())
        .await
        .unwrap();
    pool.commit_block(addr, key, token(key).as_ref(), bytes.len() as u64)
        .await
        .unwrap();
}

/// The value of a counter series in `recorder` (0 when never incremented).
fn counter(recorder: &PrometheusRecorder, series: &str) -> u64 {
    let text = recorder.handle().render();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0, |value| value.trim().parse().unwrap())
}

const SC_READS: &str = "tessera_client_short_circuit_reads_total";
const SC_FALLBACKS: &str = "tessera_client_short_circuit_fallbacks_total";
const OPENS: &str = "tessera_datanode_requests_total{op=\"short_circuit_open\",outcome=\"ok\"}";

#[tokio::test]
async fn short_circuit_reads_return_the_same_bytes_as_tcp() {
    // Metrics go to a recorder local to this test's thread (the runtime is
    // single-threaded), so it sees only its own counts.
    let recorder = PrometheusBuilder::new().build_recorder();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let dir = short_dir();
    let node = start_datanode(dir.path(), Some(dir.path().join("dn.sock"))).await;
    let addr = node.addr().to_string();
    let tcp = pool(false);
    let local = pool(true);
    let len = 3 * BPC as usize + 1234;
    let bytes = data(len, 7);
    put(&tcp, &addr, key(1, 0), &bytes).await;
    let small = data(10, 8);
    put(&tcp, &addr, key(2, 3), &small).await;

    // The first read finds the datanode local (reads racing with that
    // discovery go over TCP); then concurrent first reads of another block
    // share one open.
    let got = local
        .read_block(&addr, key(1, 0), token(key(1, 0)).as_ref(), 0, 10)
        .await
        .unwrap();
    assert_eq!(got, bytes.slice(..10));
    let small_token = token(key(2, 3));
    let first_reads =
        (0..8).map(|i| local.read_block(&addr, key(2, 3), small_token.as_ref(), i, 1));
    for (i, got) in futures::future::join_all(first_reads)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(got.unwrap(), small.slice(i..i + 1));
    }

    let mut ranges = vec![(0, len), (0, 1), (len - 1, 1), (5, 0), (len, 0)];
    let bpc = BPC as usize;
    for start in [1, bpc - 1, bpc, bpc + 1, 2 * bpc + 17] {
        for n in [1, 100, bpc, bpc + 1, len - start] {
            if start + n <= len {
                ranges.push((start, n));
            }
        }
    }
    for &(offset, n) in &ranges {
        let got = local
            .read_block(
                &addr,
                key(1, 0),
                token(key(1, 0)).as_ref(),
                offset as u64,
                n as u64,
            )
            .await
            .unwrap();
        let over_tcp = tcp
            .read_block(
                &addr,
                key(1, 0),
                token(key(1, 0)).as_ref(),
                offset as u64,
                n as u64,
            )
            .await
            .unwrap();
        assert_eq!(got, bytes.slice(offset..offset + n), "range {offset}+{n}");
        assert_eq!(got, over_tcp, "range {offset}+{n}");
    }
    let got = local
        .read_block(&addr, key(2, 3), token(key(2, 3)).as_ref(), 0, 10)
        .await
        .unwrap();
    assert_eq!(got, small);

    let stats = local.short_circuit_stats().expect("short-circuit is on");
    assert_eq!(stats.reads, ranges.len() as u64 + 10);
    assert_eq!(stats.fallbacks, 0);
    assert_eq!(stats.cached_replicas, 2);
    assert!(tcp.short_circuit_stats().is_none());
    assert_eq!(counter(&recorder, SC_READS), stats.reads);
    assert_eq!(counter(&recorder, SC_FALLBACKS), 0);
    // One open per block, however many reads.
    assert_eq!(counter(&recorder, OPENS), 2);

    // A range past the end is refused as over TCP (out of range), not served.
    let err = local
        .read_block(
            &addr,
            key(1, 0),
            token(key(1, 0)).as_ref(),
            len as u64 - 1,
            2,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Remote { .. }), "{err:?}");
    node.shutdown().await;
    assert!(
        !dir.path().join("dn.sock").exists(),
        "socket removed on shutdown"
    );
}

#[tokio::test]
async fn a_flipped_byte_on_disk_is_a_checksum_error_on_both_paths() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let dir = short_dir();
    let node = start_datanode(dir.path(), Some(dir.path().join("dn.sock"))).await;
    let addr = node.addr().to_string();
    let tcp = pool(false);
    let local = pool(true);
    let bytes = data(2 * BPC as usize, 11);
    put(&tcp, &addr, key(3, 0), &bytes).await;
    // Cache the replica first, so the flip happens under an open descriptor.
    local
        .read_block(&addr, key(3, 0), token(key(3, 0)).as_ref(), 0, 10)
        .await
        .unwrap();

    let (path, base) = node.store().stored_at(key(3, 0)).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let bad = BPC as u64 + 100;
    file.write_all_at(&[bytes[bad as usize] ^ 0x40], base + bad)
        .unwrap();

    let err = local
        .read_block(&addr, key(3, 0), token(key(3, 0)).as_ref(), bad, 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Checksum { offset, .. } if offset == BPC as u64),
        "{err:?}"
    );
    let stats = local.short_circuit_stats().unwrap();
    assert_eq!((stats.reads, stats.fallbacks), (1, 1));
    assert_eq!(counter(&recorder, SC_FALLBACKS), 1);
    let err = tcp
        .read_block(&addr, key(3, 0), token(key(3, 0)).as_ref(), bad, 1)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Checksum { .. }), "{err:?}");
    // The good first chunk still reads locally.
    let good = local
        .read_block(&addr, key(3, 0), token(key(3, 0)).as_ref(), 0, BPC as u64)
        .await
        .unwrap();
    assert_eq!(good, bytes.slice(..BPC as usize));
    assert_eq!(local.short_circuit_stats().unwrap().reads, 2);
    node.shutdown().await;
}

#[tokio::test]
async fn without_a_usable_socket_reads_go_over_tcp() {
    // No socket configured: the datanode refuses LocalInfo.
    let dir = short_dir();
    let node = start_datanode(dir.path(), None).await;
    let addr = node.addr().to_string();
    let local = pool(true);
    let bytes = data(50_000, 3);
    put(&local, &addr, key(4, 0), &bytes).await;
    for _ in 0..3 {
        let got = local
            .read_block(&addr, key(4, 0), token(key(4, 0)).as_ref(), 100, 40_000)
            .await
            .unwrap();
        assert_eq!(got, bytes.slice(100..40_100));
    }
    let stats = local.short_circuit_stats().unwrap();
    assert_eq!((stats.reads, stats.cached_replicas), (0, 0));
    node.shutdown().await;

    // A socket configured, but its file gone: connecting fails.
    let dir = short_dir();
    let socket = dir.path().join("dn.sock");
    let node = start_datanode(dir.path(), Some(socket.clone())).await;
    let addr = node.addr().to_string();
    std::fs::remove_file(&socket).unwrap();
    let local = pool(true);
    put(&local, &addr, key(5, 0), &bytes).await;
    let got = local
        .read_block(&addr, key(5, 0), token(key(5, 0)).as_ref(), 0, 50_000)
        .await
        .unwrap();
    assert_eq!(got, bytes);
    assert_eq!(local.short_circuit_stats().unwrap().reads, 0);
    node.shutdown().await;
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced_but_other_files_are_not() {
    let dir = short_dir();
    let socket = dir.path().join("dn.sock");
    // A crashed run leaves its socket file behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let node = start_datanode(dir.path(), Some(socket.clone())).await;
    let addr = node.addr().to_string();
    let local = pool(true);
    let bytes = data(1000, 5);
    put(&local, &addr, key(6, 0), &bytes).await;
    assert_eq!(
        local
            .read_block(&addr, key(6, 0), token(key(6, 0)).as_ref(), 0, 1000)
            .await
            .unwrap(),
        bytes
    );
    assert_eq!(local.short_circuit_stats().unwrap().reads, 1);
    node.shutdown().await;

    // A socket another process still serves is not taken over.
    let live = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let config = DatanodeConfig {
        data_dirs: vec![dir.path().join("dn")],
        local_socket: Some(socket.clone()),
        fsync: false,
        ..DatanodeConfig::default()
    };
    assert!(datanode::start_with(config, NoMeta).await.is_err());
    drop(live);
    std::fs::remove_file(&socket).unwrap();

    // A regular file at the socket path is someone's data: refuse to start.
    std::fs::write(&socket, b"not a socket").unwrap();
    let config = DatanodeConfig {
        data_dirs: vec![dir.path().join("dn")],
        local_socket: Some(socket.clone()),
        fsync: false,
        ..DatanodeConfig::default()
    };
    assert!(datanode::start_with(config, NoMeta).await.is_err());
    assert_eq!(std::fs::read(&socket).unwrap(), b"not a socket");
}

#[tokio::test]
async fn deleting_a_block_revokes_its_cached_descriptor() {
    let dir = short_dir();
    let node = start_datanode(dir.path(), Some(dir.path().join("dn.sock"))).await;
    // Files of their own, which a delete unlinks.
    node.store().set_pack_max(0);
    let addr = node.addr().to_string();
    let local = pool(true);
    let (a, b) = (data(40_000, 1), data(40_000, 2));
    put(&local, &addr, key(7, 0), &a).await;
    put(&local, &addr, key(8, 0), &b).await;
    assert_eq!(
        local
            .read_block(&addr, key(7, 0), token(key(7, 0)).as_ref(), 0, 100)
            .await
            .unwrap(),
        a.slice(..100)
    );
    assert_eq!(
        local
            .read_block(&addr, key(8, 0), token(key(8, 0)).as_ref(), 0, 100)
            .await
            .unwrap(),
        b.slice(..100)
    );
    assert_eq!(local.short_circuit_stats().unwrap().cached_replicas, 2);

    // Deleted right before a read: the unlinked file is not served, whether
    // or not the revocation has arrived yet.
    local
        .delete_block(&addr, key(7, 0), token(key(7, 0)).as_ref())
        .await
        .unwrap();
    let err = local
        .read_block(&addr, key(7, 0), token(key(7, 0)).as_ref(), 0, 100)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Missing { .. }), "{err:?}");

    // The datanode pushes the deletion: the descriptor goes without a read.
    let tcp = pool(false);
    put(&tcp, &addr, key(9, 0), &a).await;
    local
        .read_block(&addr, key(9, 0), token(key(9, 0)).as_ref(), 0, 10)
        .await
        .unwrap();
    assert_eq!(local.short_circuit_stats().unwrap().cached_replicas, 2);
    tcp.delete_block(&addr, key(9, 0), token(key(9, 0)).as_ref())
        .await
        .unwrap();
    eventually("the revoked replica leaves the cache", || {
        local.short_circuit_stats().unwrap().cached_replicas == 1
    })
    .await;
    // The other block still reads locally.
    let before = local.short_circuit_stats().unwrap().reads;
    assert_eq!(
        local
            .read_block(&addr, key(8, 0), token(key(8, 0)).as_ref(), 5, 10)
            .await
            .unwrap(),
        b.slice(5..15)
    );
    assert_eq!(local.short_circuit_stats().unwrap().reads, before + 1);

    // The datanode stopping ends the watch: every descriptor of it goes.
    node.shutdown().await;
    eventually("a stopped datanode's replicas leave the cache", || {
        local.short_circuit_stats().unwrap().cached_replicas == 0
    })
    .await;
}

/// A packed block's volume stays linked when the block is deleted: the
/// datanode's push is what takes its descriptor away (until then a read
/// gets the deleted block's own bytes, never another's: block ids are not
/// reused), and a read after it is refused.
#[tokio::test]
async fn deleting_a_packed_block_revokes_its_descriptor_by_the_push() {
    let dir = short_dir();
    let node = start_datanode(dir.path(), Some(dir.path().join("dn.sock"))).await;
    let addr = node.addr().to_string();
    let local = pool(true);
    let (a, b) = (data(40_000, 1), data(30_000, 2));
    put(&local, &addr, key(7, 0), &a).await;
    put(&local, &addr, key(8, 0), &b).await;
    assert_eq!(
        node.store().stored_at(key(7, 0)).unwrap().0,
        node.store().stored_at(key(8, 0)).unwrap().0,
        "both in one volume"
    );
    for (k, body) in [(key(7, 0), &a), (key(8, 0), &b)] {
        let got = local
            .read_block(&addr, k, token(k).as_ref(), 1000, 5000)
            .await
            .unwrap();
        assert_eq!(got, body.slice(1000..6000));
    }
    assert_eq!(local.short_circuit_stats().unwrap().cached_replicas, 2);
    local
        .delete_block(&addr, key(7, 0), token(key(7, 0)).as_ref())
        .await
        .unwrap();
    eventually("the deleted block's descriptor leaves the cache", || {
        local.short_circuit_stats().unwrap().cached_replicas == 1
    })
    .await;
    let err = local
        .read_block(&addr, key(7, 0), token(key(7, 0)).as_ref(), 0, 100)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Missing { .. }), "{err:?}");
    let before = local.short_circuit_stats().unwrap().reads;
    let got = local
        .read_block(&addr, key(8, 0), token(key(8, 0)).as_ref(), 29_000, 1000)
        .await
        .unwrap();
    assert_eq!(got, b.slice(29_000..));
    assert_eq!(local.short_circuit_stats().unwrap().reads, before + 1);
    node.shutdown().await;
}

/// Reads of cached pages complete without awaiting anything; they still
/// count against the task's budget, so a task reading in a loop lets the
/// other tasks of its worker run (a sequential stream beside positioned
/// readers was starved for whole runs before).
#[tokio::test]
async fn a_task_reading_cached_data_in_a_loop_lets_others_run() {
    let dir = short_dir();
    let node = start_datanode(dir.path(), Some(dir.path().join("dn.sock"))).await;
    let addr = node.addr().to_string();
    let local = pool(true);
    let bytes = data(64 * 1024, 5);
    put(&local, &addr, key(9, 0), &bytes).await;
    local
        .read_block(&addr, key(9, 0), token(key(9, 0)).as_ref(), 0, 4096)
        .await
        .unwrap();
    let other_ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = other_ran.clone();
    // Single-threaded runtime: the spawned task runs only when this one yields.
    tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
    for _ in 0..1000 {
        let got = local
            .read_block(&addr, key(9, 0), token(key(9, 0)).as_ref(), 0, 4096)
            .await
            .unwrap();
        assert_eq!(got, bytes.slice(..4096));
    }
    assert!(
        other_ran.load(std::sync::atomic::Ordering::SeqCst),
        "1000 cached reads never yielded"
    );
}

/// Another local user gets no block file: the socket is its owner's alone
/// (0600), and even with its mode opened up by hand the datanode checks the
/// peer's uid (SO_PEERCRED) and closes the connection without a reply. The
/// stranger is a real process running as `nobody`; the test waits for it
/// on its own thread while the datanode serves on the runtime's workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_process_gets_no_descriptor() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !rustix::process::getuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: this test must run there"
        );
        eprintln!("skipped: starting a process as another user needs root");
        return;
    }
    let dir = short_dir();
    let socket = dir.path().join("dn.sock");
    let node = start_datanode(dir.path(), Some(socket.clone())).await;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&socket), 0o600);
    let stranger = |path: &Path| {
        // Sends an OpenBlock request for block 1 and prints what comes back.
        let script = format!(
            "import socket,sys\n\
             s=socket.socket(socket.AF_UNIX)\n\
             try:\n s.connect({path:?})\n\
             except OSError as e:\n print('refused', e.errno); sys.exit()\n\
             try:\n s.sendall(bytes.fromhex({frame:?})); n=len(s.recv(4096))\n\
             except OSError: n=0\n\
             print('reply', n)\n",
            path = path.to_str().unwrap(),
            frame = hex::encode(open_request(key(1, 0)).encode()),
        );
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // The socket's mode and its folder's keep the stranger out.
    assert!(
        stranger(&socket).starts_with("refused"),
        "{}",
        stranger(&socket)
    );
    // With both opened up, the peer check still refuses it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(stranger(&socket), "reply 0");
    node.shutdown().await;
}
