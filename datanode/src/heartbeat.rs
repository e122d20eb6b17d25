//! The heartbeat loop: at start and then every interval, report identity,
//! address, capacity and usage to meta, take the block token keys it
//! answers with, delete the block files it names, and acknowledge them in
//! the next heartbeat. Meta being unreachable
//! is logged and retried, never fatal.
//!
//! Once registered, and then every block report interval, the datanode also
//! sends a block report (every committed block file and its age, in pieces
//! of [`REPORT_PIECE`] blocks) from a task of its own, so a long report never
//! delays a heartbeat; meta queues the orphans among them for deletion.
//! Uploads (temporary files) untouched for the upload grace period belong to
//! a writer that died and are removed here. Repairs meta hands out with an
//! answer go to the [`RepairWorker`].

use crate::access::TokenGate;
use crate::repair::RepairWorker;
use crate::scrub::ScrubState;
use crate::store::BlockStore;
use crate::telemetry;
use meta_api::{
    BlockReport, DamagedBlockFile, DatanodeReport, DiskReport, Heartbeat, HeartbeatReply,
    MetaClient, MetaError, ReportedBlock,
};
use proto::{BlockKey, DatanodeId};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Longest wait for one heartbeat answer.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// Blocks per block report piece (one meta request each).
pub const REPORT_PIECE: usize = 20_000;
/// Longest wait for one block report piece's answer (the first one may make
/// meta scan its tables).
const REPORT_PIECE_TIMEOUT: Duration = Duration::from_secs(120);
/// Wait before a failed block report is tried again (unless the report
/// interval is shorter).
const REPORT_RETRY: Duration = Duration::from_secs(30);

/// Whoever receives heartbeats: meta through [`MetaClient`], or a stand-in in tests.
pub trait HeartbeatTarget: Send + Sync + 'static {
    /// Registers or refreshes the datanode; answers with block files to
    /// delete and the current block token keys.
    fn heartbeat(
        &self,
        report: DatanodeReport,
    ) -> impl Future<Output = Result<HeartbeatReply, MetaError>> + Send;

    /// Takes one piece of a block report; answers how many of its blocks
    /// were queued for deletion. Stand-ins that ignore reports keep this.
    fn block_report(
        &self,
        datanode: DatanodeId,
        blocks: Vec<ReportedBlock>,
    ) -> impl Future<Output = Result<u64, MetaError>> + Send {
        let _ = (datanode, blocks);
        async { Ok(0) }
    }
}

impl HeartbeatTarget for MetaClient {
    fn heartbeat(
        &self,
        report: DatanodeReport,
    ) -> impl Future<Output = Result<HeartbeatReply, MetaError>> + Send {
        self.call(Heartbeat { report })
    }

    fn block_report(
        &self,
        datanode: DatanodeId,
        blocks: Vec<ReportedBlock>,
    ) -> impl Future<Output = Result<u64, MetaError>> + Send {
        self.call(BlockReport { datanode, blocks })
    }
}

/// What the loop reports besides the store's own numbers.
pub(crate) struct HeartbeatSettings {
    /// Address clients use to reach this datanode.
    pub addr: String,
    /// Fixed capacity, or None to measure it: the room left on the disks in
    /// service plus what the store holds (not the filesystems' sizes, so
    /// that datanodes sharing a filesystem, and disks filled by others, are
    /// seen as they are).
    pub capacity: Option<u64>,
    /// Where the datanode stands, if it was told.
    pub location: Option<meta_api::Location>,
    /// Time between heartbeats.
    pub interval: Duration,
    /// Time between block reports (the first follows registration).
    pub block_report_interval: Duration,
    /// Uploads untouched this long are discarded, their files removed.
    pub upload_grace: Duration,
}

/// Every committed block file of `store` with its age (from its commit
/// time). Blocks deleted meanwhile are left out. Blocking: one stat per
/// block with a file of its own.
pub fn reported_blocks(store: &BlockStore) -> Vec<ReportedBlock> {
    let now = SystemTime::now();
    store
        .committed_blocks()
        .into_iter()
        .filter_map(|key| {
            let committed = store.committed_at(key)?;
            // A clock that went backwards makes a block young, never old.
            let age = now.duration_since(committed).unwrap_or_default();
            Some(ReportedBlock {
                key,
                age_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
            })
        })
        .collect()
}

/// Sends one whole block report in pieces; returns how many blocks meta
/// queued for deletion.
async fn send_block_report<H: HeartbeatTarget>(
    target: &H,
    store: Arc<BlockStore>,
) -> Result<u64, MetaError> {
    let id = store.id().clone();
    let blocks = tokio::task::spawn_blocking(move || reported_blocks(&store))
        .await
        .map_err(|e| MetaError::Transport(format!("block report task: {e}")))?;
    let mut queued = 0;
    for piece in blocks.chunks(REPORT_PIECE) {
        let answer = tokio::time::timeout(
            REPORT_PIECE_TIMEOUT,
            target.block_report(id.clone(), piece.to_vec()),
        )
        .await
        .map_err(|_| MetaError::Transport("block report timed out".into()))??;
        queued += answer;
    }
    tracing::debug!(blocks = blocks.len(), queued, "block report sent");
    Ok(queued)
}

/// Runs until `stop` turns true.
pub(crate) async fn run<H: HeartbeatTarget>(
    target: H,
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    settings: HeartbeatSettings,
    repairs: Option<Arc<RepairWorker>>,
    scrub: Arc<ScrubState>,
    mut stop: watch::Receiver<bool>,
) {
    let target = Arc::new(target);
    // Deleted since the last heartbeat meta answered.
    let mut deleted: Vec<BlockKey> = Vec::new();
    let mut report_task: Option<JoinHandle<Result<u64, MetaError>>> = None;
    let mut next_report = Instant::now();
    loop {
        let checked = store.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || checked.check_disks()).await {
            tracing::warn!(error = %e, "disk check task failed");
        }
        let lost = store.take_lost();
        scrub.found(
            lost.into_iter()
                .map(|(key, reason)| DamagedBlockFile { key, reason })
                .collect(),
        );
        let mut report = report(&store, &settings, deleted.clone()).await;
        report.damaged = scrub.take_damaged();
        report.scrub = scrub.progress();
        let damaged = report.damaged.clone();
        let answer = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            answer = tokio::time::timeout(HEARTBEAT_TIMEOUT, target.heartbeat(report)) => answer,
        };
        let registered = matches!(answer, Ok(Ok(_)));
        match answer {
            Ok(Ok(answer)) => {
                gate.set_keys(answer.token_keys);
                if let Some(repairs) = &repairs {
                    repairs.start(answer.repairs);
                }
                deleted.clear();
                for key in answer.deletions {
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
        if !registered {
            scrub.unreported(damaged);
        }
        if let Some(task) = report_task.take_if(|t| t.is_finished()) {
            match futures::FutureExt::now_or_never(task) {
                Some(Ok(Err(e))) => {
                    tracing::warn!(error = %e, "block report failed; will retry");
                    next_report = Instant::now() + REPORT_RETRY.min(settings.block_report_interval);
                }
                Some(Err(e)) => tracing::warn!(error = %e, "block report task failed"),
                _ => {}
            }
        }
        if registered && report_task.is_none() && Instant::now() >= next_report {
            next_report = Instant::now() + settings.block_report_interval;
            let (target, store) = (target.clone(), store.clone());
            report_task = Some(tokio::spawn(async move {
                send_block_report(&*target, store).await
            }));
        }
        store.discard_idle_uploads(settings.upload_grace).await;
        store.remove_stale_tmp_files(settings.upload_grace).await;
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
    if let Some(task) = report_task {
        task.abort();
    }
}

async fn report(
    store: &Arc<BlockStore>,
    settings: &HeartbeatSettings,
    deleted: Vec<BlockKey>,
) -> DatanodeReport {
    let stats = store.stats();
    let measured = store.clone();
    let disks = tokio::task::spawn_blocking(move || measured.disks())
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "statvfs task failed; reporting no free space");
            Vec::new()
        });
    for disk in &disks {
        let path = disk.path.display().to_string();
        let failed = disk.failed.is_some();
        telemetry::disk_gauges(
            store.id(),
            &path,
            disk.blocks,
            disk.used,
            disk.available,
            failed,
        );
    }
    let capacity = match settings.capacity {
        Some(capacity) => capacity,
        // Garbage holds disk space as block files do, until compacted; a
        // failed disk offers nothing.
        None => {
            (stats.used + stats.garbage).saturating_add(disks.iter().map(|d| d.available).sum())
        }
    };
    let disks = disks
        .into_iter()
        .map(|disk| DiskReport {
            path: disk.path.display().to_string(),
            blocks: disk.blocks,
            used: disk.used,
            available: disk.available,
            failed: disk.failed,
        })
        .collect();
    DatanodeReport {
        id: store.id().clone(),
        addr: settings.addr.clone(),
        local_socket: None,
        capacity,
        used: stats.used,
        garbage: stats.garbage,
        blocks: stats.blocks,
        deleted,
        damaged: Vec::new(),
        scrub: Default::default(),
        location: settings.location.clone(),
        disks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reports_list_committed_blocks_and_old_leftovers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlockStore::open(dir.path(), 4096, false).await.unwrap();
        let key = BlockKey::new(proto::BlockId(7), 1);
        store.commit(key, 0).await.unwrap();
        let reported = reported_blocks(&store);
        assert_eq!(reported.len(), 1);
        assert_eq!(reported[0].key, key);
        assert!(reported[0].age_ms < 3_600_000, "{:?}", reported[0]);

        let tmp = dir.path().join("tmp");
        let old = tmp.join("0000000000000009_0.3.data");
        let fresh = tmp.join("000000000000000a_0.4.data");
        let foreign = tmp.join("notes.txt");
        for path in [&old, &fresh, &foreign] {
            std::fs::write(path, b"x").unwrap();
        }
        let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
        for path in [&old, &foreign] {
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(two_hours_ago)
                .unwrap();
        }
        let grace = Duration::from_secs(3600);
        assert_eq!(store.remove_stale_tmp_files(grace).await, 1);
        assert!(!old.exists());
        assert!(fresh.exists() && foreign.exists());
    }
}
