//! The Dueling DQN in tch (feature `torch`; only the manager turns it on): the
//! network, the [`Learner`] that holds one run's training state, and (in `group.rs`)
//! the one train step every run takes, alone or with others ([`Group`]).
//!
//! **Read `src/dqn/reference.rs` first.** It is the same train step in plain autograd,
//! top to bottom in the shape of CleanRL's `dqn.py` (config, model, loss, target
//! sync), with the easy-to-miss lines marked: terminal against time-limit ends, the
//! no-grad target, Double DQN, n-step returns. [`Group::device_step`] computes the same
//! in a few dozen ops, and the numerics tests hold it to the reference run in float64,
//! within what float32 rounding allows (`src/dqn/oracle.rs` derives that bound). In
//! order here: [`DqnConfig`] (the documented hyper-parameters), [`row`] (a transition
//! as the learner reads it on the device), the flat parameter layout ([`Layout`]),
//! [`DuelingDqn`] (the model), [`Learner`] (a run's networks, optimizer state and
//! counters).
//!
//! Fused means: a network's parameters live in one flat buffer laid out for the step's
//! products ([`Layout`]); by name (the PyTorch attribute names of
//! [`crate::model::TENSORS`], the `state_dict` keys of the model file and of
//! checkpoints) they are views of it. The gradients are written by hand, not taken by
//! autograd. The optimizers are [`crate::optim`]'s, over whole buffers at once.
//!
//! The train step never waits for the device: it reads nothing back to the host (no
//! `f64::try_from`, no `.item()`), so on CUDA the whole step is queued kernels, and it
//! can be captured once as a CUDA graph. The loss and mean Q are by-products the caller
//! reduces only when it reads them ([`TrainOutput`]).

use crate::experience::col;
use crate::model::{self, ModelMeta, TENSORS};
use crate::optim::{Optimizer, OptimizerConfig};
use crate::state::STATE_DIM;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tch::{Device, Kind, Tensor};
use thiserror::Error;

/// Which optimizer [`Learner`] runs (defined with the optimizers, in `optim`).
pub use crate::optim::OptimizerKind;

mod group;
#[cfg(test)]
mod oracle;
#[cfg(test)]
mod reference;

pub use group::{Group, GroupOutput, GroupShape, TrainOutput};

// ---------------------------------------------------------------------------------
// Hyper-parameters
// ---------------------------------------------------------------------------------

/// The learner's hyper-parameters: the `[dqn]` section of `configs/manager.toml`.
/// Defaults are the paper's where it gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DqnConfig {
    /// Discount per frame-step (paper: 0.99).
    pub gamma: f64,
    /// Transitions per train step (paper: 32).
    pub batch_size: usize,
    /// Learning rate (paper: 2.5e-4, with RMSProp).
    pub lr: f64,
    /// `rmsprop` (paper) or `adam`.
    pub optimizer: OptimizerKind,
    /// RMSProp smoothing constant (PyTorch default 0.99).
    pub rmsprop_alpha: f64,
    /// Adam's first and second moment decay (PyTorch defaults 0.9, 0.999).
    pub adam_betas: (f64, f64),
    /// Added to the RMS in the denominator, both optimizers (PyTorch default 1e-8).
    pub eps: f64,
    /// Double DQN (van Hasselt et al. 2016): the online net picks the next action, the
    /// target net values it. On by default although the paper used plain DQN: it
    /// removes the max-operator's over-estimation at the cost of one more forward pass
    /// of a tiny network, and Ape-X (which Shine's fleet resembles) uses it.
    pub double_dqn: bool,
    /// Steps summed into each transition's reward by the worker (1 = plain one-step
    /// TD). Must equal the `n_step` field of uploads; the bootstrap uses `gamma^n`.
    pub n_step: u8,
    /// Huber loss threshold (1.0 = Nature DQN's error clipping to [-1, 1]).
    pub huber_delta: f64,
    /// Clip gradients to this global L2 norm (CleanRL and SB3 use 10); 0 turns it off.
    pub max_grad_norm: f64,
    /// Copy the online weights into the target net every this many train steps
    /// (paper: 10,000).
    pub target_sync_every: u64,
    /// Publish a Polyak average of the online weights instead of the online weights:
    /// after every train step `average += publish_average_tau * (online - average)`, so
    /// the published model averages about the last `1 / publish_average_tau` steps. The
    /// training itself (targets, gradients) does not change. 0 (the default, the
    /// paper's choice) publishes the online weights.
    pub publish_average_tau: f64,
}

impl Default for DqnConfig {
    fn default() -> Self {
        // The optimizer's defaults are defined with the optimizers.
        let optimizer = OptimizerConfig::default();
        DqnConfig {
            gamma: 0.99,
            batch_size: 32,
            lr: optimizer.lr,
            optimizer: optimizer.kind,
            rmsprop_alpha: optimizer.rmsprop_alpha,
            adam_betas: optimizer.adam_betas,
            eps: optimizer.eps,
            double_dqn: true,
            n_step: 1,
            huber_delta: 1.0,
            max_grad_norm: 10.0,
            target_sync_every: 10_000,
            publish_average_tau: 0.0,
        }
    }
}

#[derive(Debug, Error)]
pub enum DqnError {
    #[error("[dqn] {0}")]
    Config(String),
    #[error("learner state {name}: {problem}")]
    State { name: String, problem: String },
}

impl DqnConfig {
    /// The optimizer's part of the config.
    pub(crate) fn optimizer_config(&self) -> OptimizerConfig {
        OptimizerConfig { kind: self.optimizer, lr: self.lr, rmsprop_alpha: self.rmsprop_alpha, adam_betas: self.adam_betas, eps: self.eps }
    }

    /// Every value in range, or an error naming the field and what is allowed.
    pub fn validate(&self) -> Result<(), DqnError> {
        let bad = |m: String| Err(DqnError::Config(m));
        let unit = |x: f64| x.is_finite() && x > 0.0 && x <= 1.0;
        if !unit(self.gamma) {
            return bad(format!("gamma = {} must be in (0, 1]", self.gamma));
        }
        if self.batch_size == 0 || self.batch_size > 1 << 20 {
            return bad(format!("batch_size = {} must be in 1..=1048576", self.batch_size));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad(format!("lr = {} must be a positive number", self.lr));
        }
        if !(unit(self.rmsprop_alpha) && self.rmsprop_alpha < 1.0) {
            return bad(format!("rmsprop_alpha = {} must be in (0, 1)", self.rmsprop_alpha));
        }
        let (b1, b2) = self.adam_betas;
        if !(b1.is_finite() && (0.0..1.0).contains(&b1) && b2.is_finite() && (0.0..1.0).contains(&b2)) {
            return bad(format!("adam_betas = ({b1}, {b2}) must both be in [0, 1)"));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return bad(format!("eps = {} must be a positive number", self.eps));
        }
        if self.n_step == 0 {
            return bad("n_step must be at least 1".into());
        }
        if !(self.huber_delta.is_finite() && self.huber_delta > 0.0) {
            return bad(format!("huber_delta = {} must be a positive number", self.huber_delta));
        }
        if !(self.max_grad_norm.is_finite() && self.max_grad_norm >= 0.0) {
            return bad(format!("max_grad_norm = {} must be >= 0 (0 turns clipping off)", self.max_grad_norm));
        }
        if self.target_sync_every == 0 {
            return bad("target_sync_every must be at least 1".into());
        }
        if !(self.publish_average_tau.is_finite() && (0.0..1.0).contains(&self.publish_average_tau)) {
            return bad(format!("publish_average_tau = {} must be in [0, 1) (0 publishes the online weights)", self.publish_average_tau));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------
// A transition on the training device
// ---------------------------------------------------------------------------------

/// A transition as the learner reads it from the replay on the training device: 64
/// floats (256 bytes), laid out so that every operand of the step's products is a
/// 16-byte-aligned row, and the TD target needs no arithmetic on the terminal flag.
///
/// ```text
///  0..27  state        27  1.0 (the first layer's bias input)
///  28     action       29  reward       30  discount gamma^n (1 - terminal)       31  0
///  32..59 next state   59  1.0          60..64  0
/// ```
///
/// A batch `[B, 64]` is thus also `[2B, 32]`: its states and next states, interleaved,
/// each padded to [`INPUTS`](row::INPUTS) inputs of the first layer. Only the first 28
/// carry anything (the state and the bias input): the first layer's weights on inputs
/// 28..32 are zero, so the action, reward and discount there add exactly nothing to a
/// product. The discount is computed once, when the row is written
/// ([`row::from_wire`]), from the run's `gamma` and `n_step`. What workers upload and
/// the write-ahead log keeps is the wire format ([`crate::experience`], 57 floats).
pub mod row {
    use crate::experience::{col, TRANSITION_FLOATS};
    use crate::state::STATE_DIM;

    pub const STATE: usize = 0;
    /// 1.0: what the first layer's bias multiplies.
    pub const ONE: usize = STATE_DIM;
    pub const ACTION: usize = 28;
    pub const REWARD: usize = 29;
    /// `gamma^n (1 - terminal)`: the bootstrap's factor.
    pub const DISCOUNT: usize = 30;
    pub const NEXT_STATE: usize = 32;
    pub const NEXT_ONE: usize = NEXT_STATE + STATE_DIM;
    /// Floats per row.
    pub const WIDTH: usize = 64;
    /// Inputs of the first layer: a state, the bias input, padding.
    pub const INPUTS: usize = 32;
    /// The first layer's inputs that carry anything: the state and the bias input.
    pub const USED_INPUTS: usize = STATE_DIM + 1;

    /// Wire rows (`n x 57`, [`col`]) as device rows (`n x 64`), appended to `out`;
    /// `gamma_n` is the run's `gamma^n_step`.
    pub fn from_wire(wire: &[f32], gamma_n: f32, out: &mut Vec<f32>) {
        for t in wire.chunks_exact(TRANSITION_FLOATS) {
            let at = out.len();
            out.resize(at + WIDTH, 0.0);
            let r = &mut out[at..];
            r[STATE..STATE + STATE_DIM].copy_from_slice(&t[col::STATE..col::STATE + STATE_DIM]);
            r[ONE] = 1.0;
            r[ACTION] = t[col::ACTION];
            r[REWARD] = t[col::REWARD];
            r[DISCOUNT] = gamma_n * (1.0 - t[col::TERMINAL]);
            r[NEXT_STATE..NEXT_STATE + STATE_DIM].copy_from_slice(&t[col::NEXT_STATE..col::NEXT_STATE + STATE_DIM]);
            r[NEXT_ONE] = 1.0;
        }
    }
}

// ---------------------------------------------------------------------------------
// The flat parameter layout
// ---------------------------------------------------------------------------------

/// The parameters as the step multiplies them, in one flat buffer: five blocks, each a
/// 16-byte-aligned matrix, so that every product reads and writes whole aligned rows
/// (on a GPU, misaligned operands cost split-K chains of three kernels):
///
/// ```text
/// w1  [128, 32]     shared.weight in columns 0..27, shared.bias in column 27, zeros after
/// w2  [1024, 128]   value_hidden.weight (rows 0..512), advantage_hidden.weight (512..1024)
/// b2  [1024]        value_hidden.bias, advantage_hidden.bias
/// wh  [H, 1024]     row 0: value.weight on columns 0..512; rows 1..1+A: advantage.weight
///                   on columns 512..1024; every other element zero
/// bh  [H]           value.bias, advantage.bias, zeros
/// ```
///
/// `H` is `1 + A` rounded up to a multiple of 4 ([`Layout::heads`]). The first layer's
/// bias sits beside its weights because each device row carries a 1.0 beside its state
/// ([`row`]): one product gives the layer and its bias, and one product its gradients.
/// The two heads are one product over both streams' 1,024 units (the zeros keep each
/// head to its stream), whose output is `[V, A_0 .. A_{A-1}, 0 ..]`. The zeros stay
/// zero: no optimizer moves them (w1's padding gradient is never written, the heads'
/// is written as exact zeros through a mask).
#[derive(Debug, Clone)]
pub struct Layout {
    actions: usize,
    heads: usize,
    len: i64,
}

/// A block of [`Layout`]: its offset in the buffer and its shape.
#[derive(Debug, Clone, Copy)]
struct Block {
    offset: i64,
    rows: i64,
    /// 0: a vector of `rows`.
    cols: i64,
}

/// The blocks of one network (or, stacked, of k: each with a leading run dimension).
#[derive(Debug)]
pub(crate) struct Blocks {
    pub w1: Tensor,
    pub w2: Tensor,
    pub b2: Tensor,
    pub wh: Tensor,
    pub bh: Tensor,
}

const SHARED: i64 = model::SHARED as i64;
const STREAM: i64 = model::STREAM as i64;

impl Layout {
    pub fn new(actions: usize) -> Layout {
        let heads = (1 + actions).div_ceil(4) * 4;
        let mut l = Layout { actions, heads, len: 0 };
        let bh = l.blocks_at()[4];
        l.len = bh.offset + bh.rows;
        l
    }

    /// Rows of the heads' block: the value, the advantages, zero rows to a multiple of 4.
    pub fn heads(&self) -> usize {
        self.heads
    }

    pub fn actions(&self) -> usize {
        self.actions
    }

    /// Elements of a buffer laid out as this.
    pub fn len(&self) -> i64 {
        self.len
    }

    /// w1, w2, b2, wh, bh.
    fn blocks_at(&self) -> [Block; 5] {
        let h = self.heads as i64;
        let w1 = Block { offset: 0, rows: SHARED, cols: row::INPUTS as i64 };
        let w2 = Block { offset: w1.offset + SHARED * row::INPUTS as i64, rows: 2 * STREAM, cols: SHARED };
        let b2 = Block { offset: w2.offset + 2 * STREAM * SHARED, rows: 2 * STREAM, cols: 0 };
        let wh = Block { offset: b2.offset + 2 * STREAM, rows: h, cols: 2 * STREAM };
        let bh = Block { offset: wh.offset + h * 2 * STREAM, rows: h, cols: 0 };
        [w1, w2, b2, wh, bh]
    }

    /// Block `b` of `flat` (`[P]`, or k buffers stacked `[k, P]`): a view, with the
    /// same leading dimensions.
    fn block(flat: &Tensor, b: Block) -> Tensor {
        let lead = &flat.size()[..flat.dim() - 1];
        let shape: Vec<i64> = lead.iter().copied().chain([b.rows]).chain((b.cols > 0).then_some(b.cols)).collect();
        let n = b.rows * b.cols.max(1);
        flat.narrow(-1, b.offset, n).view(shape.as_slice())
    }

    /// The blocks of `flat` (`[P]` or `[k, P]`), as views.
    pub(crate) fn blocks(&self, flat: &Tensor) -> Blocks {
        let [w1, w2, b2, wh, bh] = self.blocks_at().map(|b| Self::block(flat, b));
        Blocks { w1, w2, b2, wh, bh }
    }

    /// Tensor `i` of [`TENSORS`] in `flat` (a buffer laid out as this, `[P]`): a view,
    /// of the shape [`ModelMeta::shapes`] gives it.
    pub fn view(&self, flat: &Tensor, i: usize) -> Tensor {
        // Only the block tensor `i` lies in is viewed (inference and checkpoints call
        // this per tensor).
        let [w1, w2, b2, wh, bh] = self.blocks_at().map(|b| move || Self::block(flat, b));
        let a = self.actions as i64;
        match i {
            0 => w1().narrow(-1, 0, STATE_DIM as i64),
            1 => w1().select(-1, row::ONE as i64),
            2 => w2().narrow(-2, 0, STREAM),
            3 => b2().narrow(-1, 0, STREAM),
            4 => wh().narrow(-2, 0, 1).narrow(-1, 0, STREAM),
            5 => bh().narrow(-1, 0, 1),
            6 => w2().narrow(-2, STREAM, STREAM),
            7 => b2().narrow(-1, STREAM, STREAM),
            8 => wh().narrow(-2, 1, a).narrow(-1, STREAM, STREAM),
            9 => bh().narrow(-1, 1, a),
            _ => panic!("the network has ten tensors, not {}", i + 1),
        }
    }
}

// ---------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------

/// The paper's network: 27 -> 128 -> (value 512 -> 1, advantage 512 -> A), every
/// parameter in one flat buffer laid out by [`Layout`]. The parameters by name
/// ([`DuelingDqn::param`], the model file, checkpoints) are views of it, under the
/// PyTorch names of [`crate::model::TENSORS`]; the model file is exactly as it was
/// before the layout had padding (`docs/model-format.md`).
#[derive(Debug)]
pub struct DuelingDqn {
    /// Every parameter, laid out by `layout`.
    flat: Tensor,
    layout: Layout,
}

impl DuelingDqn {
    /// Fresh weights: PyTorch's `nn.Linear` initialisation, uniform in
    /// `±1/sqrt(fan_in)` for weights and biases alike; the layout's padding zero.
    pub fn new(device: Device, actions: usize) -> Self {
        let layout = Layout::new(actions);
        let flat = Tensor::zeros([layout.len], (Kind::Float, device));
        let net = DuelingDqn { flat, layout };
        let shapes = ModelMeta::new("", actions).shapes();
        for layer in 0..TENSORS.len() / 2 {
            let (weight, bias) = (2 * layer, 2 * layer + 1);
            // The weight's fan-in, for the bias too (PyTorch's choice).
            let bound = 1.0 / (shapes[weight][1] as f64).sqrt();
            for i in [weight, bias] {
                let _ = net.param(i).uniform_(-bound, bound);
            }
        }
        net
    }

    pub fn actions(&self) -> usize {
        self.layout.actions
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Keep the weights in `flat` from now on (a buffer laid out as this network's: a
    /// [`Group`]'s row), copying them there first.
    fn move_to(&mut self, mut flat: Tensor) {
        flat.copy_(&self.flat);
        self.flat = flat;
    }

    pub fn device(&self) -> Device {
        self.flat.device()
    }

    /// Tensor `i` of [`TENSORS`]: a view of the flat buffer (writes to it are writes to
    /// the network).
    pub fn param(&self, i: usize) -> Tensor {
        self.layout.view(&self.flat, i)
    }

    /// Q-values of states `x` (`[N, 27]`): the network for inference (and the frozen TD
    /// errors at ingest), from the named tensors. The train step has its own forward,
    /// over device rows ([`Group::device_step`]).
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let p = |i: usize| self.param(i);
        let h1 = x.linear(&p(0), Some(&p(1))).relu();
        let b = self.layout.blocks(&self.flat);
        // Both streams' hidden layers in one product, then both heads in one.
        let h2 = h1.linear(&b.w2, Some(&b.b2)).relu();
        let o = h2.linear(&b.wh, Some(&b.bh));
        let value = o.narrow(1, 0, 1);
        let advantage = o.narrow(1, 1, self.layout.actions as i64);
        // Q = V + A - mean(A): the mean keeps V and A identifiable (Wang et al.).
        value + &advantage - advantage.mean_dim(1, true, Kind::Float)
    }

    /// Weights in [`TENSORS`] order as host vectors (for the model file).
    pub fn weights(&self) -> Vec<Vec<f32>> {
        (0..TENSORS.len())
            .map(|i| {
                let t = self.param(i).detach().to_device(Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]);
                Vec::<f32>::try_from(&t).expect("f32 weights")
            })
            .collect()
    }

    /// Overwrite the weights (in [`TENSORS`] order, shapes as [`ModelMeta::shapes`]).
    pub fn set_weights(&mut self, weights: &[Vec<f32>]) {
        let shapes = ModelMeta::new("", self.layout.actions).shapes();
        for (i, w) in weights.iter().enumerate().take(TENSORS.len()) {
            let shape: Vec<i64> = shapes[i].iter().map(|&d| d as i64).collect();
            let src = Tensor::from_slice(w).view(shape.as_slice()).to_device(self.device());
            self.param(i).copy_(&src);
        }
    }

    /// The model file for these weights.
    pub fn to_model_file(&self, meta: &ModelMeta) -> Result<Vec<u8>, model::ModelError> {
        model::save(meta, &self.weights())
    }
}

// ---------------------------------------------------------------------------------
// The learner
// ---------------------------------------------------------------------------------

/// Where a learner keeps its tensors when it trains in a [`Group`]: its rows of the
/// group's buffers, each laid out as the flat parameter buffer.
struct LearnerRows {
    online: Tensor,
    target: Tensor,
    average: Option<Tensor>,
    /// The optimizer's slots, in its order.
    slots: Vec<Tensor>,
    /// Adam's count of updates on the device (a 0-dimensional f32), `None` for RMSProp.
    device_steps: Option<Tensor>,
    grad: Tensor,
}

/// One run's training state: online and target networks, the published average,
/// the optimizer's state, the gradient buffer and the step counters. It takes no step
/// itself: a [`Group`] (of one run, or of several) does, and the learner then counts
/// it ([`Learner::finish_step`]).
pub struct Learner {
    pub online: DuelingDqn,
    pub target: DuelingDqn,
    /// With `publish_average_tau` > 0: the Polyak average of the online weights, which
    /// [`Learner::model_file`] publishes.
    pub average: Option<DuelingDqn>,
    optimizer: Optimizer,
    /// The gradients, laid out as the parameters: each step overwrites them, and after
    /// the step they are the clipped ones it applied.
    grad: Tensor,
    /// Train steps taken, over the whole run (restored from checkpoints).
    pub step: u64,
    cfg: DqnConfig,
}

impl Learner {
    pub fn new(cfg: &DqnConfig, actions: usize, device: Device) -> Result<Learner, DqnError> {
        cfg.validate()?;
        if actions == 0 {
            return Err(DqnError::Config("the action set is empty".into()));
        }
        let online = DuelingDqn::new(device, actions);
        let mut target = DuelingDqn::new(device, actions);
        target.flat.copy_(&online.flat);
        let average = (cfg.publish_average_tau > 0.0).then(|| {
            let mut average = DuelingDqn::new(device, actions);
            average.flat.copy_(&online.flat);
            average
        });
        let optimizer = Optimizer::new(cfg.optimizer, &online.flat);
        let grad = online.flat.zeros_like();
        Ok(Learner { grad, online, target, average, optimizer, step: 0, cfg: cfg.clone() })
    }

    pub fn config(&self) -> &DqnConfig {
        &self.cfg
    }

    /// `gamma^n_step`: the discount of the bootstrap term (what [`row::from_wire`]
    /// writes into a device row, with the terminal flag).
    pub fn gamma_n(&self) -> f64 {
        self.cfg.gamma.powi(self.cfg.n_step as i32)
    }

    /// Keep every tensor in `rows` from now on (a [`Group`]'s), copying it there first.
    /// Everything this learner does outside the step (a restore, a checkpoint, the
    /// target sync, publishing) then reads and writes those rows.
    fn move_into(&mut self, rows: LearnerRows) {
        let LearnerRows { online, target, average, slots, device_steps, mut grad } = rows;
        self.online.move_to(online);
        self.target.move_to(target);
        if let (Some(mine), Some(row)) = (&mut self.average, average) {
            mine.move_to(row);
        }
        for (mine, mut row) in self.optimizer.slots.iter_mut().zip(slots) {
            row.copy_(mine);
            *mine = row;
        }
        if let (Some(mine), Some(mut row)) = (&mut self.optimizer.device_steps, device_steps) {
            row.copy_(mine);
            *mine = row;
        }
        grad.copy_(&self.grad);
        self.grad = grad;
    }

    pub fn device(&self) -> Device {
        self.online.device()
    }

    /// The host's part of a train step, after its device work: count it (the learner's
    /// and the optimizer's step), and copy the online weights into the target net when
    /// the sync is due (one copy kernel, outside any graph).
    pub fn finish_step(&mut self) {
        self.optimizer.count_step();
        self.step += 1;
        if self.step.is_multiple_of(self.cfg.target_sync_every) {
            self.sync_target();
        }
    }

    /// Each row's |TD error| under the target network alone, `[B]`, for wire rows
    /// `batch` (`[B, 57]`, on the learner's device): `|r + gamma^n (1 - terminal) max_a
    /// Q'(s', a) - Q'(s, a)|`. What an Ape-X actor computes with its frozen copy of the
    /// model as a new row's priority; the target net is the learner's frozen copy.
    /// Changes nothing.
    pub fn frozen_td_abs(&self, batch: &Tensor) -> Tensor {
        let column = |c: usize| batch.select(1, c as i64);
        let states = batch.narrow(1, col::STATE as i64, STATE_DIM as i64);
        let next_states = batch.narrow(1, col::NEXT_STATE as i64, STATE_DIM as i64);
        let actions = batch.narrow(1, col::ACTION as i64, 1).to_kind(Kind::Int64);
        let next_q = self.target.forward(&next_states).amax(1, false);
        let td_target = column(col::REWARD) + (1.0 - column(col::TERMINAL)) * next_q * self.gamma_n();
        (self.target.forward(&states).gather(1, &actions, false).squeeze_dim(1) - &td_target).abs()
    }

    /// Copy the online weights into the target net.
    pub fn sync_target(&mut self) {
        self.target.flat.copy_(&self.online.flat);
    }

    /// The model file of the published weights: the average when there is one,
    /// otherwise the online net.
    pub fn model_file(&self, meta: &ModelMeta) -> Result<Vec<u8>, model::ModelError> {
        self.average.as_ref().unwrap_or(&self.online).to_model_file(meta)
    }

    /// Optimizer updates applied since its state was created or restored.
    pub fn optimizer_steps(&self) -> u64 {
        self.optimizer.steps
    }

    /// Every tensor a checkpoint needs, named `online.<param>`, `target.<param>`,
    /// `average.<param>` (with `publish_average_tau` > 0) and
    /// `optim.<kind>.<slot>.<param>` (e.g. `optim.rmsprop.square_avg.shared.weight`).
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        let average = self.average.as_ref().map(|a| ("average", a));
        for (prefix, net) in [("online", &self.online), ("target", &self.target)].into_iter().chain(average) {
            for (i, name) in TENSORS.iter().enumerate() {
                out.push((format!("{prefix}.{name}"), net.param(i).detach()));
            }
        }
        let kind = self.optimizer.kind();
        for (slot, flat) in Optimizer::slot_names(kind).iter().zip(&self.optimizer.slots) {
            for (i, name) in TENSORS.iter().enumerate() {
                out.push((Optimizer::slot_key(kind, slot, name), self.online.layout.view(flat, i)));
            }
        }
        out
    }

    /// Restore from [`Learner::state_tensors`] output (tensors on any device) and the
    /// counters saved beside it. Weights must all be there with the right shapes (a
    /// different action count is an error). The optimizer state is restored when the
    /// checkpoint has it for the configured optimizer; otherwise it starts fresh and
    /// this returns `Ok(false)` (so switching RMSProp to Adam between runs works). The
    /// published average, when this learner keeps one, starts at the online weights if
    /// the checkpoint has none (a run that turns averaging on).
    pub fn load_state(&mut self, tensors: &HashMap<String, Tensor>, step: u64, optimizer_steps: u64) -> Result<bool, DqnError> {
        let device = self.device();
        let fetch = |key: &str, like: &Tensor| -> Result<Tensor, DqnError> {
            let t = tensors.get(key).ok_or_else(|| DqnError::State { name: key.into(), problem: "missing".into() })?;
            if t.size() != like.size() {
                return Err(DqnError::State {
                    name: key.into(),
                    problem: format!("shape {:?}, this learner has {:?} (a different action set?)", t.size(), like.size()),
                });
            }
            Ok(t.to_device(device).to_kind(Kind::Float))
        };
        // Check everything before changing anything.
        let mut weights = Vec::new();
        for (prefix, net) in [("online", &self.online), ("target", &self.target)] {
            for (i, name) in TENSORS.iter().enumerate() {
                let dst = net.param(i);
                let src = fetch(&format!("{prefix}.{name}"), &dst)?;
                weights.push((dst, src));
            }
        }
        if let Some(average) = &self.average {
            for (i, name) in TENSORS.iter().enumerate() {
                let key = format!("average.{name}");
                let dst = average.param(i);
                // weights[i] is online tensor i.
                let src = if tensors.contains_key(&key) { fetch(&key, &dst)? } else { weights[i].1.shallow_clone() };
                weights.push((dst, src));
            }
        }
        let kind = self.optimizer.kind();
        let mut slots = Vec::new();
        for (slot, flat) in Optimizer::slot_names(kind).iter().zip(&self.optimizer.slots) {
            for (i, name) in TENSORS.iter().enumerate() {
                let dst = self.online.layout.view(flat, i);
                let src = fetch(&Optimizer::slot_key(kind, slot, name), &dst);
                slots.push((dst, src));
            }
        }
        let optimizer_ok = slots.iter().all(|(_, r)| r.is_ok());
        tch::no_grad(|| {
            for (mut dst, src) in weights {
                dst.copy_(&src);
            }
            for (mut dst, src) in slots {
                match src {
                    Ok(src) if optimizer_ok => dst.copy_(&src),
                    _ => {
                        let _ = dst.zero_();
                    }
                }
            }
        });
        self.step = step;
        self.optimizer.set_steps(if optimizer_ok { optimizer_steps } else { 0 });
        Ok(optimizer_ok)
    }
}


#[cfg(test)]
mod tests {
    use super::oracle;
    use super::*;
    use crate::model::{QNet, Scratch};
    use crate::ActionSet;

    #[test]
    fn tch_forward_runs_on_the_cpu_and_has_the_dueling_shape() {
        let net = DuelingDqn::new(Device::Cpu, 5);
        let x = Tensor::rand([8, STATE_DIM as i64], (Kind::Float, Device::Cpu));
        assert_eq!(net.forward(&x).size(), vec![8, 5]);
        // Every named parameter has the model file's shape, no element is in two of
        // them, and every element of the buffer in none of them (the padding) is zero.
        let shapes = ModelMeta::new("", 5).shapes();
        let marks = net.flat.zeros_like();
        for (i, shape) in shapes.iter().enumerate() {
            let want: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            assert_eq!(net.param(i).size(), want, "{}", TENSORS[i]);
            let _ = net.layout().view(&marks, i).g_add_scalar_(1.0);
        }
        assert_eq!(f32::try_from(marks.max()).unwrap(), 1.0, "no element shared");
        let named: i64 = shapes.iter().map(|s| s.iter().product::<usize>() as i64).sum();
        assert_eq!(i64::try_from(marks.sum(Kind::Float)).unwrap_or(0) as f64, named as f64);
        let padding = net.flat.masked_select(&marks.eq(0.0));
        assert_eq!(padding.size()[0], net.layout().len() - named);
        assert!(padding.abs().max().double_value(&[]) == 0.0, "the padding is zero");
    }

    #[test]
    fn each_named_tensor_sits_where_the_steps_products_read_it() {
        // Marks in each named tensor, then the blocks read back: the model file's names
        // are the blocks' parts that the layout's doc draws.
        let mut net = DuelingDqn::new(Device::Cpu, 5);
        let shapes = ModelMeta::new("", 5).shapes();
        net.set_weights(&(0..10).map(|i| vec![i as f32 + 1.0; shapes[i].iter().product()]).collect::<Vec<_>>());
        let b = net.layout().blocks(&net.flat);
        let at = |t: &Tensor, idx: &[i64]| t.double_value(idx);
        assert_eq!((at(&b.w1, &[5, 3]), at(&b.w1, &[5, 27]), at(&b.w1, &[5, 28])), (1.0, 2.0, 0.0), "shared: weights, bias in column 27, padding");
        assert_eq!((at(&b.w2, &[10, 7]), at(&b.w2, &[600, 7])), (3.0, 7.0), "value_hidden rows, then advantage_hidden");
        assert_eq!((at(&b.b2, &[10]), at(&b.b2, &[600])), (4.0, 8.0));
        assert_eq!((at(&b.wh, &[0, 10]), at(&b.wh, &[0, 600]), at(&b.wh, &[2, 10]), at(&b.wh, &[2, 600]), at(&b.wh, &[6, 600])), (5.0, 0.0, 0.0, 9.0, 0.0), "heads: value on its stream, advantages on theirs");
        assert_eq!((at(&b.bh, &[0]), at(&b.bh, &[5]), at(&b.bh, &[6])), (6.0, 10.0, 0.0));
        assert_eq!(b.wh.size(), vec![8, 1024], "1 + 5 heads padded to 8 rows");
    }

    /// Pure-Rust inference and tch's forward each within float32 rounding of the
    /// network in float64 (`model::tests::reference_with_bound`), for every action set.
    #[test]
    fn numerics_pure_rust_inference_and_tch_are_the_float64_network() {
        tch::manual_seed(7);
        for set in ActionSet::ALL {
            let net = DuelingDqn::new(Device::Cpu, set.len());
            let meta = ModelMeta::new(set.name(), set.len());
            let weights = net.weights();
            let rust = QNet::load(&net.to_model_file(&meta).unwrap()).unwrap();
            let mut margin = 0.0f64;
            // One state (a worker's single environment) and a batch: both kernels.
            for n in [1, 64] {
                let x = Tensor::rand([n, STATE_DIM as i64], (Kind::Float, Device::Cpu)) * 2.0 - 0.5;
                let theirs = Vec::<f32>::try_from(&net.forward(&x).view([-1])).unwrap();
                let xs = Vec::<f32>::try_from(&x.view([-1])).unwrap();
                let mut ours = vec![0.0; n as usize * set.len()];
                rust.forward(&xs, n as usize, &mut ours, &mut Scratch::default());
                for r in 0..n as usize {
                    let want = crate::model::tests::reference_with_bound(&weights, &meta, &xs[r * STATE_DIM..(r + 1) * STATE_DIM]);
                    for (a, &(v, bound)) in want.iter().enumerate() {
                        for (who, got) in [("pure Rust", ours[r * set.len() + a]), ("tch", theirs[r * set.len() + a])] {
                            let off = (got as f64 - v).abs();
                            assert!(off <= bound, "{set}, batch {n}, row {r}, action {a}: {who} {got}, float64 {v}, off by {off:e} > {bound:e}");
                            margin = margin.max(off / bound);
                        }
                    }
                }
            }
            println!("{set}: largest error / bound {margin:.2e}");
        }
    }

    #[test]
    fn set_weights_round_trips() {
        let a = DuelingDqn::new(Device::Cpu, 5);
        let mut b = DuelingDqn::new(Device::Cpu, 5);
        assert_ne!(a.weights(), b.weights());
        b.set_weights(&a.weights());
        assert_eq!(a.weights(), b.weights());
    }

    // ----- the learner -----

    use crate::experience::TRANSITION_FLOATS;

    /// A fixed batch of `n` plausible transitions; `terminal` for every row.
    fn batch(n: usize, actions: usize, terminal: f32) -> Tensor {
        let mut rows = Vec::with_capacity(n * TRANSITION_FLOATS);
        for i in 0..n {
            for c in 0..TRANSITION_FLOATS {
                rows.push(((i * 31 + c * 7) % 17) as f32 / 17.0 - 0.5);
            }
            let r = &mut rows[i * TRANSITION_FLOATS..];
            r[col::ACTION] = (i % actions) as f32;
            r[col::REWARD] = if i % 3 == 0 { 1.0 } else { -0.25 };
            r[col::TERMINAL] = terminal;
        }
        Tensor::from_slice(&rows).view([n as i64, TRANSITION_FLOATS as i64])
    }

    fn scalar(t: &Tensor) -> f32 {
        f32::try_from(t).unwrap()
    }

    /// Wire rows as the device rows a learner trains on ([`row`]), with `l`'s discount.
    pub(crate) fn device_rows(l: &Learner, wire: &Tensor) -> Tensor {
        let v = Vec::<f32>::try_from(&wire.view([-1])).unwrap();
        let mut out = Vec::new();
        row::from_wire(&v, l.gamma_n() as f32, &mut out);
        Tensor::from_slice(&out).view([-1, row::WIDTH as i64])
    }

    /// One train step of `l` alone (a group of one) on wire rows `b` (as many as its
    /// batch size), each row's loss weighted by `w` if given.
    pub(crate) fn step(l: &mut Learner, b: &Tensor, w: Option<&Tensor>) -> TrainOutput {
        assert_eq!(b.size()[0], l.config().batch_size as i64, "a batch of the learner's batch size");
        let rows = device_rows(l, b).unsqueeze(0);
        let w = w.map(|w| w.unsqueeze(0));
        let mut g = Group::new(&mut [&mut *l], w.is_some()).unwrap();
        let out = g.device_step(&rows, w.as_ref()).unwrap().run(0);
        l.finish_step();
        out
    }

    fn with_batch(b: usize) -> DqnConfig {
        DqnConfig { batch_size: b, ..Default::default() }
    }

    fn huber(x: f64, delta: f64) -> f64 {
        if x.abs() <= delta {
            0.5 * x * x
        } else {
            delta * (x.abs() - 0.5 * delta)
        }
    }

    #[test]
    fn train_step_on_a_fixed_batch_lowers_the_loss() {
        for optimizer in [OptimizerKind::Rmsprop, OptimizerKind::Adam] {
            tch::manual_seed(1);
            let cfg = DqnConfig { optimizer, lr: 1e-3, ..Default::default() };
            let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
            let b = batch(32, 5, 0.0);
            let first = scalar(&step(&mut l, &b, None).loss());
            let mut last = first;
            for _ in 0..200 {
                last = scalar(&step(&mut l, &b, None).loss());
            }
            assert!(last < first * 0.2, "{optimizer:?}: loss {first} -> {last}");
            assert_eq!(l.step, 201);
        }
    }

    #[test]
    fn terminal_rows_do_not_bootstrap() {
        tch::manual_seed(2);
        let mut l = Learner::new(&with_batch(8), 5, Device::Cpu).unwrap();
        let b = batch(8, 5, 1.0);
        // The loss returned is that of the weights before the update.
        let q = l.online.forward(&b.narrow(1, 0, STATE_DIM as i64));
        let q = Vec::<f32>::try_from(&q.view([-1])).unwrap();
        let rows = Vec::<f32>::try_from(&b.view([-1])).unwrap();
        let want: f64 = (0..8)
            .map(|i| {
                let r = &rows[i * TRANSITION_FLOATS..];
                let qa = q[i * 5 + r[col::ACTION] as usize] as f64;
                huber(qa - r[col::REWARD] as f64, 1.0)
            })
            .sum::<f64>()
            / 8.0;
        let got = scalar(&step(&mut l, &b, None).loss()) as f64;
        assert!((got - want).abs() < 1e-5, "loss {got}, expected {want} (no bootstrap)");
    }

    /// A learner with 3-step returns at gamma 0.9 and 5 actions whose target net differs
    /// from its online net, so that which net values what matters.
    fn learner_with_distinct_nets(seed: i64) -> Learner {
        tch::manual_seed(seed);
        let cfg = DqnConfig { n_step: 3, gamma: 0.9, batch_size: 8, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        l.target.set_weights(&DuelingDqn::new(Device::Cpu, 5).weights());
        l
    }

    #[test]
    fn n_step_bootstrap_uses_gamma_to_the_n_and_double_dqn_lets_online_choose() {
        // The nets differ so that "online chooses, target values" matters.
        let mut l = learner_with_distinct_nets(3);
        let b = batch(8, 5, 0.0);
        let v = |t: Tensor| Vec::<f32>::try_from(&t.view([-1])).unwrap();
        let q = v(l.online.forward(&b.narrow(1, 0, STATE_DIM as i64)));
        let next = b.narrow(1, col::NEXT_STATE as i64, STATE_DIM as i64);
        let (qn_online, qn_target) = (v(l.online.forward(&next)), v(l.target.forward(&next)));
        let rows = v(b.shallow_clone());
        let want: f64 = (0..8)
            .map(|i| {
                let r = &rows[i * TRANSITION_FLOATS..];
                let best = model::QNet::argmax(&qn_online[i * 5..i * 5 + 5]);
                let target = r[col::REWARD] as f64 + 0.9f64.powi(3) * qn_target[i * 5 + best] as f64;
                huber(q[i * 5 + r[col::ACTION] as usize] as f64 - target, 1.0)
            })
            .sum::<f64>()
            / 8.0;
        let got = scalar(&step(&mut l, &b, None).loss()) as f64;
        assert!((got - want).abs() < 1e-5, "loss {got}, expected {want}");
    }

    #[test]
    fn frozen_td_errors_use_the_target_net_alone_and_change_nothing() {
        let l = learner_with_distinct_nets(5);
        let (online, target) = (l.online.weights(), l.target.weights());
        let v = |t: Tensor| Vec::<f32>::try_from(&t.view([-1])).unwrap();
        for terminal in [0.0, 1.0] {
            let b = batch(8, 5, terminal);
            let q = v(l.target.forward(&b.narrow(1, 0, STATE_DIM as i64)));
            let qn = v(l.target.forward(&b.narrow(1, col::NEXT_STATE as i64, STATE_DIM as i64)));
            let rows = v(b.shallow_clone());
            let got = v(l.frozen_td_abs(&b));
            assert_eq!(got.len(), 8);
            for i in 0..8 {
                let r = &rows[i * TRANSITION_FLOATS..];
                let best = qn[i * 5..i * 5 + 5].iter().copied().fold(f32::MIN, f32::max) as f64;
                let want = (q[i * 5 + r[col::ACTION] as usize] as f64 - r[col::REWARD] as f64 - (1.0 - terminal as f64) * 0.9f64.powi(3) * best).abs();
                assert!((got[i] as f64 - want).abs() < 1e-5, "terminal {terminal}, row {i}: {} vs {want}", got[i]);
            }
        }
        assert_eq!((l.online.weights(), l.target.weights(), l.step), (online, target, 0), "scoring rows trains nothing");
    }

    #[test]
    fn gradients_are_clipped_to_the_global_norm() {
        tch::manual_seed(4);
        let cfg = DqnConfig { max_grad_norm: 1e-3, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        let out = step(&mut l, &batch(32, 5, 0.0), None);
        let before = scalar(&out.grad_norm);
        assert!(before > 1e-2, "the test needs a gradient larger than the limit, got {before}");
        // The gradients left on the parameters are the clipped ones.
        let after = scalar(&l.grad.norm());
        assert!((after - 1e-3).abs() < 1e-5, "norm after clipping {after}");
    }

    #[test]
    fn target_is_synced_every_n_steps_and_only_then() {
        tch::manual_seed(5);
        let cfg = DqnConfig { target_sync_every: 3, batch_size: 16, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        assert_eq!(l.online.weights(), l.target.weights(), "target starts as a copy");
        let b = batch(16, 5, 0.0);
        step(&mut l, &b, None);
        step(&mut l, &b, None);
        assert_ne!(l.online.weights(), l.target.weights());
        step(&mut l, &b, None);
        assert_eq!(l.online.weights(), l.target.weights());
    }

    #[test]
    fn importance_weights_scale_each_rows_loss() {
        let b = batch(32, 5, 0.0);
        let first = Learner::new(&DqnConfig::default(), 5, Device::Cpu).unwrap();
        // Copies of one learner (tests run in parallel: a seed would not make them equal).
        let learner = || {
            let l = Learner::new(&DqnConfig::default(), 5, Device::Cpu).unwrap();
            tch::no_grad(|| {
                l.online.flat.shallow_clone().copy_(&first.online.flat);
                l.target.flat.shallow_clone().copy_(&first.target.flat);
            });
            l
        };
        // Weights of one: the plain step, exactly.
        let (mut plain, mut weighted) = (learner(), learner());
        let ones = Tensor::ones([32], (Kind::Float, Device::Cpu));
        for _ in 0..3 {
            let p = step(&mut plain, &b, None);
            let w = step(&mut weighted, &b, Some(&ones));
            assert_eq!(f64::try_from(&p.loss()).unwrap(), f64::try_from(&w.loss()).unwrap());
        }
        assert!(plain.online.flat.equal(&weighted.online.flat), "the same weights after three steps");
        // One row at weight 2, the rest 0: the loss is that row's Huber loss of its
        // reported |TD error|, times 2, over the batch.
        let mut one = learner();
        let w = Tensor::zeros([32], (Kind::Float, Device::Cpu));
        let _ = w.narrow(0, 5, 1).fill_(2.0);
        let out = step(&mut one, &b, Some(&w));
        let td = Vec::<f32>::try_from(&out.td_abs()).unwrap();
        assert_eq!(td.len(), 32);
        let huber = |x: f64| if x < 1.0 { 0.5 * x * x } else { x - 0.5 };
        let want = 2.0 * huber(td[5] as f64) / 32.0;
        let got = f64::try_from(&out.loss()).unwrap();
        assert!((got - want).abs() < 1e-6 * want.max(1.0), "loss {got}, expected {want}");
        assert!(td.iter().all(|&x| x.is_finite() && x >= 0.0) && td.iter().any(|&x| x > 0.0));
    }

    #[test]
    fn state_round_trips_and_training_continues_identically() {
        tch::manual_seed(6);
        let cfg = DqnConfig { optimizer: OptimizerKind::Adam, ..Default::default() };
        let b = batch(32, 5, 0.0);
        let mut a = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        for _ in 0..5 {
            step(&mut a, &b, None);
        }
        let saved: HashMap<String, Tensor> = a.state_tensors().into_iter().map(|(k, v)| (k, v.copy())).collect();
        let mut c = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        assert!(c.load_state(&saved, a.step, a.optimizer_steps()).unwrap(), "optimizer state restored");
        assert_eq!(c.step, 5);
        let (la, lc) = (scalar(&step(&mut a, &b, None).loss()), scalar(&step(&mut c, &b, None).loss()));
        assert_eq!(la, lc);
        assert_eq!(a.online.weights(), c.online.weights());
        assert_eq!(a.target.weights(), c.target.weights());

        // Another optimizer: weights load, its state starts fresh.
        let mut r = Learner::new(&DqnConfig::default(), 5, Device::Cpu).unwrap();
        assert!(!r.load_state(&saved, 5, 5).unwrap());
        assert_eq!(r.online.weights(), saved_online(&saved));
        assert_eq!(r.optimizer_steps(), 0);

        // Another action count is an error that says so, and changes nothing.
        let mut w = Learner::new(&cfg, 7, Device::Cpu).unwrap();
        let before = w.online.weights();
        let err = w.load_state(&saved, 5, 5).unwrap_err().to_string();
        assert!(err.contains("action set"), "{err}");
        assert_eq!(w.online.weights(), before);
    }

    #[test]
    fn the_published_model_is_the_polyak_average_of_the_online_weights() {
        tch::manual_seed(7);
        let b = batch(32, 5, 0.0);
        let meta = ModelMeta::new("test", 5);
        let tau = 0.25;
        let cfg = DqnConfig { publish_average_tau: tau, lr: 1e-3, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        let flat = |w: Vec<Vec<f32>>| w.concat().into_iter().map(f64::from).collect::<Vec<f64>>();
        let mut want = flat(l.online.weights());
        for _ in 0..6 {
            step(&mut l, &b, None);
            for (a, o) in want.iter_mut().zip(flat(l.online.weights())) {
                *a += tau * (o - *a);
            }
        }
        let got = flat(l.average.as_ref().expect("an average is kept").weights());
        let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-6, "average off by {worst}");
        assert_ne!(l.average.as_ref().unwrap().weights(), l.online.weights(), "six steps moved the online weights past their average");
        assert!(file_weights(&l.model_file(&meta).unwrap()) == l.average.as_ref().unwrap().weights(), "the average is published");

        // Saved and restored with the rest of the state.
        let saved: HashMap<String, Tensor> = l.state_tensors().into_iter().map(|(k, v)| (k, v.copy())).collect();
        let mut r = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        r.load_state(&saved, l.step, l.optimizer_steps()).unwrap();
        assert!(file_weights(&r.model_file(&meta).unwrap()) == l.average.as_ref().unwrap().weights());
        step(&mut l, &b, None);
        step(&mut r, &b, None);
        assert_eq!(r.average.as_ref().unwrap().weights(), l.average.as_ref().unwrap().weights());

        // Turned on over a checkpoint without an average: it starts at the online weights.
        let mut plain = Learner::new(&DqnConfig { lr: 1e-3, ..Default::default() }, 5, Device::Cpu).unwrap();
        step(&mut plain, &b, None);
        assert!(plain.average.is_none());
        assert!(file_weights(&plain.model_file(&meta).unwrap()) == plain.online.weights(), "tau 0 publishes the online weights");
        let saved: HashMap<String, Tensor> = plain.state_tensors().into_iter().map(|(k, v)| (k, v.copy())).collect();
        assert!(!saved.keys().any(|k| k.starts_with("average.")));
        let mut on = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        on.load_state(&saved, 1, 1).unwrap();
        assert_eq!(on.average.as_ref().unwrap().weights(), plain.online.weights());
    }

    /// A model file's tensors in [`TENSORS`] order.
    fn file_weights(file: &[u8]) -> Vec<Vec<f32>> {
        let st = safetensors::SafeTensors::deserialize(file).unwrap();
        TENSORS.iter().map(|n| st.tensor(n).unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()).collect()
    }

    fn saved_online(saved: &HashMap<String, Tensor>) -> Vec<Vec<f32>> {
        TENSORS.iter().map(|n| Vec::<f32>::try_from(&saved[&format!("online.{n}")].view([-1])).unwrap()).collect()
    }

    /// The learner's state, copied (the oracle's input: what a step starts from).
    pub(crate) fn snapshot(l: &Learner) -> HashMap<String, Tensor> {
        l.state_tensors().into_iter().map(|(k, v)| (k, v.copy())).collect()
    }

    /// One train step of `l` checked against the oracle: every output and every tensor
    /// of the learner after it, the clipped gradient too. Returns the margin.
    pub(crate) fn checked_step(l: &mut Learner, b: &Tensor, w: Option<&Tensor>, what: &str) -> f64 {
        let cfg = l.config().clone();
        let before = snapshot(l);
        let case =
            oracle::Case { cfg: &cfg, actions: l.online.actions(), state: &before, steps: l.step, optimizer_steps: l.optimizer_steps(), batch: b, weights: w };
        let want = oracle::expect(&case);
        let out = step(l, b, w);
        let mut margin = ["loss", "mean_q", "grad_norm", "td_abs"]
            .iter()
            .zip([out.loss(), out.mean_q(), out.grad_norm.shallow_clone(), out.td_abs()])
            .map(|(n, t)| want.check(n, &t, what))
            .fold(0.0, f64::max);
        for (i, name) in TENSORS.iter().enumerate() {
            margin = margin.max(want.check(&format!("grad.{name}"), &l.online.layout().view(&l.grad, i), what));
        }
        margin.max(want.check_state(&l.state_tensors(), what))
    }

    /// Every step of the learner equals the autograd reference run in float64, within
    /// what float32 rounding allows (`dqn/oracle.rs` derives the bound element by
    /// element): both optimizers, Double DQN on and off, 3-step returns, terminal rows,
    /// importance weights on every other step, clipping active in some steps, a target
    /// sync on the way, the published average. Twenty steps each, every one from the
    /// state the step before left.
    #[test]
    fn numerics_each_step_is_the_float64_reference_within_float32_rounding() {
        for (optimizer, double_dqn, tau) in [(OptimizerKind::Rmsprop, true, 0.0), (OptimizerKind::Adam, true, 0.05), (OptimizerKind::Rmsprop, false, 0.01)] {
            tch::manual_seed(8);
            let cfg = DqnConfig {
                optimizer,
                double_dqn,
                lr: 1e-3,
                max_grad_norm: 0.5,
                target_sync_every: 7,
                n_step: 3,
                publish_average_tau: tau,
                ..Default::default()
            };
            let mut l = Learner::new(&cfg, 9, Device::Cpu).unwrap();
            // Online and target differ from the start, so the target's part shows.
            l.target.set_weights(&DuelingDqn::new(Device::Cpu, 9).weights());
            let weights = Tensor::linspace(0.1, 1.0, 32, (Kind::Float, Device::Cpu));
            let mut margin = 0.0f64;
            for step in 0..20 {
                let b = batch(32, 9, if step % 3 == 0 { 1.0 } else { 0.0 });
                let w = (step % 2 == 1).then_some(&weights);
                margin = margin.max(checked_step(&mut l, &b, w, &format!("{optimizer:?}, double {double_dqn}, step {step}")));
            }
            println!("{optimizer:?}, double {double_dqn}, tau {tau}: largest error / bound {margin:.2e}");
        }
    }

    /// The oracle's bounds are tight enough to matter: a step whose learning rate is off
    /// by a thousandth, or whose bootstrap is discounted gamma^(n-1), is caught (in the
    /// weights, or in the TD errors).
    #[test]
    fn numerics_the_oracle_catches_a_step_slightly_off() {
        let cfg = DqnConfig { n_step: 3, gamma: 0.9, ..Default::default() };
        for (wrong, why) in [(DqnConfig { lr: cfg.lr * 1.001, ..cfg.clone() }, "lr x 1.001"), (DqnConfig { n_step: 2, ..cfg.clone() }, "gamma^(n-1)")] {
            tch::manual_seed(9);
            let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
            let b = batch(32, 5, 0.0);
            let ones = Tensor::ones([32], (Kind::Float, Device::Cpu));
            for _ in 0..3 {
                step(&mut l, &b, None);
            }
            let before = snapshot(&l);
            let case =
                oracle::Case { cfg: &wrong, actions: 5, state: &before, steps: l.step, optimizer_steps: l.optimizer_steps(), batch: &b, weights: Some(&ones) };
            let want = oracle::expect(&case);
            let out = step(&mut l, &b, Some(&ones));
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                want.check("td_abs", &out.td_abs(), why);
                want.check_state(&l.state_tensors(), why)
            }));
            assert!(caught.is_err(), "{why}: the oracle took a wrong step for a right one");
        }
    }

    #[test]
    fn bad_configs_are_errors_naming_the_field() {
        let cases: [(DqnConfig, &str); 8] = [
            (DqnConfig { gamma: 1.5, ..Default::default() }, "gamma"),
            (DqnConfig { batch_size: 0, ..Default::default() }, "batch_size"),
            (DqnConfig { lr: -1.0, ..Default::default() }, "lr"),
            (DqnConfig { n_step: 0, ..Default::default() }, "n_step"),
            (DqnConfig { target_sync_every: 0, ..Default::default() }, "target_sync_every"),
            (DqnConfig { max_grad_norm: f64::NAN, ..Default::default() }, "max_grad_norm"),
            (DqnConfig { publish_average_tau: 1.0, ..Default::default() }, "publish_average_tau"),
            (DqnConfig { publish_average_tau: -0.1, ..Default::default() }, "publish_average_tau"),
        ];
        for (cfg, field) in cases {
            let err = Learner::new(&cfg, 5, Device::Cpu).err().expect("rejected").to_string();
            assert!(err.contains(field), "{err}");
        }
        assert!(DqnConfig::default().validate().is_ok());
    }

    #[test]
    fn config_reads_from_toml_like_json_and_rejects_unknown_fields() {
        let cfg: DqnConfig = serde_json::from_str(r#"{"optimizer": "adam", "n_step": 3}"#).unwrap();
        assert_eq!(cfg.optimizer, OptimizerKind::Adam);
        assert_eq!(cfg.n_step, 3);
        assert_eq!(cfg.gamma, 0.99, "unset fields keep their defaults");
        assert!(serde_json::from_str::<DqnConfig>(r#"{"gama": 0.9}"#).is_err());
    }
}
