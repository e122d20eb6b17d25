//! `tessera console`: the web console as its own process, in front of a
//! cluster's gateway; `tessera server` serves it too ([`serve`]).

use super::{print_ready, ClusterTlsArgs};
use crate::shutdown::Shutdown;
use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use futures::FutureExt;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use meta_api::MetaClient;
use std::path::PathBuf;
use std::sync::Arc;

/// Where the console listens and the address its share links name; shared
/// by `tessera server` and `tessera console`.
#[derive(Args, Clone, Debug)]
pub struct ConsoleListenArgs {
    /// Address of the web console (`off`: no console). Loopback by
    /// default: put it behind a TLS proxy to serve it further.
    #[arg(long, env = "TESSERA_CONSOLE_LISTEN", default_value = "127.0.0.1:9882")]
    pub console_listen: String,
    /// The S3 endpoint as browsers reach it, named by share links
    /// (http[s]://host[:port]); the gateway's own address when unset.
    #[arg(long, env = "TESSERA_CONSOLE_PUBLIC_ENDPOINT")]
    pub console_public_endpoint: Option<String>,
    /// A host name browsers reach the console by (repeatable), when a proxy
    /// in front passes its Host on; IP addresses and localhost are always
    /// taken, and any other name is refused (DNS rebinding).
    #[arg(
        long = "console-host",
        env = "TESSERA_CONSOLE_HOSTS",
        value_delimiter = ','
    )]
    pub console_hosts: Vec<String>,
    /// How often the console samples the metrics for its charts.
    #[arg(long, env = "TESSERA_CONSOLE_SAMPLE_INTERVAL", default_value = "10s", value_parser = super::parse_duration)]
    pub console_sample_interval: std::time::Duration,
}

impl ConsoleListenArgs {
    /// Whether a console is to be served.
    pub fn enabled(&self) -> bool {
        self.console_listen != "off"
    }
}

/// Flags of `tessera console`.
#[derive(Args, Debug)]
pub struct ConsoleArgs {
    /// Where to listen, and the address share links name.
    #[command(flatten)]
    pub listen: ConsoleListenArgs,
    /// The S3 gateway the console acts through (http://host:port or
    /// https://host:port).
    #[arg(long, env = "TESSERA_GATEWAY")]
    pub gateway: String,
    /// The certificates (PEM) that an https gateway's certificate must
    /// chain to: its CA, or its own self-signed certificate.
    #[arg(long, env = "TESSERA_GATEWAY_CA")]
    pub gateway_ca: Option<PathBuf>,
    /// The region requests are signed for (the gateway's --region).
    #[arg(long, env = "TESSERA_REGION", default_value = "us-east-1")]
    pub region: String,
    /// The gateway's /metrics, for the charts (its --ops-listen address).
    #[arg(long, env = "TESSERA_GATEWAY_METRICS")]
    pub metrics: Option<String>,
    /// Address of meta's RPC.
    #[arg(long, env = "TESSERA_META")]
    pub meta: String,
    /// The admin token (who a key belongs to, the admin pages); else read
    /// from --token-file.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// File holding the admin token.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Mutual TLS to meta, when the cluster runs it.
    #[command(flatten)]
    pub cluster_tls: ClusterTlsArgs,
}

/// Binds `listen` and serves the console until shutdown; returns its URL.
pub async fn serve(
    listen: &str,
    config: web_console::ConsoleConfig,
    shutdown: &Shutdown,
) -> Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the web console on {listen}"))?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = web_console::ConsoleApp::new(config)?;
    let stop = shutdown.wait();
    let task = tokio::spawn(async move {
        if let Err(e) = app.serve(listener, stop).await {
            tracing::error!("web console: {e}");
        }
    });
    Ok((url, task))
}

/// The metrics of a process's own recorder.
pub fn own_metrics(
    handle: metrics_exporter_prometheus::PrometheusHandle,
) -> web_console::MetricsSource {
    Arc::new(move || {
        let text = handle.render();
        async move { Ok(text) }.boxed()
    })
}

/// The metrics a GET of `url` answers.
fn remote_metrics(url: String) -> web_console::MetricsSource {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    Arc::new(move || {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
            let response = client.get(uri).await.map_err(|e| e.to_string())?;
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
        }
        .boxed()
    })
}

/// Runs the console until SIGTERM.
pub async fn run(args: ConsoleArgs) -> Result<()> {
    let shutdown = Shutdown::on_signals();
    let token = match (&args.token, &args.token_file) {
        (Some(token), _) => token.clone(),
        (None, Some(file)) => std::fs::read_to_string(file)
            .with_context(|| format!("reading the admin token from {}", file.display()))?
            .trim()
            .to_string(),
        (None, None) => anyhow::bail!("the console needs the admin token: --token or --token-file"),
    };
    let meta = MetaClient::remote(&args.meta, &token, args.cluster_tls.load()?);
    let metrics = match args.metrics.clone() {
        Some(url) => remote_metrics(url),
        None => Arc::new(|| async { Err("no --metrics address".to_string()) }.boxed()),
    };
    let config = web_console::ConsoleConfig {
        gateway: args.gateway,
        gateway_ca: args.gateway_ca,
        public_endpoint: args.listen.console_public_endpoint,
        region: args.region,
        meta,
        admin_token: Some(token),
        metrics,
        sample_every: args.listen.console_sample_interval,
        host_names: args.listen.console_hosts,
    };
    let (url, task) = serve(&args.listen.console_listen, config, &shutdown).await?;
    print_ready(&[("console", url)]);
    task.await?;
    Ok(())
}
