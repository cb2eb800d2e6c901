//! One run's learner: its Dueling DQN, optimizer, replay, rate limiter and counters,
//! as one plain struct ([`RunTrainer`]) with no thread and no channel of its own: the
//! device layer ([`crate::device`]) owns every run's trainer on its one thread and
//! calls it in turn.
//!
//! ```text
//! let mut run = RunTrainer::build(RunSetup { name, weight, trainer, replay, dqn, actions, side, restore },
//!                                 device, publish)?;
//!     // restores <restore.data_dir>/checkpoint if present and the replay rows the
//!     // write-ahead log kept (`Restore`); publishes the current model before returning:
//!     // version 1, random weights, on a fresh start; above every version ever published
//!     // after a crash that lost models published since the checkpoint.
//! if run.takes_inserts() { run.ingest(batch)? }   // unless the fleet is too far ahead
//! run.may_train(paused)                           // burn-in done, within the ratio
//!     // its group (crate::device::group) takes the step: run.replay_mut().draw_into(..)
//!     // of its rows, the grouped step, run.replay_mut().update_priorities(..), then
//! run.grouped_step_taken(out)?                    // counting, publishing, checkpoints
//! run.stats()                                     // TrainerStats, for /stats and /metrics
//! run.final_checkpoint()?                         // on removal and at a graceful stop
//! wire_expect(&dqn_cfg, action_set)               // what experience::decode must check
//! TrainerConfig::device()       // "auto" | "cpu" | "cuda" | "cuda:N" -> tch::Device
//! ```
//!
//! A run's turn: its queued uploads go into the replay unless the fleet is too far
//! ahead of the learner ([`RateLimiter::takes_inserts`]); if burn-in is done, it is not
//! paused and the [`RateLimiter`] allows, it may take a train step, which its group
//! takes (a run alone is a group of one: [`crate::device::group`]). Every
//! `stats_every` steps the loss and mean Q come back to the host (the only device sync
//! of the steady state besides block writes, publishes and checkpoints); every
//! `publish_every` steps a new model version goes to `publish`; every
//! `checkpoint_every` steps (or `checkpoint_every_secs`) a checkpoint is written.

pub mod bench;
mod config;
pub mod cuda_graph;
mod graph;
mod limiter;
pub(crate) mod step;

pub use config::TrainerConfig;
pub use graph::graph_applies;
pub(crate) use graph::GRAPH_WARMUP_STEPS;
pub use limiter::RateLimiter;
pub use step::GroupStep;

use crate::storage::checkpoint::{self, RunCounters};
use crate::storage::registry::Published;
use crate::storage::replay::{NewPriority, Replay, ReplayConfig, ReplayKind, Sampling};
use anyhow::{bail, Context};
use serde::Serialize;
use shine_agent::dqn::{DqnConfig, GroupShape, Learner, TrainOutput};
use shine_agent::experience::{Batch, Expect, TRANSITION_FLOATS};
use shine_agent::model::{ModelMeta, QNet};
use shine_agent::{ActionSet, Side};
use std::path::PathBuf;
use std::time::Instant;
use tch::Tensor;

/// What `experience::decode` must check for this trainer.
pub fn wire_expect(dqn: &DqnConfig, actions: ActionSet) -> Expect {
    Expect { actions: actions.len(), n_step: dqn.n_step }
}

/// Live numbers for the dashboard, `/api/v1/stats` and `/metrics`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrainerStats {
    pub device: String,
    pub replay_kind: String,
    pub replay_capacity: usize,
    /// Transitions visible to sampling.
    pub replay_len: usize,
    /// Transitions waiting in host memory for the next block write.
    pub replay_staged: usize,
    /// Train steps over the whole run (continues across restarts).
    pub train_steps: u64,
    /// Transitions inserted into the replay over the whole run.
    pub transitions_inserted: u64,
    /// Transitions inserted since this process started.
    pub inserted_since_start: u64,
    /// Transitions sampled for training over the whole run.
    pub transitions_sampled: u64,
    /// Burn-in done: the trainer trains when the rate limiter allows.
    pub training: bool,
    /// Mean TD loss of the last step read back (`losses/td_loss`); NaN (JSON null)
    /// before the first.
    pub loss: f64,
    /// Mean Q of the taken actions of the last step read back (`losses/q_values`).
    pub mean_q: f64,
    /// Gradient norm before clipping, same step.
    pub grad_norm: f64,
    /// Transitions trained per transition inserted, since this process started.
    pub samples_per_insert: f64,
    pub samples_per_insert_target: f64,
    /// Version of the model workers download now.
    pub model_version: u64,
    /// Train steps per second over the last stats interval (`charts/SPS`).
    pub train_steps_per_sec: f64,
    /// Uploads turned away because the queue was full.
    pub ingest_rejected: u64,
    /// Transitions accepted and waiting in the ingest queue for the replay.
    pub queued: u64,
    pub last_checkpoint_step: Option<u64>,
    /// False once the run's trainer has ended (shutdown, removal, or a failure: see
    /// the log).
    pub running: bool,
    /// Paused through the API: no train steps until resumed.
    pub paused: bool,
    /// The runs this one trains with as one step (itself among them, in the group's
    /// order), or `None` when it trains alone (`[trainer] grouped`).
    pub group: Option<Vec<String>>,
    /// CUDA graphs captured of the step this run trains in, since this process started:
    /// one for each group it has been in (a regroup makes a new one).
    pub graph_captures: u64,
}

/// Where a run's trainer starts from: the checkpoint in `data_dir` (if any), and what
/// a restarted manager knows besides it.
#[derive(Debug, Default)]
pub struct Restore {
    /// Holds `checkpoint/`, where checkpoints are read and written.
    pub data_dir: PathBuf,
    /// Replay rows the write-ahead log kept (`count x 57`), oldest first.
    pub rows: Vec<f32>,
    /// The highest model version ever published in this data directory: new versions
    /// go above it, so a number never names two sets of weights.
    pub highest_published: u64,
}

/// Everything one run's trainer is built from ([`RunTrainer::build`], through
/// [`crate::device::Device::add_run`]).
pub struct RunSetup {
    pub name: String,
    /// Its share of the device's train steps against the other runs' (1.0: equal).
    pub weight: f64,
    pub trainer: TrainerConfig,
    pub replay: ReplayConfig,
    pub dqn: DqnConfig,
    pub actions: ActionSet,
    /// The fighter the run's bot plays (stamped on every model file it publishes).
    pub side: Side,
    pub restore: Restore,
}

fn model_meta(actions: ActionSet, side: Side, version: u64, train_step: u64) -> ModelMeta {
    let mut m = ModelMeta::new(actions.name(), actions.len()).with_side(side);
    m.model_version = version;
    m.train_step = train_step;
    m
}

/// One run's learner, replay, rate limiter and counters; owned by the device thread.
pub struct RunTrainer {
    name: String,
    weight: f64,
    cfg: TrainerConfig,
    actions: ActionSet,
    side: Side,
    learner: Learner,
    replay: Replay,
    /// Whether its group's step may be replayed as a CUDA graph ([`TrainerConfig::cuda_graph`]).
    use_graph: bool,
    /// Whether it trains in one group with other runs of its shape ([`TrainerConfig::grouped`]).
    grouped: bool,
    /// The `[replay]` settings.
    replay_cfg: ReplayConfig,
    /// Its live numbers, kept up to date here; the device layer shows them.
    stats: TrainerStats,
    publish: Box<dyn Fn(Published) + Send>,
    data_dir: PathBuf,
    config: serde_json::Value,
    counters: RunCounters,
    /// The last published model file (what a checkpoint keeps).
    model_file: Vec<u8>,
    limiter: RateLimiter,
    /// Start of the current stats interval: time and train step.
    interval_start: (Instant, u64),
    inserted_since_start: u64,
    last_checkpoint: Instant,
}

impl RunTrainer {
    /// Build the learner and replay, restore the checkpoint and the logged rows, and
    /// publish the current model (so a run always has one to serve).
    pub fn build(setup: RunSetup, device: tch::Device, publish: Box<dyn Fn(Published) + Send>) -> anyhow::Result<RunTrainer> {
        let RunSetup { name, weight, trainer: cfg, replay: replay_cfg, dqn: dqn_cfg, actions, side, restore } = setup;
        cfg.validate(&replay_cfg)?;
        if !(weight.is_finite() && weight > 0.0) {
            bail!("run {name:?}: weight = {weight} must be a positive number");
        }
        let Restore { data_dir, rows, highest_published } = restore;
        let data_dir = data_dir.as_path();
        let use_graph = match (cfg.cuda_graph, graph_applies(device, &replay_cfg)) {
            (Some(true), Err(why)) => bail!("[trainer] cuda_graph = true, but {why}; set cuda_graph = false, or leave it out"),
            (Some(false), _) | (None, Err(_)) => false,
            (_, Ok(())) => true,
        };
        let grouped = cfg.grouped.unwrap_or(device.is_cuda());
        let mut learner = Learner::new(&dqn_cfg, actions.len(), device)?;
        let mut replay = Replay::new(&replay_cfg, learner.gamma_n(), device)?;
        // Rows restored from the log are not counted as inserts: they were counted when
        // first inserted, and the rate limiter must not hold the fleet back for them.
        replay.push(&rows)?;
        let config = serde_json::json!({ "trainer": cfg, "replay": replay_cfg, "dqn": dqn_cfg });

        let checkpoint = checkpoint::load(data_dir)?;
        let checkpointed = checkpoint.is_some();
        let (counters, model_file) = match checkpoint {
            Some(ck) => {
                if ck.meta.action_set != actions.name() {
                    bail!(
                        "checkpoint {} was trained with action set {:?}, run {name:?} is configured for {:?}: use another data dir or the same action set",
                        checkpoint::path(data_dir).display(),
                        ck.meta.action_set,
                        actions.name()
                    );
                }
                let trained_as = QNet::load(&ck.model_file).map_or(Side::Fox, |n| n.meta().side);
                if trained_as != side {
                    bail!(
                        "checkpoint {} was trained for {trained_as}, run {name:?} is configured for {side}: use another data dir or the same side",
                        checkpoint::path(data_dir).display()
                    );
                }
                let c = ck.meta.counters.clone();
                let restored = learner
                    .load_state(&ck.tensors, c.train_step, c.optimizer_steps)
                    .with_context(|| format!("restoring {}", checkpoint::path(data_dir).display()))?;
                if !restored {
                    tracing::warn!(run = %name, "checkpoint has no {:?} optimizer state: starting the optimizer fresh", dqn_cfg.optimizer);
                }
                if ck.meta.config != config {
                    tracing::info!(run = %name, "configuration differs from the checkpoint's; continuing with the new one");
                }
                tracing::info!(run = %name, train_step = c.train_step, model_version = c.model_version, "resumed from checkpoint");
                (c, ck.model_file)
            }
            None => {
                // Version 1: random weights, so that workers always have a model to play.
                let c = RunCounters { model_version: 1, ..Default::default() };
                let meta = model_meta(actions, side, 1, 0);
                (c, learner.model_file(&meta)?)
            }
        };
        // The number in hand already names other weights when models were published after
        // the checkpoint and lost with a crash (or, with no checkpoint, when any model was
        // published here): the weights in hand get a number above all of them.
        let taken = if checkpointed { highest_published > counters.model_version } else { highest_published > 0 };
        let (counters, model_file) = if taken {
            let version = highest_published + 1;
            tracing::warn!(
                run = %name,
                checkpoint_version = counters.model_version,
                highest_published = highest_published,
                version,
                "models were published after the last checkpoint and lost with a crash; publishing the restored weights as a new version"
            );
            let file = learner.model_file(&model_meta(actions, side, version, learner.step))?;
            (RunCounters { model_version: version, model_train_step: learner.step, ..counters }, file)
        } else {
            (counters, model_file)
        };
        // Prioritized sampling's exponent goes on from the steps taken.
        replay.set_steps(learner.step);
        // Published before the run joins the device: by the time it is served there is a model.
        publish(Published { version: counters.model_version, train_step: counters.model_train_step, file: model_file.clone() });

        let stats = TrainerStats {
            device: format!("{device:?}"),
            replay_kind: match replay.kind() {
                ReplayKind::Device => "device".into(),
                ReplayKind::Host => "host".into(),
            },
            replay_capacity: replay.capacity(),
            replay_len: replay.len(),
            replay_staged: replay.staged(),
            training: replay.len() >= cfg.burn_in.max(1),
            train_steps: counters.train_step,
            transitions_inserted: counters.transitions_inserted,
            transitions_sampled: counters.transitions_sampled,
            samples_per_insert_target: cfg.samples_per_insert,
            model_version: counters.model_version,
            loss: f64::NAN,
            mean_q: f64::NAN,
            grad_norm: f64::NAN,
            running: true,
            ..Default::default()
        };
        Ok(RunTrainer {
            name,
            weight,
            limiter: RateLimiter::new(cfg.samples_per_insert, cfg.rate_slack, cfg.insert_slack),
            cfg,
            actions,
            side,
            learner,
            replay,
            use_graph,
            grouped,
            replay_cfg,
            stats,
            publish,
            data_dir: data_dir.to_path_buf(),
            config,
            counters,
            model_file,
            interval_start: (Instant::now(), 0),
            inserted_since_start: 0,
            last_checkpoint: Instant::now(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its share of the device's train steps against the other runs' (1.0: equal).
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// Transitions its ingest queue holds ([`TrainerConfig::queue_capacity`]).
    pub fn queue_capacity(&self) -> u64 {
        self.cfg.queue_capacity()
    }

    /// Its live numbers (`train_steps` as of the last read-back, every `stats_every`
    /// steps, or [`RunTrainer::count_steps`]).
    pub fn stats(&self) -> &TrainerStats {
        &self.stats
    }

    /// Bring `train_steps` up to the step in hand (between read-backs it trails by up to
    /// `stats_every - 1` steps).
    pub fn count_steps(&mut self) {
        self.stats.train_steps = self.learner.step;
    }

    /// Whether queued uploads may go into the replay now: always during burn-in; after
    /// it, unless the fleet is too far ahead of the learner (then the queue is left to
    /// fill, uploads get 503 and the workers pause until the learner has caught up).
    pub fn takes_inserts(&self) -> bool {
        self.replay.len() < self.cfg.burn_in.max(1) || self.limiter.takes_inserts()
    }

    /// Whether a train step may be taken now: burn-in done, not `paused`, and within the
    /// rate limiter's budget.
    pub fn may_train(&self, paused: bool) -> bool {
        self.replay.len() >= self.cfg.burn_in.max(1) && !paused && self.limiter.allows(self.learner.config().batch_size as u64)
    }

    /// The shape of the step this run takes ([`crate::device::group`]).
    pub fn group_shape(&self) -> GroupShape {
        GroupShape::of(&self.learner, self.prioritized())
    }

    /// Whether it trains in one group with the other runs of its shape, or in a group of
    /// its own ([`TrainerConfig::grouped`]).
    pub fn shares_group(&self) -> bool {
        self.grouped
    }

    /// Whether its replay samples by priority (its loss takes importance weights).
    pub fn prioritized(&self) -> bool {
        self.replay_cfg.sampling == Sampling::Prioritized
    }

    /// Whether a group it trains in may replay its step as a CUDA graph: a CUDA device
    /// and the device replay, whose draws are device work alone ([`graph_applies`]),
    /// and `cuda_graph` not set to false.
    pub fn allows_graph(&self) -> bool {
        self.use_graph
    }

    /// Its learner, to be moved into a group.
    pub fn learner_for_group(&mut self) -> &mut Learner {
        &mut self.learner
    }

    /// Which runs it trains with ([`TrainerStats::group`]).
    pub fn set_group(&mut self, names: Option<Vec<String>>) {
        self.stats.group = names;
    }

    /// Count a CUDA graph captured of the step it trains in ([`TrainerStats::graph_captures`]).
    pub fn graph_captured(&mut self) {
        self.stats.graph_captures += 1;
    }

    /// Its replay, for its group's step to draw from ([`GroupStep::step`]).
    pub fn replay_mut(&mut self) -> &mut Replay {
        &mut self.replay
    }

    /// Its online weights, as the model file has them (tests of groups on CUDA).
    #[cfg(test)]
    pub(crate) fn model_weights_for_test(&self) -> Vec<Vec<f32>> {
        self.learner.online.weights()
    }

    /// Put a validated upload into the replay (and count it against the rate limiter).
    pub fn ingest(&mut self, b: Batch) -> anyhow::Result<()> {
        let n = b.count() as u64;
        let pushed = if self.scores_new_rows() {
            // Read back to the host: the rows are staged there until their block is written.
            let rows = Tensor::from_slice(&b.data).view([n as i64, TRANSITION_FLOATS as i64]).to_device(self.learner.device());
            let td = Vec::<f32>::try_from(&self.learner.frozen_td_abs(&rows)).context("reading the new rows' TD errors")?;
            self.replay.push_scored(&b.data, Some(&td))
        } else {
            self.replay.push(&b.data)
        };
        pushed?;
        self.limiter.inserted(n);
        self.inserted_since_start += n;
        self.counters.transitions_inserted += n;
        let s = &mut self.stats;
        s.transitions_inserted = self.counters.transitions_inserted;
        s.inserted_since_start = self.inserted_since_start;
        s.replay_len = self.replay.len();
        s.replay_staged = self.replay.staged();
        s.training = self.replay.len() >= self.cfg.burn_in.max(1);
        s.samples_per_insert = self.limiter.actual();
        Ok(())
    }

    /// Whether new rows enter the prioritized replay at their own TD error's priority
    /// (`[replay] new_priority = "td"`) rather than at the running maximum.
    fn scores_new_rows(&self) -> bool {
        self.replay_cfg.sampling == Sampling::Prioritized && self.replay_cfg.new_priority == NewPriority::Td
    }

    /// What follows a step taken for this run by its group ([`crate::device::group`]): the
    /// learner counts it (and syncs the target when due); then the host's bookkeeping:
    /// the limiter and counters; the read-back, publishing and checkpoint when due.
    /// Returns whether its numbers were read back or a model published (the device
    /// layer shows them then).
    pub fn grouped_step_taken(&mut self, out: TrainOutput) -> anyhow::Result<bool> {
        self.learner.finish_step();
        let batch_size = self.learner.config().batch_size;
        self.limiter.sampled(batch_size as u64);
        self.counters.transitions_sampled += batch_size as u64;
        self.counters.train_step = self.learner.step;
        self.counters.optimizer_steps = self.learner.optimizer_steps();
        let step = self.learner.step;

        let read_back = step.is_multiple_of(self.cfg.stats_every);
        if read_back {
            // The only read-back of the steady state: it waits for the step to finish.
            let read = |t: &tch::Tensor| f64::try_from(t).unwrap_or(f64::NAN);
            let (loss, mean_q, grad_norm) = (read(&out.loss()), read(&out.mean_q()), read(&out.grad_norm));
            let (t0, s0) = self.interval_start;
            let secs = t0.elapsed().as_secs_f64();
            let s = &mut self.stats;
            s.train_steps = step;
            s.loss = loss;
            s.mean_q = mean_q;
            s.grad_norm = grad_norm;
            s.samples_per_insert = self.limiter.actual();
            s.train_steps_per_sec = if secs > 0.0 { (step - s0) as f64 / secs } else { 0.0 };
            self.interval_start = (Instant::now(), step);
        }
        let publish = step.is_multiple_of(self.cfg.publish_every);
        if publish {
            self.publish()?;
        }
        let by_steps = self.cfg.checkpoint_every > 0 && step.is_multiple_of(self.cfg.checkpoint_every);
        let by_time = self.cfg.checkpoint_every_secs > 0.0 && self.last_checkpoint.elapsed().as_secs_f64() >= self.cfg.checkpoint_every_secs;
        if by_steps || by_time {
            // A failed periodic checkpoint (disk full) must not stop training; the
            // next one, or the final one, tries again.
            if let Err(e) = self.checkpoint() {
                tracing::error!(run = %self.name, "checkpoint at step {step} failed: {e:#}");
            }
        }
        Ok(read_back || publish)
    }

    fn publish(&mut self) -> anyhow::Result<()> {
        let version = self.counters.model_version + 1;
        let step = self.learner.step;
        let file = self.learner.model_file(&model_meta(self.actions, self.side, version, step))?;
        (self.publish)(Published { version, train_step: step, file: file.clone() });
        self.model_file = file;
        self.counters.model_version = version;
        self.counters.model_train_step = step;
        self.stats.model_version = version;
        self.stats.train_steps = step;
        Ok(())
    }

    fn checkpoint(&mut self) -> anyhow::Result<()> {
        let p = checkpoint::save(&self.data_dir, &self.learner, &self.counters, self.actions.name(), self.config.clone(), &self.model_file)?;
        tracing::info!(run = %self.name, step = self.learner.step, path = %p.display(), "checkpoint written");
        self.last_checkpoint = Instant::now();
        self.stats.last_checkpoint_step = Some(self.learner.step);
        Ok(())
    }

    /// The checkpoint written when the run leaves the device or the manager stops.
    pub fn final_checkpoint(&mut self) -> anyhow::Result<()> {
        self.count_steps();
        self.checkpoint().with_context(|| format!("final checkpoint of run {:?}", self.name))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shine_agent::experience::{col, BatchMeta, TRANSITION_FLOATS};

    pub(crate) fn batch(n: usize, seed: usize) -> Batch {
        let mut data = Vec::with_capacity(n * TRANSITION_FLOATS);
        for i in 0..n {
            let k = i + seed * 1000;
            let mut row: Vec<f32> = (0..TRANSITION_FLOATS).map(|c| ((k * 13 + c * 5) % 23) as f32 / 23.0).collect();
            row[col::ACTION] = (k % 5) as f32;
            row[col::REWARD] = if k.is_multiple_of(7) { 1.0 } else { 0.0 };
            row[col::TERMINAL] = k.is_multiple_of(50) as u8 as f32;
            data.extend(row);
        }
        Batch { meta: BatchMeta { worker_id: 1, model_version: 1, n_step: 1, upload_id: [0; 16] }, data }
    }

    pub(crate) fn small() -> (TrainerConfig, ReplayConfig, DqnConfig) {
        let t = TrainerConfig {
            burn_in: 100,
            samples_per_insert: 8.0,
            rate_slack: 0,
            insert_slack: 0,
            ingest_queue_transitions: 4000,
            checkpoint_every_secs: 0.0,
            publish_every: 5,
            checkpoint_every: 0,
            stats_every: 10,
            device: "cpu".into(),
            nice: 0,
            threads: 1,
            cuda_graph: None,
            grouped: None,
        };
        (t, ReplayConfig { capacity: 1000, update_size: 10, ..Default::default() }, DqnConfig { batch_size: 8, ..Default::default() })
    }

    /// A Fox run "default" of the Untouchable task with these sections, its data in `dir`.
    pub(crate) fn setup_in(dir: &std::path::Path, (trainer, replay, dqn): (TrainerConfig, ReplayConfig, DqnConfig)) -> RunSetup {
        let restore = Restore { data_dir: dir.into(), ..Default::default() };
        RunSetup { name: "default".into(), weight: 1.0, trainer, replay, dqn, actions: ActionSet::Untouchable, side: Side::Fox, restore }
    }

    #[test]
    fn rate_limiter_keeps_samples_per_insert_at_the_target() {
        let mut l = RateLimiter::new(8.0, 0, 0);
        assert!(!l.allows(32), "nothing inserted, nothing to train");
        l.inserted(4);
        assert!(l.allows(32));
        l.sampled(32);
        assert!(!l.allows(32), "32 samples for 4 inserts is the budget");
        l.inserted(3);
        assert!(!l.allows(32), "56 < 64: still waiting");
        l.inserted(1);
        assert!(l.allows(32));
        assert_eq!(l.actual(), 4.0);
        let mut slack = RateLimiter::new(8.0, 64, 0);
        assert!(slack.allows(64) && !slack.allows(65));
        slack.sampled(1_000_000);
        assert!(RateLimiter::new(0.0, 0, 0).allows(1 << 40), "0 turns it off");
    }

    #[test]
    fn rate_limiter_refuses_inserts_that_run_too_far_ahead_of_the_learner() {
        let mut l = RateLimiter::new(8.0, 0, 10);
        l.inserted(10);
        assert!(l.takes_inserts(), "10 ahead is the slack");
        l.inserted(1);
        assert!(!l.takes_inserts(), "11 ahead is one too many");
        assert!(l.allows(8), "while inserts wait, the learner may always train");
        l.sampled(8);
        assert!(l.takes_inserts(), "one transition's worth trained: 10 ahead again");
        let mut free = RateLimiter::new(8.0, 0, 0);
        free.inserted(1 << 40);
        assert!(free.takes_inserts(), "insert_slack 0: inserts never wait");
        let mut off = RateLimiter::new(0.0, 0, 10);
        off.inserted(1 << 40);
        assert!(off.takes_inserts(), "samples_per_insert 0: no limits at all");
    }

    #[test]
    fn new_rows_enter_at_their_frozen_td_errors_priority_or_at_the_maximum() {
        for (new_priority, kind) in [(NewPriority::Td, ReplayKind::Device), (NewPriority::Td, ReplayKind::Host), (NewPriority::Max, ReplayKind::Device)] {
            let tmp = tempfile::tempdir().unwrap();
            let (t, mut r, d) = small();
            (r.kind, r.sampling, r.new_priority) = (kind, Sampling::Prioritized, new_priority);
            let mut run = RunTrainer::build(setup_in(tmp.path(), (t, r.clone(), d)), tch::Device::Cpu, Box::new(|_| {})).unwrap();
            let b = batch(20, 0);
            run.ingest(b.clone()).unwrap();
            let rows = Tensor::from_slice(&b.data).view([20, TRANSITION_FLOATS as i64]);
            let td = Vec::<f32>::try_from(&run.learner.frozen_td_abs(&rows)).unwrap();
            let p = run.replay.priorities().expect("prioritized");
            for i in 0..20 {
                let want = match new_priority {
                    NewPriority::Td => (td[i] + r.priority_eps as f32).powf(r.alpha as f32),
                    NewPriority::Max => 1.0,
                };
                assert!((p[i] - want).abs() < 1e-5, "{new_priority:?}, {kind:?}: row {i}: {} vs {want}", p[i]);
            }
            assert!(td.iter().any(|&x| (x - td[0]).abs() > 1e-3), "the rows' TD errors differ, so the check means something");
        }
    }

    #[test]
    fn a_marth_run_publishes_marth_models_and_its_checkpoint_refuses_another_side() {
        let tmp = tempfile::tempdir().unwrap();
        let setup = |side| RunSetup { actions: ActionSet::Fight, side, ..setup_in(tmp.path(), small()) };
        let published = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = published.clone();
        let mut run = RunTrainer::build(setup(Side::Marth), tch::Device::Cpu, Box::new(move |p: Published| sink.lock().unwrap().push(p))).unwrap();
        run.final_checkpoint().unwrap();
        let first = published.lock().unwrap()[0].file.clone();
        let meta = QNet::load(&first).unwrap().meta().clone();
        assert_eq!((meta.side, meta.action_set.as_str()), (Side::Marth, "fight"));
        drop(run);
        let err = RunTrainer::build(setup(Side::Fox), tch::Device::Cpu, Box::new(|_| {})).err().expect("refused").to_string();
        assert!(err.contains("was trained for marth") && err.contains("configured for fox"), "{err}");
        assert!(RunTrainer::build(setup(Side::Marth), tch::Device::Cpu, Box::new(|_| {})).is_ok(), "the same side resumes");
    }

    #[test]
    fn bad_trainer_configs_are_clear_errors() {
        let (t, r, _) = small();
        let e = TrainerConfig { burn_in: 5000, ..t.clone() }.validate(&r).unwrap_err().to_string();
        assert!(e.contains("burn_in 5000") && e.contains("never start"), "{e}");
        let e = TrainerConfig { ingest_queue_transitions: 0, ..t.clone() }.validate(&r).unwrap_err().to_string();
        assert!(e.contains("ingest_queue_transitions"), "{e}");
        let e = TrainerConfig { device: "tpu".into(), ..t.clone() }.validate(&r).unwrap_err().to_string();
        assert!(e.contains("expected auto, cpu, cuda or cuda:N"), "{e}");
        if !tch::Cuda::is_available() {
            let e = TrainerConfig { device: "cuda".into(), ..t.clone() }.validate(&r).unwrap_err().to_string();
            assert!(e.contains("CUDA is not available"), "{e}");
        }
        assert!(t.validate(&r).is_ok());
    }

    #[test]
    fn cuda_graph_true_where_it_cannot_apply_is_an_error_naming_the_key() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut t, r, d) = small();
        t.cuda_graph = Some(true);
        let setup = |t: TrainerConfig, r: ReplayConfig, d: DqnConfig| setup_in(tmp.path(), (t, r, d));
        let err = RunTrainer::build(setup(t.clone(), r.clone(), d.clone()), tch::Device::Cpu, Box::new(|_| {})).err().expect("refused").to_string();
        assert!(err.contains("[trainer] cuda_graph = true") && err.contains("needs a CUDA device") && err.contains("cuda_graph = false"), "{err}");
        // Unset (or false) on the CPU: eager steps, as before.
        for off in [None, Some(false)] {
            let t = TrainerConfig { cuda_graph: off, ..t.clone() };
            let mut run = RunTrainer::build(setup(t, r.clone(), d.clone()), tch::Device::Cpu, Box::new(|_| {})).unwrap();
            run.ingest(batch(120, 0)).unwrap();
            step::for_tests::step_run(&mut run).unwrap();
            assert!(!run.allows_graph() && run.learner.step == 1, "{off:?}");
        }
        // What keeps a CUDA device from graphs is said too (here, on any machine).
        let cuda = tch::Device::Cuda(0);
        assert!(graph_applies(cuda, &ReplayConfig { kind: ReplayKind::Host, ..r.clone() })
            .is_err_and(|e| e.contains("device replay") || e.contains("no CUDA graph support")));
        // Neither the optimizer nor the sampling matters (Adam's bias correction counts on
        // the device; prioritized sampling's exponent and updates are device work).
        if crate::trainer::cuda_graph::BUILT {
            assert_eq!(graph_applies(cuda, &r), Ok(()));
            assert_eq!(graph_applies(cuda, &ReplayConfig { sampling: Sampling::Prioritized, ..r.clone() }), Ok(()));
        }
    }

    #[test]
    fn every_run_may_share_a_group_and_does_by_default_on_cuda_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (t, r, d) = small();
        let build = |t: &TrainerConfig, r: ReplayConfig| RunTrainer::build(setup_in(tmp.path(), (t.clone(), r, d.clone())), tch::Device::Cpu, Box::new(|_| {})).unwrap();
        // Any replay, uniform or prioritized: `grouped = true` shares on the CPU too;
        // unset, only on CUDA.
        for replay in [r.clone(), ReplayConfig { kind: ReplayKind::Host, ..r.clone() }, ReplayConfig { sampling: Sampling::Prioritized, ..r.clone() }] {
            assert!(build(&TrainerConfig { grouped: Some(true), ..t.clone() }, replay.clone()).shares_group(), "{replay:?}");
            for off in [None, Some(false)] {
                assert!(!build(&TrainerConfig { grouped: off, ..t.clone() }, replay.clone()).shares_group(), "{off:?}, {replay:?}");
            }
        }
        // The shape says whether the loss is weighted: uniform and prioritized runs do
        // not share a step.
        let prioritized = build(&t, ReplayConfig { sampling: Sampling::Prioritized, ..r.clone() });
        assert!(prioritized.group_shape().weighted && !build(&t, r.clone()).group_shape().weighted);
    }
}
