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
//! talks to the network is a task on a small tokio runtime ([`control`],
//! [`crate::pipeline::uploader`], [`crate::pipeline::live`]). They meet through channels and share a
//! [`Session`]. Shutdown is the pattern of `shine_agent::shutdown`: Ctrl-C or SIGTERM
//! cancels the session's token, every task returns (every task is tracked and joined,
//! none aborted), the actor hands over its last transitions, everything is spooled,
//! the spool is flushed for as long as the manager answers (at most [`FLUSH_SECS`]),
//! the last episode reports are posted (at most [`REPORT_SECS`] more), and what is
//! left of the gameplay stays on disk for the next start. A second signal exits at
//! once.

pub mod control;
pub mod league;
pub mod settings;

use crate::pipeline::actor::{self, ActorConfig, ActorIo};
use crate::pipeline::batcher::RawBatch;
use crate::pipeline::selfplay;
use crate::games::backend::{Backend, DolphinSetup};
use crate::client::{Client, ModelFetch};
use control::retrying;
use crate::games::duel::Duel;
use crate::pipeline::live::{self, LiveTap};
use settings::{Envs, RunArgs, Settings};
use crate::pipeline::shared::{ActorCounters, Identity, Session, UploadStats};
use crate::pipeline::spool::Spool;
use crate::pipeline::tuner::TunerConfig;
use crate::pipeline::uploader::{self, DrainMode};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use shine_agent::durable;
use shine_agent::protocol::{RegisterRequest, Registration};
use shine_agent::{ActionSet, Side, Task};
use shine_bridge::{Emulator, MatchSetup};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// Longest a shutdown waits for the manager to take the spooled batches.
pub const FLUSH_SECS: u64 = 15;

/// Longest a shutdown waits, after the flush, for the last episode reports to be posted.
pub const REPORT_SECS: u64 = 5;

/// Batches the actor may hand over before the spooler takes them. Small, because the
/// spooler stops taking batches while the manager is behind (see
/// [`uploader::BACKLOG_PAUSE`]) and this is how soon the actor then pauses: with 64,
/// a busy manager let it play on for 64 more batches, held in memory.
pub const HANDOVER_BATCHES: usize = 2;

/// What a run did; written to `--stats-file` as JSON when the worker exits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub worker_id: u32,
    pub frames: u64,
    pub episodes: u64,
    /// Episodes cut short by a pause (Dolphin: the game ran on while the bot did not decide).
    pub episodes_cut: u64,
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
    /// Self-play: the opponent's transitions played here, accepted by its run, and
    /// still on disk for it (all 0 without self-play).
    #[serde(default)]
    pub opponent_transitions_generated: u64,
    #[serde(default)]
    pub opponent_transitions_uploaded: u64,
    #[serde(default)]
    pub opponent_spooled_transitions: u64,
}

/// What a run did, from each side's counters in the actor's outputs' order: the
/// worker's own run, then in self-play the opponent's side (the `opponent_*` figures).
fn run_stats(identity: &Identity, sides: &[(Arc<ActorCounters>, Arc<UploadStats>)]) -> RunStats {
    let (c, u) = &sides[0];
    let (og, ou, os) =
        sides.get(1).map_or((0, 0, 0), |(c, u)| (c.transitions.load(Relaxed), u.transitions_uploaded.load(Relaxed), u.spooled_transitions.load(Relaxed)));
    RunStats {
        opponent_transitions_generated: og,
        opponent_transitions_uploaded: ou,
        opponent_spooled_transitions: os,
        worker_id: identity.worker_id(),
        frames: c.frames.load(Relaxed),
        episodes: c.episodes.load(Relaxed),
        episodes_cut: c.episodes_cut.load(Relaxed),
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
    rt.block_on(async move {
        let cancel = CancellationToken::new();
        shine_agent::shutdown::cancel_on_signals(cancel.clone()).context("installing the signal handlers")?;
        match dolphin {
            None => {
                run_with(settings, cancel, move |cfg: &ActorConfig, i: usize| Ok(Duel::new(cfg.side, cfg.setup, cfg.task, seed.wrapping_add(i as u64)))).await
            }
            // Each environment's thread starts its own Dolphin (user folder, pipe, RAM).
            Some(dolphin) => run_with(settings, cancel, move |cfg: &ActorConfig, _| dolphin.launch(cfg.setup)).await,
        }
    })?;
    Ok(())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// The spool of `run`: `spool_dir` itself for the run `default` (and a manager without
/// runs), `spool_dir/runs/<run>` for any other.
pub fn spool_dir_for(spool_dir: &std::path::Path, run: &str) -> anyhow::Result<std::path::PathBuf> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if !run.chars().all(ok) {
        anyhow::bail!("the manager named the run {run:?}, which is not a run name (a-z, 0-9, - and _): is --manager a Shine manager?");
    }
    Ok(if run.is_empty() || run == "default" { spool_dir.to_path_buf() } else { spool_dir.join("runs").join(run) })
}

/// Where the gameplay of one side of the matches goes: its run's session, its spool, and
/// the signal that wakes the spool's drainer. A worker has one (its run's), and a second
/// in self-play (the opponent run's side of each match); each is one entry of the
/// actor's outputs, delivered by the same two tasks.
struct Destination {
    session: Session,
    spool: Arc<Mutex<Spool>>,
    wake: Arc<Notify>,
    /// The context its failures get, where it is not the worker's own run's.
    about: Option<&'static str>,
}

/// A destination with its two tasks running.
struct Delivery {
    dest: Destination,
    spooler: JoinHandle<anyhow::Result<()>>,
    drainer: JoinHandle<anyhow::Result<()>>,
}

impl Destination {
    async fn open(
        session: Session,
        dir: std::path::PathBuf,
        limits: crate::pipeline::spool::SpoolLimits,
        about: Option<&'static str>,
    ) -> anyhow::Result<Destination> {
        let spool = tokio::task::spawn_blocking(move || Spool::open(&dir, limits)).await??;
        let uploads = &session.uploads;
        uploads.spooled_batches.store(spool.len() as u64, Relaxed);
        uploads.spooled_transitions.store(spool.transitions(), Relaxed);
        if !spool.is_empty() {
            tracing::info!(batches = spool.len(), transitions = spool.transitions(), dir = %spool.dir().display(), "found gameplay spooled by an earlier run; sending it first");
        }
        Ok(Destination { session, spool: Arc::new(Mutex::new(spool)), wake: Arc::new(Notify::new()), about })
    }

    /// The spooler (batches from `rx` onto disk) and the drainer (disk to the manager),
    /// tracked by `delivery`. A drainer ends only on the session's token or on an error
    /// that must stop the worker (a refused token): either way it cancels the session.
    fn start(self, delivery: &TaskTracker, rx: tokio::sync::mpsc::Receiver<RawBatch>) -> Delivery {
        let s = &self.session;
        let spooler = delivery.spawn(uploader::spool_batches(rx, s.clone(), self.spool.clone(), self.wake.clone()));
        let drain = uploader::drain(s.clone(), self.spool.clone(), self.wake.clone(), s.cancel.clone(), DrainMode::Forever);
        let cancel = s.cancel.clone();
        let drainer = delivery.spawn(async move {
            let r = drain.await;
            cancel.cancel();
            r
        });
        Delivery { dest: self, spooler, drainer }
    }
}

impl Delivery {
    /// After the actor has stopped (dropping its senders): the spooler's end, once
    /// everything is on disk, then the drainer's. The error that must stop the worker,
    /// if any.
    async fn finish(&mut self) -> anyhow::Result<Option<anyhow::Error>> {
        let about = self.dest.about;
        let named = move |e: anyhow::Error| match about {
            Some(about) => e.context(about),
            None => e,
        };
        (&mut self.spooler).await.context("the spool task panicked").map_err(named)?.map_err(named)?;
        let drained = (&mut self.drainer).await.context("the upload task panicked").and_then(|r| r);
        Ok(drained.err().map(named))
    }

    /// Send what is spooled for as long as the manager takes it (the caller bounds it).
    async fn flush(&self) {
        let d = &self.dest;
        let _ = uploader::drain(d.session.clone(), d.spool.clone(), d.wake.clone(), CancellationToken::new(), DrainMode::Flush).await;
    }
}

/// Where a self-play worker spools the opponent's side for `run`:
/// `spool_dir/opponents/<run>`, apart from the spool of any worker playing for `run`.
pub fn opponent_spool_dir(spool_dir: &std::path::Path, run: &str) -> anyhow::Result<std::path::PathBuf> {
    spool_dir_for(spool_dir, run)?;
    Ok(spool_dir.join("opponents").join(run))
}

/// The destinations of the registered run's gameplay, in the actor's outputs' order:
/// the run's own (its spool apart from any other run's: what was played for one run is
/// never sent to another); in self-play, the opponent's side of each match for the
/// opponent run, through a spool of its own (apart from that run's own workers' spool on
/// this machine).
async fn destinations(settings: &Settings, reg: &Registration, session: &Session) -> anyhow::Result<Vec<Destination>> {
    let limits = settings.spool_limits;
    let mut out = vec![Destination::open(session.clone(), spool_dir_for(&settings.spool_dir, &reg.run)?, limits, None).await?];
    if let Some(sp) = &reg.selfplay {
        tracing::info!(opponent_run = %sp.opponent_run, cpu_share = sp.cpu_share, latest_share = sp.latest_share, "self-play");
        let s = Session {
            client: session.client.clone().with_run(Some(&sp.opponent_run)),
            counters: Arc::new(ActorCounters::default()),
            uploads: Arc::new(UploadStats::default()),
            ..session.clone()
        };
        let dir = opponent_spool_dir(&settings.spool_dir, &sp.opponent_run)?;
        out.push(Destination::open(s, dir, limits, Some("uploading the opponent's side to its run")).await?);
    }
    Ok(out)
}

/// The first model (the manager publishes one before training starts), waiting for it
/// as long as it takes; with its ETag. `None`: the session was cancelled first.
async fn first_model(session: &Session, reg: &Registration, poll_every: Duration) -> anyhow::Result<Option<(actor::Model, Option<String>)>> {
    let mut announced = false;
    loop {
        match retrying("downloading the model", &session.cancel, || session.client.latest_model(None)).await? {
            None => return Ok(None),
            Some(ModelFetch::Model { bytes, etag, version }) => {
                let model = control::load_model(bytes, version).await?;
                control::check_model(&model, reg)?;
                return Ok(Some((model, etag)));
            }
            Some(_) => {
                if !announced {
                    tracing::info!("the manager has not published a model yet; waiting for it");
                    announced = true;
                }
                tokio::select! {
                    _ = tokio::time::sleep(poll_every) => {}
                    _ = session.cancel.cancelled() => return Ok(None),
                }
            }
        }
    }
}

/// Play for the manager until `cancel` fires (or a fatal error). `make(cfg, i)`
/// builds environment i's emulator for the game the registration asks for; `run`
/// passes the simulator or Dolphin, tests may pass any [`Emulator`].
pub async fn run_with<E, F>(settings: Settings, cancel: CancellationToken, make: F) -> anyhow::Result<RunStats>
where
    E: Emulator + crate::games::duel::Seats,
    F: Fn(&ActorConfig, usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    let client = Client::new(&settings.manager, &settings.token)?.with_run(settings.run.as_deref());
    let uploads = Arc::new(UploadStats::default());
    let counters = Arc::new(ActorCounters::default());

    // Register (waiting for the manager as long as it takes).
    let request = RegisterRequest {
        host: host_name(),
        backend: settings.backend.name().into(),
        // The count it starts with (auto starts with one; heartbeats carry the current).
        envs: match settings.envs {
            Envs::Fixed(n) => n.try_into().unwrap_or(u32::MAX),
            Envs::Auto => 1,
        },
        version: env!("CARGO_PKG_VERSION").into(),
    };
    tracing::info!(manager = %client.base(), run = settings.run.as_deref().unwrap_or("(assigned by the manager)"), envs = %settings.envs, seed = settings.seed, "registering");
    let Some(reg) = retrying("registering with the manager", &cancel, || client.register(&request)).await? else {
        return Ok(run_stats(&Identity::new(0), &[(counters, uploads)]));
    };
    let cfg = actor_config(&reg, &settings)?;
    tracing::info!(worker_id = reg.worker_id, run = %reg.run, epsilon = reg.epsilon, n_step = reg.n_step, task = %reg.task, side = %reg.side, "registered");
    // From here on every request is for that run, re-registrations included.
    let client = client.with_run(Some(&reg.run));
    counters.set_epsilon(reg.epsilon);
    let session = Session { client, identity: Arc::new(Identity::new(reg.worker_id)), counters, uploads, cancel };
    let destinations = destinations(&settings, &reg, &session).await?;
    let sides: Vec<_> = destinations.iter().map(|d| (d.session.counters.clone(), d.session.uploads.clone())).collect();
    let stats = || run_stats(&session.identity, &sides);

    let poll_every = Duration::from_secs_f64(reg.model_poll_secs.max(0.1));
    let Some((model, etag)) = first_model(&session, &reg, poll_every).await? else { return Ok(stats()) };
    tracing::info!(model_version = model.version, "playing");

    let (episode_tx, episode_rx) = tokio::sync::mpsc::channel(10_000);
    let (model_tx, model_rx) = tokio::sync::mpsc::channel(2);
    let (spare_tx, spare_rx) = tokio::sync::mpsc::channel(2);
    let tap = Arc::new(LiveTap::default());

    // Every task is tracked and joined, in two groups that end at different moments.
    // The control tasks only return, on the token: joined before the flush. The
    // uploader's two tasks and the episode reporter deliver what the actor hands over:
    // the first two return results (a refused token stops the worker), awaited through
    // their handles after the actor; the reporter posts the actor's last episodes, for
    // at most REPORT_SECS after the flush; `delivery` is joined last.
    let delivery = TaskTracker::new();
    // Each destination takes the batches of its output of the actor, in the same order.
    let (mut outputs, mut deliveries) = (vec![], vec![]);
    for dest in destinations {
        let (tx, rx) = tokio::sync::mpsc::channel(HANDOVER_BATCHES);
        outputs.push(actor::Output { batches: tx, counters: dest.session.counters.clone() });
        deliveries.push(dest.start(&delivery, rx));
    }
    // Self-play: the opponent run's models, kept by a task of their own.
    let pool = reg.selfplay.as_ref().map(|sp| {
        let (pool_tx, pool) = tokio::sync::watch::channel(Arc::new(selfplay::Pool::default()));
        let wanted = selfplay::Wanted { side: cfg.side.other(), actions: cfg.actions };
        let client = session.client.clone().with_run(Some(&sp.opponent_run));
        delivery.spawn(selfplay::poll_pool(client, wanted, poll_every, pool_tx, session.cancel.clone()));
        pool
    });
    let reports_stop = CancellationToken::new();
    let every = Duration::from_secs_f64(reg.heartbeat_secs.max(0.1));
    delivery.spawn(control::report_episodes(session.clone(), episode_rx, every, reports_stop.clone()));
    delivery.close();
    let control = TaskTracker::new();
    control.spawn(control::poll_models(session.clone(), reg.clone(), etag, model.version, poll_every, model_tx, spare_rx));
    control.spawn(control::heartbeats(session.clone(), request, reg.clone(), tap.clone()));
    let action_names: Vec<String> = (0..cfg.actions.len()).map(|a| cfg.actions.action_name(a).to_string()).collect();
    control.spawn(live::stream(session.clone(), tap.clone(), action_names));
    control.spawn(crate::run::league::play_league(session.client.clone(), reg.league_share, session.cancel.clone()));
    control.close();

    let actor = {
        let (counters, cancel) = (session.counters.clone(), session.cancel.clone());
        let game = cfg.clone();
        let io = ActorIo { outputs, episodes: episode_tx, models: model_rx, live: Some(tap), spares: Some(spare_tx), pool };
        let handle =
            std::thread::Builder::new().name("actor".into()).spawn(move || actor::run_actor(cfg, move |i| make(&game, i), model, io, counters, cancel))?;
        tokio::task::spawn_blocking(move || handle.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the actor thread panicked"))))
    };

    // Run until shutdown, or until an output must stop us (its drainer cancels the
    // session on a refused token).
    session.cancel.cancelled().await;
    let fatal = stop(actor, &mut deliveries, &control, &delivery, &reports_stop).await?;

    let stats = stats();
    stopped(&stats, settings.stats_file.as_deref())?;
    match fatal {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

/// Say what the run did, and write it to `--stats-file` when asked.
fn stopped(stats: &RunStats, stats_file: Option<&std::path::Path>) -> anyhow::Result<()> {
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
    if let Some(path) = stats_file {
        durable::write_atomic(path, &serde_json::to_vec_pretty(stats)?).with_context(|| format!("writing --stats-file {}", path.display()))?;
    }
    Ok(())
}

/// The shutdown, once the session's token fired: the actor's end (it hands over its
/// last transitions), then each destination's tasks (everything on disk), the control
/// tasks, the flush (unless a destination must stop the worker) and the last episode
/// reports. The error that stops the worker, if any.
async fn stop(
    actor: JoinHandle<anyhow::Result<()>>,
    deliveries: &mut [Delivery],
    control: &TaskTracker,
    delivery: &TaskTracker,
    reports_stop: &CancellationToken,
) -> anyhow::Result<Option<anyhow::Error>> {
    let mut fatal = None;
    if let Err(e) = actor.await.context("the actor task panicked")? {
        fatal = Some(e);
    }
    for d in deliveries.iter_mut() {
        if let Some(e) = d.finish().await? {
            // A refused token is the reason to stop; the actor's error is its consequence.
            fatal = Some(e);
        }
    }
    control.wait().await;
    if fatal.is_none() {
        // One deadline for all: a shutdown must not take twice as long in self-play.
        let flush = async {
            for d in deliveries.iter() {
                d.flush().await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(FLUSH_SECS), flush).await.is_err() {
            tracing::warn!("the manager did not take everything within {FLUSH_SECS} s; the rest stays spooled for the next start");
        }
    }
    // By now only the reporter can still be running.
    if tokio::time::timeout(Duration::from_secs(REPORT_SECS), delivery.wait()).await.is_err() {
        reports_stop.cancel();
        delivery.wait().await;
    }
    Ok(fatal)
}

fn actor_config(reg: &Registration, settings: &Settings) -> anyhow::Result<ActorConfig> {
    let actions: ActionSet =
        reg.action_set.parse().map_err(|e| anyhow::anyhow!("the manager asks for {e}: this shine-worker is too old for that manager; upgrade it"))?;
    let task: Task = reg.task.parse().map_err(|e| anyhow::anyhow!("the manager asks for {e}: this shine-worker is too old for that manager; upgrade it"))?;
    let side: Side = reg.side.parse().map_err(|e| anyhow::anyhow!("the manager asks for {e}: this shine-worker is too old for that manager; upgrade it"))?;
    if reg.n_step == 0 {
        bail!("the manager asks for n_step 0; it must be at least 1");
    }
    if side != Side::Fox && settings.backend == Backend::Dolphin {
        bail!("run {:?} plays {side}; a Dolphin worker plays Fox only (so far): run this worker with --backend sim, or join a Fox run (--run)", reg.run);
    }
    if let Some(sp) = &reg.selfplay {
        if settings.backend != Backend::Sim {
            bail!("run {:?} learns by self-play against run {:?}, which runs on the simulator only (so far): run this worker with --backend sim", reg.run, sp.opponent_run);
        }
        for (name, v) in [("cpu_share", sp.cpu_share), ("latest_share", sp.latest_share)] {
            if !(0.0..=1.0).contains(&v) {
                bail!("the manager's self-play {name} = {v} is not a share in [0, 1]");
            }
        }
    }
    Ok(ActorConfig {
        task,
        actions,
        side,
        setup: side.view(MatchSetup::default()),
        envs: match settings.envs {
            Envs::Fixed(n) => n,
            Envs::Auto => 1,
        },
        n_step: reg.n_step,
        gamma: reg.gamma as f32,
        cpu_level: reg.cpu_level,
        cpu_level_top_share: reg.cpu_level_top_share,
        eval_share: reg.eval_share,
        batch_transitions: reg.upload_every_transitions as usize,
        batch_secs: reg.upload_every_secs,
        batch_cap: uploader::batch_cap(reg.upload_every_transitions as usize, reg.max_upload_bytes, reg.ingest_queue_transitions),
        seed: settings.seed,
        auto: (settings.envs == Envs::Auto).then(TunerConfig::for_machine),
        selfplay: reg.selfplay.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_stop_fits_in_the_units_stop_timeout() {
        // systemd kills a service still running TimeoutStopSec after SIGTERM: the
        // worker's own limits on a stop (the flush, then the last reports) must leave
        // room in it. (manager/tests/fleet.rs stops real workers started from the unit
        // and checks that they exit cleanly; this is the "in time" half, by the numbers.)
        let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systemd/shine-worker.service")).unwrap();
        let stop: u64 = unit.lines().find_map(|l| l.trim().strip_prefix("TimeoutStopSec=")).expect("TimeoutStopSec=").trim().parse().unwrap();
        assert!(FLUSH_SECS + REPORT_SECS < stop, "a stop may take {FLUSH_SECS} s + {REPORT_SECS} s; the unit allows {stop} s");
    }
}
