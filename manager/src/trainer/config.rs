//! The `[trainer]` section: [`TrainerConfig`], its checks and the device it names.

use crate::storage::replay::ReplayConfig;
use anyhow::bail;
use serde::{Deserialize, Serialize};

/// The `[trainer]` section of `configs/manager.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainerConfig {
    /// Experiences visible in the replay before the first train step (10,000): the
    /// first batches would otherwise be drawn from a handful of episodes.
    pub burn_in: usize,
    /// Target transitions trained per transition inserted, held from both sides: the
    /// learner waits when it gets ahead, and uploads wait (503, the workers pause) when
    /// the fleet gets more than `insert_slack` ahead. 8 is Nature DQN's ratio (a batch
    /// of 32 every 4 agent steps), which the paper's hyper-parameters were tuned with.
    /// 0 turns the limiter off. `stats` shows the actual ratio.
    pub samples_per_insert: f64,
    /// Transitions the learner may train ahead of the ratio before it waits, so that
    /// it does not stop and start for every small upload.
    pub rate_slack: u64,
    /// Transitions the fleet may insert ahead of the ratio before the trainer stops
    /// taking uploads until the learner catches up. 0: never stop them (the workers run
    /// free, the actual ratio falls below the target when they outpace the learner,
    /// and the replay drops its oldest rows unsampled: Ape-X's choice, for a fleet
    /// whose data is worth more than its CPU time).
    pub insert_slack: u64,
    /// Most transitions queued for the trainer; with the rate limiter on
    /// (`samples_per_insert` and `insert_slack` above 0) the queue holds at most
    /// `insert_slack` too. When full, uploads get 503.
    pub ingest_queue_transitions: u64,
    /// Publish a new model version every this many train steps (1000).
    pub publish_every: u64,
    /// Write a checkpoint every this many train steps (0: not by steps).
    pub checkpoint_every: u64,
    /// ...and at least every this many seconds while training (0: not by time), so a
    /// `kill -9` costs at most that much training.
    pub checkpoint_every_secs: f64,
    /// Read loss and mean Q back to the host every this many train steps.
    pub stats_every: u64,
    /// Training device: `auto` (CUDA when present), `cpu`, `cuda` or `cuda:N`.
    pub device: String,
    /// The trainer thread's nice value, -20 (first) .. 19 (last); 0 leaves it as is.
    /// -10 by default: the learner gets its core before request handling does
    /// ([`crate::nice`]). Needs root or `CAP_SYS_NICE`; without, a note in the log.
    pub nice: i32,
    /// libtorch's threads for CPU work (0: its default, one per core). 1 by default:
    /// this network's ops are too small to split well, and a second thread waiting at
    /// libtorch's barriers while a worker or the HTTP server holds the other core made a
    /// train step 11 times slower on a 2-core machine (docs/benchmarks.md).
    pub threads: usize,
    /// Replay the train step as one CUDA graph (`crate::trainer::cuda_graph`): the draw
    /// from the device replay, forward, backward, clipping, the optimizer's update and
    /// (prioritized) the priority update launched with one call instead of a few dozen,
    /// captured once for the run's group's life. Unset: on for a CUDA device where it
    /// applies (the device replay), off elsewhere. `true` where it cannot apply is an
    /// error that says why.
    pub cuda_graph: Option<bool>,
    /// Let this run share its group (every run trains in one; alone, a group of one)
    /// with the other runs on the device that share its network shape, action set,
    /// batch size, optimizer, Double DQN, averaging and sampling, and whether their
    /// step can be a CUDA graph (`crate::device::group`): their parameters stacked, one
    /// set of batched kernels (and on CUDA one graph) for all of them, so that k runs on
    /// one GPU go nearly k times as fast as one. Each keeps its replay, limiter, pause,
    /// hyper-parameters, checkpoints and models. Unset: on for a CUDA device, off on the
    /// CPU (there a shared step is no faster than its runs' steps in turn); `true` on
    /// the CPU groups there too.
    pub grouped: Option<bool>,
}

impl Default for TrainerConfig {
    fn default() -> Self {
        TrainerConfig {
            burn_in: 10_000,
            samples_per_insert: 8.0,
            rate_slack: 1024,
            insert_slack: 20_000,
            ingest_queue_transitions: 200_000,
            publish_every: 1000,
            checkpoint_every: 10_000,
            checkpoint_every_secs: 60.0,
            stats_every: 100,
            device: "auto".into(),
            nice: -10,
            threads: 1,
            cuda_graph: None,
            grouped: None,
        }
    }
}

impl TrainerConfig {
    pub fn validate(&self, replay: &ReplayConfig) -> anyhow::Result<()> {
        if !(self.samples_per_insert.is_finite() && self.samples_per_insert >= 0.0) {
            bail!("[trainer] samples_per_insert = {} must be >= 0 (0 turns the rate limiter off)", self.samples_per_insert);
        }
        if self.burn_in > replay.capacity {
            bail!("[trainer] burn_in {} is more than [replay] capacity {}: training would never start", self.burn_in, replay.capacity);
        }
        if self.queue_capacity() == 0 {
            bail!("[trainer] ingest_queue_transitions must be at least 1 (it bounds the queue when the rate limiter does not)");
        }
        if !(-20..=19).contains(&self.nice) {
            bail!("[trainer] nice = {} must be in -20..=19 (lower runs first; 0 leaves the priority as is)", self.nice);
        }
        if !(self.checkpoint_every_secs.is_finite() && self.checkpoint_every_secs >= 0.0) {
            bail!("[trainer] checkpoint_every_secs = {} must be >= 0 (0: not by time)", self.checkpoint_every_secs);
        }
        if self.publish_every == 0 || self.stats_every == 0 {
            bail!("[trainer] publish_every and stats_every must be at least 1");
        }
        self.device()?;
        Ok(())
    }

    /// Transitions the ingest queue holds: `ingest_queue_transitions`, and no more than
    /// `insert_slack` while the rate limiter holds the fleet back (so a queued upload is
    /// in the replay within the limiter's window).
    pub fn queue_capacity(&self) -> u64 {
        if self.samples_per_insert > 0.0 && self.insert_slack > 0 {
            self.insert_slack.min(self.ingest_queue_transitions)
        } else {
            self.ingest_queue_transitions
        }
    }

    /// The configured device; asking for CUDA where there is none is an error.
    pub fn device(&self) -> anyhow::Result<tch::Device> {
        let d = self.device.trim();
        let cuda = |i: usize| {
            if !tch::Cuda::is_available() {
                bail!("[trainer] device = {d:?} but CUDA is not available (no GPU, or libtorch_cuda.so not linked); use \"auto\" or \"cpu\"");
            }
            let n = tch::Cuda::device_count() as usize;
            if i >= n {
                bail!("[trainer] device = {d:?} but there are {n} CUDA devices");
            }
            Ok(tch::Device::Cuda(i))
        };
        match d {
            "auto" => Ok(tch::Device::cuda_if_available()),
            "cpu" => Ok(tch::Device::Cpu),
            "cuda" => cuda(0),
            _ => match d.strip_prefix("cuda:").and_then(|i| i.parse().ok()) {
                Some(i) => cuda(i),
                None => bail!("[trainer] device = {d:?}: expected auto, cpu, cuda or cuda:N"),
            },
        }
    }
}
