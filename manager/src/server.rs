//! Start-up and shutdown of the whole service.
//!
//! [`run`] binds the configured address and calls [`serve`]; tests call [`serve`] with
//! a listener on `127.0.0.1:0`. Shutdown is one pattern: when the `shutdown` future
//! completes the server stops accepting and drains in-flight requests, a cancellation
//! token stops the background tasks (joined), and the trainer goes last so its final
//! checkpoint covers every batch that was accepted.

use crate::api;
use crate::config::Config;
use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::state::{AppState, Dedup, Manager};
use crate::stats::{self, EpisodeLog, Series};
use crate::trainer::{self, TrainerHandle};
use anyhow::Context;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Validate `config`, listen on `[server] listen`, serve until `shutdown` completes.
pub async fn run(config: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    config.validate()?;
    let addr = &config.server.listen;
    let listener = TcpListener::bind(addr).await.with_context(|| format!("listening on {addr} ([server] listen, --listen)"))?;
    serve(listener, config, shutdown).await
}

/// Serve on `listener` until `shutdown` completes; then stop cleanly (final checkpoint).
pub async fn serve(listener: TcpListener, config: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    config.validate()?;
    let (state, trainer) = start(config).await?;
    let addr = listener.local_addr()?;
    println!("shine-manager listening on http://{addr}");
    tracing::info!(%addr, data_dir = %state.config.server.data_dir.display(), "listening");
    if state.config.token().is_none() {
        tracing::warn!("running WITHOUT a token (--insecure-no-token): anyone who reaches this port can upload");
    }

    let stop = CancellationToken::new();
    let sampler = tokio::spawn(stats::sampler(state.clone(), stop.clone()));
    let served = axum::serve(listener, api::app(state.clone())).with_graceful_shutdown(shutdown).await;
    tracing::info!("stopped accepting requests; shutting down");
    stop.cancel();
    let _ = sampler.await;
    // The trainer last, whatever happened to the server: the final checkpoint.
    tokio::task::spawn_blocking(move || trainer.shutdown()).await.context("trainer shutdown panicked")??;
    tracing::info!("shutdown complete");
    served.context("HTTP server")
}

/// Build the shared state: data directory, registry, trainer.
async fn start(config: Config) -> anyhow::Result<(AppState, TrainerHandle)> {
    let action_set = config.game.action_set()?;
    let task = config.game.task()?;
    let device = config.trainer.device()?;
    let data_dir = config.server.data_dir.clone();
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating the data directory {} ([server] data_dir, --data-dir)", data_dir.display()))?;
    let registry = Arc::new(Registry::open(&data_dir, config.registry.clone())?);
    tracing::info!(?device, action_set = action_set.name(), "starting the trainer");

    let publish_to = registry.clone();
    let publish = move |version: u64, train_step: u64, file: Vec<u8>| {
        if let Err(e) = publish_to.publish(version, train_step, file) {
            tracing::error!(version, error = format!("{e:#}"), "could not store a published model");
        }
    };
    let (tc, rc, dc) = (config.trainer.clone(), config.replay.clone(), config.dqn.clone());
    // Restoring a checkpoint reads files and may initialise CUDA: blocking work.
    let handle =
        tokio::task::spawn_blocking(move || trainer::spawn(tc, rc, dc, action_set, device, &data_dir, publish)).await.context("trainer start panicked")??;

    let state = Arc::new(Manager {
        action_set,
        task,
        expect: trainer::wire_expect(&config.dqn, action_set),
        trainer: handle.client(),
        registry,
        fleet: Mutex::new(Fleet::new(config.workers.clone())),
        dedup: Mutex::new(Dedup::new(config.server.dedup_window)),
        episodes: Mutex::new(EpisodeLog::new(config.stats.recent_episodes)),
        series: Mutex::new(Series::new(config.stats.history)),
        metrics: Metrics::new(),
        live: Default::default(),
        age_sum: Default::default(),
        age_count: Default::default(),
        config,
    });
    Ok((state, handle))
}

/// A future that completes on Ctrl-C (SIGINT) or SIGTERM (what systemd and Kubernetes
/// send). The handlers are installed here, at the call, not when the future is first
/// polled: a signal that arrives while the trainer is still starting is not lost (and
/// does not kill the process with the default action).
#[cfg(unix)]
pub fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("Ctrl-C received"),
            _ = term.recv() => tracing::info!("SIGTERM received"),
        }
    })
}

#[cfg(not(unix))]
pub fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()> + Send + 'static> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
