//! `tessera admin balance start|stop|status`: the balancer, which moves
//! block files until every datanode's use is within a threshold of the mean.

use super::human;
use anyhow::Result;
use clap::Subcommand;
use meta_api::{BalanceState, BalanceStatus, GetClusterStatus, MetaClient, SetBalancer};
use serde_json::{json, Value};

/// `tessera admin balance ...`
#[derive(Subcommand, Debug)]
pub enum BalanceCommand {
    /// Runs the balancer (it runs unless stopped), with a new threshold or
    /// bandwidth when given; kept until changed.
    Start {
        /// Largest distance of a datanode's use from the mean, in
        /// percentage points [default: 10, or as last set].
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
        threshold: Option<u32>,
        /// Bytes a second of block files it moves, in the whole cluster
        /// (as `64MiB`; 0: no limit) [default: 64MiB, or as last set].
        #[arg(long, value_parser = crate::roles::parse_size)]
        bandwidth: Option<u64>,
    },
    /// Stops it: no new moves are handed out (those running finish).
    Stop,
    /// Its settings, what it did, and each datanode's use against the mean.
    Status,
}

/// Runs `command` through `meta`; its answer as JSON.
pub async fn run(meta: &MetaClient, command: &BalanceCommand) -> Result<Value> {
    let set = match command {
        BalanceCommand::Start {
            threshold,
            bandwidth,
        } => SetBalancer {
            enabled: true,
            threshold_percent: *threshold,
            bandwidth: *bandwidth,
        },
        BalanceCommand::Stop => SetBalancer {
            enabled: false,
            threshold_percent: None,
            bandwidth: None,
        },
        BalanceCommand::Status => {
            return Ok(status_json(&meta.call(GetClusterStatus).await?.balance));
        }
    };
    meta.call(set).await?;
    Ok(json!({"ok": true}))
}

fn state_name(state: BalanceState) -> &'static str {
    match state {
        BalanceState::Off => "off",
        BalanceState::Waiting => "waiting",
        BalanceState::Balanced => "balanced",
        BalanceState::Moving => "moving",
        BalanceState::Stuck => "stuck",
    }
}

/// Use as a percentage of capacity.
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The balancer's part of `admin status --json`, and `admin balance status`.
pub fn status_json(balance: &BalanceStatus) -> Value {
    let listed: u64 = balance.datanodes.iter().map(|d| d.listed_bytes).sum();
    let capacity: u64 = balance.datanodes.iter().map(|d| d.capacity).sum();
    let mean = percent(listed, capacity);
    json!({
        "enabled": balance.enabled,
        "state": state_name(balance.state),
        "threshold_percent": balance.threshold_percent,
        "bandwidth": balance.bandwidth,
        "queued": balance.queued,
        "moved": balance.moved,
        "moved_bytes": balance.moved_bytes,
        "failed": balance.failed,
        "last_round": balance.last_round,
        "mean_use_percent": mean,
        "datanodes": balance.datanodes.iter().map(|d| {
            let used = percent(d.listed_bytes, d.capacity);
            json!({
                "id": d.id.0,
                "listed_bytes": d.listed_bytes,
                "capacity": d.capacity,
                "use_percent": used,
                "from_mean_points": used - mean,
            })
        }).collect::<Vec<_>>(),
    })
}

/// Prints `admin balance status` for people.
pub fn print_status(value: &Value) {
    println!(
        "balancer {}  threshold {} points  bandwidth {}/s  queued {}  moved {} ({})  failed {}",
        value["state"].as_str().unwrap_or(""),
        value["threshold_percent"],
        human::bytes(&value["bandwidth"]),
        value["queued"],
        value["moved"],
        human::bytes(&value["moved_bytes"]),
        value["failed"]
    );
    println!(
        "{:<38} {:>16} {:>16} {:>8} {:>10}",
        "DATANODE", "LISTED", "CAPACITY", "USE", "FROM MEAN"
    );
    for d in value["datanodes"].as_array().into_iter().flatten() {
        println!(
            "{:<38} {:>16} {:>16} {:>7.2}% {:>+10.2}",
            d["id"].as_str().unwrap_or(""),
            human::bytes(&d["listed_bytes"]),
            human::bytes(&d["capacity"]),
            d["use_percent"].as_f64().unwrap_or(0.0),
            d["from_mean_points"].as_f64().unwrap_or(0.0)
        );
    }
    println!(
        "mean use {:.2}%",
        value["mean_use_percent"].as_f64().unwrap_or(0.0)
    );
}
