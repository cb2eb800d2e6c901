//! The train step: one step for every run, alone or with others (issue: many
//! experiments on one GPU).
//!
//! On a GPU a step costs its kernels one after another, not its arithmetic (the network
//! is tiny), so the step is written in few ops (38 for a run alone, uniform sampling,
//! RMSProp, batch 32, counting the draw: a test holds it to 40), each a whole-buffer
//! operation on aligned operands ([`super::Layout`], [`super::row`]). A [`Group`]
//! stacks k learners' tensors on a leading run dimension (parameters, gradients,
//! optimizer state, target nets, published averages: each `[k, P]`, P the flat
//! buffer's length) and takes the step for all of them at once: at k = 1 with the 2-D
//! products (`addmm`, and `_addmm_activation`, whose bias and ReLU cuBLASLt applies in
//! the product's epilogue), above with batched ones (`baddbmm`, `bmm`). A run alone is
//! a group of one: there is no other step.
//!
//! Each learner keeps what makes it a run. Its tensors become views of its row of the
//! group's buffers ([`Learner::move_into`]), so everything the run does outside the
//! step (checkpoints, restores, publishing, the target sync, counting steps) goes on
//! reading or writing its row. Its hyper-parameters (learning rate, Huber delta,
//! clipping norm, RMSProp's alpha, Adam's betas, eps, averaging rate) are per-run
//! values the step reads, not constants baked into it; its discount is in the rows of
//! its own replay ([`super::row`]). So runs that differ in them share one step (and one
//! captured CUDA graph). What must be equal is what shapes the step: the [`GroupShape`].
//!
//! [`Group::device_step`] takes a `[k, B, 64]` batch (each run's rows drawn from its
//! own replay), maybe with `[k, B]` importance weights, and a `[k]` mask
//! ([`Group::set_mask`]): a run whose mask is 0 (its rate limiter holds it back, it is
//! paused or still burning in) does not move in that step. Its parameters, optimizer
//! state and Adam's count stay exactly as they were (a `where` on the mask, not a
//! multiplication, so not even a NaN in its unused batch could reach them). The step
//! only queues device work, so it can be captured as a CUDA graph; the host then counts
//! the step for each run that moved ([`Learner::finish_step`], which also syncs that
//! run's target net when due). The loss and mean Q are not computed in the step: it
//! keeps each row's TD error and target, and [`TrainOutput`] reduces them when they are
//! read (every few hundred steps).
//!
//! The numerics test (`numerics_a_grouped_step_is_each_runs_float64_reference`) holds
//! each run of groups of k = 1, 2 and 4 to its own step in float64 (the autograd
//! reference) within float32 rounding, both forms of the optimizer, with differing
//! hyper-parameters, importance weights, masks and membership changes.

use super::{row, DqnConfig, DqnError, Layout, Learner, LearnerRows, OptimizerKind};
use crate::aten;
use crate::model;
use crate::optim::{OptimizerConfig, RowConstants, Rows};
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
    /// Whether each row's loss is weighted (prioritized replay's importance weights).
    pub weighted: bool,
}

impl GroupShape {
    /// The shape of `learner`'s step; `weighted` when its replay samples by priority.
    pub fn of(learner: &Learner, weighted: bool) -> GroupShape {
        let c = learner.config();
        GroupShape {
            device: learner.device(),
            actions: learner.online.actions(),
            batch_size: c.batch_size,
            optimizer: c.optimizer,
            double_dqn: c.double_dqn,
            average: learner.average.is_some(),
            weighted,
        }
    }
}

/// What one grouped step leaves on the device, one row per run (`[k, ...]`); a
/// held-back run's values are those of a step not taken.
pub struct GroupOutput {
    /// Each row's TD error `Q(s, a) - y`, over the batch size: `[k, B]`.
    td_over_b: Tensor,
    /// Each row's TD target `y`: `[k, B]`.
    y: Tensor,
    /// Each run's global gradient norm before clipping: `[k]`.
    grad_norm: Tensor,
    /// The importance weights the step used, `[k, B]`.
    weights: Option<Tensor>,
    /// Each run's Huber threshold.
    delta: Vec<f64>,
}

impl GroupOutput {
    /// Another handle to the same tensors (a captured graph's outputs, rewritten by each
    /// replay).
    pub fn shallow_clone(&self) -> GroupOutput {
        GroupOutput {
            td_over_b: self.td_over_b.shallow_clone(),
            y: self.y.shallow_clone(),
            grad_norm: self.grad_norm.shallow_clone(),
            weights: self.weights.as_ref().map(Tensor::shallow_clone),
            delta: self.delta.clone(),
        }
    }

    /// Run `r`'s part, as its own step returns it.
    pub fn run(&self, r: usize) -> TrainOutput {
        let row = |t: &Tensor| t.get(r as i64);
        TrainOutput {
            grad_norm: row(&self.grad_norm),
            td_over_b: row(&self.td_over_b),
            y: row(&self.y),
            weights: self.weights.as_ref().map(row),
            delta: self.delta[r],
        }
    }
}

/// One run's step, still on the device: the gradient norm, and what the loss, mean Q
/// and the rows' |TD errors| are reduced from when read (each read queues a few ops and
/// [`f64::try_from`] of the result waits for the step: do it only now and then).
pub struct TrainOutput {
    /// The global gradient norm before clipping (a scalar).
    pub grad_norm: Tensor,
    td_over_b: Tensor,
    y: Tensor,
    weights: Option<Tensor>,
    delta: f64,
}

impl TrainOutput {
    /// Each row's TD error `Q(s, a) - y`, `[B]`.
    fn td(&self) -> Tensor {
        &self.td_over_b * self.td_over_b.size()[0] as f64
    }

    /// Each row's |TD error|, `[B]` (prioritized replay's new priorities).
    pub fn td_abs(&self) -> Tensor {
        self.td().abs()
    }

    /// The mean Huber loss (each row times its importance weight): CleanRL's
    /// `losses/td_loss`, of the weights before the update.
    pub fn loss(&self) -> Tensor {
        let td = self.td();
        let a = td.abs();
        let huber = (&td * &td * 0.5).where_self(&a.le(self.delta), &((&a - self.delta * 0.5) * self.delta));
        match &self.weights {
            Some(w) => (huber * w).mean(Kind::Float),
            None => huber.mean(Kind::Float),
        }
    }

    /// The mean Q(s, a) of the taken actions (CleanRL: `losses/q_values`).
    pub fn mean_q(&self) -> Tensor {
        (self.td() + &self.y).mean(Kind::Float)
    }
}

/// Constants of the step, made once per group on its device.
struct StepConstants {
    /// `[H]`: -1, then 0 .. A-1 (the action each advantage column is), then -2: a row's
    /// action compared with it is the one-hot of its advantage column.
    index: Tensor,
    /// `[H]`: the coefficients of `Q(s, a) = V + A_a - mean(A)` in the heads' output
    /// but for the one-hot: 1, then -1/A for each advantage, then 0.
    base: Tensor,
    /// `[H, A]`: every action's coefficients, column a (`Q = output @ dueling`).
    dueling: Tensor,
    /// `[H, 1024]`: 1 where the heads' block holds a parameter (row 0 on the value
    /// stream, rows 1 .. 1+A on the advantage stream), 0 elsewhere.
    head_mask: Tensor,
    /// `[128]` zeros: the first layer's separate bias, which it has none of (its bias is
    /// a column of its weights).
    no_bias: Tensor,
}

impl StepConstants {
    fn new(layout: &Layout, device: Device) -> StepConstants {
        let (a, h) = (layout.actions(), layout.heads());
        let stream = model::STREAM;
        let mut index = vec![-2.0f32; h];
        let mut base = vec![0.0f32; h];
        let mut dueling = vec![0.0f32; h * a];
        let mut head_mask = vec![0.0f32; h * 2 * stream];
        index[0] = -1.0;
        base[0] = 1.0;
        head_mask[..stream].fill(1.0);
        // Q_col = V + A_col - mean(A): V's coefficient 1 in every column.
        dueling[..a].fill(1.0);
        for j in 0..a {
            index[1 + j] = j as f32;
            base[1 + j] = -1.0 / a as f32;
            head_mask[(1 + j) * 2 * stream + stream..(2 + j) * 2 * stream].fill(1.0);
            for col in 0..a {
                dueling[(1 + j) * a + col] = if j == col { 1.0 } else { 0.0 } - 1.0 / a as f32;
            }
        }
        let t = |v: &[f32], shape: &[i64]| Tensor::from_slice(v).view(shape).to_device(device);
        StepConstants {
            index: t(&index, &[h as i64]),
            base: t(&base, &[h as i64]),
            dueling: t(&dueling, &[h as i64, a as i64]),
            head_mask: t(&head_mask, &[h as i64, 2 * stream as i64]),
            no_bias: Tensor::zeros([model::SHARED as i64], (Kind::Float, device)),
        }
    }
}

/// The per-run constants of the loss and clipping, `[k, 1]` on the device.
struct Hyper {
    /// `-delta / B` and `delta / B`: Huber's slope, over the batch, clamps there.
    neg_delta_b: Tensor,
    delta_b: Tensor,
    /// The clipping norm; +inf for a run that does not clip (`max_grad_norm` 0).
    max_norm: Tensor,
    /// The averaging rate, times the mask (a held-back run's average stays).
    tau_moves: Option<Tensor>,
    delta: Vec<f64>,
    tau: Vec<f64>,
}

impl Hyper {
    fn of(cfgs: &[DqnConfig], average: bool, device: Device) -> Hyper {
        let col = |f: &dyn Fn(&DqnConfig) -> f64| {
            let v: Vec<f64> = cfgs.iter().map(f).collect();
            Tensor::from_slice(&v).view([-1, 1]).to_kind(Kind::Float).to_device(device)
        };
        Hyper {
            neg_delta_b: col(&|c| -c.huber_delta / c.batch_size as f64),
            delta_b: col(&|c| c.huber_delta / c.batch_size as f64),
            max_norm: col(&|c| if c.max_grad_norm > 0.0 { c.max_grad_norm } else { f64::INFINITY }),
            tau_moves: average.then(|| col(&|c| c.publish_average_tau)),
            delta: cfgs.iter().map(|c| c.huber_delta).collect(),
            tau: cfgs.iter().map(|c| c.publish_average_tau).collect(),
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
    /// Adam's updates applied per run, `[k]` f32, counted on the device by the step
    /// itself; element r is learner r's own device count (a view), so it goes on
    /// counting when the learner moves to another group.
    adam_steps: Option<Tensor>,
    cfgs: Vec<OptimizerConfig>,
    optim: RowConstants,
    hyper: Hyper,
    consts: StepConstants,
    /// `[k]` f32, 1 for a run that moves in the next step, 0 for one that stays as it
    /// is: written by [`Group::set_mask`] before a step, read by it.
    mask: Tensor,
    /// Adam, k > 1: per run, `[1]` f32, 1 - its mask: the fused kernel skips a run
    /// whose `found_inf` is 1.
    found_inf: Vec<Tensor>,
    /// What `mask` holds, on the host (so that an unchanged mask costs nothing).
    moves: Vec<bool>,
    /// RMSProp's update as one loop over host memory (on the CPU; [`Group::set_host_optimizer`]).
    host_optimizer: bool,
}

impl Group {
    /// Stack `members` into one group, in that order (row r is `members[r]`), moving
    /// each one's tensors into its row: from now on the learner reads and writes the
    /// group's buffers. `weighted`: the runs' losses take importance weights
    /// (prioritized replay). Learners of another [`GroupShape`] than the first are an
    /// error (and nothing is moved). A learner can be moved again into a later group
    /// (when the membership changes, the caller builds a new group from the members
    /// left); the old group's buffers are then dropped with it.
    pub fn new(members: &mut [&mut Learner], weighted: bool) -> Result<Group, DqnError> {
        let Some(first) = members.first() else { return Err(DqnError::Config("a group needs at least one learner".into())) };
        let shape = GroupShape::of(first, weighted);
        if let Some(other) = members.iter().map(|l| GroupShape::of(l, weighted)).find(|s| *s != shape) {
            return Err(DqnError::Config(format!("learners of different shapes cannot train as one step: {shape:?} and {other:?}")));
        }
        let (k, device) = (members.len() as i64, shape.device);
        let layout = members[0].online.layout().clone();
        let buffer = || Tensor::zeros([k, layout.len()], (Kind::Float, device));
        let (online, target, grad) = (buffer(), buffer(), buffer());
        let average = shape.average.then(buffer);
        let slots: Vec<Tensor> = members[0].optimizer.slots.iter().map(|_| buffer()).collect();
        let adam = shape.optimizer == OptimizerKind::Adam;
        let adam_steps = adam.then(|| Tensor::zeros([k], (Kind::Float, device)));
        let dqn: Vec<DqnConfig> = members.iter().map(|l| l.config().clone()).collect();
        let cfgs: Vec<OptimizerConfig> = dqn.iter().map(DqnConfig::optimizer_config).collect();
        for (r, learner) in members.iter_mut().enumerate() {
            let row = |t: &Tensor| t.get(r as i64);
            learner.move_into(LearnerRows {
                online: row(&online),
                target: row(&target),
                average: average.as_ref().map(row),
                slots: slots.iter().map(row).collect(),
                device_steps: adam_steps.as_ref().map(row),
                grad: row(&grad),
            });
        }
        let optim = RowConstants::new(&cfgs, device);
        let hyper = Hyper::of(&dqn, shape.average, device);
        let consts = StepConstants::new(&layout, device);
        let mask = Tensor::ones([k], (Kind::Float, device));
        let found_inf = if adam && k > 1 { (0..k).map(|_| Tensor::zeros([1], (Kind::Float, device))).collect() } else { Vec::new() };
        let mut group = Group { shape, layout, online, target, average, slots, grad, adam_steps, cfgs, optim, hyper, consts, mask, found_inf, moves: vec![true; k as usize], host_optimizer: false };
        group.set_host_optimizer(true);
        Ok(group)
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

    /// Whether RMSProp's update runs as one loop over host memory (the default on the
    /// CPU) or as tensor ops (what a GPU runs). Tests count and check the tensor form
    /// on the CPU with `false`.
    pub fn set_host_optimizer(&mut self, on: bool) {
        self.host_optimizer = on && self.shape.device == Device::Cpu && self.shape.optimizer == OptimizerKind::Rmsprop;
    }

    /// Every buffer of the group (each `[k, ...]`), online, target and gradient first:
    /// what its learners' tensors are views of and what its step reads, so what a dropped
    /// group must free (tests count their storages' handles).
    pub fn buffers(&self) -> Vec<&Tensor> {
        let mut all = vec![&self.online, &self.target, &self.grad, &self.mask];
        all.extend(self.average.iter());
        all.extend(self.slots.iter());
        all.extend(self.adam_steps.iter());
        all
    }

    /// Whether row `r` moves in the next step, on the device: a 0-dimensional f32 view
    /// of the mask, 1 or 0 ([`Group::set_mask`]). What the run's draw and priority
    /// update read.
    pub fn moved(&self, r: usize) -> Tensor {
        self.mask.get(r as i64)
    }

    /// Which runs move in the next step (`moves[r]` for row r), written into the mask
    /// the step reads (outside a captured graph, which reads the same tensors each
    /// replay). Each flag that changed is a few fills of single elements, queued like any
    /// kernel: a copy from host memory would make the host wait for the device at
    /// every step (a copy from pageable memory synchronizes its stream first).
    pub fn set_mask(&mut self, moves: &[bool]) {
        assert_eq!(moves.len(), self.len(), "one flag per run");
        for (r, (&new, old)) in moves.iter().zip(self.moves.iter_mut()).enumerate() {
            if new == *old {
                continue;
            }
            *old = new;
            let flag = if new { 1.0 } else { 0.0 };
            let _ = self.mask.get(r as i64).fill_(flag);
            if let Some(t) = &self.hyper.tau_moves {
                let _ = t.get(r as i64).fill_(self.hyper.tau[r] * flag);
            }
            if let Some(f) = self.found_inf.get(r) {
                let _ = f.shallow_clone().fill_(1.0 - flag);
            }
        }
    }

    /// One DQN update of every run whose mask is 1, on `batch` (`[k, B, 64]`: row r is
    /// run r's batch of device rows, [`super::row`], on the group's device), each row's
    /// loss times its importance weight (`[k, B]`) in a weighted group. The same update,
    /// run by run, as the autograd reference (`reference.rs`). Only queues device work;
    /// the caller counts the step for each run that moved ([`Learner::finish_step`]).
    pub fn device_step(&mut self, batch: &Tensor, weights: Option<&Tensor>) -> Result<GroupOutput, DqnError> {
        if weights.is_some() != self.shape.weighted {
            return Err(DqnError::Config(format!("a {} group's step takes {} importance weights", if self.shape.weighted { "weighted" } else { "uniform" }, if self.shape.weighted { "its" } else { "no" })));
        }
        let (k, b) = (self.len() as i64, self.shape.batch_size as i64);
        let (a, h) = (self.shape.actions as i64, self.layout.heads() as i64);
        // At k = 1 every tensor is the run's own (its row), and the products are 2-D.
        let alone = k == 1;
        let run = |t: &Tensor| if alone { t.get(0) } else { t.shallow_clone() };
        let lead = |dims: &[i64]| -> Vec<i64> { if alone { dims.to_vec() } else { [&[k], dims].concat() } };
        let c = &self.consts;
        let batch = run(batch);
        let (p, tp, g) = (self.layout.blocks(&run(&self.online)), self.layout.blocks(&run(&self.target)), self.layout.blocks(&run(&self.grad)));
        let t = |m: &Tensor| m.transpose(-2, -1);
        let mm = |x: &Tensor, y: &Tensor| if alone { x.mm(y) } else { x.bmm(y) };
        let mm_out = |out: &Tensor, x: &Tensor, y: &Tensor| {
            let _ = if alone { x.mm_out(out, y) } else { x.bmm_out(out, y) };
        };
        // x W^T + b, then ReLU: at k = 1 one `_addmm_activation` (cuBLASLt applies the
        // bias and the ReLU in the product's epilogue).
        let linear = |x: &Tensor, w: &Tensor, bias: &Tensor, relu: bool| -> Tensor {
            match (alone, relu) {
                (true, true) => aten::addmm_relu(bias, x, &t(w)).expect("a product of matching shapes"),
                (true, false) => bias.addmm(x, &t(w)),
                (false, _) => {
                    let y = bias.unsqueeze(-2).baddbmm(x, &t(w), 1.0, 1.0);
                    if relu {
                        y.relu()
                    } else {
                        y
                    }
                }
            }
        };
        // The first layer's bias is its weights' column 27, times each row's 1.0.
        let first = |x: &Tensor, w1: &Tensor| if alone { aten::addmm_relu(&c.no_bias, x, &t(w1)).expect("a product of matching shapes") } else { x.bmm(&t(w1)).relu() };
        let column = |i: usize| batch.narrow(-1, i as i64, 1); // [.., B, 1]

        // The online net over the states and the next states at once: B device rows of
        // 64 floats are 2B rows of 32, each state followed by its next state.
        let x2 = batch.view(lead(&[2 * b, row::INPUTS as i64]).as_slice());
        let h1 = first(&x2, &p.w1); // [.., 2B, 128]
        let h2 = linear(&h1, &p.w2, &p.b2, true); // [.., 2B, 1024]
        let o = linear(&h2, &p.wh, &p.bh, false); // [.., 2B, H]: V, A_0 .. A_{A-1}, 0 ..
        let half = |t: &Tensor, i: i64| t.view(lead(&[b, 2, *t.size().last().unwrap()]).as_slice()).select(-2, i);
        let (x_s, h1_s, h2_s, o_s) = (half(&x2, 0), half(&h1, 0), half(&h2, 0), half(&o, 0));
        // The target net over the next states (columns 32..64 of each row).
        let x_n = batch.narrow(-1, row::NEXT_STATE as i64, row::INPUTS as i64);
        let o_t = linear(&linear(&first(&x_n, &tp.w1), &tp.w2, &tp.b2, true), &tp.wh, &tp.bh, false);

        // The TD target, y = r + gamma^n (1 - terminal) Q'(s', a'). EASY TO MISS (see
        // reference.rs): no gradient flows into it (the backward below starts from
        // Q(s, a) alone); only a real end stops the bootstrap, and it is discounted
        // gamma^n: both are in the row's discount column ([`super::row`]).
        let q_target = o_t.matmul(&c.dueling); // [.., B, A]: every action's Q' = V' + A' - mean(A')
        let next_q = if self.shape.double_dqn {
            // Double DQN: the online net chooses (the argmax of V + A - mean(A) is the
            // argmax of A), the target net values.
            let best = half(&o, 1).narrow(-1, 1, a).argmax(-1, true);
            q_target.gather(-1, &best, false)
        } else {
            q_target.amax([-1i64].as_slice(), true)
        };
        let y = column(row::REWARD).addcmul(&column(row::DISCOUNT), &next_q); // [.., B, 1]

        // Q(s, a) of the taken actions as one dot product per row with its action's
        // coefficients (which are also dQ(s, a) / d output, for the backward), and the
        // TD error Q(s, a) - y with the loss's mean over B folded in.
        let coefficients = c.base.g_add(&column(row::ACTION).eq_tensor(&c.index)); // [.., B, H]
        let n = k * b;
        let td_over_b = y.view([n, 1, 1]).baddbmm(&o_s.view([n, 1, h]), &coefficients.view([n, h, 1]), -1.0 / b as f64, 1.0 / b as f64).view(lead(&[b]).as_slice());
        // The loss's slope in Q(s, a): Huber's (the TD error clamped to ±delta) over B,
        // times the row's importance weight (prioritized replay, Schaul et al.
        // Algorithm 1: it undoes the bias of drawing the row more or less often than
        // uniformly). The delta's a tensor: each run's own.
        let hy = &self.hyper;
        let mut slope = td_over_b.clamp_tensor(Some(&run(&hy.neg_delta_b)), Some(&run(&hy.delta_b)));
        if let Some(w) = weights {
            slope = slope * run(w);
        }
        let d_o = slope.unsqueeze(-1) * &coefficients; // [.., B, H]

        // The backward, layer by layer from the top, for the state rows only. The heads:
        // one product over both streams, the zeros between the heads kept zero.
        let _ = mm(&t(&d_o), &h2_s).mul_out(&g.wh, &c.head_mask);
        let _ = d_o.sum_intlist_out(&g.bh, [-2i64].as_slice(), false, Kind::Float);
        let dz2 = h2_s.threshold_backward(&mm(&d_o, &p.wh), 0.0); // ReLU passes it where its output is positive
        mm_out(&g.w2, &t(&dz2), &h1_s);
        let _ = dz2.sum_intlist_out(&g.b2, [-2i64].as_slice(), false, Kind::Float);
        let dz1 = h1_s.threshold_backward(&mm(&dz2, &p.w2), 0.0);
        // The first layer's weights and bias in one product: the inputs that carry
        // anything (the state and the 1.0); the padding's gradient stays zero.
        let used = row::USED_INPUTS as i64;
        mm_out(&g.w1.narrow(-1, 0, used), &t(&dz1), &x_s.narrow(-1, 0, used));

        // Each run's global gradient norm, and clipping to its max_grad_norm (torch's
        // clip_grad_norm_: max / (norm + 1e-6), at most 1).
        let grad_norm = self.grad.norm_scalaropt_dim(2, [1i64].as_slice(), true); // [k, 1]
        let coef = (&hy.max_norm / (&grad_norm + 1e-6)).clamp_max(1.0);
        // A run alone always moves (the device thread does not step it otherwise). A
        // held-back run's coefficient is 1: its norm may be NaN, and the gradient's
        // padding, which no product rewrites, must stay zero.
        let moves = (!alone).then(|| self.mask.unsqueeze(1).gt(0.5)); // [k, 1] bool
        let coef = match &moves {
            Some(m) => coef.where_scalarother(m, 1.0),
            None => coef,
        };
        let rows = Rows { p: &self.online, g: &self.grad, slots: &self.slots, cfgs: &self.cfgs };
        match self.shape.optimizer {
            OptimizerKind::Rmsprop if self.host_optimizer => {
                // On the CPU reading the coefficients is a load, not a wait for a device.
                let scale = Vec::<f32>::try_from(&coef.view([-1])).map_err(|e| DqnError::Config(format!("clipping coefficients: {e}")))?;
                rows.rmsprop_host(&scale, &self.moves);
            }
            OptimizerKind::Rmsprop => {
                let _ = self.grad.shallow_clone().g_mul_(&coef);
                rows.rmsprop_tensors(&self.optim, moves.as_ref());
            }
            OptimizerKind::Adam => {
                let _ = self.grad.shallow_clone().g_mul_(&coef);
                let steps = self.adam_steps.as_ref().expect("Adam counts on the device");
                let held = (!alone).then_some((&self.mask, self.found_inf.as_slice()));
                rows.adam_fused(&self.optim, steps, held).map_err(|e| DqnError::Config(e.to_string()))?;
            }
        }
        if let (Some(average), Some(tau)) = (&self.average, &hy.tau_moves) {
            // Polyak averaging of the iterates: the online weights of two nearby steps
            // can act very differently (one published model survives 9 of 30 matches,
            // the next 21 of 21); their average moves as slowly as the learning does. A
            // held-back run's rate is 0: its average stays as it was.
            let _ = average.shallow_clone().lerp_tensor_(&self.online, tau);
        }
        let unstack = |t: Tensor| if alone { t.unsqueeze(0) } else { t };
        Ok(GroupOutput {
            td_over_b: unstack(td_over_b),
            y: unstack(y.view(lead(&[b]).as_slice())),
            grad_norm: grad_norm.squeeze_dim(1),
            weights: weights.map(Tensor::shallow_clone),
            delta: hy.delta.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::oracle;
    use super::super::tests::{checked_step, device_rows, snapshot, step};
    use super::*;
    use crate::experience::{col, TRANSITION_FLOATS};
    use std::collections::HashMap;

    const ACTIONS: usize = 5;
    const BATCH: usize = 16;

    /// A batch of plausible transitions drawn from `seed` (some terminal), wire rows.
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

    /// Importance weights in (0, 1] drawn from `seed`.
    fn weights(seed: u64) -> Tensor {
        Tensor::from_slice(&(0..BATCH).map(|i| ((i as u64 * 7 + seed * 13) % 10 + 1) as f32 / 10.0).collect::<Vec<_>>())
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
    fn group_of(learners: &mut [Learner], runs: &[usize], weighted: bool) -> Group {
        let mut each: Vec<Option<&mut Learner>> = learners.iter_mut().map(Some).collect();
        let mut members: Vec<&mut Learner> = runs.iter().map(|&r| each[r].take().expect("each run once")).collect();
        Group::new(&mut members, weighted).unwrap()
    }

    /// Each run of a group steps as the autograd reference in float64 says its own step
    /// goes, within float32 rounding (`dqn/oracle.rs`), with differing hyper-parameters,
    /// uniform and weighted, both forms of RMSProp (the CPU's host loop, the tensor ops
    /// a GPU runs), masks and membership changes (k = 1, 2 and 4). A run whose mask is 0
    /// stays exactly as it was, even on a batch of NaN (a run in burn-in draws rows its
    /// replay never wrote).
    #[test]
    fn numerics_a_grouped_step_is_each_runs_float64_reference() {
        // Enough for every event below and a target sync in each run.
        const STEPS: usize = 20;
        let variants = [
            (OptimizerKind::Rmsprop, true, 0.0, false, true),
            (OptimizerKind::Rmsprop, true, 0.01, true, false),
            (OptimizerKind::Adam, false, 0.05, false, false),
            (OptimizerKind::Adam, true, 0.0, true, false),
        ];
        for (optimizer, double_dqn, tau, weighted, host) in variants {
            for k in [1usize, 2, 4] {
                tch::manual_seed(k as i64);
                let what = |r: usize, step: usize| format!("{optimizer:?}, double {double_dqn}, tau {tau}, weighted {weighted}, host loop {host}, k = {k}, run {r}, step {step}");
                // Runs 0..k start in the group; with k = 4, run 2 leaves at step 12 and a
                // new run 4 joins (the group is rebuilt from the runs then present).
                let mut runs: Vec<Learner> = (0..=k).map(|i| Learner::new(&config(i, optimizer, double_dqn, tau), ACTIONS, Device::Cpu).unwrap()).collect();
                let mut members: Vec<usize> = (0..k).collect();
                let new_group = |runs: &mut [Learner], members: &[usize]| {
                    let mut g = group_of(runs, members, weighted);
                    g.set_host_optimizer(host);
                    g
                };
                let mut group = new_group(&mut runs, &members);
                let mut moved = vec![0u64; k + 1];
                let mut margin = 0.0f64;
                for step in 0..STEPS {
                    if k == 4 && step == 12 {
                        members = vec![0, 1, 3, 4];
                        group = new_group(&mut runs, &members);
                    }
                    // Run 1's limiter holds it back every third step; run 3 is in burn-in
                    // (its batch all NaN) from step 5 to 9.
                    let moves: Vec<bool> = members.iter().map(|&r| !(r == 1 && step % 3 == 0 || r == 3 && (5..10).contains(&step))).collect();
                    let batches: Vec<Tensor> = members.iter().map(|&r| batch((step * 10 + r) as u64)).collect();
                    let rows: Vec<Tensor> = members
                        .iter()
                        .zip(&batches)
                        .zip(&moves)
                        .map(|((&r, b), &m)| if m { device_rows(&runs[r], b) } else { device_rows(&runs[r], b).fill_(f64::NAN) })
                        .collect();
                    let w: Vec<Tensor> = members.iter().map(|&r| weights((step * 10 + r) as u64)).collect();
                    let before: Vec<HashMap<String, Tensor>> = members.iter().map(|&r| snapshot(&runs[r])).collect();
                    let wants: Vec<Option<oracle::Expected>> = (0..members.len())
                        .map(|row| {
                            let l = &runs[members[row]];
                            let cfg = l.config().clone();
                            let case = oracle::Case {
                                cfg: &cfg,
                                actions: ACTIONS,
                                state: &before[row],
                                steps: l.step,
                                optimizer_steps: l.optimizer_steps(),
                                batch: &batches[row],
                                weights: weighted.then_some(&w[row]),
                            };
                            moves[row].then(|| oracle::expect(&case))
                        })
                        .collect();
                    group.set_mask(&moves);
                    let out = group.device_step(&Tensor::stack(&rows, 0), weighted.then(|| Tensor::stack(&w, 0)).as_ref()).unwrap();
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
                        for (name, t) in [("loss", got.loss()), ("mean_q", got.mean_q()), ("grad_norm", got.grad_norm.shallow_clone()), ("td_abs", got.td_abs())] {
                            margin = margin.max(want.check(name, &t, &what(r, step)));
                        }
                        margin = margin.max(want.check_state(&runs[r].state_tensors(), &what(r, step)));
                    }
                }
                for &r in &members {
                    assert_eq!((runs[r].step, runs[r].optimizer_steps()), (moved[r], moved[r]), "{}: a step counted for each step moved", what(r, STEPS));
                }
                if k == 4 {
                    // The run that left trains alone again, from its row of the old group's
                    // buffers, Adam counting on from the group's count.
                    let (l, b) = (&mut runs[2], batch(999));
                    let w = weights(999);
                    margin = margin.max(checked_step(l, &b, weighted.then_some(&w), &what(2, STEPS)));
                }
                // The runs moved, each its own way.
                if k > 1 {
                    let w = |r: usize| runs[r].online.weights();
                    assert_ne!(w(0), w(1));
                }
                println!("{optimizer:?}, double {double_dqn}, tau {tau}, weighted {weighted}, host loop {host}, k = {k}: largest error / bound {margin:.2e}");
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
            let err = Group::new(&mut [&mut x, &mut y], false).err().expect("different shapes");
            assert!(err.to_string().contains("different shapes"), "{err}");
            // Nothing moved: x still trains, on its own buffers.
            let _ = step(&mut x, &batch(1), None);
            assert_ne!(x.online.weights(), before);
        }
        // The same shape with other learning rates, discounts and n-steps groups.
        let (mut x, mut y) = (a(base.clone(), ACTIONS), a(DqnConfig { lr: 1e-2, gamma: 0.5, n_step: 4, ..base }, ACTIONS));
        assert_eq!(Group::new(&mut [&mut x, &mut y], false).unwrap().len(), 2);
    }

    /// A weighted group's step wants weights and a uniform one none: an error, not a
    /// step that silently ignores them.
    #[test]
    fn weights_are_the_weighted_groups_alone() {
        let mut l = Learner::new(&DqnConfig { batch_size: BATCH, ..Default::default() }, ACTIONS, Device::Cpu).unwrap();
        let rows = device_rows(&l, &batch(3)).unsqueeze(0);
        let w = weights(3).unsqueeze(0);
        let mut uniform = Group::new(&mut [&mut l], false).unwrap();
        assert!(uniform.device_step(&rows, Some(&w)).is_err());
        let mut weighted = Group::new(&mut [&mut l], true).unwrap();
        assert!(weighted.device_step(&rows, None).is_err());
        assert!(weighted.device_step(&rows, Some(&w)).is_ok());
    }
}
