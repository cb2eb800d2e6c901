//! The train step of a group of runs, as the device runs it ([`GroupStep`]): each run's
//! draw from its replay into the step's buffers (one `randint` for all), one
//! [`shine_agent::dqn::Group`] step for all of them, and by priority each run's
//! priority update. A run alone is a group of one: there is no other step.
//!
//! ```text
//! let mut s = GroupStep::new(&mut learners, weighted, use_graph)?;   // learners move in
//! let (out, captured) = s.step(&mut replays, &moves)?;              // one step; out.run(r)
//! ```
//!
//! On CUDA (where this build has graph support, every replay is the device replay and
//! no run set `[trainer] cuda_graph = false`) the step is captured once as a CUDA graph,
//! after [`GRAPH_WARMUP_STEPS`] eager steps, and replayed for the group's life:
//! everything it reads that changes (each replay's fill level, the mask, Adam's counts,
//! prioritized sampling's exponent) is a tensor written in place, so a growing replay
//! needs no new capture. Each group captures into a memory pool of its own
//! ([`GraphPool`]), whose memory goes back to the device when the group is dropped and
//! the cache emptied ([`crate::device`] does after a regroup).
//!
//! The op count of one step (what a test holds at 40 for a run alone, uniform, batch 32)
//! is of [`GroupStep::device_work`]: the draw and the grouped step.

use super::graph::GRAPH_WARMUP_STEPS;
use crate::storage::prioritized::Drawn;
use crate::storage::replay::{Replay, DRAW_RANGE};
use crate::trainer::cuda_graph::{CudaGraph, GraphPool};
use anyhow::{bail, Context};
use shine_agent::dqn::{row, Group, GroupOutput, Learner};
use tch::{Kind, Tensor};

/// A group's step, maybe as a captured CUDA graph.
pub struct GroupStep {
    group: Group,
    /// What the runs' draws write and the step reads, for the group's life: the rows
    /// `[k, B, 64]` and, by priority, the importance weights `[k, B]`.
    batch: Tensor,
    weights: Option<Tensor>,
    use_graph: bool,
    /// The captured step and its outputs, in the graph's memory (rewritten by each replay).
    graph: Option<(CudaGraph, GroupOutput)>,
    eager_steps: u64,
    /// Graphs captured: one for the group's life.
    captures: u64,
}

impl GroupStep {
    /// The step of `learners` (row order), who move into the group's buffers; `weighted`:
    /// their replays sample by priority; `use_graph`: replay the step as a CUDA graph
    /// where the device allows (a CUDA device, a build with graph support).
    pub fn new(learners: &mut [&mut Learner], weighted: bool, use_graph: bool) -> anyhow::Result<GroupStep> {
        let group = Group::new(learners, weighted)?;
        let shape = group.shape().clone();
        let use_graph = use_graph && shape.device.is_cuda() && crate::trainer::cuda_graph::BUILT;
        let (k, b) = (learners.len() as i64, shape.batch_size as i64);
        let batch = Tensor::zeros([k, b, row::WIDTH as i64], (Kind::Float, shape.device));
        let weights = weighted.then(|| Tensor::ones([k, b], (Kind::Float, shape.device)));
        Ok(GroupStep { group, batch, weights, use_graph, graph: None, eager_steps: 0, captures: 0 })
    }

    /// Whether the step is replayed as a CUDA graph (after its warm-up).
    pub fn uses_graph(&self) -> bool {
        self.use_graph
    }

    /// Graphs captured for this group so far (at most one).
    pub fn captures(&self) -> u64 {
        self.captures
    }

    /// The captured graph, once there is one (benchmarks count and name its kernels).
    pub fn graph(&self) -> Option<&CudaGraph> {
        self.graph.as_ref().map(|(g, _)| g)
    }

    pub fn group(&self) -> &Group {
        &self.group
    }

    pub fn group_mut(&mut self) -> &mut Group {
        &mut self.group
    }

    /// Every buffer the step holds (its own and its learners' rows): what a dropped
    /// group must free (tests count their storages' handles).
    pub fn buffers(&self) -> Vec<Tensor> {
        let mut all: Vec<Tensor> = self.group.buffers().into_iter().map(Tensor::shallow_clone).collect();
        all.push(self.batch.shallow_clone());
        all.extend(self.weights.iter().map(Tensor::shallow_clone));
        all
    }

    /// One step of the runs whose `moves` flag is set (row order; `replays[r]` is run r's
    /// replay); the others stay exactly as they were. Returns every run's outputs (those
    /// of runs that did not move mean nothing), and whether this step captured the graph.
    pub fn step(&mut self, replays: &mut [&mut Replay], moves: &[bool]) -> anyhow::Result<(GroupOutput, bool)> {
        self.group.set_mask(moves);
        if !(self.use_graph && self.eager_steps >= GRAPH_WARMUP_STEPS) {
            self.eager_steps += 1;
            return Ok((self.device_work(replays)?, false));
        }
        let captured = self.graph.is_none();
        if captured {
            let tch::Device::Cuda(index) = self.group.shape().device else { bail!("a CUDA graph on {:?}", self.group.shape().device) };
            // The group's own pool: its one capture's memory, freed with the group.
            let pool = GraphPool::new(index)?;
            let mut graph = CudaGraph::new()?;
            let out = graph.capture(&pool, || self.device_work(replays))??;
            self.graph = Some((graph, out));
            self.captures += 1;
        }
        let (graph, out) = self.graph.as_mut().expect("captured above");
        graph.replay()?;
        Ok((out.shallow_clone(), captured))
    }

    /// The step's device work: each run's draw into the group's batch (one `randint` for
    /// all), the grouped step, and by priority each run's priority update. What a graph
    /// captures; device work alone where every replay is the device replay.
    pub fn device_work(&mut self, replays: &mut [&mut Replay]) -> anyhow::Result<GroupOutput> {
        let shape = self.group.shape();
        let (k, b) = (replays.len() as i64, shape.batch_size as i64);
        let rand = Tensor::randint_low(0, DRAW_RANGE, [k, b], (Kind::Int64, shape.device));
        let mut drawn: Vec<Option<Drawn>> = Vec::with_capacity(replays.len());
        for (r, replay) in replays.iter_mut().enumerate() {
            let d = replay.draw_into(&self.batch.get(r as i64), &rand.get(r as i64), &self.group.moved(r));
            if let (Some(d), Some(w)) = (&d, &self.weights) {
                w.get(r as i64).copy_(&d.weights);
            }
            drawn.push(d);
        }
        let out = self.group.device_step(&self.batch, self.weights.as_ref()).context("the grouped step")?;
        for (r, (replay, d)) in replays.iter_mut().zip(&drawn).enumerate() {
            if let Some(d) = d {
                replay.update_priorities(d, &out.run(r).td_abs(), &self.group.moved(r));
            }
        }
        Ok(out)
    }
}

/// Steps taken outside the device thread, for tests.
#[cfg(test)]
pub(crate) mod for_tests {
    use super::*;
    use crate::trainer::RunTrainer;

    /// One step of `run` alone, as its group of one takes it on the device thread;
    /// returns what its bookkeeping returns (whether its numbers were read back or a
    /// model published).
    pub(crate) fn step_run(run: &mut RunTrainer) -> anyhow::Result<bool> {
        let (weighted, graph) = (run.prioritized(), run.allows_graph());
        let mut step = GroupStep::new(&mut [run.learner_for_group()], weighted, graph)?;
        let (out, _) = step.step(&mut [run.replay_mut()], &[true])?;
        run.grouped_step_taken(out.run(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::replay::{ReplayConfig, ReplayKind, Sampling};
    use shine_agent::aten::{count_ops, record_ops, Ops};
    use shine_agent::dqn::{DqnConfig, OptimizerKind};
    use shine_agent::experience::{col, TRANSITION_FLOATS};

    /// `n` plausible wire rows (valid actions, some terminal).
    fn wire(n: usize, seed: usize) -> Vec<f32> {
        let mut v = Vec::with_capacity(n * TRANSITION_FLOATS);
        for i in 0..n {
            let k = i + seed * 7919;
            let start = v.len();
            v.extend((0..TRANSITION_FLOATS).map(|c| ((k * 13 + c * 5) % 23) as f32 / 23.0 - 0.4));
            v[start + col::ACTION] = (k % 5) as f32;
            v[start + col::TERMINAL] = (k % 17 == 0) as u8 as f32;
        }
        v
    }

    fn replay(sampling: Sampling, rows: usize) -> Replay {
        let cfg = ReplayConfig { kind: ReplayKind::Device, sampling, capacity: 4096, update_size: 256, ..Default::default() };
        let mut r = Replay::new(&cfg, 0.99, tch::Device::Cpu).unwrap();
        r.push(&wire(rows, 1)).unwrap();
        r.flush();
        r
    }

    /// The ops of one step of a run alone (default settings but `cfg`), in the form a GPU
    /// runs (the optimizer's tensor ops, also on the CPU), after one warm-up step.
    fn ops_of_one_step(cfg: DqnConfig, sampling: Sampling) -> Ops {
        let mut learner = Learner::new(&cfg, 5, tch::Device::Cpu).unwrap();
        let mut r = replay(sampling, 1000);
        r.set_host_loops(false);
        let mut s = GroupStep::new(&mut [&mut learner], sampling == Sampling::Prioritized, false).unwrap();
        s.group_mut().set_host_optimizer(false);
        s.step(&mut [&mut r], &[true]).unwrap();
        let (out, ops) = count_ops(|| s.device_work(&mut [&mut r])).unwrap();
        out.unwrap();
        ops
    }

    /// The op count of the step a GPU runs, held where a GPU's step time is set: a run
    /// alone, uniform sampling, batch 32 (the defaults: RMSProp, Double DQN, clipping at
    /// 10), is at most 40 ops (it was 64 at ec7fad3), and none of them waits for the
    /// device. What counts (`shine_agent::aten`): every op our code dispatches from
    /// outside another op (the draw from the replay included), but those that only make
    /// a view or set metadata (`view`, `select`, `narrow`, `transpose`, `unsqueeze`,
    /// `empty`, ...: `aten::NOT_COUNTED`), which launch no kernel. A wait: an op that
    /// reads a value back or sizes its result by the data, or a copy between devices.
    /// The counts of the other forms are printed, not held (prioritized sampling adds its
    /// draw and update; Adam its count).
    #[test]
    fn a_run_alones_step_is_at_most_40_ops_and_none_waits_for_the_device() {
        let ops = ops_of_one_step(DqnConfig::default(), Sampling::Uniform);
        let counted = ops.counted();
        println!("uniform, RMSProp, batch 32: {} ops: {counted:?}", counted.len());
        println!("not counted: {:?}", ops.not_counted());
        assert!(counted.len() <= 40, "{} ops: {:?}", counted.len(), ops.by_name());
        assert!(ops.syncs().is_empty(), "waits for the device: {:?}", ops.syncs());
        for (what, cfg, sampling) in [
            ("prioritized", DqnConfig::default(), Sampling::Prioritized),
            ("Adam", DqnConfig { optimizer: OptimizerKind::Adam, ..Default::default() }, Sampling::Uniform),
            ("averaged", DqnConfig { publish_average_tau: 0.01, ..Default::default() }, Sampling::Uniform),
        ] {
            let ops = ops_of_one_step(cfg, sampling);
            println!("{what}: {} ops: {:?}", ops.counted().len(), ops.by_name());
            assert!(ops.syncs().is_empty(), "{what}: waits for the device: {:?}", ops.syncs());
        }
    }

    /// A step's ops with their arguments, as a graph captured of it would replay them.
    fn records(s: &mut GroupStep, replays: &mut [&mut Replay]) -> Vec<String> {
        let (out, ops) = record_ops(|| s.device_work(replays)).unwrap();
        out.unwrap();
        ops.records()
    }

    /// Captured once: a CUDA graph records a step's ops and every value they take but
    /// their tensors' contents, and replays exactly that. Between a group's capture and
    /// its later steps the replays fill (one from empty: a run in burn-in), the mask
    /// changes (that run starts training) and prioritized sampling's exponent moves; each
    /// is read from a tensor written in place, so a later step records what the first
    /// did, and one capture serves the group's life. On the CPU, where no graph is
    /// captured, this is what shows it.
    #[test]
    fn a_later_step_records_what_the_first_did_as_replays_fill_the_mask_changes_and_beta_moves() {
        for sampling in [Sampling::Uniform, Sampling::Prioritized] {
            for k in [1usize, 2] {
                let what = format!("{sampling:?}, k = {k}");
                let cfg = ReplayConfig { kind: ReplayKind::Device, sampling, capacity: 4096, update_size: 256, beta_steps: 10, ..Default::default() };
                let mut replays: Vec<Replay> = (0..k).map(|_| Replay::new(&cfg, 0.99, tch::Device::Cpu).unwrap()).collect();
                replays[0].push(&wire(300, 1)).unwrap();
                replays[0].flush();
                for r in &mut replays {
                    r.set_host_loops(false);
                }
                let mut learners: Vec<Learner> = (0..k).map(|_| Learner::new(&DqnConfig::default(), 5, tch::Device::Cpu).unwrap()).collect();
                let mut members: Vec<&mut Learner> = learners.iter_mut().collect();
                let mut s = GroupStep::new(&mut members, sampling == Sampling::Prioritized, false).unwrap();
                s.group_mut().set_host_optimizer(false);
                // The last run, when there are two, is in burn-in: its replay is empty.
                let burn_in: Vec<bool> = (0..k).map(|r| r + 1 < k || k == 1).collect();
                s.group_mut().set_mask(&burn_in);
                let mut views: Vec<&mut Replay> = replays.iter_mut().collect();
                let first = records(&mut s, &mut views);
                for i in 0..6 {
                    for r in views.iter_mut() {
                        r.push(&wire(300, 10 + i)).unwrap();
                    }
                    s.step(&mut views, &vec![true; k]).unwrap();
                }
                s.group_mut().set_mask(&vec![true; k]);
                let later = records(&mut s, &mut views);
                assert_eq!(first.len(), later.len(), "{what}");
                for (i, (a, b)) in first.iter().zip(&later).enumerate() {
                    assert_eq!(a, b, "{what}: op {i} records other values than at the capture");
                }
            }
        }
    }
}
