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
    /// Fixed capacity, or None to measure it (see [`measured_capacity`]).
    pub capacity: Option<u64>,
    /// Time between heartbeats.
    pub interval: Duration,
}

/// Bytes still free for unprivileged use in the filesystem holding `path`
/// (statvfs `f_bavail * f_frsize`).
pub fn available_space(path: &Path) -> std::io::Result<u64> {
    let stat = rustix::fs::statvfs(path)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Capacity to report for a store using `used` bytes in the filesystem holding
/// `path`: the space it can still fill plus what it uses, not the filesystem's
/// size, so that datanodes sharing one filesystem and a disk filled by others
/// are seen as they are. When the filesystem cannot be measured, `used`
/// alone (no free space: the node gets no new blocks until it can be), never
/// 0, which meta would also read as full but which hides what the node holds.
pub fn measured_capacity(path: &Path, used: u64) -> u64 {
    match available_space(path) {
        Ok(available) => available.saturating_add(used),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "statvfs of the data folder failed; reporting no free space");
            used
        }
    }
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
    let stats = store.stats();
    let capacity = match settings.capacity {
        Some(capacity) => capacity,
        None => {
            let dir = store.data_dir().to_path_buf();
            let used = stats.used;
            tokio::task::spawn_blocking(move || measured_capacity(&dir, used))
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "statvfs task failed; reporting no free space");
                    used
                })
        }
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_free_space_plus_use_and_never_zero_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let available = available_space(dir.path()).unwrap();
        let reported = measured_capacity(dir.path(), 5_000);
        // Other processes write meanwhile: allow some drift either way.
        let slack = 64 * 1024 * 1024;
        assert!(
            reported.abs_diff(available + 5_000) < slack,
            "{reported} vs {available}"
        );
        let stat = rustix::fs::statvfs(dir.path()).unwrap();
        let total = stat.f_blocks * stat.f_frsize;
        if total > available + 5_000 + slack {
            assert!(
                reported < total,
                "the filesystem's size is not our capacity"
            );
        }
        let missing = dir.path().join("gone");
        assert_eq!(measured_capacity(&missing, 5_000), 5_000);
        assert_eq!(measured_capacity(&missing, 0), 0);
    }
}
