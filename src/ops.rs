//! The operations endpoint every role serves on its own port: `/health` for
//! orchestrators and `/metrics` in Prometheus text format.

use crate::shutdown::Shutdown;
use anyhow::{Context, Result};
use axum::{routing::get, Router};
use http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// 1, labelled with the version of the binary (`version`).
const BUILD_INFO: proto::telemetry::Metric = proto::telemetry::Metric::gauge(
    "tessera_build_info",
    "1, labelled with the version of tessera this process runs",
);

/// Every crate's metrics: each process describes them all (a family shows
/// on /metrics only once recorded).
const METRIC_TABLES: &[&[proto::telemetry::Metric]] = &[
    &[BUILD_INFO],
    gateway::telemetry::METRICS,
    meta::telemetry::METRICS,
    block_client::telemetry::METRICS,
    datanode::telemetry::METRICS,
];

/// Installs the process-wide Prometheus recorder behind the `metrics`
/// macros, with every metric's help text.
pub fn install_recorder() -> Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets(&[
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ])
        .context("metrics buckets")?
        .install_recorder()
        .context("installing the metrics recorder")?;
    proto::telemetry::describe(METRIC_TABLES);
    metrics::gauge!(BUILD_INFO.name, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// Whether the role can do its work: `Err(why)` makes /health answer 503.
pub type HealthCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A check for roles that are healthy whenever they answer.
pub fn always_healthy() -> HealthCheck {
    Arc::new(|| Ok(()))
}

/// Meta's check: its store takes writes (a full disk makes it refuse them).
pub fn meta_health(service: Arc<::meta::MetaService>) -> HealthCheck {
    Arc::new(move || match service.store_failure() {
        None => Ok(()),
        Some(why) => Err(format!("metadata store refuses writes: {why}")),
    })
}

/// Binds `listen` and serves /health and /metrics until shutdown.
pub async fn serve(
    listen: &str,
    metrics: PrometheusHandle,
    health: HealthCheck,
    shutdown: &Shutdown,
) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the ops endpoint on {listen}"))?;
    let addr = listener.local_addr()?;
    let process = metrics_process::Collector::default();
    process.describe();
    let app = Router::new()
        .route(
            "/health",
            get(move || {
                let answer = match health() {
                    Ok(()) => (StatusCode::OK, "ok\n".to_string()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
                };
                std::future::ready(answer)
            }),
        )
        .route(
            "/metrics",
            get(move || {
                // The process's CPU, memory, threads and files
                // (`process_*`), read from /proc as each scrape asks.
                process.collect();
                std::future::ready(metrics.render())
            }),
        );
    let stop = shutdown.wait();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!("ops endpoint: {e}");
        }
    });
    Ok(addr)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_metric_has_one_name_a_kind_its_name_says_and_help() {
        let all: Vec<_> = super::METRIC_TABLES.concat();
        assert!(all.len() > 80, "{} metrics", all.len());
        assert_eq!(proto::telemetry::problems(&all), Vec::<String>::new());
    }
}
