//! The bitrot scrubber: in the background, pass after pass, it reads every
//! committed block file against its sidecar's checksums, paced so that a
//! pass spreads over the scrub period (a week by default) however much the
//! datanode holds. Packed blocks are read in their volumes' order, so a
//! volume is read front to back. A damaged file is quarantined at once (never served
//! again) and reported with the next heartbeat; meta then counts it as
//! missing and has it rebuilt from the group's other block files.

use crate::store::{BlockStore, Verified};
use block_client::Pacer;
use meta_api::{now_millis, DamagedBlockFile, ScrubProgress};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Damaged block files one heartbeat reports at most.
const MAX_REPORTED: usize = 10_000;

/// What the scrubber found, for the heartbeat to report.
#[derive(Default)]
pub(crate) struct ScrubState {
    progress: Mutex<ScrubProgress>,
    /// Damaged block files not yet reported to meta.
    damaged: Mutex<Vec<DamagedBlockFile>>,
}

impl ScrubState {
    /// A state whose first report names every block file `store` holds in
    /// quarantine: meta may not have heard of them (a crash before the
    /// report, or damage found at start), and a repeated report is harmless.
    pub(crate) fn reporting_quarantine(store: &BlockStore) -> Self {
        let state = Self::default();
        let damaged = store
            .quarantined_blocks()
            .into_iter()
            .map(|key| DamagedBlockFile {
                key,
                reason: "found in quarantine at start".into(),
            })
            .collect();
        state.unreported(damaged);
        state
    }

    /// The progress to report now.
    pub(crate) fn progress(&self) -> ScrubProgress {
        self.progress.lock().clone()
    }

    /// The damaged files not reported yet, [`MAX_REPORTED`] at most (a
    /// failed disk's may be many: the rest follow with later heartbeats); a
    /// failed heartbeat hands them back with [`ScrubState::unreported`].
    pub(crate) fn take_damaged(&self) -> Vec<DamagedBlockFile> {
        let mut damaged = self.damaged.lock();
        let taken = damaged.len().min(MAX_REPORTED);
        damaged.drain(..taken).collect()
    }

    /// Adds block files found damaged or lost outside the scrubber.
    pub(crate) fn found(&self, damaged: Vec<DamagedBlockFile>) {
        if !damaged.is_empty() {
            self.damaged.lock().extend(damaged);
        }
    }

    /// Puts back damaged files meta did not hear of.
    pub(crate) fn unreported(&self, damaged: Vec<DamagedBlockFile>) {
        let mut pending = self.damaged.lock();
        let newer = std::mem::replace(&mut *pending, damaged);
        pending.extend(newer);
    }
}

/// Scrubs `store` pass after pass, one pass per `period`, until `stop`.
pub(crate) async fn run(
    store: Arc<BlockStore>,
    period: Duration,
    state: Arc<ScrubState>,
    mut stop: watch::Receiver<bool>,
) {
    if period.is_zero() {
        return;
    }
    loop {
        let started = tokio::time::Instant::now();
        let keys = store.scrub_order();
        let total: u64 = keys
            .iter()
            .filter_map(|key| store.block(*key))
            .map(|meta| meta.length)
            .sum();
        {
            let mut progress = state.progress.lock();
            progress.checked_bytes = 0;
            progress.pass_bytes = total;
        }
        // The pass's bytes spread over the period, at least a byte a second.
        let rate = ((total as f64 / period.as_secs_f64()).ceil() as u64).max(1);
        let pacer = Pacer::new(rate);
        for key in keys {
            let verified = tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => return,
                verified = store.verify_block(key, &pacer) => verified,
            };
            let (verified, read) = match verified {
                Ok(verified) => verified,
                Err(e) => {
                    tracing::warn!(block = %key, error = %e, "could not scrub a block file");
                    continue;
                }
            };
            metrics::counter!(crate::telemetry::SCRUBBED_BYTES.name).increment(read);
            state.progress.lock().checked_bytes += read;
            if let Verified::Corrupt(reason) = verified {
                metrics::counter!(crate::telemetry::DAMAGED_BLOCKS.name).increment(1);
                tracing::error!(block = %key, %reason, "scrubber found a damaged block file; quarantined");
                match store.quarantine_block(key, &reason).await {
                    Ok(true) => {
                        state.progress.lock().damaged += 1;
                        state.damaged.lock().push(DamagedBlockFile { key, reason });
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::error!(block = %key, error = %e, "could not quarantine a damaged block file")
                    }
                }
            }
        }
        {
            let mut progress = state.progress.lock();
            progress.passes += 1;
            progress.last_pass_end = now_millis();
        }
        tracing::debug!(bytes = total, "scrub pass done");
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            () = tokio::time::sleep_until(started + period) => {}
        }
    }
}
