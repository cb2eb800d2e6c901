//! Start-up and shutdown of the whole service.
//!
//! [`run`] binds the configured address and calls [`serve`]; tests call [`serve`] with
//! a listener on `127.0.0.1:0`. Shutdown is the one pattern of `shine_agent::shutdown`
//! (the worker's too): `main` has the first Ctrl-C or SIGTERM cancel a token (a second
//! exits at once). When it fires the server stops accepting and drains in-flight
//! requests; the requests that would wait (a worker's live long poll, a browser's
//! WebSocket) hold the same token in [`Manager::shutdown`] and end at once; the
//! background tasks are tracked and joined; and the trainer goes last so its final
//! checkpoint covers every batch that was accepted.

use crate::api;
use crate::config::Config;
use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::sampler;
use crate::state::{AppState, Dedup, Manager};
use crate::stats::{EpisodeLog, Series};
use crate::trainer::{self, TrainerHandle};
use crate::wal;
use anyhow::Context;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Validate `config`, listen on `[server] listen`, serve until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate()?;
    let addr = &config.server.listen;
    let listener = TcpListener::bind(addr).await.with_context(|| format!("listening on {addr} ([server] listen, --listen)"))?;
    serve(listener, config, shutdown).await
}

/// Serve on `listener` until `shutdown` is cancelled; then stop cleanly (final checkpoint).
pub async fn serve(listener: TcpListener, config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate()?;
    let (state, trainer) = start(config, shutdown.clone()).await?;
    let addr = listener.local_addr()?;
    println!("shine-manager listening on http://{addr}");
    tracing::info!(%addr, data_dir = %state.config.server.data_dir.display(), "listening");
    if state.config.token().is_none() {
        tracing::warn!("running WITHOUT a token (--insecure-no-token): anyone who reaches this port can upload");
    }

    let tasks = TaskTracker::new();
    tasks.spawn(sampler::sampler(state.clone(), shutdown.clone()));
    tasks.close();
    let served = axum::serve(listener, api::app(state.clone())).with_graceful_shutdown(shutdown.clone().cancelled_owned()).await;
    tracing::info!("stopped accepting requests; shutting down");
    // The server may also have stopped on an error: the tasks stop all the same.
    shutdown.cancel();
    tasks.wait().await;
    // The trainer last, whatever happened to the server: the final checkpoint.
    tokio::task::spawn_blocking(move || trainer.shutdown()).await.context("trainer shutdown panicked")??;
    tracing::info!("shutdown complete");
    served.context("HTTP server")
}

/// Build the shared state: data directory, registry, trainer.
async fn start(config: Config, shutdown: CancellationToken) -> anyhow::Result<(AppState, TrainerHandle)> {
    let action_set = config.game.action_set()?;
    let task = config.game.task()?;
    let device = config.trainer.device()?;
    let data_dir = config.server.data_dir.clone();
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating the data directory {} ([server] data_dir, --data-dir)", data_dir.display()))?;
    let registry = Arc::new(Registry::open(&data_dir, config.registry.clone())?);

    let publish_to = registry.clone();
    let publish = move |m: trainer::Published| {
        let version = m.version;
        if let Err(e) = publish_to.publish(m) {
            tracing::error!(version, error = format!("{e:#}"), "could not store a published model");
        }
    };
    // The write-ahead log: what was acknowledged before a stop or a crash goes back
    // into the replay, and its upload ids into the dedup window.
    let expect = trainer::wire_expect(&config.dqn, action_set);
    let (wal_dir, wal_cfg, capacity) = (data_dir.join("wal"), config.wal.clone(), config.replay.capacity);
    let meta = wal::WalMeta::new(action_set.name(), expect);
    let (recovered, wal) =
        tokio::task::spawn_blocking(move || wal::start(&wal_dir, &wal_cfg, &meta, capacity, expect)).await.context("write-ahead log recovery panicked")??;
    let mut dedup = Dedup::new(config.server.dedup_window);
    for id in &recovered.upload_ids {
        dedup.insert(*id);
    }
    let restore = trainer::Restore { data_dir: data_dir.clone(), rows: recovered.rows, highest_published: registry.highest_version() };

    tracing::info!(?device, action_set = action_set.name(), "starting the trainer");
    let (tc, rc, dc) = (config.trainer.clone(), config.replay.clone(), config.dqn.clone());
    // Restoring a checkpoint reads files and may initialise CUDA: blocking work.
    let handle =
        tokio::task::spawn_blocking(move || trainer::spawn(tc, rc, dc, action_set, device, restore, publish)).await.context("trainer start panicked")??;

    let state = Arc::new(Manager {
        action_set,
        task,
        expect,
        wal,
        trainer: handle.client(),
        registry,
        fleet: Mutex::new(Fleet::new(config.workers.clone())),
        dedup: Mutex::new(dedup),
        episodes: Mutex::new(EpisodeLog::new(config.stats.recent_episodes)),
        series: Mutex::new(Series::new(config.stats.history)),
        metrics: Metrics::new(),
        live: Default::default(),
        age_sum: Default::default(),
        age_count: Default::default(),
        shutdown,
        config,
    });
    Ok((state, handle))
}
