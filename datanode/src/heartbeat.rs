//! The heartbeat loop: at start and then every interval, report identity,
//! address, capacity and usage to meta, delete the block files meta answers
//! with, and acknowledge them in the next heartbeat. Meta being unreachable
//! is logged and retried, never fatal.

use crate::store::BlockStore;
use blockstore::meta::{DatanodeReport, MetaClient, MetaError};
use blockstore::BlockKey;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Longest wait for one heartbeat answer.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// Uploads untouched this long belong to a writer that died; they are discarded.
const ABANDONED_UPLOAD: Duration = Duration::from_secs(3600);

/// Whoever receives heartbeats: meta through [`MetaClient`], or a stand-in in tests.
pub trait HeartbeatTarget: Send + Sync + 'static {
    /// Registers or refreshes the datanode; answers with block files to delete.
    fn heartbeat(
        &self,
        report: DatanodeReport,
    ) -> impl Future<Output = Result<Vec<BlockKey>, MetaError>> + Send;
}

impl HeartbeatTarget for MetaClient {
    fn heartbeat(
        &self,
        report: DatanodeReport,
    ) -> impl Future<Output = Result<Vec<BlockKey>, MetaError>> + Send {
        MetaClient::heartbeat(self, report)
    }
}

/// What the loop reports besides the store's own numbers.
pub(crate) struct HeartbeatSettings {
    /// Address clients use to reach this datanode.
    pub addr: String,
    /// Fixed capacity, or None for the data folder's filesystem size.
    pub capacity: Option<u64>,
    pub interval: Duration,
}

/// Total size of the filesystem holding `path` (statvfs).
pub fn filesystem_capacity(path: &Path) -> std::io::Result<u64> {
    let stat = rustix::fs::statvfs(path)?;
    Ok(stat.f_blocks.saturating_mul(stat.f_frsize))
}

/// Runs until `stop` turns true.
pub(crate) async fn run<H: HeartbeatTarget>(
    target: H,
    store: Arc<BlockStore>,
    settings: HeartbeatSettings,
    mut stop: watch::Receiver<bool>,
) {
    // Deleted since the last heartbeat meta answered.
    let mut deleted: Vec<BlockKey> = Vec::new();
    loop {
        let report = report(&store, &settings, deleted.clone()).await;
        let answer = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            answer = tokio::time::timeout(HEARTBEAT_TIMEOUT, target.heartbeat(report)) => answer,
        };
        match answer {
            Ok(Ok(to_delete)) => {
                deleted.clear();
                for key in to_delete {
                    match store.delete(key).await {
                        Ok(_) => deleted.push(key),
                        Err(e) => {
                            tracing::warn!(block = %key, error = %e, "could not delete a block meta released")
                        }
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "heartbeat to meta failed; will retry"),
            Err(_) => tracing::warn!("heartbeat to meta timed out; will retry"),
        }
        store.discard_idle_uploads(ABANDONED_UPLOAD).await;
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}

async fn report(
    store: &BlockStore,
    settings: &HeartbeatSettings,
    deleted: Vec<BlockKey>,
) -> DatanodeReport {
    let capacity = match settings.capacity {
        Some(capacity) => capacity,
        None => {
            let dir = store.data_dir().to_path_buf();
            let size = tokio::task::spawn_blocking(move || filesystem_capacity(&dir)).await;
            match size {
                Ok(Ok(size)) => size,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "statvfs of the data folder failed; reporting capacity 0");
                    0
                }
                Err(e) => {
                    tracing::warn!(error = %e, "statvfs task failed; reporting capacity 0");
                    0
                }
            }
        }
    };
    let stats = store.stats();
    DatanodeReport {
        id: store.id().clone(),
        addr: settings.addr.clone(),
        local_socket: None,
        capacity,
        used: stats.used,
        blocks: stats.blocks,
        deleted,
    }
}
