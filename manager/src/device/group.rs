//! The runs on the device as they train: each in one [`TrainGroup`], the runs that share
//! a [`GroupShape`](shine_agent::dqn::GroupShape) (network, action set, batch size,
//! optimizer, Double DQN, averaging, uniform or prioritized), may train together
//! (`[trainer] grouped`) and can all be a CUDA graph or all not (below) in one, every
//! other run in a group of its own. A group's step
//! is the draw from each member's replay and one [`shine_agent::dqn::Group`] step for
//! all of them (and, by priority, each member's priority update).
//!
//! Why groups: one run's step on a GPU is a chain of a few dozen small kernels whose
//! launches, not their arithmetic, set the pace; k runs stepped in turn took k times as
//! long. A grouped step is one chain of batched kernels for all k. A run alone is a
//! group of one: there is one step, not two.
//!
//! On CUDA (where this build has graph support and no member set `[trainer] cuda_graph
//! = false` or draws on the host) a group's step is captured once as a CUDA graph,
//! after a few eager steps, and replayed for the group's life: everything it reads that
//! changes (each replay's fill level, the mask, Adam's counts, prioritized sampling's
//! exponent) is a tensor written in place, so a growing replay needs no new capture.
//! One more capture follows each regroup (a new group). Each group captures into a
//! memory pool of its own ([`GraphPool`](crate::trainer::cuda_graph::GraphPool)), whose memory goes back to the device when the
//! group is dropped ([`crate::device`] empties the cache after a regroup).
//!
//! The device thread (`device/mod.rs`) owns the groups: it forms them as runs join and
//! leave ([`TrainGroup::new`], over the runs' [`RunTrainer`]s, whose learners then live
//! in the group's buffers), and when the scheduler picks a run it steps that run's
//! group, with a mask that holds back every member not ready (limiter, pause, burn-in)
//! or not due (its share of the device). Each member that moved then does its own
//! bookkeeping ([`RunTrainer::grouped_step_taken`]): limiter, counters, publishing,
//! checkpoints.

use crate::storage::replay::Replay;
use crate::trainer::{GroupStep, RunTrainer};
use anyhow::bail;
use shine_agent::dqn::GroupOutput;

/// Runs trained as one step, and the step.
pub struct TrainGroup {
    /// The members' device ids, in the group's row order.
    pub members: Vec<super::RunId>,
    step: GroupStep,
}

impl TrainGroup {
    /// Group `trainers` (row order; `members` their ids): their learners move into the
    /// group's buffers, and each one's stats name the group's runs when there are two
    /// or more.
    pub fn new(members: Vec<super::RunId>, trainers: &mut [&mut RunTrainer]) -> anyhow::Result<TrainGroup> {
        if members.len() != trainers.len() || trainers.is_empty() {
            bail!("a group is one run or more, one id for each ({} ids, {} runs)", members.len(), trainers.len());
        }
        let names: Vec<String> = trainers.iter().map(|t| t.name().to_string()).collect();
        let weighted = trainers[0].prioritized();
        let use_graph = trainers.iter().all(|t| t.allows_graph());
        let mut learners: Vec<_> = trainers.iter_mut().map(|t| t.learner_for_group()).collect();
        let step = GroupStep::new(&mut learners, weighted, use_graph)?;
        for t in trainers.iter_mut() {
            t.set_group((names.len() > 1).then(|| names.clone()));
        }
        Ok(TrainGroup { members, step })
    }

    /// The group's step (tests count its ops, captures and buffers).
    #[cfg(test)]
    pub(crate) fn group_step(&mut self) -> &mut GroupStep {
        &mut self.step
    }

    /// One step of the members whose `moves` flag is set (row order); the others stay
    /// exactly as they were. Returns every member's outputs (those of members that did
    /// not move mean nothing), and whether this step captured the group's graph; the
    /// caller then calls [`RunTrainer::grouped_step_taken`] for each member that moved.
    pub fn step(&mut self, trainers: &mut [&mut RunTrainer], moves: &[bool]) -> anyhow::Result<(GroupOutput, bool)> {
        let mut replays: Vec<&mut Replay> = trainers.iter_mut().map(|t| t.replay_mut()).collect();
        self.step.step(&mut replays, moves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trainer::tests::{batch, setup_in, small};

    /// A regroup frees the old group: once its runs have moved into new groups and it is
    /// dropped, nothing holds any of its buffers (parameters, gradients, optimizer state,
    /// targets, the step's batch), so their memory can go back to the device.
    #[test]
    fn a_regroup_leaves_nothing_of_the_old_group_alive() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut t, r, d) = small();
        t.grouped = Some(true);
        let mut runs: Vec<RunTrainer> = ["a", "b"]
            .iter()
            .map(|n| {
                let mut s = setup_in(&tmp.path().join(n), (t.clone(), r.clone(), d.clone()));
                s.name = n.to_string();
                RunTrainer::build(s, tch::Device::Cpu, Box::new(|_| {})).unwrap()
            })
            .collect();
        for (i, run) in runs.iter_mut().enumerate() {
            run.ingest(batch(150, i)).unwrap();
        }
        let mut trainers: Vec<&mut RunTrainer> = runs.iter_mut().collect();
        let mut both = TrainGroup::new(vec![1, 2], &mut trainers).unwrap();
        let (out, _) = both.step(&mut trainers, &[true, true]).unwrap();
        drop(out);
        let kept = both.group_step().buffers();
        assert!(kept.len() >= 6, "the group's buffers: {}", kept.len());
        // Online, target and gradient first: the runs' tensors are views of them.
        for b in &kept[..3] {
            assert!(shine_agent::aten::storage_use_count(b).unwrap() > 1, "a buffer the runs' tensors are views of");
        }
        // Each run moves into a group of its own; the old group goes.
        let (a, b) = trainers.split_at_mut(1);
        let alone_a = TrainGroup::new(vec![1], a).unwrap();
        let alone_b = TrainGroup::new(vec![2], b).unwrap();
        drop(both);
        for (i, b) in kept.iter().enumerate() {
            assert_eq!(shine_agent::aten::storage_use_count(b).unwrap(), 1, "buffer {i} of the old group is still held");
        }
        drop((alone_a, alone_b));
    }
}

/// Groups on a real GPU (one replaying its step as a CUDA graph, one whose run's replay
/// is in RAM): `scripts/gpu-check.sh --tests BIN` runs these (the library's test
/// binary, `--ignored graph_tests`); without a GPU they are ignored. (The grouped graph
/// step's equality with the eager grouped step is replay_bench's check, which
/// gpu-check.sh runs.)
#[cfg(test)]
mod graph_tests {
    use super::*;
    use crate::trainer::tests::{batch, setup_in, small};
    use crate::trainer::GRAPH_WARMUP_STEPS;

    #[test]
    #[ignore = "needs a CUDA device: scripts/gpu-check.sh runs it"]
    fn a_group_on_cuda_is_captured_once_as_its_replays_grow_draws_anew_each_replay_and_a_held_back_run_stays() {
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
        for (i, run) in runs.iter_mut().enumerate() {
            run.ingest(batch(150, i)).unwrap();
        }
        let mut trainers: Vec<&mut RunTrainer> = runs.iter_mut().collect();
        let mut group = TrainGroup::new(vec![1, 2], &mut trainers).unwrap();
        assert!(group.step.uses_graph());
        let step = |group: &mut TrainGroup, trainers: &mut [&mut RunTrainer], moves: &[bool]| {
            let (out, _) = group.step(trainers, moves).unwrap();
            for (r, t) in trainers.iter_mut().enumerate().filter(|&(r, _)| moves[r]) {
                t.grouped_step_taken(out.run(r)).unwrap();
            }
            out
        };
        // Successive replays draw different rows: the batch buffer changes between two.
        let mut seen = Vec::new();
        for _ in 0..20 {
            step(&mut group, &mut trainers, &[true, true]);
            seen.push(Vec::<f32>::try_from(&group.step.buffers()[4].get(0).get(0).to_device(tch::Device::Cpu)).unwrap());
        }
        assert_eq!(group.step.captures(), 1, "captured after the warm-up");
        assert!(seen.windows(2).skip(GRAPH_WARMUP_STEPS as usize).any(|w| w[0] != w[1]), "each replay draws anew");
        // b's replay grows and b is held back: no new capture, and b stays as it was.
        trainers[1].ingest(batch(50, 7)).unwrap();
        let before = trainers[1].model_weights_for_test();
        for _ in 0..10 {
            step(&mut group, &mut trainers, &[true, false]);
        }
        assert_eq!(group.step.captures(), 1, "a growing replay is no reason to capture again");
        assert_eq!(trainers[1].model_weights_for_test(), before, "a held-back member does not move");
        let out = step(&mut group, &mut trainers, &[true, true]);
        for t in trainers.iter_mut() {
            t.count_steps();
        }
        assert_eq!((trainers[0].stats().train_steps, trainers[1].stats().train_steps), (31, 21));
        let loss = out.run(0).loss().double_value(&[]);
        assert!(loss.is_finite(), "{loss}");
    }

    #[test]
    #[ignore = "needs a CUDA device: scripts/gpu-check.sh runs it"]
    fn a_run_with_the_in_ram_replay_sampling_by_priority_trains_on_cuda() {
        // Its priorities live on the CPU, its step on the GPU: what passes between them
        // (the step's flag, its TD errors) must cross to the CPU (a CPU test has one
        // device, and cannot see this).
        use crate::storage::replay::{ReplayKind, Sampling};
        assert!(tch::Cuda::is_available(), "these tests need a CUDA device (scripts/gpu-check.sh)");
        let tmp = tempfile::tempdir().unwrap();
        let (mut t, mut r, d) = small();
        t.device = "cuda".into();
        t.samples_per_insert = 0.0;
        (r.kind, r.sampling) = (ReplayKind::Host, Sampling::Prioritized);
        let mut run = RunTrainer::build(setup_in(tmp.path(), (t, r, d)), tch::Device::Cuda(0), Box::new(|_| {})).unwrap();
        run.ingest(batch(150, 0)).unwrap();
        let mut trainers = [&mut run];
        let mut group = TrainGroup::new(vec![1], &mut trainers).unwrap();
        assert!(!group.step.uses_graph(), "the in-RAM replay draws on the host");
        for _ in 0..10 {
            let (out, _) = group.step(&mut trainers, &[true]).unwrap();
            trainers[0].grouped_step_taken(out.run(0)).unwrap();
        }
        trainers[0].count_steps();
        assert_eq!(trainers[0].stats().train_steps, 10);
        assert!(trainers[0].stats().loss.is_finite(), "{}", trainers[0].stats().loss);
    }
}
