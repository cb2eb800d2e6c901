//! Runs trained as one step: a [`TrainGroup`] is the runs on the device that share a
//! [`GroupShape`](shine_agent::dqn::GroupShape) (network, action set, batch size, optimizer, Double DQN, averaging),
//! trained by one [`shine_agent::dqn::Group`] step.
//!
//! Why: one run's step on a GPU is a chain of about 80 small kernels whose launches,
//! not their arithmetic, set the pace; k runs stepped in turn took k times as long, so
//! four runs on one card trained no faster together than one. A grouped step is one
//! chain of batched kernels for all k (and, on CUDA, one graph replay).
//!
//! The device thread (`device/mod.rs`) owns the groups: it forms them as runs join
//! and leave ([`TrainGroup::new`], over the runs' [`RunTrainer`]s, whose learners then
//! live in the group's buffers), and when the scheduler picks a grouped run it steps
//! the whole group, with a mask that holds back every member not ready (limiter,
//! pause, burn-in) or not due (its share of the device). Each member that moved then
//! does its own bookkeeping ([`RunTrainer::grouped_step_taken`]): limiter, counters,
//! publishing, checkpoints.

use crate::trainer::{RunTrainer, GRAPH_WARMUP_STEPS};
use anyhow::bail;
use shine_agent::dqn::{Group, GroupOutput};
use tch::Tensor;

/// A grouped step captured as a CUDA graph, with what it was captured against.
struct GroupGraph {
    graph: crate::trainer::cuda_graph::CudaGraph,
    /// The step's outputs, in the graph's memory: rewritten by each replay.
    out: GroupOutput,
    /// Each member's replay length when captured: the bounds its draw was recorded with.
    replay_lens: Vec<usize>,
}

/// Runs trained as one step, and the step.
pub struct TrainGroup {
    /// The members' device ids, in the group's row order.
    pub members: Vec<super::RunId>,
    group: Group,
    /// Replay the step as one CUDA graph: on CUDA, where this build has graph support,
    /// unless a member set `[trainer] cuda_graph = false`.
    use_graph: bool,
    graph: Option<GroupGraph>,
    eager_steps: u64,
}

impl TrainGroup {
    /// Group `trainers` (row order; `members` their ids): their learners move into the
    /// group's buffers, and each one's stats name the group's runs.
    pub fn new(members: Vec<super::RunId>, trainers: &mut [&mut RunTrainer]) -> anyhow::Result<TrainGroup> {
        if members.len() != trainers.len() || trainers.len() < 2 {
            bail!("a group is two runs or more, one id for each ({} ids, {} runs)", members.len(), trainers.len());
        }
        let names: Vec<String> = trainers.iter().map(|t| t.name().to_string()).collect();
        let use_graph = trainers.iter().all(|t| t.allows_graph());
        let mut learners: Vec<_> = trainers.iter_mut().map(|t| t.learner_for_group()).collect();
        let group = Group::new(&mut learners)?;
        let use_graph = use_graph && group.shape().device.is_cuda() && crate::trainer::cuda_graph::BUILT;
        for t in trainers.iter_mut() {
            t.set_group(Some(names.clone()));
        }
        Ok(TrainGroup { members, group, use_graph, graph: None, eager_steps: 0 })
    }

    /// One step of the members whose `moves` flag is set (row order); the others stay
    /// exactly as they were. Returns every member's outputs (those of members that did
    /// not move mean nothing); the caller then calls
    /// [`RunTrainer::grouped_step_taken`] for each member that moved.
    pub fn step(&mut self, trainers: &mut [&mut RunTrainer], moves: &[bool]) -> anyhow::Result<GroupOutput> {
        self.group.set_mask(moves);
        if self.use_graph && self.eager_steps >= GRAPH_WARMUP_STEPS {
            return self.graph_step(trainers);
        }
        self.eager_steps += 1;
        let batch = Self::batch(trainers)?;
        Ok(self.group.device_step(&batch))
    }

    /// Each member's rows, stacked: `[k, B, 57]`.
    fn batch(trainers: &mut [&mut RunTrainer]) -> anyhow::Result<Tensor> {
        let rows = trainers.iter_mut().map(|t| t.group_rows()).collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Tensor::stack(&rows, 0))
    }

    /// The step as a replay of the captured graph (the draws from each member's replay,
    /// the stacking and the update), captured first when there is none or a member's
    /// replay has grown since (its draw's bound is recorded in the graph; once every
    /// ring is full this never happens again). The mask is the group's tensor that the
    /// graph reads, written before the replay.
    fn graph_step(&mut self, trainers: &mut [&mut RunTrainer]) -> anyhow::Result<GroupOutput> {
        let lens: Vec<usize> = trainers.iter().map(|t| t.replay_len()).collect();
        if self.graph.as_ref().is_none_or(|g| g.replay_lens != lens) {
            self.graph = None; // its memory goes back before the new capture takes some
            let tch::Device::Cuda(index) = self.group.shape().device else { bail!("a CUDA graph on {:?}", self.group.shape().device) };
            let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
            let group = &mut self.group;
            let out = graph.capture(index, || -> anyhow::Result<_> {
                let batch = Self::batch(trainers)?;
                Ok(group.device_step(&batch))
            })??;
            self.graph = Some(GroupGraph { graph, out, replay_lens: lens });
        }
        let g = self.graph.as_mut().expect("captured above");
        g.graph.replay()?;
        let o = &g.out;
        Ok(GroupOutput { loss: o.loss.shallow_clone(), mean_q: o.mean_q.shallow_clone(), grad_norm: o.grad_norm.shallow_clone() })
    }
}

/// A group replaying its step as a CUDA graph, on a real GPU: `scripts/gpu-check.sh
/// --tests BIN` runs these (the library's test binary, `--ignored graph_tests`); without
/// a GPU they are ignored. (The grouped graph step's equality with the eager grouped
/// step is replay_bench's check, which gpu-check.sh runs.)
#[cfg(test)]
mod graph_tests {
    use super::*;
    use crate::trainer::tests::{batch, setup_in, small};

    #[test]
    #[ignore = "needs a CUDA device: scripts/gpu-check.sh runs it"]
    fn a_group_on_cuda_trains_by_graph_replays_recaptured_as_replays_grow_and_a_held_back_run_stays() {
        assert!(tch::Cuda::is_available(), "these tests need a CUDA device (scripts/gpu-check.sh)");
        let device = tch::Device::Cuda(0);
        let tmp = tempfile::tempdir().unwrap();
        let (mut t, mut r, d) = small();
        t.device = "cuda".into();
        t.samples_per_insert = 0.0;
        r.update_size = 50;
        let mut runs: Vec<RunTrainer> = ["a", "b"]
            .iter()
            .map(|n| {
                let mut s = setup_in(&tmp.path().join(n), (t.clone(), r.clone(), d.clone()));
                s.name = n.to_string();
                RunTrainer::build(s, device, Box::new(|_| {})).unwrap()
            })
            .collect();
        assert!(runs.iter().all(|r| r.group_shape().is_some()), "grouped by default on CUDA with the device replay, uniform");
        for (i, run) in runs.iter_mut().enumerate() {
            run.ingest(batch(150, i)).unwrap();
        }
        let mut trainers: Vec<&mut RunTrainer> = runs.iter_mut().collect();
        let mut group = TrainGroup::new(vec![1, 2], &mut trainers).unwrap();
        assert!(group.use_graph);
        let step = |group: &mut TrainGroup, trainers: &mut [&mut RunTrainer], moves: &[bool]| {
            let out = group.step(trainers, moves).unwrap();
            for (r, t) in trainers.iter_mut().enumerate().filter(|&(r, _)| moves[r]) {
                t.grouped_step_taken(out.run(r)).unwrap();
            }
            out
        };
        for _ in 0..20 {
            step(&mut group, &mut trainers, &[true, true]);
        }
        assert_eq!(group.graph.as_ref().expect("captured after the warm-up").replay_lens, [150, 150]);
        trainers[1].ingest(batch(50, 7)).unwrap();
        // b held back: a moves alone, b's weights stay as they were.
        let before = trainers[1].model_weights_for_test();
        for _ in 0..10 {
            step(&mut group, &mut trainers, &[true, false]);
        }
        assert_eq!(group.graph.as_ref().unwrap().replay_lens, [150, 200], "re-captured for b's longer replay");
        assert_eq!(trainers[1].model_weights_for_test(), before, "a held-back member does not move");
        let out = step(&mut group, &mut trainers, &[true, true]);
        for t in trainers.iter_mut() {
            t.count_steps();
        }
        assert_eq!((trainers[0].stats().train_steps, trainers[1].stats().train_steps), (31, 21));
        let loss = Vec::<f32>::try_from(&out.loss).unwrap();
        assert!(loss.iter().all(|l| l.is_finite()), "{loss:?}");
    }
}
