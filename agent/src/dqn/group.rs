//! k learners trained as one step (issue: many experiments on one GPU).
//!
//! One run's step is a chain of about 80 small kernels; k runs stepped in turn are k
//! such chains, and on a GPU the chain's launches, not its arithmetic, set the pace. A
//! [`Group`] stacks the k learners' tensors on a leading run dimension (parameters,
//! gradients, optimizer state, target nets, published averages: each `[k, P]`, P the
//! flat buffer's length) and takes the step for all of them with batched kernels
//! (`baddbmm`, `bmm`), so k runs cost one chain of the same length.
//!
//! Each learner keeps what makes it a run. Its tensors become views of its row of the
//! group's buffers ([`Learner::move_into`]), so everything the run does on its own
//! (checkpoints, restores, publishing, the target sync, counting steps) goes on as
//! before and reads or writes its row. Its hyper-parameters (learning rate, discount,
//! n-step, Huber delta, clipping norm, RMSProp's alpha, Adam's betas, eps, averaging
//! rate) are per-run values on the device that the step reads, not constants baked into
//! it, so runs that differ in them share one step (and one captured CUDA graph). What
//! must be equal is what shapes the step: the [`GroupShape`].
//!
//! [`Group::device_step`] takes a `[k, B, 57]` batch (each run's rows drawn from its
//! own replay) and a `[k]` mask: a run whose mask is 0 (its rate limiter holds it back,
//! or it is paused) does not move in that step. Its parameters, optimizer state and
//! Adam's step count stay exactly as they were (a `where` on the mask, not a
//! multiplication, so not even a NaN in its unused batch could reach them). Like
//! [`Learner::device_step`] it only queues kernels, so it can be captured as a CUDA
//! graph; the host then counts the step for each run that moved
//! ([`Learner::finish_step`], which also syncs that run's target net when due).
//!
//! A test (`numerics_a_grouped_step_is_each_runs_float64_reference`) holds each run of
//! groups of k = 1, 2 and 4 to its own step in float64 (the autograd reference) within
//! float32 rounding, with differing hyper-parameters, masks and membership changes.

use super::{Activations, Columns, DqnConfig, DqnError, Layout, Learner, LearnerRows, OptimizerKind};
use crate::model;
use tch::{Device, Kind, Tensor};

/// What learners must share to train as one step: the step's shapes and its ops.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupShape {
    pub device: Device,
    pub actions: usize,
    pub batch_size: usize,
    pub optimizer: OptimizerKind,
    pub double_dqn: bool,
    /// Whether the learners keep a published average (`publish_average_tau` > 0).
    pub average: bool,
}

impl GroupShape {
    pub fn of(learner: &Learner) -> GroupShape {
        let c = learner.config();
        GroupShape {
            device: learner.device(),
            actions: learner.online.actions(),
            batch_size: c.batch_size,
            optimizer: c.optimizer,
            double_dqn: c.double_dqn,
            average: learner.average.is_some(),
        }
    }
}

/// What one grouped step returns, one value per run (`[k]`), still on the device (as
/// [`super::TrainOutput`]); a held-back run's values are those of a step not taken.
pub struct GroupOutput {
    pub loss: Tensor,
    pub mean_q: Tensor,
    pub grad_norm: Tensor,
}

impl GroupOutput {
    /// Run `r`'s part, as its own step would have returned it.
    pub fn run(&self, r: usize) -> super::TrainOutput {
        let r = r as i64;
        super::TrainOutput { loss: self.loss.get(r), mean_q: self.mean_q.get(r), grad_norm: self.grad_norm.get(r), td_abs: None }
    }
}

/// The per-run hyper-parameters as `[k, 1]` f32 columns on the device (f64 where the
/// step computes in f64), each run's row its own config's value.
struct Hyper {
    lr: Tensor,
    gamma_n: Tensor,
    huber_delta: Tensor,
    /// 0 turns a run's clipping off.
    max_grad_norm: Tensor,
    rmsprop_alpha: Tensor,
    eps: Tensor,
    beta1: Tensor,
    beta2: Tensor,
    /// `1 - alpha`, `1 - beta1`, `1 - beta2` computed in f64 and then rounded, as the
    /// lone optimizer's scalar operands are (not `1 - alpha` in f32).
    one_minus_alpha: Tensor,
    one_minus_beta1: Tensor,
    one_minus_beta2: Tensor,
    /// Adam's betas and learning rate in f64: its bias corrections `1 - beta^t`, and
    /// `lr / (1 - beta1^t)`, are computed in f64 as the lone optimizer computes them on
    /// the host (t runs into the millions).
    beta1_f64: Tensor,
    beta2_f64: Tensor,
    lr_f64: Tensor,
    tau: Tensor,
}

impl Hyper {
    fn of(cfgs: &[&DqnConfig], device: Device) -> Hyper {
        let col = |kind: Kind, f: &dyn Fn(&DqnConfig) -> f64| {
            let v: Vec<f64> = cfgs.iter().map(|c| f(c)).collect();
            Tensor::from_slice(&v).view([-1, 1]).to_kind(kind).to_device(device)
        };
        let f32s = |f: &dyn Fn(&DqnConfig) -> f64| col(Kind::Float, f);
        let f64s = |f: &dyn Fn(&DqnConfig) -> f64| col(Kind::Double, f);
        Hyper {
            lr: f32s(&|c| c.lr),
            gamma_n: f32s(&|c| c.gamma.powi(c.n_step as i32)),
            huber_delta: f32s(&|c| c.huber_delta),
            max_grad_norm: f32s(&|c| c.max_grad_norm),
            rmsprop_alpha: f32s(&|c| c.rmsprop_alpha),
            eps: f32s(&|c| c.eps),
            beta1: f32s(&|c| c.adam_betas.0),
            beta2: f32s(&|c| c.adam_betas.1),
            one_minus_alpha: f32s(&|c| 1.0 - c.rmsprop_alpha),
            one_minus_beta1: f32s(&|c| 1.0 - c.adam_betas.0),
            one_minus_beta2: f32s(&|c| 1.0 - c.adam_betas.1),
            beta1_f64: f64s(&|c| c.adam_betas.0),
            beta2_f64: f64s(&|c| c.adam_betas.1),
            lr_f64: f64s(&|c| c.lr),
            tau: f32s(&|c| c.publish_average_tau),
        }
    }
}

/// k learners' tensors stacked, and the step that trains them together.
pub struct Group {
    shape: GroupShape,
    layout: Layout,
    /// `[k, P]` each; row r is learner r's buffer (its tensors are views of it).
    online: Tensor,
    target: Tensor,
    average: Option<Tensor>,
    slots: Vec<Tensor>,
    grad: Tensor,
    hyper: Hyper,
    /// Adam's updates applied per run, `[k, 1]` f64, counted on the device by the step
    /// itself (so an Adam group can be captured as a graph); row r is learner r's own
    /// device count (a view), so it goes on counting when the learner trains alone.
    adam_steps: Tensor,
    /// `[k]` f32, 1 for a run that moves in the next step, 0 for one that stays as it
    /// is: written by the caller before each step ([`Group::set_mask`]), read by it.
    mask: Tensor,
    /// What `mask` holds, on the host (so that an unchanged mask costs nothing).
    moves: Vec<bool>,
}

impl Group {
    /// Stack `members` into one group, in that order (row r is `members[r]`), moving
    /// each one's tensors into its row: from now on the learner reads and writes the
    /// group's buffers. Learners of another [`GroupShape`] than the first are an error
    /// (and nothing is moved). A learner can be moved again into a later group (when
    /// the membership changes, the caller builds a new group from the members left).
    pub fn new(members: &mut [&mut Learner]) -> Result<Group, DqnError> {
        let Some(first) = members.first() else { return Err(DqnError::Config("a group needs at least one learner".into())) };
        let shape = GroupShape::of(first);
        if let Some(other) = members.iter().map(|l| GroupShape::of(l)).find(|s| *s != shape) {
            return Err(DqnError::Config(format!("learners of different shapes cannot train as one step: {shape:?} and {other:?}")));
        }
        let (k, device) = (members.len() as i64, shape.device);
        let layout = Layout::new(shape.actions);
        let buffer = || Tensor::zeros([k, layout.len], (Kind::Float, device));
        let (online, target, grad) = (buffer(), buffer(), buffer());
        let average = shape.average.then(buffer);
        let slots: Vec<Tensor> = members[0].optimizer.slots.iter().map(|_| buffer()).collect();
        // Adam's counts: each learner's own, moved into its row below (so the count
        // stays the learner's when it trains alone again).
        let adam_steps = Tensor::zeros([k, 1], (Kind::Double, device));
        let cfgs: Vec<DqnConfig> = members.iter().map(|l| l.config().clone()).collect();
        let hyper = Hyper::of(&cfgs.iter().collect::<Vec<_>>(), device);
        for (r, learner) in members.iter_mut().enumerate() {
            let row = |t: &Tensor| t.get(r as i64);
            learner.move_into(LearnerRows {
                online: row(&online),
                target: row(&target),
                average: average.as_ref().map(row),
                slots: slots.iter().map(row).collect(),
                device_steps: (shape.optimizer == OptimizerKind::Adam).then(|| row(&adam_steps)),
                grad: row(&grad),
            });
        }
        let mask = Tensor::ones([k], (Kind::Float, device));
        let moves = vec![true; k as usize];
        Ok(Group { shape, layout, online, target, average, slots, grad, hyper, adam_steps, mask, moves })
    }

    pub fn shape(&self) -> &GroupShape {
        &self.shape
    }

    /// Runs in the group.
    pub fn len(&self) -> usize {
        self.online.size()[0] as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Which runs move in the next step (`moves[r]` for row r), written into the mask
    /// the step reads (outside a captured graph, which reads the same tensor each
    /// replay). Each flag that changed is one fill of its element, queued like any
    /// kernel: a copy from host memory would make the host wait for the device at
    /// every step (a copy from pageable memory synchronizes its stream first).
    pub fn set_mask(&mut self, moves: &[bool]) {
        assert_eq!(moves.len(), self.len(), "one flag per run");
        for (r, (&new, old)) in moves.iter().zip(self.moves.iter_mut()).enumerate() {
            if new != *old {
                let _ = self.mask.get(r as i64).fill_(if new { 1.0 } else { 0.0 });
                *old = new;
            }
        }
    }

    /// The forward of the k networks stacked in `flat` (`[k, P]`) over `x` (`[k, N, 27]`):
    /// each activation `[k, N, ...]`.
    fn activations(&self, flat: &Tensor, x: &Tensor) -> Activations {
        let p = self.layout.stacked_blocks(flat);
        // x W^T + b for each run: the bias as [k, 1, out], broadcast over the rows.
        let linear = |x: &Tensor, w: &Tensor, b: &Tensor| b.unsqueeze(1).baddbmm(x, &w.transpose(1, 2), 1.0, 1.0);
        let h1 = linear(x, &p.w1, &p.b1).relu();
        let h2 = linear(&h1, &p.w2, &p.b2).relu();
        let stream = model::STREAM as i64;
        let value = linear(&h2.narrow(2, 0, stream), &p.wv, &p.bv);
        let advantage = linear(&h2.narrow(2, stream, stream), &p.wa, &p.ba);
        Activations { h1, h2, value, advantage }
    }

    /// [`super::DuelingDqn::backward`] for k networks at once: the gradients of
    /// `sum_i dq[r, i] * Q_r(x_ri, a_ri)` for each run r, written into `self.grad`.
    fn backward(&self, x: &Tensor, act: &Activations, actions: &Tensor, dq: &Tensor) {
        let p = self.layout.stacked_blocks(&self.online);
        let g = self.layout.stacked_blocks(&self.grad);
        let (k, rows) = (x.size()[0], x.size()[1]);
        let n_actions = self.shape.actions as i64;
        let stream = model::STREAM as i64;
        let (h2v, h2a) = (act.h2.narrow(2, 0, stream), act.h2.narrow(2, stream, stream));
        let dq = dq.unsqueeze(2); // [k, B, 1]
        let mut d_adv = (&dq * (-1.0 / n_actions as f64)).expand([k, rows, n_actions], false).contiguous();
        let _ = d_adv.scatter_add_(2, actions, &dq);
        let t = |m: &Tensor| m.transpose(1, 2);
        let _ = t(&dq).bmm_out(&g.wv, &h2v);
        let _ = dq.sum_intlist_out(&g.bv, [1i64].as_slice(), false, Kind::Float);
        let _ = t(&d_adv).bmm_out(&g.wa, &h2a);
        let _ = d_adv.sum_intlist_out(&g.ba, [1i64].as_slice(), false, Kind::Float);
        let dh2 = Tensor::empty([k, rows, 2 * stream], (Kind::Float, x.device()));
        let _ = dq.bmm_out(&dh2.narrow(2, 0, stream), &p.wv);
        let _ = d_adv.bmm_out(&dh2.narrow(2, stream, stream), &p.wa);
        let dz2 = act.h2.threshold_backward(&dh2, 0.0);
        let _ = t(&dz2).bmm_out(&g.w2, &act.h1);
        let _ = dz2.sum_intlist_out(&g.b2, [1i64].as_slice(), false, Kind::Float);
        let dz1 = act.h1.threshold_backward(&dz2.bmm(&p.w2), 0.0);
        let _ = t(&dz1).bmm_out(&g.w1, x);
        let _ = dz1.sum_intlist_out(&g.b1, [1i64].as_slice(), false, Kind::Float);
    }

    /// One DQN update of every run whose mask is 1, on `batch` (`[k, B, 57]`: row r is
    /// run r's batch, wire layout, on the group's device), as [`Learner::device_step`]
    /// computes it for each run alone. Only queues kernels; the caller counts the step
    /// for each run that moved ([`Learner::finish_step`]).
    pub fn device_step(&mut self, batch: &Tensor) -> GroupOutput {
        let rows = batch.size()[1];
        let Columns { states, actions, rewards, next_states, terminal } = Columns::of_stacked(batch);
        let h = &self.hyper;
        let (online, next_online) = if self.shape.double_dqn {
            let both = self.activations(&self.online, &Tensor::cat(&[&states, &next_states], 1));
            (both.rows(0, rows), Some(both.rows(rows, rows)))
        } else {
            (self.activations(&self.online, &states), None)
        };
        // The TD target, as the lone step's (see the EASY TO MISS notes there).
        let next = self.activations(&self.target, &next_states);
        let next_q = match &next_online {
            Some(online) => next.q_of(&online.advantage.argmax(2, true)),
            None => next.q().amax(2, false),
        };
        let td_target = &rewards + (1.0 - &terminal) * next_q * &h.gamma_n;
        let q_taken = online.q_of(&actions);
        let td = &q_taken - &td_target;
        let delta = &h.huber_delta;
        // Huber's loss and its slope with each run's own delta.
        let abs = td.abs();
        let huber = (&td * &td * 0.5).where_self(&abs.le_tensor(delta), &(delta * (&abs - delta * 0.5)));
        let loss = huber.mean_dim(1, false, Kind::Float);
        let slope = td.clamp_tensor(Some(&-delta), Some(delta)) * (1.0 / rows as f64);
        self.backward(&states, &online, &actions, &slope);

        // Each run's global gradient norm, and its clipping (a run with max_grad_norm 0
        // is not clipped: its coefficient is 1).
        let grad_norm = self.grad.norm_scalaropt_dim(2, [1i64].as_slice(), true); // [k, 1]
        let coef = ((&grad_norm + 1e-6).reciprocal() * &h.max_grad_norm).clamp_max(1.0);
        let coef = coef.where_self(&h.max_grad_norm.gt(0.0), &coef.ones_like());
        let _ = self.grad.g_mul_(&coef);
        self.apply_optimizer();
        if let Some(average) = &mut self.average {
            // A held-back run's weight is 0: lerp by 0 leaves its average as it was.
            let _ = average.lerp_tensor_(&self.online, &(&self.hyper.tau * self.mask.unsqueeze(1)));
        }
        GroupOutput { loss, mean_q: q_taken.mean_dim(1, false, Kind::Float), grad_norm: grad_norm.squeeze_dim(1) }
    }

    /// The optimizer's update of the runs that move, in the lone learner's arithmetic
    /// (`optim::Optimizer::step_tensors`), each run with its own hyper-parameters.
    fn apply_optimizer(&mut self) {
        let h = &self.hyper;
        let moves = self.mask.unsqueeze(1).gt(0.5); // [k, 1] bool
        let g = &self.grad;
        // A run that stays gets neither a new moment nor a parameter change.
        let keep = |slot: &mut Tensor, new: Tensor| {
            let kept = new.where_self(&moves, slot);
            slot.copy_(&kept);
        };
        match self.shape.optimizer {
            OptimizerKind::Rmsprop => {
                let sq = &mut self.slots[0];
                let new_sq = &*sq * &h.rmsprop_alpha + g * (g * &h.one_minus_alpha);
                keep(sq, new_sq);
                let update = (g * -&h.lr) / (sq.sqrt() + &h.eps);
                let _ = self.online.g_add_(&update.where_scalarother(&moves, 0.0));
            }
            OptimizerKind::Adam => {
                let t = &self.adam_steps + moves.to_kind(Kind::Double);
                // The lone optimizer's host scalars, per run: -lr / (1 - beta1^t) and
                // sqrt(1 - beta2^t), in f64, then rounded to f32.
                let (b1t, b2t): (Tensor, Tensor) = (h.beta1_f64.pow(&t), h.beta2_f64.pow(&t));
                let step_size = (-&h.lr_f64 / (1.0f64 - &b1t)).to_kind(Kind::Float);
                let bc2_sqrt = (1.0f64 - &b2t).sqrt().to_kind(Kind::Float);
                let (m, v) = self.slots.split_at_mut(1);
                let (m, v) = (&mut m[0], &mut v[0]);
                let new_m = &*m * &h.beta1 + g * &h.one_minus_beta1;
                let new_v = &*v * &h.beta2 + g * (g * &h.one_minus_beta2);
                keep(m, new_m);
                keep(v, new_v);
                let denom = v.sqrt() / bc2_sqrt + &h.eps;
                let update = (&*m * step_size) / denom;
                let _ = self.online.g_add_(&update.where_scalarother(&moves, 0.0));
                self.adam_steps.copy_(&t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::oracle;
    use super::*;
    use crate::experience::{col, TRANSITION_FLOATS};
    use std::collections::HashMap;

    const ACTIONS: usize = 5;
    const BATCH: usize = 16;

    /// The learner's state, copied (what a step starts from, for the oracle).
    fn snapshot(l: &Learner) -> HashMap<String, Tensor> {
        l.state_tensors().into_iter().map(|(n, t)| (n, t.copy())).collect()
    }

    /// A batch of plausible transitions drawn from `seed` (some terminal).
    fn batch(seed: u64) -> Tensor {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut rows = vec![0f32; BATCH * TRANSITION_FLOATS];
        for r in rows.chunks_mut(TRANSITION_FLOATS) {
            for v in r.iter_mut() {
                *v = (next() * 2.0 - 1.0) as f32;
            }
            r[col::ACTION] = (next() * ACTIONS as f64).floor() as f32;
            r[col::REWARD] = (next() * 2.0 - 1.0) as f32 * 3.0;
            r[col::TERMINAL] = if next() < 0.2 { 1.0 } else { 0.0 };
        }
        Tensor::from_slice(&rows).view([BATCH as i64, TRANSITION_FLOATS as i64])
    }

    /// Run i's config: each differs from the others in what a run may choose.
    fn config(i: usize, optimizer: OptimizerKind, double_dqn: bool, tau: f64) -> DqnConfig {
        let base = DqnConfig { optimizer, double_dqn, publish_average_tau: tau, batch_size: BATCH, lr: 1e-3, target_sync_every: 7, ..Default::default() };
        match i % 4 {
            0 => base,
            1 => DqnConfig { lr: 1.5e-4, gamma: 0.9, n_step: 3, huber_delta: 0.5, target_sync_every: 5, adam_betas: (0.8, 0.99), ..base },
            2 => DqnConfig { lr: 4e-4, max_grad_norm: 0.05, rmsprop_alpha: 0.95, publish_average_tau: tau * 2.0, ..base },
            _ => DqnConfig { max_grad_norm: 0.0, eps: 1e-6, gamma: 0.97, target_sync_every: 11, ..base },
        }
    }

    /// Build the group of `runs` (indices into `learners`), in that order.
    fn group_of(learners: &mut [Learner], runs: &[usize]) -> Group {
        let mut each: Vec<Option<&mut Learner>> = learners.iter_mut().map(Some).collect();
        let mut members: Vec<&mut Learner> = runs.iter().map(|&r| each[r].take().expect("each run once")).collect();
        Group::new(&mut members).unwrap()
    }

    /// Each run of a group steps as the autograd reference in float64 says its own step
    /// goes, within float32 rounding (`dqn/oracle.rs`), with differing hyper-parameters,
    /// masks and membership changes (k = 1, 2 and 4); a run whose mask is 0 stays
    /// exactly as it was.
    #[test]
    fn numerics_a_grouped_step_is_each_runs_float64_reference() {
        let variants = [(OptimizerKind::Rmsprop, true, 0.0), (OptimizerKind::Adam, false, 0.05), (OptimizerKind::Rmsprop, true, 0.01)];
        for (optimizer, double_dqn, tau) in variants {
            for k in [1usize, 2, 4] {
                let what = |r: usize, step: usize| format!("{optimizer:?}, double {double_dqn}, tau {tau}, k = {k}, run {r}, step {step}");
                // Runs 0..k start in the group; with k = 4, run 2 leaves at step 25 and a
                // new run 4 joins (the group is rebuilt from the runs then present).
                let mut runs: Vec<Learner> = (0..=k).map(|i| Learner::new(&config(i, optimizer, double_dqn, tau), ACTIONS, Device::Cpu).unwrap()).collect();
                let mut members: Vec<usize> = (0..k).collect();
                let mut group = group_of(&mut runs, &members);
                let mut moved = vec![0u64; k + 1];
                let mut margin = 0.0f64;
                for step in 0..50 {
                    if k == 4 && step == 25 {
                        members = vec![0, 1, 3, 4];
                        group = group_of(&mut runs, &members);
                    }
                    // Run 1's limiter holds it back every third step; run 3 is paused
                    // from step 10 to 19.
                    let moves: Vec<bool> = members.iter().map(|&r| !(r == 1 && step % 3 == 0 || r == 3 && (10..20).contains(&step))).collect();
                    let batches: Vec<Tensor> = members.iter().map(|&r| batch((step * 10 + r) as u64)).collect();
                    let before: Vec<HashMap<String, Tensor>> = members.iter().map(|&r| snapshot(&runs[r])).collect();
                    let wants: Vec<Option<oracle::Expected>> = members
                        .iter()
                        .zip(&moves)
                        .enumerate()
                        .map(|(row, (&r, &m))| {
                            let l = &runs[r];
                            let cfg = l.config().clone();
                            m.then(|| {
                                oracle::expect(&oracle::Case {
                                    cfg: &cfg,
                                    actions: ACTIONS,
                                    state: &before[row],
                                    steps: l.step,
                                    optimizer_steps: l.optimizer_steps(),
                                    batch: &batches[row],
                                    weights: None,
                                })
                            })
                        })
                        .collect();
                    group.set_mask(&moves);
                    let out = group.device_step(&Tensor::stack(&batches, 0));
                    for (row, &r) in members.iter().enumerate() {
                        let Some(want) = &wants[row] else {
                            let after: HashMap<String, Tensor> = runs[r].state_tensors().into_iter().collect();
                            for (name, t) in &before[row] {
                                assert!(t.equal(&after[name]), "{} (held back): {name} changed", what(r, step));
                            }
                            continue;
                        };
                        runs[r].finish_step();
                        moved[r] += 1;
                        let got = out.run(row);
                        for (name, t) in [("loss", &got.loss), ("mean_q", &got.mean_q), ("grad_norm", &got.grad_norm)] {
                            margin = margin.max(want.check(name, t, &what(r, step)));
                        }
                        margin = margin.max(want.check_state(&runs[r].state_tensors(), &what(r, step)));
                    }
                }
                for &r in &members {
                    assert_eq!((runs[r].step, runs[r].optimizer_steps()), (moved[r], moved[r]), "{}: a step counted for each step moved", what(r, 50));
                }
                if k == 4 {
                    // The run that left trains alone again, from its row of the old group's
                    // buffers, Adam counting on from the group's count.
                    let (l, b) = (&mut runs[2], batch(999));
                    let (cfg, before) = (l.config().clone(), snapshot(l));
                    let want = oracle::expect(&oracle::Case {
                        cfg: &cfg,
                        actions: ACTIONS,
                        state: &before,
                        steps: l.step,
                        optimizer_steps: l.optimizer_steps(),
                        batch: &b,
                        weights: None,
                    });
                    let out = l.train_step(&b);
                    margin = margin.max(want.check("loss", &out.loss, &what(2, 50))).max(want.check_state(&l.state_tensors(), &what(2, 50)));
                }
                // The runs moved, each its own way.
                if k > 1 {
                    let w = |r: usize| runs[r].online.weights();
                    assert_ne!(w(0), w(1));
                }
                println!("{optimizer:?}, double {double_dqn}, tau {tau}, k = {k}: largest error / bound {margin:.2e}");
            }
        }
    }

    #[test]
    fn only_learners_of_one_shape_group() {
        let a = |cfg: DqnConfig, actions| Learner::new(&cfg, actions, Device::Cpu).unwrap();
        let base = DqnConfig { batch_size: BATCH, ..Default::default() };
        for (other, actions) in [
            (DqnConfig { batch_size: 8, ..base.clone() }, ACTIONS),
            (base.clone(), ACTIONS + 1),
            (DqnConfig { optimizer: OptimizerKind::Adam, ..base.clone() }, ACTIONS),
            (DqnConfig { double_dqn: false, ..base.clone() }, ACTIONS),
            (DqnConfig { publish_average_tau: 0.01, ..base.clone() }, ACTIONS),
        ] {
            let (mut x, mut y) = (a(base.clone(), ACTIONS), a(other.clone(), actions));
            let before = x.online.weights();
            let err = Group::new(&mut [&mut x, &mut y]).err().expect("different shapes");
            assert!(err.to_string().contains("different shapes"), "{err}");
            // Nothing moved: x still trains alone, on its own buffers.
            let _ = x.train_step(&batch(1).narrow(0, 0, BATCH as i64));
            assert_ne!(x.online.weights(), before);
        }
        // The same shape with other learning rates, discounts and n-steps groups.
        let (mut x, mut y) = (a(base.clone(), ACTIONS), a(DqnConfig { lr: 1e-2, gamma: 0.5, n_step: 4, ..base }, ACTIONS));
        assert_eq!(Group::new(&mut [&mut x, &mut y]).unwrap().len(), 2);
    }
}
