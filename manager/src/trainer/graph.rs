//! A run's train step captured once as a CUDA graph and replayed ([`super::TrainerConfig::cuda_graph`]):
//! whether it applies, the captured step, and the step as a replay.

use super::RunTrainer;
use crate::storage::replay::{ReplayConfig, ReplayKind, Sampling};
use anyhow::bail;
use shine_agent::dqn::TrainOutput;

/// Whether the train step can be one CUDA graph, or why not ([`super::TrainerConfig::cuda_graph`]).
pub fn graph_applies(device: tch::Device, replay: &ReplayConfig) -> Result<(), String> {
    if !device.is_cuda() {
        return Err(format!("it needs a CUDA device (the device is {device:?})"));
    }
    if !crate::trainer::cuda_graph::BUILT {
        return Err("this build of shine-manager has no CUDA graph support (its PyTorch had no CUDA headers at build time)".into());
    }
    if replay.kind != ReplayKind::Device {
        return Err("it needs the device replay ([replay] kind = \"device\"): the in-RAM replay samples on the host".into());
    }
    if replay.sampling != Sampling::Uniform {
        return Err("prioritized sampling is not captured yet (its importance weights follow a host schedule): use [replay] sampling = \"uniform\"".into());
    }
    Ok(())
}

/// A train step captured as a CUDA graph, with what it reads that a replay cannot
/// change.
pub(super) struct GraphStep {
    graph: crate::trainer::cuda_graph::CudaGraph,
    /// The step's outputs, in the graph's memory: rewritten by each replay.
    out: shine_agent::dqn::TrainOutput,
    /// The replay's length when captured: the bound `randint` was recorded with.
    replay_len: usize,
}

/// Eager steps before the first capture: libtorch and cuBLAS set themselves up on the
/// first steps (PyTorch's `torch.cuda.graph` warms up likewise). A group's graph too.
pub(crate) const GRAPH_WARMUP_STEPS: u64 = 3;

impl RunTrainer {
    /// One step as a replay of the captured graph: sample and update, launched at once.
    /// (Re)captured first when there is none yet, or when the replay's length changed
    /// since (a block was written while it filled: the draw's bound is recorded in the
    /// graph); once the ring is full it never changes.
    pub(super) fn graph_step(&mut self) -> anyhow::Result<TrainOutput> {
        let len = self.replay.len();
        if self.graph.as_ref().is_none_or(|g| g.replay_len != len) {
            self.graph = None; // its memory goes back before the new capture takes some
            let tch::Device::Cuda(index) = self.learner.device() else { bail!("a CUDA graph on {:?}", self.learner.device()) };
            let batch_size = self.learner.config().batch_size;
            let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
            let (replay, learner) = (&mut self.replay, &mut self.learner);
            let out = graph.capture(index, || -> anyhow::Result<_> {
                let sampled = replay.sample(batch_size, 1.0)?;
                Ok(learner.device_step(&sampled.rows, None))
            })??;
            self.graph = Some(GraphStep { graph, out, replay_len: len });
        }
        let g = self.graph.as_mut().expect("captured above");
        g.graph.replay()?;
        self.learner.finish_step();
        let o = &g.out;
        Ok(TrainOutput {
            loss: o.loss.shallow_clone(),
            mean_q: o.mean_q.shallow_clone(),
            grad_norm: o.grad_norm.shallow_clone(),
            td_abs: None,
        })
    }
}

/// A run's trainer replaying its step as a CUDA graph, on a real GPU: `scripts/gpu-check.sh
/// --tests BIN` runs these (the library's test binary, `--ignored graph_tests`); without a
/// GPU they are ignored. (The graph step's equality with the eager one is `bench`'s check,
/// which replay_bench runs.)
#[cfg(test)]
mod graph_tests {
    use super::super::tests::{batch, setup_in, small};
    use super::*;

    fn cuda() -> tch::Device {
        assert!(tch::Cuda::is_available(), "these tests need a CUDA device (scripts/gpu-check.sh)");
        tch::Device::Cuda(0)
    }

    #[test]
    #[ignore = "needs a CUDA device: scripts/gpu-check.sh runs it"]
    fn a_run_on_cuda_trains_by_graph_replays_and_recaptures_as_the_replay_grows() {
        let device = cuda();
        let tmp = tempfile::tempdir().unwrap();
        let (mut t, mut r, d) = small();
        t.device = "cuda".into();
        t.samples_per_insert = 0.0;
        r.update_size = 50;
        let mut run = RunTrainer::build(setup_in(tmp.path(), (t, r, d)), device, Box::new(|_| {})).unwrap();
        assert!(run.use_graph, "on by default on CUDA with the device replay, uniform sampling");
        run.ingest(batch(150, 0)).unwrap();
        for _ in 0..20 {
            run.train_step().unwrap();
        }
        let first = run.graph.as_ref().expect("captured after the warm-up").replay_len;
        assert_eq!(first, 150);
        run.ingest(batch(50, 1)).unwrap();
        for _ in 0..20 {
            run.train_step().unwrap();
        }
        assert_eq!(run.graph.as_ref().unwrap().replay_len, 200, "re-captured for the longer replay");
        run.count_steps();
        assert_eq!(run.stats().train_steps, 40);
        let loss = f64::try_from(&run.graph.as_ref().unwrap().out.loss).unwrap();
        assert!(loss.is_finite(), "{loss}");
    }
}
