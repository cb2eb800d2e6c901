//! The actor: K environments played by one frozen model, recorded as transitions.
//!
//! ```text
//!  env thread 0 ─┐ (Observation | Step)                      ┌─► RawBatch ─► uploader
//!  env thread 1 ─┼──────────────────► actor thread ─ n-step ─┤
//!  env thread K ─┘ ◄── Reset | Step(action) ──  one forward  └─► EpisodeReport ─► uploader
//!                                              for all ready envs
//! ```
//!
//! Each environment lives on its own thread (stepping the game is the CPU work, so K
//! envs use K cores). The actor thread waits for whichever environments are ready,
//! takes all of them at once, runs **one** batched forward pass of the [`QNet`] for
//! their states, picks actions epsilon-greedily and sends them back. Environments never
//! wait for each other, and inference costs one matrix product per round, not one per
//! environment.
//!
//! Everything random about an environment (episode seeds, evaluation or training,
//! CPU level, exploration) comes from its own RNG stream, so an environment's
//! episodes depend on the seed and the model, not on which envs shared a batch.
//!
//! While a browser watches the worker ([`crate::pipeline::live`]), environment 0 plays at the
//! game's real pace and records every frame with the decision behind it (the chosen
//! action and all its Q-values); the other environments are untouched.
//!
//! A newer model arrives on a channel and is swapped in between two rounds, never
//! during a forward pass; the old one goes back to the loader ([`ActorIo::spares`]),
//! which loads the next model file into its buffers, so a long run allocates no new
//! weights however many models it sees (`tests/model_swap_memory.rs` measures it).

use crate::pipeline::batcher::{Batcher, RawBatch};
use crate::games::duel::Seats;
use crate::pipeline::envs::{env_thread, Cmd, Game, Reply};
use crate::pipeline::live::{LiveDecision, LiveTap};
use crate::pipeline::nstep::{Decision, NStep};
use crate::pipeline::selfplay::Pool;
use crate::pipeline::shared::ActorCounters;
use crate::pipeline::tuner::{Tuner, TunerConfig};
use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shine_agent::model::{QNet, Scratch};
use shine_agent::protocol::{EpisodeReport, SelfPlay};
use shine_agent::{ActionSet, EpisodeEnd, Observation, Side, Task, STATE_DIM};
use shine_bridge::{Emulator, MatchSetup};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A model ready to play.
pub struct Model {
    pub net: QNet,
    pub version: u64,
}

/// How the actor plays; most of it comes from the manager's registration answer.
#[derive(Debug, Clone)]
pub struct ActorConfig {
    pub task: Task,
    pub actions: ActionSet,
    /// The fighter the bot plays.
    pub side: Side,
    /// The match as the bot sees it ([`Side::view`]).
    pub setup: MatchSetup,
    pub envs: usize,
    pub n_step: u8,
    pub gamma: f32,
    /// Top CPU level: evaluation episodes, and training ones with `cpu_level_top_share`.
    pub cpu_level: u8,
    pub cpu_level_top_share: f64,
    /// Share of episodes played greedily at `cpu_level` and reported as evaluation.
    pub eval_share: f64,
    pub batch_transitions: usize,
    pub batch_secs: f64,
    /// The most transitions a batch may grow to while the manager answers busy (at
    /// most `batch_transitions`: batches never grow).
    pub batch_cap: usize,
    pub seed: u64,
    /// `--envs auto`: start with one environment and let [`Tuner`] set the count.
    pub auto: Option<TunerConfig>,
    /// Self-play: the opponent run's models play the other side in a share of the
    /// training episodes ([`crate::pipeline::selfplay`]); `None`: the scripted CPU always.
    pub selfplay: Option<SelfPlay>,
}

/// The actor's connections to the network side.
pub struct ActorIo {
    /// Where each side's transitions go, one entry per side of the matches that learns:
    /// the bot's run first, then in self-play the opponent run (the seated rival's).
    pub outputs: Vec<Output>,
    pub episodes: tokio::sync::mpsc::Sender<EpisodeReport>,
    pub models: tokio::sync::mpsc::Receiver<Model>,
    /// The live view's tap (environment 0 streams through it while watched).
    pub live: Option<Arc<LiveTap>>,
    /// Where a swapped-out network goes, for the loader to fill with the next model
    /// (`None`: dropped).
    pub spares: Option<tokio::sync::mpsc::Sender<QNet>>,
    /// Self-play: the opponent run's models ([`crate::pipeline::selfplay::poll_pool`]),
    /// a rival picked among them for each training episode.
    pub pool: Option<tokio::sync::watch::Receiver<Arc<Pool>>>,
}

/// Where one side's transitions go: batched for its run's uploader.
pub struct Output {
    pub batches: tokio::sync::mpsc::Sender<RawBatch>,
    /// Their count and the uploader's batch scale (its manager's busy state).
    pub counters: Arc<ActorCounters>,
}

/// The episode an environment is playing.
#[derive(Debug, Clone, Copy)]
struct EpisodeInfo {
    eval: bool,
    cpu_level: u8,
    frames: u32,
    reward: f32,
}

struct Slot {
    cmds: Option<mpsc::Sender<Cmd>>,
    rng: ChaCha8Rng,
    episode: EpisodeInfo,
    /// The observation the next action is for.
    obs: Option<Observation>,
    /// The decision in flight.
    pending: Option<Decision>,
    /// Each output's decisions on their way to n-step transitions, in [`Round::outputs`]'
    /// order: the bot's, then (self-play) the rival's.
    nsteps: Vec<NStep>,
    skipped: u64,
    failures: u32,
    /// Taken away by `--envs auto`: stops at its next reply.
    retiring: bool,
}

/// After this many failures in a row an environment is given up.
const MAX_ENV_FAILURES: u32 = 3;

impl Slot {
    /// Draw the next episode's kind (and, in self-play, its rival from `pool`, exploring
    /// at `epsilon`) and send the reset.
    fn start_episode(&mut self, cfg: &ActorConfig, pool: Option<&tokio::sync::watch::Receiver<Arc<Pool>>>, epsilon: f64) {
        let eval = self.rng.random::<f64>() < cfg.eval_share;
        // The paper: the top level in most training episodes, the rest uniform, so
        // the agent also sees weaker (different) opponents.
        let cpu_level = if eval || self.rng.random::<f64>() < cfg.cpu_level_top_share { cfg.cpu_level } else { self.rng.random_range(1..=cfg.cpu_level) };
        self.obs = None;
        self.pending = None;
        let seed = self.rng.random();
        // Evaluation episodes are always against the CPU: the measure stays the same.
        let rival = match (&cfg.selfplay, pool) {
            (Some(sp), Some(pool)) if !eval => pool.borrow().draw(sp, epsilon, &mut self.rng),
            _ => None,
        };
        self.episode = EpisodeInfo { eval, cpu_level, frames: 0, reward: 0.0 };
        self.send(Cmd::Reset { cpu_level, seed, rival });
    }

    /// Forget the open episode's unfinished decisions, every side's; how many.
    fn drop_unfinished(&mut self) -> u64 {
        self.nsteps.iter_mut().map(|n| n.clear() as u64).sum::<u64>() + self.pending.take().is_some() as u64
    }

    fn send(&mut self, cmd: Cmd) {
        if let Some(tx) = &self.cmds {
            if tx.send(cmd).is_err() {
                self.cmds = None;
            }
        }
    }
}

/// Play until `cancel` fires, then hand over every complete transition and return.
/// `make` builds environment `i`'s emulator on that environment's own thread (so the
/// emulator need not be `Send`).
pub fn run_actor<E, F>(
    cfg: ActorConfig,
    make: F,
    mut model: Model,
    mut io: ActorIo,
    counters: Arc<ActorCounters>,
    cancel: CancellationToken,
) -> anyhow::Result<()>
where
    E: Emulator + Seats,
    F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    let start_envs = if cfg.auto.is_some() { 1 } else { cfg.envs };
    if start_envs == 0 {
        bail!("--envs must be at least 1");
    }
    if !(1..=9).contains(&cfg.cpu_level) {
        bail!("cpu_level {} from the manager is outside 1..=9", cfg.cpu_level);
    }
    if io.outputs.is_empty() {
        bail!("the actor needs an output for the bot's transitions");
    }
    check_model(&model, cfg.actions)?;
    counters.model_version.store(model.version, Relaxed);
    let make = Arc::new(make);
    let (reply_tx, replies) = mpsc::channel();
    let mut threads = Vec::with_capacity(start_envs);
    let mut slots = Vec::with_capacity(start_envs);
    // One output pipeline (n-step per environment, batcher, channel) per side that
    // learns: the bot's run, and in self-play the opponent run.
    let sides = io.outputs.len();
    for i in 0..start_envs {
        let (t, slot) = spawn_env(i, &make, &reply_tx, &cfg, io.live.clone(), sides)?;
        threads.push(t);
        slots.push(slot);
    }
    // Tuning keeps a sender to start more environments; otherwise the replies end
    // when every environment has stopped.
    let mut tuner = cfg.auto.map(|t| Tuner::new(t, Instant::now()));
    let spawner = tuner.is_some().then_some(reply_tx);
    let pool = io.pool.clone();
    for s in &mut slots {
        s.start_episode(&cfg, pool.as_ref(), counters.epsilon());
    }
    counters.envs_auto.store(tuner.is_some(), Relaxed);
    counters.set_envs(start_envs, tuner.as_ref().map_or_else(|| format!("fixed at {start_envs} (--envs)"), |t| t.reason().to_string()));

    // The same batcher for each output, each with its channel and counters.
    let batcher = |batches: &tokio::sync::mpsc::Sender<RawBatch>, counters: &Arc<ActorCounters>| {
        counters.batch_scale_max.store((cfg.batch_cap / cfg.batch_transitions.max(1)).max(1) as u64, Relaxed);
        Batcher::new(cfg.batch_transitions, Duration::from_secs_f64(cfg.batch_secs.max(0.01)), cfg.n_step.max(1), batches.clone(), counters.clone())
            .with_cap(cfg.batch_cap)
    };
    let outputs = io.outputs.iter().map(|o| batcher(&o.batches, &o.counters)).collect();
    let mut round = Round {
        cfg: &cfg,
        slots,
        outputs,
        pool,
        counters,
        episodes: io.episodes.clone(),
        live: io.live.clone(),
        alive: start_envs,
        last_error: String::new(),
        need: Vec::with_capacity(start_envs),
        scratch: Scratch::default(),
        states: vec![0.0; start_envs * STATE_DIM],
        q: vec![0.0; start_envs * cfg.actions.len()],
    };
    let mut ready: Vec<(usize, Reply)> = Vec::with_capacity(start_envs);

    let result = loop {
        if cancel.is_cancelled() {
            break Ok(());
        }
        if let (Some(t), Some(tx)) = (tuner.as_mut(), spawner.as_ref()) {
            let c = &round.counters;
            let before = t.revision();
            if let Some(n) = t.observe(c.frames.load(Relaxed), c.skipped_frames.load(Relaxed), Instant::now()) {
                tracing::info!(envs = n, reason = t.reason(), "--envs auto");
                if let Err(e) = round.resize(n, |i| spawn_env(i, &make, tx, &cfg, io.live.clone(), sides), &mut threads) {
                    break Err(e);
                }
            }
            // Said again only when something changed (retired environments leave on
            // their next reply), not every round.
            let active = round.active() as u64;
            if active != round.counters.envs.load(Relaxed) || t.revision() != before {
                round.counters.set_envs(active as usize, t.reason().to_string());
            }
        }
        // Wait for one environment, then take every other one that is ready too.
        match replies.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => ready.push(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = round.flush_if_due() {
                    break Err(e);
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Err(anyhow::anyhow!("every environment stopped; last error: {}", round.last_error)),
        }
        ready.extend(replies.try_iter());
        // Between decisions: take the newest model, drop the old one here.
        swap_model(&mut model, &mut io.models, io.spares.as_ref(), cfg.actions, &round.counters);
        if let Err(e) = round.answer(ready.drain(..), &model) {
            break Err(e);
        }
    };

    // Shutdown: stop the environments, then hand over every complete transition. With
    // n > 1 the last decisions of each running episode are incomplete and dropped.
    for s in &mut round.slots {
        s.cmds = None;
        round.counters.incomplete.fetch_add(s.drop_unfinished(), Relaxed);
    }
    drop(replies);
    for t in threads {
        let _ = t.join();
    }
    let flushed = round.outputs.iter_mut().map(Batcher::flush).collect::<anyhow::Result<Vec<()>>>();
    result.and(flushed.map(drop))
}

/// Start environment `i` on a thread of its own (only environment 0 is ever shown live)
/// and make its slot.
fn spawn_env<E, F>(
    i: usize,
    make: &Arc<F>,
    reply_tx: &mpsc::Sender<(usize, Reply)>,
    cfg: &ActorConfig,
    live: Option<Arc<LiveTap>>,
    outputs: usize,
) -> anyhow::Result<(std::thread::JoinHandle<()>, Slot)>
where
    E: Emulator + Seats,
    F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::channel();
    let (make, reply_tx) = (make.clone(), reply_tx.clone());
    let game = Game { setup: cfg.setup, task: cfg.task, actions: cfg.actions };
    let live = if i == 0 { live } else { None };
    let t = std::thread::Builder::new()
        .name(format!("env-{i}"))
        .spawn(move || env_thread(i, &*make, game, rx, reply_tx, live))
        .context("starting an environment thread")?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(i as u64);
    let slot = Slot {
        cmds: Some(tx),
        rng,
        episode: EpisodeInfo { eval: false, cpu_level: cfg.cpu_level, frames: 0, reward: 0.0 },
        obs: None,
        pending: None,
        nsteps: (0..outputs).map(|_| NStep::new(cfg.n_step.max(1) as usize, cfg.gamma)).collect(),
        skipped: 0,
        failures: 0,
        retiring: false,
    };
    Ok((t, slot))
}

/// Swap in the newest model waiting on `models`, between two forward passes; the old
/// one goes to `spares` (or is dropped when that is full or absent). A model for
/// another action set is refused.
fn swap_model(
    model: &mut Model,
    models: &mut tokio::sync::mpsc::Receiver<Model>,
    spares: Option<&tokio::sync::mpsc::Sender<QNet>>,
    actions: ActionSet,
    counters: &ActorCounters,
) {
    while let Ok(m) = models.try_recv() {
        if let Err(e) = check_model(&m, actions) {
            tracing::warn!("ignoring model v{}: {e:#}", m.version);
            continue;
        }
        tracing::info!(from = model.version, to = m.version, "playing with a new model");
        counters.model_version.store(m.version, Relaxed);
        counters.model_swaps.fetch_add(1, Relaxed);
        let old = std::mem::replace(model, m);
        if let Some(tx) = spares {
            let _ = tx.try_send(old.net);
        }
    }
}

/// The actor's state between rounds: the environments' slots and where their
/// transitions and episodes go. One round takes the environments' replies, records
/// what they played, and sends every ready environment its next action from one
/// forward pass.
struct Round<'a> {
    cfg: &'a ActorConfig,
    slots: Vec<Slot>,
    /// Where each side's transitions go, one batcher each, in [`ActorIo::outputs`]'
    /// order (each slot's `nsteps` in the same order).
    outputs: Vec<Batcher>,
    /// Self-play: where rivals come from.
    pool: Option<tokio::sync::watch::Receiver<Arc<Pool>>>,
    counters: Arc<ActorCounters>,
    episodes: tokio::sync::mpsc::Sender<EpisodeReport>,
    live: Option<Arc<LiveTap>>,
    /// Environments still playing, and the last error of one that failed.
    alive: usize,
    last_error: String,
    /// Environments waiting for an action this round.
    need: Vec<usize>,
    scratch: Scratch,
    states: Vec<f32>,
    q: Vec<f32>,
}

impl Round<'_> {
    /// One round: record every reply, then decide for every environment that waits.
    fn answer(&mut self, replies: impl Iterator<Item = (usize, Reply)>, model: &Model) -> anyhow::Result<()> {
        self.need.clear();
        for (i, reply) in replies {
            self.record(i, reply)?;
        }
        if self.alive == 0 {
            bail!("every environment failed; last error: {}", self.last_error);
        }
        self.decide(model);
        self.flush_if_due()
    }

    /// Hand over the batches that are old enough, every side's.
    fn flush_if_due(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        self.outputs.iter_mut().try_for_each(|b| b.flush_if_due(now))
    }

    /// Environments playing and not on their way out.
    fn active(&self) -> usize {
        self.slots.iter().filter(|s| s.cmds.is_some() && !s.retiring).count()
    }

    /// `--envs auto` set the count to `n`: start new environments, or mark the newest
    /// ones to stop at their next reply (every environment has a command in flight).
    fn resize(
        &mut self,
        n: usize,
        mut spawn: impl FnMut(usize) -> anyhow::Result<(std::thread::JoinHandle<()>, Slot)>,
        threads: &mut Vec<std::thread::JoinHandle<()>>,
    ) -> anyhow::Result<()> {
        let mut active = self.active();
        while active < n {
            let (t, mut slot) = spawn(self.slots.len())?;
            slot.start_episode(self.cfg, self.pool.as_ref(), self.counters.epsilon());
            threads.push(t);
            self.slots.push(slot);
            self.alive += 1;
            active += 1;
        }
        for s in self.slots.iter_mut().rev().filter(|s| s.cmds.is_some() && !s.retiring).take(active.saturating_sub(n)) {
            s.retiring = true;
        }
        let k = self.slots.len();
        self.states.resize(k * STATE_DIM, 0.0);
        self.q.resize(k * self.cfg.actions.len(), 0.0);
        Ok(())
    }

    /// What environment `i` answered: an observation to act on, a step to record (and
    /// maybe a finished episode), or a failure.
    fn record(&mut self, i: usize, reply: Reply) -> anyhow::Result<()> {
        let (cfg, counters, pool) = (self.cfg, &self.counters, self.pool.as_ref());
        let epsilon = counters.epsilon();
        let s = &mut self.slots[i];
        if s.retiring {
            // Taken away by --envs auto: its open episode ends here like a cut (the
            // complete transitions are already handed over), and its thread stops.
            counters.incomplete.fetch_add(s.drop_unfinished(), Relaxed);
            (s.cmds, s.retiring, s.obs) = (None, false, None);
            self.alive -= 1;
            return Ok(());
        }
        match reply {
            Reply::Ready(obs) => {
                s.obs = Some(obs);
                s.failures = 0;
                self.need.push(i);
            }
            Reply::Stepped { step, skipped_total, rival } => {
                counters.frames.fetch_add(step.frames as u64, Relaxed);
                counters.skipped_frames.fetch_add(skipped_total.saturating_sub(s.skipped), Relaxed);
                s.skipped = skipped_total;
                s.episode.frames += step.frames;
                s.episode.reward += step.reward;
                let model_version = s.pending.take().expect("a step answers a decision").model_version;
                // Each side's macro-actions in the order of the outputs: the bot's (this
                // step, by the model it decided with), then in self-play the rival's (by
                // its own); each with its own side's rewards, by the same n-step rule,
                // into its own run's transitions (each tagged with its output's index).
                let played = std::iter::once((0, step, model_version)).chain(rival.into_iter().map(|r| (1, r.played, r.model_version)));
                for (o, m, model_version) in played {
                    let (Some(nstep), Some(batcher)) = (s.nsteps.get_mut(o), self.outputs.get_mut(o)) else { continue };
                    let d = Decision { state: m.state, action: m.action, reward: m.reward, model_version };
                    let mut handed = Ok(());
                    let dropped = nstep.push(d, &m.next.state, m.end, &mut |row, v| {
                        if handed.is_ok() {
                            handed = batcher.push(row, v);
                        }
                    });
                    counters.incomplete.fetch_add(dropped as u64, Relaxed);
                    handed?;
                }
                match step.end {
                    Some(end) => {
                        counters.episodes.fetch_add(1, Relaxed);
                        let report = EpisodeReport {
                            frames: s.episode.frames,
                            reward: s.episode.reward as f64,
                            survived: end == EpisodeEnd::TimeLimit,
                            eval: s.episode.eval,
                            cpu_level: s.episode.cpu_level,
                            model_version,
                        };
                        // Reports feed the dashboard only: when the queue is full
                        // (manager away a long time) dropping one is fine, blocking
                        // play is not.
                        if self.episodes.try_send(report).is_err() {
                            counters.reports_dropped.fetch_add(1, Relaxed);
                        }
                        s.start_episode(cfg, pool, epsilon);
                    }
                    None => {
                        s.obs = Some(step.next);
                        self.need.push(i);
                    }
                }
            }
            Reply::Cut { skipped, skipped_total } => {
                // A truncation at the last state the bot decided on: the transitions
                // already complete are kept; the step across the pause, and the
                // decisions still short of their n rewards, are not (as at a time
                // limit). The episode is not reported: it has no outcome.
                counters.skipped_frames.fetch_add(skipped_total.saturating_sub(s.skipped), Relaxed);
                s.skipped = skipped_total;
                counters.episodes_cut.fetch_add(1, Relaxed);
                counters.incomplete.fetch_add(s.drop_unfinished(), Relaxed);
                tracing::info!(env = i, skipped, "the game ran on without the bot (paused worker): episode cut at the last decision");
                s.start_episode(cfg, pool, epsilon);
            }
            Reply::Failed(e) => {
                s.failures += 1;
                counters.incomplete.fetch_add(s.drop_unfinished(), Relaxed);
                if s.failures >= MAX_ENV_FAILURES {
                    tracing::error!(env = i, "environment failed {} times in a row, giving it up: {e}", s.failures);
                    s.cmds = None;
                    self.alive -= 1;
                } else {
                    tracing::warn!(env = i, "environment failed, restarting its episode: {e}");
                    s.start_episode(cfg, pool, epsilon);
                }
                self.last_error = e;
            }
            Reply::Fatal(e) => {
                tracing::error!(env = i, "cannot start the environment: {e}");
                s.cmds = None;
                self.alive -= 1;
                self.last_error = e;
            }
        }
        Ok(())
    }

    /// One batched forward pass for every waiting environment, then an
    /// epsilon-greedy action each (greedy in evaluation episodes).
    fn decide(&mut self, model: &Model) {
        let n = self.need.len();
        if n == 0 {
            return;
        }
        let actions = self.cfg.actions.len();
        for (j, &i) in self.need.iter().enumerate() {
            self.states[j * STATE_DIM..(j + 1) * STATE_DIM].copy_from_slice(&self.slots[i].obs.as_ref().expect("ready env has an observation").state);
        }
        model.net.forward(&self.states, n, &mut self.q, &mut self.scratch);
        let eps = self.counters.epsilon();
        let watched = self.live.as_ref().is_some_and(|t| t.watched());
        for (j, &i) in self.need.iter().enumerate() {
            let s = &mut self.slots[i];
            let q = &self.q[j * actions..(j + 1) * actions];
            // Evaluation episodes are greedy: they measure the model, not exploration.
            let explore = !s.episode.eval && s.rng.random::<f64>() < eps;
            let action = if explore { s.rng.random_range(0..actions) } else { QNet::argmax(q) };
            let obs = s.obs.take().expect("checked above");
            s.pending = Some(Decision { state: obs.state, action, reward: 0.0, model_version: model.version });
            let live = (i == 0 && watched).then(|| LiveDecision {
                action: action as u32,
                q: q.to_vec(),
                explored: explore,
                model_version: model.version,
                cpu_level: s.episode.cpu_level,
                eval: s.episode.eval,
            });
            s.send(Cmd::Step(action, live));
        }
    }
}

fn check_model(m: &Model, actions: ActionSet) -> anyhow::Result<()> {
    if m.net.action_count() != actions.len() {
        bail!("model v{} has {} actions but the {} action set has {}", m.version, m.net.action_count(), actions, actions.len());
    }
    Ok(())
}
