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
use crate::device::Device;
use crate::fleet::{Fleet, IdBlocks};
use crate::history::{History, Record};
use crate::league;
use crate::metrics::Metrics;
use crate::run::{store, Runs};
use crate::dashboard::sampler;
use crate::app_state::{AppState, Manager};
use anyhow::Context;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
    let state = start(config, shutdown.clone()).await?;
    let addr = listener.local_addr()?;
    println!("shine-manager listening on http://{addr}");
    tracing::info!(%addr, data_dir = %state.config.server.data_dir.display(), runs = state.runs.len(), "listening");
    if state.config.token().is_none() {
        tracing::warn!("running WITHOUT a token (--insecure-no-token): anyone who reaches this port can upload");
    }

    let tasks = TaskTracker::new();
    tasks.spawn(sample_every_interval(state.clone(), shutdown.clone()));
    tasks.close();
    let served = axum::serve(listener, api::app(state.clone())).with_graceful_shutdown(shutdown.clone().cancelled_owned()).await;
    tracing::info!("stopped accepting requests; shutting down");
    // The server may also have stopped on an error: the tasks stop all the same.
    shutdown.cancel();
    tasks.wait().await;
    // The trainer last, whatever happened to the server: the final checkpoints.
    let stopped = tokio::task::spawn_blocking(move || {
        let r = state.device.stop();
        // What the sampler and the handlers recorded, written before exiting.
        state.history.close();
        r
    });
    stopped.await.context("trainer shutdown panicked")??;
    tracing::info!("shutdown complete");
    served.context("HTTP server")
}

/// Build the shared state: the data directory, the device thread, every run.
async fn start(config: Config, shutdown: CancellationToken) -> anyhow::Result<AppState> {
    let device = config.trainer.device()?;
    let data_dir = config.server.data_dir.clone();
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating the data directory {} ([server] data_dir, --data-dir)", data_dir.display()))?;
    store::migrate_legacy(&data_dir)?;
    tracing::info!(?device, "starting the trainer");
    let (worker_ids, first_id) = IdBlocks::open(&data_dir)?;
    let history = History::open(&data_dir, config.history.clone())?;
    let league = league::protocol::open(history.league_matches());
    let state = Arc::new(Manager {
        device: Device::start(&config.trainer, device)?,
        runs: Runs::default(),
        fleet: Mutex::new(Fleet::new(config.workers.clone(), first_id)),
        worker_ids,
        metrics: Metrics::new(),
        history,
        league: Mutex::new(league),
        live: Default::default(),
        plays: Default::default(),
        shutdown,
        config,
    });
    // Each run: its write-ahead log read back, its checkpoint restored (files, maybe
    // CUDA): blocking work.
    let s = state.clone();
    tokio::task::spawn_blocking(move || s.runs.open_all(&s.config, &s.device, &s.history))
    .await
    .context("opening the runs panicked")??;
    // Each registry keeps its run's best rated models from its next prune on.
    state.keep_league_models(&state.league.lock().expect("league lock"));
    Ok(state)
}

/// The sampler task: every `[stats] interval_secs` until `stop`, the fleet swept (its
/// workers that timed out marked gone), one sample of every run (into its series and
/// the history), and the live channels of workers gone and unwatched dropped.
async fn sample_every_interval(state: AppState, stop: CancellationToken) {
    let period = Duration::from_secs_f64(state.config.stats.interval_secs);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        state.fleet.lock().expect("fleet lock").sweep(Instant::now());
        for run in state.all_runs() {
            let prev = run.series().lock().expect("series lock").last().cloned();
            let s = sampler::sample(&run, &state.metrics, &state.fleet.lock().expect("fleet lock"), prev.as_ref());
            run.series().lock().expect("series lock").push(s.clone());
            state.history.record(Record::Sample { run: run.name().to_string(), sample: Box::new(s) });
        }
        let now = Instant::now();
        let fleet = state.fleet.lock().expect("fleet lock");
        state.live.retain_workers(|id| fleet.contains(id, now));
    }
}
