//! SIGTERM / Ctrl-C handling: one signal tells every listener to stop
//! accepting and to finish the requests in flight.

use tokio::sync::watch;

/// A shutdown switch shared by every server of the process.
#[derive(Clone)]
pub struct Shutdown {
    receiver: watch::Receiver<bool>,
}

impl Shutdown {
    /// Starts listening for SIGTERM and SIGINT.
    pub fn on_signals() -> Self {
        let (sender, receiver) = watch::channel(false);
        tokio::spawn(async move {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: finishing in-flight requests"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: finishing in-flight requests"),
                },
                Err(e) => {
                    tracing::error!("cannot watch SIGTERM ({e}); only Ctrl-C stops gracefully");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            let _ = sender.send(true);
        });
        Self { receiver }
    }

    /// Resolves once shutdown was asked for.
    pub fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut receiver = self.receiver.clone();
        async move {
            let _ = receiver.wait_for(|stop| *stop).await;
        }
    }
}
