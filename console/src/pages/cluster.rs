//! The cluster page (root user and admin token): datanodes with their
//! location, state, capacity, use and blocks; how well the block groups
//! keep their redundancy and placement, the repair queue and the balancer;
//! charts of the last hour.

use crate::charts;
use crate::document::size;
use crate::error::ConsoleError;
use crate::layout;
use crate::session::Admin;
use crate::Console;
use axum::extract::State;
use maud::{html, Markup};
use meta_api::time::{now_millis, UnixMillis};
use meta_api::{DatanodeState, GetClusterStatus};
use std::sync::Arc;

fn ago(at: UnixMillis) -> String {
    if at <= 0 {
        return "never".into();
    }
    let seconds = (now_millis() - at).max(0) / 1000;
    match seconds {
        0..=119 => format!("{seconds} s ago"),
        120..=7199 => format!("{} min ago", seconds / 60),
        _ => format!("{} h ago", seconds / 3600),
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

/// GET /cluster
pub(crate) async fn show(
    State(console): State<Arc<Console>>,
    Admin(session): Admin,
) -> Result<Markup, ConsoleError> {
    let status = console.meta.call(GetClusterStatus).await?;
    let redundancy = &status.redundancy;
    let balance = &status.balance;
    let healthy_nodes = status
        .datanodes
        .iter()
        .filter(|d| d.state == DatanodeState::Healthy)
        .count();
    Ok(layout::page(
        "Cluster",
        &session,
        html! {
            h1 { "Cluster" }
            p {
                span.badge.good[healthy_nodes == status.datanodes.len()].bad[healthy_nodes < status.datanodes.len()] {
                    (healthy_nodes) " of " (status.datanodes.len()) " datanodes healthy"
                }
                " · " (status.buckets) " buckets · " (status.objects) " objects · "
                (status.pending_deletions) " block files waiting for deletion"
            }
            h2 { "Datanodes" }
            div.table-wrap { table #datanodes {
                thead { tr {
                    th scope="col" { "Datanode" } th scope="col" { "Address" } th scope="col" { "Location" } th scope="col" { "State" }
                    th scope="col" { "Service" } th.num scope="col" { "Capacity" } th.num scope="col" { "Used" }
                    th.num scope="col" { "Blocks" } th scope="col" { "Last heartbeat" } th scope="col" { "Scrub" }
                } }
                tbody {
                    @for node in &status.datanodes {
                        tr {
                            td { (node.id) }
                            td { (node.addr) }
                            td { (node.location) }
                            td { span.badge.good[node.state == DatanodeState::Healthy].bad[node.state != DatanodeState::Healthy] { (format!("{:?}", node.state)) } }
                            td { (format!("{:?}", node.admin)) }
                            td.num { (size(node.capacity)) }
                            td.num { (size(node.used)) " (" (percent(node.used, node.capacity)) ")" }
                            td.num { (node.blocks) }
                            td { (ago(node.last_heartbeat)) }
                            td { (node.scrub.passes) " passes, " (percent(node.scrub.checked_bytes, node.scrub.pass_bytes)) " of this one; "
                                (node.scrub.damaged) " damaged" }
                        }
                    }
                }
            } }
            h2 { "Disks" }
            div.table-wrap { table #disks {
                thead { tr {
                    th scope="col" { "Datanode" } th scope="col" { "Disk" } th scope="col" { "Health" }
                    th.num scope="col" { "Used" } th.num scope="col" { "Available" } th.num scope="col" { "Blocks" }
                } }
                tbody {
                    @for node in &status.datanodes {
                        @for disk in &node.disks {
                            tr {
                                td { (node.id) }
                                td { (disk.path) }
                                td {
                                    @match &disk.failed {
                                        Some(reason) => span.badge.bad title=(reason) { "failed: " (reason) },
                                        None => span.badge.good { "serving" },
                                    }
                                }
                                td.num { (size(disk.used)) }
                                td.num { (size(disk.available)) }
                                td.num { (disk.blocks) }
                            }
                        }
                    }
                }
            } }
            h2 { "Redundancy" }
            div.table-wrap { table #redundancy {
                thead { tr {
                    th scope="col" { "Healthy groups" } th scope="col" { "Degraded" } th scope="col" { "At risk" }
                    th scope="col" { "Lost" } th scope="col" { "Misplaced" } th scope="col" { "Repairs queued" } th scope="col" { "Running" }
                    th scope="col" { "Repaired" } th scope="col" { "Last scan" }
                } }
                tbody { tr {
                    td.num { (redundancy.healthy) } td.num { (redundancy.degraded) } td.num { (redundancy.at_risk) }
                    td.num { (redundancy.lost) } td.num { (redundancy.misplaced) } td.num { (redundancy.queued) } td.num { (redundancy.running) }
                    td.num { (size(redundancy.repaired_bytes)) } td { (ago(redundancy.last_scan)) }
                } }
            } }
            h2 { "Balancer" }
            p #balancer {
                (format!("{:?}", balance.state).to_lowercase())
                " · threshold " (balance.threshold_percent) " points · "
                (size(balance.bandwidth)) "/s · " (balance.queued) " moves queued · "
                (balance.moved) " done (" (size(balance.moved_bytes)) ") · " (balance.failed) " failed"
            }
            h2 { "The last hour" }
            (charts::charts(&console))
        },
    ))
}
