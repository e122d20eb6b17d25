//! The compactor: in the background, it rewrites each sealed volume whose
//! deleted records pass the configured share of its bytes (see
//! `store::compact`), paced by its bandwidth so that foreground reads and
//! writes keep the disk. Block files found damaged on the way are reported
//! with the scrubber's.

use crate::scrub::ScrubState;
use crate::store::BlockStore;
use block_client::Pacer;
use meta_api::DamagedBlockFile;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Time between looks for a volume worth compacting, when none was.
const IDLE_LOOK: Duration = Duration::from_secs(5);

/// How the compactor runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompactSettings {
    /// Share of a volume's bytes that must be deleted records before it is
    /// rewritten; above 1 turns compaction off.
    pub garbage_ratio: f64,
    /// Bytes a second it copies (0: no limit).
    pub bandwidth: u64,
}

/// Compacts `store`'s volumes until `stop`.
pub(crate) async fn run(
    store: Arc<BlockStore>,
    settings: CompactSettings,
    scrub: Arc<ScrubState>,
    mut stop: watch::Receiver<bool>,
) {
    if settings.garbage_ratio > 1.0 {
        return;
    }
    let pacer = Pacer::new(settings.bandwidth);
    loop {
        let Some((disk, candidate)) = store.compaction_candidate(settings.garbage_ratio) else {
            tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => return,
                () = tokio::time::sleep(IDLE_LOOK) => continue,
            }
        };
        let compacted = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            compacted = store.compact_volume(disk, candidate.volume, &pacer) => compacted,
        };
        match compacted {
            Ok(done) => {
                crate::telemetry::compacted(done.bytes, done.freed);
                tracing::info!(
                    disk,
                    volume = done.volume,
                    records = done.records,
                    copied = done.bytes,
                    freed = done.freed,
                    "compacted a volume"
                );
                let damaged: Vec<_> = done
                    .damaged
                    .into_iter()
                    .map(|(key, reason)| DamagedBlockFile { key, reason })
                    .collect();
                if !damaged.is_empty() {
                    scrub.unreported(damaged);
                }
            }
            Err(e) => {
                tracing::warn!(disk, volume = candidate.volume, error = %e, "compaction failed; trying again later");
                tokio::select! {
                    _ = stop.wait_for(|stopped| *stopped) => return,
                    () = tokio::time::sleep(IDLE_LOOK) => {}
                }
            }
        }
    }
}
