//! Repairs meta hands this datanode with heartbeat answers: each runs as a
//! task of its own (`block_client::repair` reads the group's readable block
//! files, makes the missing ones and commits them on their targets), paced
//! by the datanode's repair bandwidth, and its outcome goes back to meta,
//! which then points the group at the new block files. A command for a
//! group already being repaired here is ignored.

use block_client::repair::run_repair;
use block_client::{Pacer, StoreClient};
use meta_api::{FinishRepair, RepairCommand};
use parking_lot::Mutex;
use proto::{BlockId, DatanodeId};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Longest a finished repair keeps trying to tell meta (a meta restarting).
const REPORT_FOR: Duration = Duration::from_secs(600);
/// Wait between two attempts to tell meta.
const REPORT_RETRY: Duration = Duration::from_secs(2);

/// Runs the repairs meta hands this datanode.
pub(crate) struct RepairWorker {
    id: DatanodeId,
    client: StoreClient,
    pacer: Pacer,
    running: Mutex<HashSet<BlockId>>,
}

impl RepairWorker {
    /// A worker for datanode `id` reading and writing through `client`,
    /// at most `bandwidth` bytes a second over all its repairs (0: no limit).
    pub(crate) fn new(id: DatanodeId, client: StoreClient, bandwidth: u64) -> Arc<Self> {
        Arc::new(Self {
            id,
            client,
            pacer: Pacer::new(bandwidth),
            running: Mutex::default(),
        })
    }

    /// Starts every command not already running here.
    pub(crate) fn start(self: &Arc<Self>, commands: Vec<RepairCommand>) {
        for command in commands {
            let block = command.group.block;
            if !self.running.lock().insert(block) {
                continue;
            }
            let worker = self.clone();
            tokio::spawn(async move {
                worker.run(command).await;
                worker.running.lock().remove(&block);
            });
        }
    }

    async fn run(&self, command: RepairCommand) {
        let block = command.group.block;
        tracing::info!(%block, targets = command.targets.len(), "repair started");
        let outcome = run_repair(&self.client, &command, &self.pacer).await;
        let result = if outcome.error.is_some() {
            "failed"
        } else {
            "done"
        };
        metrics::counter!(crate::telemetry::REPAIRS.name, "result" => result).increment(1);
        metrics::counter!(crate::telemetry::REPAIR_READ_BYTES.name).increment(outcome.bytes);
        match &outcome.error {
            Some(e) => tracing::warn!(%block, error = %e, "repair failed"),
            None => tracing::info!(%block, bytes = outcome.bytes, "repair done"),
        }
        let finish = FinishRepair {
            datanode: self.id.clone(),
            block,
            made: outcome.made,
            bytes: outcome.bytes,
            error: outcome.error.map(|e| e.to_string()),
        };
        let deadline = tokio::time::Instant::now() + REPORT_FOR;
        loop {
            match self.client.meta().call(finish.clone()).await {
                Ok(()) => return,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(%block, error = %e, "could not report a repair to meta; will retry");
                    tokio::time::sleep(REPORT_RETRY).await;
                }
                Err(e) => {
                    tracing::error!(%block, error = %e, "gave up reporting a repair; meta hands it out again");
                    return;
                }
            }
        }
    }
}
