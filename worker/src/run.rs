//! `shine-worker run`: play for a manager.
//!
//! ```text
//! register ─► first model ─► actor thread (K envs) ──► spool ──► drain ──► POST experience
//!                               ▲   └─► episode reports ──────────────────► POST episodes
//!      poll_models (ETag) ──────┘
//!      heartbeats (epsilon back; 404: register again)
//!      live::stream (long poll; while a browser watches: env 0's frames every 100 ms)
//! ```
//!
//! The actor and its environments run on plain threads (CPU work); everything that
//! talks to the network is a task on a small tokio runtime. They meet through
//! channels. One [`CancellationToken`] is the shutdown signal: Ctrl-C or SIGTERM
//! cancels it, the actor hands over its last transitions, everything is spooled, the
//! spool is flushed for as long as the manager answers (at most [`FLUSH_SECS`]), and
//! what is left stays on disk for the next start.

use crate::actor::{self, ActorConfig, ActorIo, Counters, Model};
use crate::backend::{Backend, DolphinSetup};
use crate::client::{ApiError, Client, EpisodeReport, Heartbeat, ModelFetch, RegisterRequest, Registration};
use crate::live::{self, LiveTap};
use crate::spool::{Spool, SpoolLimits};
use crate::uploader::{self, DrainMode, Identity, UploadStats};
use anyhow::{bail, Context};
use clap::Args;
use rand::Rng;
use serde::{Deserialize, Serialize};
use shine_agent::model::QNet;
use shine_agent::{ActionSet, Task};
use shine_bridge::{Emulator, MatchSetup};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Longest a shutdown waits for the manager to take the spooled batches.
pub const FLUSH_SECS: u64 = 15;

/// Batches the actor may hand over before the spooler takes them. Small, because the
/// spooler stops taking batches while the manager is behind (see
/// [`uploader::BACKLOG_PAUSE`]) and this is how soon the actor then pauses: with 64,
/// a busy manager let it play on for 64 more batches, held in memory.
pub const HANDOVER_BATCHES: usize = 2;

/// `shine-worker run`. Every flag can also be a key of the `--config` TOML file
/// (same name, `_` for `-`); flags and environment variables win over the file.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// The manager's address, e.g. http://manager:8080.
    #[arg(long, env = "SHINE_MANAGER")]
    pub manager: Option<String>,
    /// The manager's bearer token (its --token).
    #[arg(long, env = "SHINE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Where the game runs [default: sim].
    #[arg(long, value_enum, env = "SHINE_BACKEND")]
    pub backend: Option<Backend>,
    /// Environments played at once [default: one per CPU core]. With Dolphin, each is a
    /// Dolphin of its own.
    #[arg(long, env = "SHINE_ENVS")]
    pub envs: Option<usize>,
    /// With --backend dolphin: your Melee NTSC 1.02 disc image (Shine cannot ship it).
    #[arg(long, env = "SHINE_ISO")]
    pub iso: Option<PathBuf>,
    /// With --backend dolphin: the dolphin-emu-nogui to run [default: found on PATH or in /usr/games].
    #[arg(long, env = "SHINE_DOLPHIN")]
    pub dolphin: Option<PathBuf>,
    /// Where unsent gameplay is kept [default: ~/.cache/shine/spool].
    #[arg(long, env = "SHINE_SPOOL_DIR")]
    pub spool_dir: Option<PathBuf>,
    /// Most MiB the spool may hold before the oldest batches are dropped [default: 1024].
    #[arg(long, env = "SHINE_SPOOL_MAX_MB")]
    pub spool_max_mb: Option<u64>,
    /// Most batches the spool may hold before the oldest are dropped [default: 10000].
    #[arg(long)]
    pub spool_max_batches: Option<usize>,
    /// Seed of all randomness (episodes, exploration) [default: random, logged].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the worker's counters as JSON to this file when it exits.
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// A TOML file with any of the keys above.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The `--config` file: the same keys as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub manager: Option<String>,
    pub token: Option<String>,
    pub backend: Option<Backend>,
    pub envs: Option<usize>,
    pub iso: Option<PathBuf>,
    pub dolphin: Option<PathBuf>,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_mb: Option<u64>,
    pub spool_max_batches: Option<usize>,
    pub seed: Option<u64>,
    pub stats_file: Option<PathBuf>,
}

/// Everything `run` needs, resolved: flags, then environment, then file, then defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    pub manager: String,
    pub token: String,
    pub backend: Backend,
    pub envs: usize,
    /// The game image and the emulator, for the Dolphin backend.
    pub iso: Option<PathBuf>,
    pub dolphin: Option<PathBuf>,
    pub spool_dir: PathBuf,
    pub spool_limits: SpoolLimits,
    pub seed: u64,
    pub stats_file: Option<PathBuf>,
}

fn default_spool_dir() -> anyhow::Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
        .context("no HOME to put the spool in: pass --spool-dir or set SHINE_SPOOL_DIR")?;
    Ok(cache.join("shine").join("spool"))
}

impl Settings {
    pub fn resolve(args: RunArgs) -> anyhow::Result<Settings> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading --config {}", path.display()))?;
                toml::from_str::<FileConfig>(&text).with_context(|| format!("--config {}: not a valid worker config", path.display()))?
            }
            None => FileConfig::default(),
        };
        let manager = args
            .manager
            .or(file.manager)
            .context("no manager address: pass --manager URL, set SHINE_MANAGER, or put manager = \"http://...\" in the --config file")?;
        let token = args.token.or(file.token).context("no token: pass --token, set SHINE_TOKEN, or put token = \"...\" in the --config file")?;
        let envs = match args.envs.or(file.envs) {
            Some(0) => bail!("--envs must be at least 1"),
            Some(k) => k,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let defaults = SpoolLimits::default();
        let spool_limits = SpoolLimits {
            max_bytes: args.spool_max_mb.or(file.spool_max_mb).map_or(defaults.max_bytes, |mb| mb.saturating_mul(1 << 20)),
            max_batches: args.spool_max_batches.or(file.spool_max_batches).unwrap_or(defaults.max_batches).max(1),
        };
        Ok(Settings {
            manager,
            token,
            backend: args.backend.or(file.backend).unwrap_or(Backend::Sim),
            envs,
            iso: args.iso.or(file.iso),
            dolphin: args.dolphin.or(file.dolphin),
            spool_dir: match args.spool_dir.or(file.spool_dir) {
                Some(d) => d,
                None => default_spool_dir()?,
            },
            spool_limits,
            seed: args.seed.or(file.seed).unwrap_or_else(|| rand::rng().random()),
            stats_file: args.stats_file.or(file.stats_file),
        })
    }
}

/// What a run did; written to `--stats-file` as JSON when the worker exits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub worker_id: u32,
    pub frames: u64,
    pub episodes: u64,
    /// Transitions the actor produced in this run.
    pub transitions_generated: u64,
    /// Transitions the manager accepted (counting batches spooled by earlier runs).
    pub transitions_uploaded: u64,
    pub batches_uploaded: u64,
    pub duplicate_answers: u64,
    /// 503 answers (the manager's rate limiter held an upload back; it was retried).
    pub busy_answers: u64,
    pub transitions_rejected: u64,
    pub transitions_dropped_spool_full: u64,
    /// Still on disk, sent at the next start.
    pub spooled_batches: u64,
    pub spooled_transitions: u64,
    /// Decisions that could not become transitions (n-step cut by a time limit, ...).
    pub incomplete_decisions: u64,
    pub model_version: u64,
    pub model_swaps: u64,
}

fn run_stats(identity: &Identity, c: &Counters, u: &UploadStats) -> RunStats {
    RunStats {
        worker_id: identity.worker_id(),
        frames: c.frames.load(Relaxed),
        episodes: c.episodes.load(Relaxed),
        transitions_generated: c.transitions.load(Relaxed),
        transitions_uploaded: u.transitions_uploaded.load(Relaxed),
        batches_uploaded: u.batches_uploaded.load(Relaxed),
        duplicate_answers: u.duplicates.load(Relaxed),
        busy_answers: u.busy_answers.load(Relaxed),
        transitions_rejected: u.transitions_rejected.load(Relaxed),
        transitions_dropped_spool_full: u.transitions_dropped.load(Relaxed),
        spooled_batches: u.spooled_batches.load(Relaxed),
        spooled_transitions: u.spooled_transitions.load(Relaxed),
        incomplete_decisions: c.incomplete.load(Relaxed),
        model_version: c.model_version.load(Relaxed),
        model_swaps: c.model_swaps.load(Relaxed),
    }
}

/// Write a file atomically (temp + rename), so a reader never sees half of it.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// `shine-worker run`.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let settings = Settings::resolve(args)?;
    // Check a Dolphin setup before registering: a worker that cannot play should say
    // why at once, not after taking an epsilon slot.
    let dolphin = match settings.backend {
        Backend::Sim => None,
        Backend::Dolphin => Some(DolphinSetup::check(settings.iso.as_deref(), settings.dolphin.as_deref())?),
    };
    // Two network threads are plenty: the CPU belongs to the environments.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the async runtime")?;
    let seed = settings.seed;
    match dolphin {
        None => rt.block_on(run_with(settings, shutdown_signal(), move |setup: MatchSetup, i: usize| {
            Ok(shine_bridge::sim::Sim::new(setup, seed.wrapping_add(i as u64)))
        }))?,
        // Each environment's thread starts its own Dolphin (user folder, pipe, RAM).
        Some(dolphin) => rt.block_on(run_with(settings, shutdown_signal(), move |setup: MatchSetup, _| dolphin.launch(setup)))?,
    };
    Ok(())
}

/// Resolves on the first Ctrl-C or SIGTERM; a second one exits at once.
pub async fn shutdown_signal() {
    let term = async {
        #[cfg(unix)]
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("shutting down: handing over the last transitions and flushing the spool (signal again to quit at once)");
    tokio::spawn(async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::warn!("second signal: quitting now; spooled batches are sent at the next start");
        std::process::exit(130);
    });
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// Retry `f` with backoff while its error is retryable, until it succeeds or `cancel`
/// fires (`Ok(None)`); a final error is returned.
async fn retrying<T, Fut: std::future::Future<Output = Result<T, ApiError>>>(
    what: &str,
    cancel: &CancellationToken,
    mut f: impl FnMut() -> Fut,
) -> anyhow::Result<Option<T>> {
    let mut delays = uploader::backoff();
    loop {
        match f().await {
            Ok(v) => return Ok(Some(v)),
            Err(e @ ApiError::Status { status: 401 | 403, .. }) => bail!("{e}: check --token / SHINE_TOKEN"),
            Err(e) if e.is_retryable() => {
                let delay = delays.next().unwrap_or(Duration::from_secs(30));
                tracing::warn!("{what}: {e}; retrying in {:.1} s", delay.as_secs_f64());
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = cancel.cancelled() => return Ok(None),
                }
            }
            Err(e) => bail!("{what}: {e}"),
        }
    }
}

async fn load_model(bytes: Vec<u8>, header_version: Option<u64>) -> anyhow::Result<Model> {
    let net = tokio::task::spawn_blocking(move || QNet::load(&bytes)).await?.context("the manager's model file does not load")?;
    // The file's own metadata is authoritative; the header only saves a parse.
    let version = net.meta().model_version;
    if header_version.is_some_and(|h| h != version) {
        tracing::warn!(header = header_version, file = version, "model version header and file disagree; using the file's");
    }
    Ok(Model { net, version })
}

/// Play for the manager until `shutdown` resolves (or a fatal error). `make(setup, i)`
/// builds environment i's emulator; `run` passes the simulator, tests may pass any
/// [`Emulator`].
pub async fn run_with<E, F>(settings: Settings, shutdown: impl std::future::Future<Output = ()> + Send + 'static, make: F) -> anyhow::Result<RunStats>
where
    E: Emulator,
    F: Fn(MatchSetup, usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    let cancel = CancellationToken::new();
    {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            shutdown.await;
            cancel.cancel();
        });
    }
    let client = Client::new(&settings.manager, &settings.token)?;
    let (dir, limits) = (settings.spool_dir.clone(), settings.spool_limits);
    let spool = tokio::task::spawn_blocking(move || Spool::open(&dir, limits)).await??;
    let upload_stats = Arc::new(UploadStats::default());
    upload_stats.spooled_batches.store(spool.len() as u64, Relaxed);
    upload_stats.spooled_transitions.store(spool.transitions(), Relaxed);
    if !spool.is_empty() {
        tracing::info!(batches = spool.len(), transitions = spool.transitions(), dir = %spool.dir().display(), "found gameplay spooled by an earlier run; sending it first");
    }
    let spool = Arc::new(Mutex::new(spool));
    let counters = Arc::new(Counters::default());

    // Register (waiting for the manager as long as it takes).
    let request =
        RegisterRequest { host: host_name(), backend: settings.backend.name().into(), envs: settings.envs, version: env!("CARGO_PKG_VERSION").into() };
    tracing::info!(manager = %client.base(), envs = settings.envs, seed = settings.seed, "registering");
    let Some(reg) = retrying("registering with the manager", &cancel, || client.register(&request)).await? else {
        return Ok(run_stats(&Identity::new(0), &counters, &upload_stats));
    };
    let cfg = actor_config(&reg, &settings)?;
    tracing::info!(worker_id = reg.worker_id, epsilon = reg.epsilon, n_step = reg.n_step, task = %reg.task, "registered");
    counters.set_epsilon(reg.epsilon);
    let identity = Arc::new(Identity::new(reg.worker_id));

    // The first model: the manager publishes one before training starts.
    let mut announced = false;
    let first = loop {
        match retrying("downloading the model", &cancel, || client.latest_model(None)).await? {
            None => return Ok(run_stats(&identity, &counters, &upload_stats)),
            Some(ModelFetch::Model { bytes, etag, version }) => break (load_model(bytes, version).await?, etag),
            Some(_) => {
                if !announced {
                    tracing::info!("the manager has not published a model yet; waiting for it");
                    announced = true;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(reg.model_poll_secs.max(0.1))) => {}
                    _ = cancel.cancelled() => return Ok(run_stats(&identity, &counters, &upload_stats)),
                }
            }
        }
    };
    let (model, etag) = first;
    tracing::info!(model_version = model.version, "playing");

    let (batch_tx, batch_rx) = tokio::sync::mpsc::channel(HANDOVER_BATCHES);
    let (episode_tx, episode_rx) = tokio::sync::mpsc::channel(10_000);
    let (model_tx, model_rx) = tokio::sync::mpsc::channel(2);
    let wake = Arc::new(Notify::new());

    let spooler = tokio::spawn(uploader::spool_batches(batch_rx, spool.clone(), identity.clone(), upload_stats.clone(), wake.clone(), cancel.clone()));
    let drainer =
        tokio::spawn(uploader::drain(client.clone(), spool.clone(), identity.clone(), upload_stats.clone(), wake.clone(), cancel.clone(), DrainMode::Forever));
    let poller =
        tokio::spawn(poll_models(client.clone(), etag, model.version, Duration::from_secs_f64(reg.model_poll_secs.max(0.1)), model_tx, cancel.clone()));
    let tap = Arc::new(LiveTap::default());
    let beats = tokio::spawn(heartbeats(
        client.clone(),
        request.clone(),
        reg.clone(),
        identity.clone(),
        counters.clone(),
        upload_stats.clone(),
        tap.clone(),
        cancel.clone(),
    ));
    let action_names: Vec<String> = (0..cfg.actions.len()).map(|a| cfg.actions.action_name(a).to_string()).collect();
    let streamer = tokio::spawn(live::stream(client.clone(), identity.clone(), tap.clone(), action_names, cancel.clone()));
    let reports = tokio::spawn(report_episodes(client.clone(), identity.clone(), episode_rx, Duration::from_secs_f64(reg.heartbeat_secs.max(0.1))));

    let actor = {
        let (counters, cancel) = (counters.clone(), cancel.clone());
        let setup = cfg.setup;
        let io = ActorIo { batches: batch_tx, episodes: episode_tx, models: model_rx, live: Some(tap) };
        let handle =
            std::thread::Builder::new().name("actor".into()).spawn(move || actor::run_actor(cfg, move |i| make(setup, i), model, io, counters, cancel))?;
        tokio::task::spawn_blocking(move || handle.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the actor thread panicked"))))
    };

    // Run until the actor stops (shutdown or failure) or the uploader must stop us.
    let mut drainer = drainer;
    let drained = tokio::select! {
        _ = cancel.cancelled() => None,
        r = &mut drainer => Some(r),
    };
    cancel.cancel();
    let mut fatal = None;
    if let Err(e) = actor.await.context("the actor task panicked")? {
        fatal = Some(e);
    }
    // The actor dropped its senders: the spooler ends once everything is on disk.
    spooler.await.context("the spool task panicked")??;
    let drained = match drained {
        Some(r) => r,
        None => drainer.await,
    };
    if let Err(e) = drained.context("the upload task panicked").and_then(|r| r) {
        // A refused token is the reason to stop; the actor's error is its consequence.
        fatal = Some(e);
    }
    poller.abort();
    beats.abort();
    streamer.abort();
    if fatal.is_none() {
        let flush =
            uploader::drain(client.clone(), spool.clone(), identity.clone(), upload_stats.clone(), wake.clone(), CancellationToken::new(), DrainMode::Flush);
        if tokio::time::timeout(Duration::from_secs(FLUSH_SECS), flush).await.is_err() {
            tracing::warn!("the manager did not take everything within {FLUSH_SECS} s; the rest stays spooled for the next start");
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), reports).await;

    let stats = run_stats(&identity, &counters, &upload_stats);
    tracing::info!(
        frames = stats.frames,
        episodes = stats.episodes,
        generated = stats.transitions_generated,
        uploaded = stats.transitions_uploaded,
        rejected = stats.transitions_rejected,
        dropped = stats.transitions_dropped_spool_full,
        still_spooled = stats.spooled_transitions,
        "worker stopped"
    );
    if let Some(path) = &settings.stats_file {
        write_atomic(path, &serde_json::to_vec_pretty(&stats)?).with_context(|| format!("writing --stats-file {}", path.display()))?;
    }
    match fatal {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

fn actor_config(reg: &Registration, settings: &Settings) -> anyhow::Result<ActorConfig> {
    let actions: ActionSet =
        reg.action_set.parse().map_err(|e| anyhow::anyhow!("the manager asks for {e}: this shine-worker is too old for that manager; upgrade it"))?;
    let task: Task = reg.task.parse().map_err(|e| anyhow::anyhow!("the manager asks for {e}: this shine-worker is too old for that manager; upgrade it"))?;
    if reg.n_step == 0 {
        bail!("the manager asks for n_step 0; it must be at least 1");
    }
    Ok(ActorConfig {
        task,
        actions,
        setup: MatchSetup::default(),
        envs: settings.envs,
        n_step: reg.n_step,
        gamma: reg.gamma as f32,
        cpu_level: reg.cpu_level,
        cpu_level_top_share: reg.cpu_level_top_share,
        eval_share: reg.eval_share,
        batch_transitions: reg.upload_every_transitions,
        batch_secs: reg.upload_every_secs,
        seed: settings.seed,
    })
}

/// Ask for a newer model every `every`; hand it to the actor, which swaps it in
/// between decisions.
async fn poll_models(
    client: Client,
    mut etag: Option<String>,
    mut version: u64,
    every: Duration,
    tx: tokio::sync::mpsc::Sender<Model>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = cancel.cancelled() => return,
        }
        match client.latest_model(etag.as_deref()).await {
            Ok(ModelFetch::Model { bytes, etag: tag, version: v }) => match load_model(bytes, v).await {
                Ok(m) if m.version != version => {
                    version = m.version;
                    etag = tag;
                    if tx.send(m).await.is_err() {
                        return;
                    }
                }
                Ok(_) => etag = tag,
                Err(e) => tracing::warn!("{e:#}; keeping model v{version}"),
            },
            Ok(ModelFetch::NotModified | ModelFetch::NoneYet) => {}
            Err(e) => tracing::debug!("model poll: {e}"),
        }
    }
}

/// Heartbeats every `heartbeat_secs`; the answer carries the current epsilon. When
/// the manager forgot us (404 here or on an upload), register again.
#[allow(clippy::too_many_arguments)]
async fn heartbeats(
    client: Client,
    request: RegisterRequest,
    reg: Registration,
    identity: Arc<Identity>,
    counters: Arc<Counters>,
    uploads: Arc<UploadStats>,
    tap: Arc<LiveTap>,
    cancel: CancellationToken,
) {
    let every = Duration::from_secs_f64(reg.heartbeat_secs.max(0.1));
    let (mut last_t, mut last_frames) = (Instant::now(), 0u64);
    let mut last_log = Instant::now();
    loop {
        let reregister = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            _ = identity.reregister.notified() => true,
            _ = cancel.cancelled() => return,
        };
        let reregister = reregister || {
            let now = Instant::now();
            let frames = counters.frames.load(Relaxed);
            let hb = Heartbeat {
                frames,
                env_fps: (frames - last_frames) as f64 / now.duration_since(last_t).as_secs_f64().max(1e-3),
                skipped_frames: counters.skipped_frames.load(Relaxed),
                episodes: counters.episodes.load(Relaxed),
                model_version: counters.model_version.load(Relaxed),
                spooled_batches: uploads.spooled_batches.load(Relaxed),
            };
            (last_t, last_frames) = (now, frames);
            if last_log.elapsed() >= Duration::from_secs(60) {
                last_log = Instant::now();
                tracing::info!(
                    frames = hb.frames,
                    env_fps = format!("{:.0}", hb.env_fps),
                    episodes = hb.episodes,
                    model_version = hb.model_version,
                    uploaded = uploads.transitions_uploaded.load(Relaxed),
                    spooled_batches = hb.spooled_batches,
                    "progress"
                );
            }
            match client.heartbeat(identity.worker_id(), &hb).await {
                Ok(reply) => {
                    counters.set_epsilon(reply.epsilon);
                    // The long poll normally notices first; this covers a poll that
                    // was between retries.
                    if reply.watch && !tap.watched() {
                        tap.wake.notify_one();
                    }
                    false
                }
                Err(ApiError::Status { status: 404, .. }) => true,
                Err(e) => {
                    tracing::debug!("heartbeat: {e}");
                    false
                }
            }
        };
        if reregister {
            match client.register(&request).await {
                Ok(new) => {
                    tracing::info!(old = identity.worker_id(), new = new.worker_id, "the manager had forgotten this worker (restarted?); registered again");
                    if (new.n_step, new.action_set.as_str(), new.task.as_str()) != (reg.n_step, reg.action_set.as_str(), reg.task.as_str()) {
                        tracing::warn!(
                            "the manager's n_step, action set or task changed; restart this worker to follow (its uploads may be rejected until then)"
                        );
                    }
                    identity.set_worker_id(new.worker_id);
                    counters.set_epsilon(new.epsilon);
                }
                Err(e) => tracing::warn!("registering again: {e}"),
            }
        }
    }
}

/// Post finished episodes in batches every `every`; keep up to 10,000 while the
/// manager is away (they feed charts, so the oldest go first when that is full).
/// Returns after a last post once the actor has stopped.
async fn report_episodes(client: Client, identity: Arc<Identity>, mut rx: tokio::sync::mpsc::Receiver<EpisodeReport>, every: Duration) {
    const KEEP: usize = 10_000;
    let mut queue: VecDeque<EpisodeReport> = VecDeque::new();
    let mut tick = tokio::time::interval(every);
    loop {
        let open = tokio::select! {
            r = rx.recv() => match r {
                Some(e) => {
                    if queue.len() == KEEP {
                        queue.pop_front();
                    }
                    queue.push_back(e);
                    continue;
                }
                None => false,
            },
            _ = tick.tick() => true,
        };
        while !queue.is_empty() {
            let chunk: Vec<EpisodeReport> = queue.iter().take(1000).copied().collect();
            match client.episodes(identity.worker_id(), &chunk).await {
                Ok(()) => {
                    queue.drain(..chunk.len());
                }
                Err(e @ ApiError::Status { status: 404, .. }) => {
                    identity.reregister.notify_one();
                    tracing::debug!("episode report: {e}");
                    break;
                }
                Err(e) if e.is_retryable() => {
                    tracing::debug!("episode report: {e}");
                    break;
                }
                Err(e) => {
                    tracing::warn!("the manager rejected {} episode reports: {e}", chunk.len());
                    queue.drain(..chunk.len());
                }
            }
        }
        if !open {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_config_file_and_typos_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("worker.toml");
        std::fs::write(&file, "manager = \"http://file:1\"\ntoken = \"from-file\"\nenvs = 3\nspool_max_mb = 2\nbackend = \"dolphin\"\n").unwrap();
        let args = RunArgs {
            manager: Some("http://flag:2".into()),
            envs: Some(5),
            spool_dir: Some(dir.path().join("s")),
            seed: Some(9),
            config: Some(file.clone()),
            ..Default::default()
        };
        let s = Settings::resolve(args).unwrap();
        assert_eq!((s.manager.as_str(), s.token.as_str(), s.envs, s.seed), ("http://flag:2", "from-file", 5, 9));
        assert_eq!((s.backend, s.spool_limits.max_bytes, s.spool_limits.max_batches), (Backend::Dolphin, 2 << 20, SpoolLimits::default().max_batches));

        std::fs::write(&file, "manger = \"http://typo\"\n").unwrap();
        let err = Settings::resolve(RunArgs { config: Some(file), ..Default::default() }).unwrap_err();
        assert!(format!("{err:#}").contains("manger"), "{err:#}");
        let err = Settings::resolve(RunArgs { manager: Some("http://m".into()), spool_dir: Some(dir.path().into()), ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("SHINE_TOKEN"), "{err}");
    }

    #[test]
    fn dolphin_backend_says_what_is_missing_before_registering() {
        let dir = tempfile::tempdir().unwrap();
        // The manager address is unroutable: reaching it would hang, so these errors
        // prove the checks come first.
        let args = RunArgs {
            manager: Some("http://192.0.2.1:9".into()),
            token: Some("t".into()),
            backend: Some(Backend::Dolphin),
            spool_dir: Some(dir.path().into()),
            ..Default::default()
        };
        let err = run(args.clone()).unwrap_err().to_string();
        assert!(err.contains("--iso PATH"), "{err}");
        let args = RunArgs { iso: Some(dir.path().join("melee.iso")), dolphin: Some("/nonexistent/dolphin-emu-nogui".into()), ..args };
        let err = format!("{:#}", run(args.clone()).unwrap_err());
        assert!(err.contains("apt-get install dolphin-emu"), "{err}");
        let args = RunArgs { dolphin: Some("/bin/true".into()), ..args };
        let err = run(args).unwrap_err().to_string();
        assert!(err.contains("melee.iso does not exist"), "{err}");
    }
}
