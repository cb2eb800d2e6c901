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
    pool: Option<GraphPool>,
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
        Ok(GroupStep { group, batch, weights, use_graph, pool: None, graph: None, eager_steps: 0, captures: 0 })
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
            let pool = match self.pool {
                Some(p) => p,
                None => *self.pool.insert(GraphPool::new(index)?),
            };
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

    /// One step of `learner` alone (a group of one) on wire rows `wire` (`[B, 57]`, B its
    /// batch size), counted on it.
    pub(crate) fn step_learner(learner: &mut Learner, wire: &Tensor) -> GroupOutput {
        let v = Vec::<f32>::try_from(&wire.view([-1])).unwrap();
        let mut rows = Vec::new();
        row::from_wire(&v, learner.gamma_n() as f32, &mut rows);
        let batch = Tensor::from_slice(&rows).view([1, -1, row::WIDTH as i64]).to_device(learner.device());
        let out = Group::new(&mut [&mut *learner], false).unwrap().device_step(&batch, None).unwrap();
        learner.finish_step();
        out
    }

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
