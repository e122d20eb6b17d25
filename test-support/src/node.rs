//! A block server on 127.0.0.1:0 over a store in a temporary folder, with no
//! meta: for tests of the datanode's own protocol. It checks block tokens
//! with [`token_key`], with which the tests sign their own ([`token`]).

use block_client::{ClientConfig, DatanodePool};
use bytes::Bytes;
use datanode::access::TokenGate;
use datanode::{server, BlockStore};
use meta_api::HeartbeatReply;
use proto::token::{index_mask, BlockToken, Modes, TokenKey};
use proto::{BlockId, BlockKey};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Chunk size the tests write with.
pub const BPC: u32 = 16 * 1024;

/// A running block server.
pub struct TestNode {
    /// Where it listens.
    pub addr: String,
    /// The store it serves.
    pub store: Arc<BlockStore>,
    /// The token keys it checks with ([`token_key`] at first).
    pub gate: Arc<TokenGate>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl TestNode {
    /// Opens the store in `dir` and serves it on a fresh port.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with_limits(dir, server::ServerLimits::default()).await
    }

    /// [`start`](Self::start) with explicit server limits.
    pub async fn start_with_limits(dir: &Path, limits: server::ServerLimits) -> Self {
        let store = BlockStore::open(dir, BPC, false).await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let gate = TokenGate::with_keys(vec![token_key()]);
        let task = tokio::spawn(server::serve_with_limits(
            listener,
            store.clone(),
            gate.clone(),
            shutdown,
            limits,
        ));
        Self {
            addr,
            store,
            gate,
            stop,
            task,
        }
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// A pool with short deadlines, writing `BPC`-byte chunks.
pub fn pool() -> DatanodePool {
    DatanodePool::new(ClientConfig {
        bytes_per_checksum: BPC,
        connect_timeout: Duration::from_secs(5),
        io_timeout: Duration::from_secs(20),
        ..ClientConfig::default()
    })
}

/// The key every [`TestNode`] checks tokens with.
pub fn token_key() -> TokenKey {
    TokenKey {
        id: 1,
        secret: [0x5a; 32],
        retire_at: u64::MAX,
    }
}

/// A token allowing every operation on block file `key`, as meta would
/// sign one with [`token_key`].
pub fn token(key: BlockKey) -> Option<BlockToken> {
    let modes = Modes::READ.with(Modes::WRITE).with(Modes::DELETE);
    let indexes = index_mask([key.index]);
    Some(BlockToken::sign(
        &token_key(),
        key.block,
        indexes,
        modes,
        u64::MAX,
    ))
}

/// What a stand-in meta answers a datanode's heartbeat with: `deletions`
/// and the key of [`token`].
pub fn heartbeat_reply(deletions: Vec<BlockKey>) -> HeartbeatReply {
    HeartbeatReply {
        deletions,
        token_keys: vec![token_key()],
        repairs: Vec::new(),
    }
}

/// Block file `index` of block `block`.
pub fn key(block: u64, index: u8) -> BlockKey {
    BlockKey::new(BlockId(block), index)
}

/// `len` bytes that differ between seeds and positions.
pub fn data(len: usize, seed: u64) -> Bytes {
    crate::data::random_bytes(len, seed).into()
}
