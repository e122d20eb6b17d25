//! The balancer's requests and rounds: `tessera admin balance start|stop`
//! (settings kept in the store), the round that follows each redundancy
//! scan and queues the moves the plan picks (see `crate::balance`), and
//! what status shows of it.

use crate::balance::{self, BalancerSettings, MovableCell, Share, MOVABLE_PER_DATANODE};
use crate::placement::tolerance;
use crate::redundancy::{PlacementView, ScanResult};
use crate::registry::RegisteredNode;
use crate::state::MetaState;
use crate::store::db::{encode, get_json};
use crate::store::repairs::{CellMove, QueuedFor, RepairEntry, RepairQueue};
use crate::store::tables::{BALANCER_SETTINGS, SETTINGS};
use meta_api::{
    AdminState, BalanceState, BalanceStatus, DatanodeState, DatanodeUse, Handle, MetaError,
    SetBalancer, UnixMillis,
};

impl Handle<SetBalancer> for MetaState {
    /// Turns the balancer on or off and keeps the settings given; a scan
    /// follows at the next check, so a started balancer plans at once.
    fn handle(&self, request: SetBalancer, _now: UnixMillis) -> Result<(), MetaError> {
        let SetBalancer {
            enabled,
            threshold_percent,
            bandwidth,
        } = request;
        if threshold_percent.is_some_and(|t| !(1..=100).contains(&t)) {
            return Err(MetaError::InvalidRequest(
                "the balancer's threshold is 1 to 100 percentage points".into(),
            ));
        }
        let (settings, dropped) = self.store.write(|txn| {
            let mut table = txn.open_table(SETTINGS)?;
            let mut settings: BalancerSettings =
                get_json(&table, BALANCER_SETTINGS)?.unwrap_or_default();
            settings.enabled = enabled;
            if let Some(threshold) = threshold_percent {
                settings.threshold_percent = threshold;
            }
            if let Some(bandwidth) = bandwidth {
                settings.bandwidth = bandwidth;
            }
            table.insert(BALANCER_SETTINGS, encode(&settings)?.as_slice())?;
            // Stopped, its queued moves go (those running finish); started
            // again, it plans anew.
            let dropped = match enabled {
                true => 0,
                false => RepairQueue::open(txn)?.drop_balance()?,
            };
            Ok((settings, dropped))
        })?;
        tracing::info!(?settings, dropped, "balancer settings changed");
        self.balance.set_state(if enabled {
            BalanceState::Waiting
        } else {
            BalanceState::Off
        });
        self.repairs.request_scan();
        Ok(())
    }
}

impl MetaState {
    /// The balancer's settings: as an operator last set them, else the defaults.
    pub(crate) fn balancer_settings(&self) -> Result<BalancerSettings, MetaError> {
        self.store.read(|txn| {
            Ok(get_json(&txn.open_table(SETTINGS)?, BALANCER_SETTINGS)?.unwrap_or_default())
        })
    }

    /// Block files a redundancy scan keeps per datanode for the balancer.
    pub(crate) fn movable_per_datanode(settings: &BalancerSettings) -> usize {
        if settings.enabled {
            MOVABLE_PER_DATANODE
        } else {
            0
        }
    }

    /// The balancer's round after a scan: each datanode's share as the
    /// scan counted it, then, unless moves of an earlier round are still
    /// queued, the moves of a new round, queued behind every repair.
    pub(crate) fn balance_round(
        &self,
        nodes: &[RegisteredNode],
        view: &PlacementView,
        scan: &ScanResult,
        settings: &BalancerSettings,
        now: UnixMillis,
    ) -> Result<(), MetaError> {
        let shares: Vec<Share> = nodes
            .iter()
            .map(|n| &n.record)
            .filter(|r| r.state == DatanodeState::Healthy && r.admin == AdminState::InService)
            .map(|r| Share {
                id: r.id.clone(),
                capacity: r.capacity,
                listed: scan.listed.get(&r.id).copied().unwrap_or(0),
            })
            .collect();
        let uses = shares
            .iter()
            .map(|s| DatanodeUse {
                id: s.id.clone(),
                listed_bytes: s.listed,
                capacity: s.capacity,
            })
            .collect();
        if !settings.enabled {
            self.repairs.balance_planned(false, now);
            self.balance.round(uses, Some(BalanceState::Off), now);
            return Ok(());
        }
        let still_queued = scan
            .queued
            .values()
            .any(|e| e.reason == QueuedFor::Balance && scan.moves_in_place.contains(&e.block));
        if still_queued {
            // A new leader learns here that moves of an earlier round wait.
            self.repairs.balance_planned(true, now);
            self.balance.round(uses, None, now);
            return Ok(());
        }
        let fits = |cell: &MovableCell, from: &_, to: &_| {
            view.is_usable(to) && view.move_fits(&cell.holders, &cell.config, from, to)
        };
        let plan = balance::plan(&shares, &scan.movable, settings.threshold_percent, fits);
        self.repairs.balance_planned(false, now);
        if !plan.moves.is_empty() {
            let queued = self.store.write(|txn| {
                let mut queue = RepairQueue::open(txn)?;
                let mut queued = 0u64;
                for planned in &plan.moves {
                    if queue.get(planned.block)?.is_some() {
                        continue;
                    }
                    let spare = i32::try_from(tolerance(&planned.config)).unwrap_or(0);
                    queue.put(RepairEntry::moving(
                        planned.block,
                        planned.owner.clone(),
                        QueuedFor::Balance,
                        spare,
                        CellMove {
                            index: planned.index,
                            from: planned.from.clone(),
                            to: Some(planned.to.clone()),
                        },
                        now,
                    ))?;
                    queued += 1;
                }
                Ok(queued)
            })?;
            let bytes: u64 = plan.moves.iter().map(|m| m.length).sum();
            tracing::info!(moves = queued, bytes, "balancer round planned");
            metrics::counter!(crate::telemetry::BALANCE_MOVES_PLANNED.name).increment(queued);
            self.repairs.balance_planned(queued > 0, now);
        }
        self.balance.round(uses, Some(plan.state), now);
        Ok(())
    }

    /// What status shows of the balancer, with `queued` of its moves waiting.
    pub(crate) fn balance_status(&self, queued: u64) -> Result<BalanceStatus, MetaError> {
        let settings = self.balancer_settings()?;
        let progress = self.balance.progress();
        Ok(BalanceStatus {
            enabled: settings.enabled,
            threshold_percent: settings.threshold_percent,
            bandwidth: settings.bandwidth,
            state: if settings.enabled {
                progress.state
            } else {
                BalanceState::Off
            },
            queued,
            moved: progress.moved,
            moved_bytes: progress.moved_bytes,
            failed: progress.failed,
            last_round: progress.last_round,
            datanodes: progress.shares,
        })
    }
}
