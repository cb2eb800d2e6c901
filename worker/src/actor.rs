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
//! While a browser watches the worker ([`crate::live`]), environment 0 plays at the
//! game's real pace and records every frame with the decision behind it (the chosen
//! action and all its Q-values); the other environments are untouched.
//!
//! A newer model arrives on a channel and is swapped in between two rounds, never
//! during a forward pass; the old one is dropped there, so memory stays flat however
//! many models a long run sees (`tests/model_swap_memory.rs` measures it).

use crate::client::EpisodeReport;
use crate::live::{LiveDecision, LiveTap, Pacer};
use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shine_agent::env::Step;
use shine_agent::experience::{col, TRANSITION_FLOATS};
use shine_agent::model::{QNet, Scratch};
use shine_agent::{ActionSet, Env, EpisodeEnd, Observation, Task, STATE_DIM};
use shine_bridge::{Emulator, MatchSetup};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One transition: state (27), action, reward, next state (27), terminal.
pub type Row = [f32; TRANSITION_FLOATS];

/// Lay out one transition as the wire format's 57 floats.
pub fn transition_row(state: &[f32; STATE_DIM], action: usize, reward: f32, next: &[f32; STATE_DIM], terminal: bool) -> Row {
    let mut row = [0.0; TRANSITION_FLOATS];
    row[col::STATE..col::STATE + STATE_DIM].copy_from_slice(state);
    row[col::ACTION] = action as f32;
    row[col::REWARD] = reward;
    row[col::NEXT_STATE..col::NEXT_STATE + STATE_DIM].copy_from_slice(next);
    row[col::TERMINAL] = if terminal { 1.0 } else { 0.0 };
    row
}

/// A decision whose transition is not complete yet.
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    pub state: [f32; STATE_DIM],
    pub action: usize,
    /// The macro's summed reward.
    pub reward: f32,
    /// The model that chose the action.
    pub model_version: u64,
}

/// Assembles n-step transitions for one environment.
///
/// A transition starting at decision t carries `r_t + g r_t+1 + ... + g^(n-1) r_t+n-1`
/// and the state after decision t+n-1; the learner bootstraps it with `g^n max Q`.
/// With n = 1 this is the plain one-step transition.
#[derive(Debug)]
pub struct NStep {
    n: usize,
    gamma: f32,
    window: VecDeque<Decision>,
}

impl NStep {
    pub fn new(n: usize, gamma: f32) -> Self {
        assert!(n >= 1, "n-step returns need n >= 1");
        NStep { n, gamma, window: VecDeque::with_capacity(n) }
    }

    fn discounted(&self) -> f32 {
        self.window.iter().rev().fold(0.0, |acc, d| d.reward + self.gamma * acc)
    }

    /// Add the decision just played (`next` is the state it led to, `end` whether the
    /// episode ended there) and emit every transition that became complete. Returns
    /// how many decisions were dropped because they can never be completed.
    pub fn push(&mut self, d: Decision, next: &[f32; STATE_DIM], end: Option<EpisodeEnd>, emit: &mut impl FnMut(&Row, u64)) -> usize {
        self.window.push_back(d);
        let emit_front = |this: &mut Self, terminal: bool, emit: &mut dyn FnMut(&Row, u64)| {
            let ret = this.discounted();
            let first = this.window.pop_front().expect("window is not empty");
            emit(&transition_row(&first.state, first.action, ret, next, terminal), first.model_version);
        };
        match end {
            None => {
                if self.window.len() == self.n {
                    emit_front(self, false, emit);
                }
                0
            }
            // A terminal state has no future value, so each of the last decisions gets
            // the exact (shorter) sum of what remained, and terminal = 1.
            Some(e) if e.is_terminal() => {
                while !self.window.is_empty() {
                    emit_front(self, true, emit);
                }
                0
            }
            // A time limit is not terminal: the learner must bootstrap from `next`
            // with g^n. The oldest decision has its full n rewards and is fine. The
            // last n-1 have fewer than n rewards before the cut; sent as non-terminal
            // they would be bootstrapped with g^n from a state fewer than n steps
            // away (wrong), and as terminal they would claim the future is worth 0
            // (the classic truncation bug). The game cannot be played on past the
            // minute, so they cannot be completed: drop them.
            Some(_) => {
                if self.window.len() == self.n {
                    emit_front(self, false, emit);
                }
                let dropped = self.window.len();
                self.window.clear();
                dropped
            }
        }
    }

    /// Forget unfinished decisions (the emulator failed mid-episode). Returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.window.len();
        self.window.clear();
        n
    }
}

/// Whole transitions played by one model, on their way to the uploader.
#[derive(Debug, Clone, PartialEq)]
pub struct RawBatch {
    /// `count x 57` floats.
    pub data: Vec<f32>,
    pub model_version: u64,
    pub n_step: u8,
}

impl RawBatch {
    pub fn count(&self) -> usize {
        self.data.len() / TRANSITION_FLOATS
    }
}

/// Counters the actor keeps and the network side reports (heartbeats, stats file).
#[derive(Debug, Default)]
pub struct Counters {
    pub frames: AtomicU64,
    pub skipped_frames: AtomicU64,
    pub episodes: AtomicU64,
    /// Transitions handed to the uploader.
    pub transitions: AtomicU64,
    /// Decisions that never became transitions (time-limit cut with n > 1, emulator
    /// failures, shutdown with n > 1).
    pub incomplete: AtomicU64,
    /// Episode reports dropped because the report queue was full.
    pub reports_dropped: AtomicU64,
    pub model_version: AtomicU64,
    pub model_swaps: AtomicU64,
    /// The manager's epsilon, as f64 bits.
    epsilon: AtomicU64,
}

impl Counters {
    pub fn epsilon(&self) -> f64 {
        f64::from_bits(self.epsilon.load(Relaxed))
    }
    pub fn set_epsilon(&self, eps: f64) {
        self.epsilon.store(eps.clamp(0.0, 1.0).to_bits(), Relaxed);
    }
}

/// Collects transitions into batches of one model version, flushed by size or age.
pub struct Batcher {
    data: Vec<f32>,
    version: u64,
    started: Option<Instant>,
    max_transitions: usize,
    max_age: Duration,
    n_step: u8,
    out: tokio::sync::mpsc::Sender<RawBatch>,
    counters: Arc<Counters>,
}

impl Batcher {
    pub fn new(max_transitions: usize, max_age: Duration, n_step: u8, out: tokio::sync::mpsc::Sender<RawBatch>, counters: Arc<Counters>) -> Self {
        let max_transitions = max_transitions.clamp(1, shine_agent::experience::MAX_COUNT as usize);
        Batcher { data: Vec::new(), version: 0, started: None, max_transitions, max_age, n_step, out, counters }
    }

    /// Add one transition chosen by model `version`. A batch holds one version only,
    /// so that its header tells the manager exactly which model played it.
    pub fn push(&mut self, row: &Row, version: u64) -> anyhow::Result<()> {
        if !self.data.is_empty() && version != self.version {
            self.flush()?;
        }
        if self.data.is_empty() {
            self.version = version;
            self.started = Some(Instant::now());
        }
        self.data.extend_from_slice(row);
        if self.data.len() / TRANSITION_FLOATS >= self.max_transitions {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush_if_due(&mut self, now: Instant) -> anyhow::Result<()> {
        match self.started {
            Some(t) if now.duration_since(t) >= self.max_age => self.flush(),
            _ => Ok(()),
        }
    }

    pub fn flush(&mut self) -> anyhow::Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.data, Vec::with_capacity(self.max_transitions.min(4096) * TRANSITION_FLOATS));
        let batch = RawBatch { data, model_version: self.version, n_step: self.n_step };
        let count = batch.count() as u64;
        self.started = None;
        // Blocking on a full channel is right: it fills when the manager is behind (the
        // spooler then waits) or the disk cannot keep up, and playing on would only
        // make gameplay the spool must hold or drop.
        self.out.blocking_send(batch).map_err(|_| anyhow::anyhow!("the uploader stopped; cannot hand over transitions"))?;
        self.counters.transitions.fetch_add(count, Relaxed);
        Ok(())
    }
}

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
    pub seed: u64,
}

/// The actor's connections to the network side.
pub struct ActorIo {
    pub batches: tokio::sync::mpsc::Sender<RawBatch>,
    pub episodes: tokio::sync::mpsc::Sender<EpisodeReport>,
    pub models: tokio::sync::mpsc::Receiver<Model>,
    /// The live view's tap (environment 0 streams through it while watched).
    pub live: Option<Arc<LiveTap>>,
}

enum Cmd {
    Reset {
        cpu_level: u8,
        seed: u64,
    },
    /// Play an action; with a decision (env 0, watched): paced to real time and recorded.
    Step(usize, Option<LiveDecision>),
}

enum Reply {
    Ready(Observation),
    Stepped {
        step: Step,
        skipped_total: u64,
    },
    /// The emulator failed; the environment can be reset.
    Failed(String),
    /// The emulator could not be created; the environment is gone.
    Fatal(String),
}

/// Run one environment: do what the actor says, answer with what happened.
fn env_thread<E: Emulator>(
    idx: usize,
    make: &dyn Fn(usize) -> anyhow::Result<E>,
    cfg: &ActorConfig,
    cmds: mpsc::Receiver<Cmd>,
    replies: mpsc::Sender<(usize, Reply)>,
    live: Option<Arc<LiveTap>>,
) {
    let emu = match make(idx) {
        Ok(e) => e,
        Err(e) => {
            let _ = replies.send((idx, Reply::Fatal(format!("{e:#}"))));
            return;
        }
    };
    let mut env = Env::new(emu, cfg.setup, cfg.task, cfg.actions);
    let mut pacer = Pacer::default();
    // The loop ends when the actor drops its sender (shutdown).
    for cmd in cmds {
        let reply = match cmd {
            Cmd::Reset { cpu_level, seed } => env.reset(cpu_level, seed).map(Reply::Ready),
            Cmd::Step(a, decision) => {
                let stepped = match (&live, decision) {
                    (Some(tap), Some(d)) if tap.watched() => {
                        tap.set_decision(&d);
                        // Each frame waits for its turn at 60 fps, then goes to the browser.
                        env.step_with(a, |obs| {
                            pacer.frame();
                            tap.push(obs, &d);
                        })
                    }
                    _ => {
                        pacer.reset();
                        env.step(a)
                    }
                };
                stepped.map(|step| Reply::Stepped { step, skipped_total: env.emulator().skipped_frames() })
            }
        };
        let reply = reply.unwrap_or_else(|e| Reply::Failed(e.to_string()));
        if replies.send((idx, reply)).is_err() {
            return;
        }
    }
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
    nstep: NStep,
    skipped: u64,
    failures: u32,
}

/// After this many failures in a row an environment is given up.
const MAX_ENV_FAILURES: u32 = 3;

impl Slot {
    /// Draw the next episode's kind and send the reset.
    fn start_episode(&mut self, cfg: &ActorConfig) {
        let eval = self.rng.random::<f64>() < cfg.eval_share;
        // The paper: the top level in most training episodes, the rest uniform, so
        // the agent also sees weaker (different) opponents.
        let cpu_level = if eval || self.rng.random::<f64>() < cfg.cpu_level_top_share { cfg.cpu_level } else { self.rng.random_range(1..=cfg.cpu_level) };
        self.episode = EpisodeInfo { eval, cpu_level, frames: 0, reward: 0.0 };
        self.obs = None;
        self.pending = None;
        let seed = self.rng.random();
        self.send(Cmd::Reset { cpu_level, seed });
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
pub fn run_actor<E, F>(cfg: ActorConfig, make: F, mut model: Model, mut io: ActorIo, counters: Arc<Counters>, cancel: CancellationToken) -> anyhow::Result<()>
where
    E: Emulator,
    F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    if cfg.envs == 0 {
        bail!("--envs must be at least 1");
    }
    if !(1..=9).contains(&cfg.cpu_level) {
        bail!("cpu_level {} from the manager is outside 1..=9", cfg.cpu_level);
    }
    check_model(&model, cfg.actions)?;
    counters.model_version.store(model.version, Relaxed);
    let make = Arc::new(make);
    let (reply_tx, replies) = mpsc::channel();
    let mut threads = Vec::with_capacity(cfg.envs);
    let mut slots = Vec::with_capacity(cfg.envs);
    for i in 0..cfg.envs {
        let (tx, rx) = mpsc::channel();
        let (make, cfg2, reply_tx) = (make.clone(), cfg.clone(), reply_tx.clone());
        // Only environment 0 is ever shown live.
        let live = if i == 0 { io.live.clone() } else { None };
        let t = std::thread::Builder::new()
            .name(format!("env-{i}"))
            .spawn(move || env_thread(i, &*make, &cfg2, rx, reply_tx, live))
            .context("starting an environment thread")?;
        threads.push(t);
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        rng.set_stream(i as u64);
        slots.push(Slot {
            cmds: Some(tx),
            rng,
            episode: EpisodeInfo { eval: false, cpu_level: cfg.cpu_level, frames: 0, reward: 0.0 },
            obs: None,
            pending: None,
            nstep: NStep::new(cfg.n_step.max(1) as usize, cfg.gamma),
            skipped: 0,
            failures: 0,
        });
    }
    drop(reply_tx);
    for s in &mut slots {
        s.start_episode(&cfg);
    }

    let mut batcher =
        Batcher::new(cfg.batch_transitions, Duration::from_secs_f64(cfg.batch_secs.max(0.01)), cfg.n_step.max(1), io.batches.clone(), counters.clone());
    let actions = cfg.actions.len();
    let mut scratch = Scratch::default();
    let (mut states, mut q) = (vec![0.0f32; cfg.envs * STATE_DIM], vec![0.0f32; cfg.envs * actions]);
    let mut ready: Vec<(usize, Reply)> = Vec::with_capacity(cfg.envs);
    let mut need: Vec<usize> = Vec::with_capacity(cfg.envs);
    let mut alive = cfg.envs;
    let mut last_error = String::new();

    let result = loop {
        if cancel.is_cancelled() {
            break Ok(());
        }
        // Wait for one environment, then take every other one that is ready too.
        match replies.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => ready.push(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = batcher.flush_if_due(Instant::now()) {
                    break Err(e);
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Err(anyhow::anyhow!("every environment stopped; last error: {last_error}")),
        }
        ready.extend(replies.try_iter());

        // Between decisions: take the newest model, drop the old one here.
        while let Ok(m) = io.models.try_recv() {
            if let Err(e) = check_model(&m, cfg.actions) {
                tracing::warn!("ignoring model v{}: {e:#}", m.version);
                continue;
            }
            tracing::info!(from = model.version, to = m.version, "playing with a new model");
            counters.model_version.store(m.version, Relaxed);
            counters.model_swaps.fetch_add(1, Relaxed);
            model = m;
        }

        need.clear();
        let mut failed = Ok(());
        for (i, reply) in ready.drain(..) {
            let s = &mut slots[i];
            match reply {
                Reply::Ready(obs) => {
                    s.obs = Some(obs);
                    s.failures = 0;
                    need.push(i);
                }
                Reply::Stepped { step, skipped_total } => {
                    counters.frames.fetch_add(step.frames as u64, Relaxed);
                    counters.skipped_frames.fetch_add(skipped_total.saturating_sub(s.skipped), Relaxed);
                    s.skipped = skipped_total;
                    s.episode.frames += step.frames;
                    s.episode.reward += step.reward;
                    let mut d = s.pending.take().expect("a step answers a decision");
                    d.reward = step.reward;
                    let dropped = s.nstep.push(d, &step.next.state, step.end, &mut |row, v| {
                        if failed.is_ok() {
                            failed = batcher.push(row, v);
                        }
                    });
                    counters.incomplete.fetch_add(dropped as u64, Relaxed);
                    match step.end {
                        Some(end) => {
                            counters.episodes.fetch_add(1, Relaxed);
                            let report = EpisodeReport {
                                frames: s.episode.frames,
                                reward: s.episode.reward,
                                survived: end == EpisodeEnd::TimeLimit,
                                eval: s.episode.eval,
                                cpu_level: s.episode.cpu_level,
                                model_version: d.model_version,
                            };
                            // Reports feed the dashboard only: when the queue is full
                            // (manager away a long time) dropping one is fine, blocking
                            // play is not.
                            if io.episodes.try_send(report).is_err() {
                                counters.reports_dropped.fetch_add(1, Relaxed);
                            }
                            s.start_episode(&cfg);
                        }
                        None => {
                            s.obs = Some(step.next);
                            need.push(i);
                        }
                    }
                }
                Reply::Failed(e) => {
                    s.failures += 1;
                    counters.incomplete.fetch_add(s.nstep.clear() as u64 + s.pending.is_some() as u64, Relaxed);
                    if s.failures >= MAX_ENV_FAILURES {
                        tracing::error!(env = i, "environment failed {} times in a row, giving it up: {e}", s.failures);
                        s.cmds = None;
                        alive -= 1;
                    } else {
                        tracing::warn!(env = i, "environment failed, restarting its episode: {e}");
                        s.start_episode(&cfg);
                    }
                    last_error = e;
                }
                Reply::Fatal(e) => {
                    tracing::error!(env = i, "cannot start the environment: {e}");
                    s.cmds = None;
                    alive -= 1;
                    last_error = e;
                }
            }
        }
        if let Err(e) = failed {
            break Err(e);
        }
        if alive == 0 {
            break Err(anyhow::anyhow!("every environment failed; last error: {last_error}"));
        }
        if !need.is_empty() {
            let n = need.len();
            for (j, &i) in need.iter().enumerate() {
                states[j * STATE_DIM..(j + 1) * STATE_DIM].copy_from_slice(&slots[i].obs.as_ref().expect("ready env has an observation").state);
            }
            model.net.forward(&states, n, &mut q, &mut scratch);
            let eps = counters.epsilon();
            for (j, &i) in need.iter().enumerate() {
                let s = &mut slots[i];
                // Evaluation episodes are greedy: they measure the model, not exploration.
                let explore = !s.episode.eval && s.rng.random::<f64>() < eps;
                let action = if explore { s.rng.random_range(0..actions) } else { QNet::argmax(&q[j * actions..(j + 1) * actions]) };
                let obs = s.obs.take().expect("checked above");
                s.pending = Some(Decision { state: obs.state, action, reward: 0.0, model_version: model.version });
                let live = (i == 0 && io.live.as_ref().is_some_and(|t| t.watched())).then(|| LiveDecision {
                    action: action as u32,
                    q: q[j * actions..(j + 1) * actions].to_vec(),
                    explored: explore,
                    model_version: model.version,
                    cpu_level: s.episode.cpu_level,
                    eval: s.episode.eval,
                });
                s.send(Cmd::Step(action, live));
            }
        }
        if let Err(e) = batcher.flush_if_due(Instant::now()) {
            break Err(e);
        }
    };

    // Shutdown: stop the environments, then hand over every complete transition. With
    // n > 1 the last decisions of each running episode are incomplete and dropped.
    for s in &mut slots {
        s.cmds = None;
        counters.incomplete.fetch_add(s.nstep.clear() as u64, Relaxed);
    }
    drop(replies);
    for t in threads {
        let _ = t.join();
    }
    let flushed = batcher.flush();
    result.and(flushed)
}

fn check_model(m: &Model, actions: ActionSet) -> anyhow::Result<()> {
    if m.net.action_count() != actions.len() {
        bail!("model v{} has {} actions but the {} action set has {}", m.version, m.net.action_count(), actions, actions.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(v: f32) -> [f32; STATE_DIM] {
        [v; STATE_DIM]
    }

    fn d(state: f32, action: usize, reward: f32) -> Decision {
        Decision { state: st(state), action, reward, model_version: 7 }
    }

    /// Push decisions (state i, action i, reward r[i]); the last one ends with `end`.
    fn run(n: usize, gamma: f32, rewards: &[f32], end: EpisodeEnd) -> (Vec<Row>, usize) {
        let mut ns = NStep::new(n, gamma);
        let mut rows = Vec::new();
        let mut dropped = 0;
        for (i, &r) in rewards.iter().enumerate() {
            let last = i + 1 == rewards.len();
            dropped += ns.push(d(i as f32, i, r), &st(i as f32 + 1.0), last.then_some(end), &mut |row, v| {
                assert_eq!(v, 7);
                rows.push(*row);
            });
        }
        (rows, dropped)
    }

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn transition_row_is_the_papers_57_floats() {
        let r = transition_row(&st(0.25), 3, 0.5, &st(0.75), true);
        assert_eq!(r.len(), 57);
        assert!(r[..27].iter().all(|&v| v == 0.25));
        assert_eq!((r[27], r[28]), (3.0, 0.5));
        assert!(r[29..56].iter().all(|&v| v == 0.75));
        assert_eq!(r[56], 1.0);
        assert_eq!(transition_row(&st(0.0), 0, 0.0, &st(0.0), false)[56], 0.0);
    }

    #[test]
    fn one_step_transitions_follow_each_decision() {
        let (rows, dropped) = run(1, 0.99, &[1.0, 2.0, 3.0], EpisodeEnd::TimeLimit);
        assert_eq!((rows.len(), dropped), (3, 0));
        for (i, r) in rows.iter().enumerate() {
            assert_eq!((r[col::STATE], r[col::ACTION], r[col::REWARD], r[col::NEXT_STATE]), (i as f32, i as f32, (i + 1) as f32, i as f32 + 1.0));
            assert_eq!(r[col::TERMINAL], 0.0, "a time limit is never terminal");
        }
        let (rows, _) = run(1, 0.99, &[1.0, 2.0], EpisodeEnd::Hit);
        assert_eq!(rows.iter().map(|r| r[col::TERMINAL]).collect::<Vec<_>>(), vec![0.0, 1.0]);
    }

    #[test]
    fn n_step_sums_are_discounted_over_n_decisions() {
        // n = 3, gamma = 0.5, rewards 1, 2, 4, 8, 16, cut by the time limit.
        let (rows, dropped) = run(3, 0.5, &[1.0, 2.0, 4.0, 8.0, 16.0], EpisodeEnd::TimeLimit);
        // t=0: 1 + 0.5*2 + 0.25*4 = 3;  t=1: 2 + 2 + 2 = 6;  t=2: 4 + 4 + 4 = 12.
        let got: Vec<(f32, f32, f32, f32)> = rows.iter().map(|r| (r[col::STATE], r[col::REWARD], r[col::NEXT_STATE], r[col::TERMINAL])).collect();
        assert_eq!(got, vec![(0.0, 3.0, 3.0, 0.0), (1.0, 6.0, 4.0, 0.0), (2.0, 12.0, 5.0, 0.0)]);
        // The decisions at t=3 and t=4 have only 2 and 1 rewards before the cut.
        assert_eq!(dropped, 2);
    }

    #[test]
    fn terminal_episode_ends_with_shorter_terminal_sums() {
        let (rows, dropped) = run(3, 0.5, &[1.0, 2.0, 4.0, 8.0, 16.0], EpisodeEnd::Hit);
        assert_eq!(dropped, 0);
        let got: Vec<(f32, f32, f32, f32)> = rows.iter().map(|r| (r[col::STATE], r[col::REWARD], r[col::NEXT_STATE], r[col::TERMINAL])).collect();
        // t=3: 8 + 0.5*16 = 16, t=4: 16; both point at the final state and are terminal.
        assert_eq!(got, vec![(0.0, 3.0, 3.0, 0.0), (1.0, 6.0, 4.0, 0.0), (2.0, 12.0, 5.0, 1.0), (3.0, 16.0, 5.0, 1.0), (4.0, 16.0, 5.0, 1.0)]);
    }

    #[test]
    fn episodes_shorter_than_n() {
        // Terminal after 2 decisions with n = 4: both kept, terminal, exact sums.
        let (rows, dropped) = run(4, 0.9, &[1.0, 1.0], EpisodeEnd::StockLost);
        assert_eq!(dropped, 0);
        assert!(close(rows[0][col::REWARD], 1.9) && close(rows[1][col::REWARD], 1.0));
        assert!(rows.iter().all(|r| r[col::TERMINAL] == 1.0));
        // Cut by the time limit after 2 decisions with n = 4: nothing can be completed.
        let (rows, dropped) = run(4, 0.9, &[1.0, 1.0], EpisodeEnd::TimeLimit);
        assert_eq!((rows.len(), dropped), (0, 2));
        // Exactly n decisions then the time limit: the first one is complete.
        let (rows, dropped) = run(2, 0.9, &[1.0, 1.0], EpisodeEnd::TimeLimit);
        assert_eq!((rows.len(), dropped), (1, 1));
        assert!(close(rows[0][col::REWARD], 1.9) && rows[0][col::TERMINAL] == 0.0);
    }

    #[test]
    fn batcher_splits_by_size_and_by_model_version() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let counters = Arc::new(Counters::default());
        let mut b = Batcher::new(3, Duration::from_secs(3600), 2, tx, counters.clone());
        let row = |v: f32| transition_row(&st(v), 0, v, &st(v), false);
        for i in 0..4 {
            b.push(&row(i as f32), 1).unwrap();
        }
        b.push(&row(9.0), 2).unwrap();
        b.flush().unwrap();
        b.flush().unwrap();
        let got: Vec<(usize, u64, u8)> = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| (b.count(), b.model_version, b.n_step)).collect();
        assert_eq!(got, vec![(3, 1, 2), (1, 1, 2), (1, 2, 2)], "full batch, then a version change, then the final flush");
        assert_eq!(counters.transitions.load(Relaxed), 5);
    }
}
