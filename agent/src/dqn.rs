//! The Dueling DQN in tch (feature `torch`; only the manager turns it on): the
//! network, and the [`Learner`] that trains it.
//!
//! **Read `src/dqn/reference.rs` first.** It is the same train step in plain autograd,
//! top to bottom in the shape of CleanRL's `dqn.py` (config, model, loss, target
//! sync), with the easy-to-miss lines marked: terminal against time-limit ends, the
//! no-grad target, Double DQN, n-step returns. This file computes the same, fused, and
//! a test (`the_lean_step_computes_what_the_step_before_it_did`) holds the two equal,
//! step by step. In order: [`DqnConfig`] (the documented hyper-parameters), the flat
//! parameter layout ([`LAYOUT`]), [`DuelingDqn`] (the model, with its hand-written
//! backward), [`Learner::train_step`] (TD target, Huber loss, clipping, optimizer,
//! target sync).
//!
//! Fused means: the parameters live in one flat buffer ([`DuelingDqn`]); by name (the
//! PyTorch attribute names of [`crate::model::TENSORS`], the `state_dict` keys of the
//! model file and of checkpoints) they are views of it. The gradients are written by
//! hand ([`DuelingDqn::backward`]), not taken by autograd. The optimizers are
//! [`crate::optim`]'s, over the whole buffer at once.
//!
//! The train step never waits for the device: it reads nothing back to the host (no
//! `f64::try_from`, no `.item()`), so on CUDA the whole step is queued kernels and the
//! host moves on to the next one. Loss and mean Q come back as device scalars that the
//! caller reads only every few hundred steps.

use crate::experience::col;
use crate::model::{self, ModelMeta, TENSORS};
use crate::optim::{Optimizer, OptimizerConfig};
use crate::state::STATE_DIM;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tch::{nn::Module, Device, Kind, Reduction, Tensor};
use thiserror::Error;

/// Which optimizer [`Learner`] runs (defined with the optimizers, in `optim`).
pub use crate::optim::OptimizerKind;

mod group;
#[cfg(test)]
mod oracle;
#[cfg(test)]
mod reference;

pub use group::{Group, GroupOutput, GroupShape};

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
// The flat parameter layout
// ---------------------------------------------------------------------------------

/// One `nn.Linear` of the network: the indices in [`TENSORS`] (PyTorch's `state_dict`
/// order) of its weight, `[out, in]`, and its bias, `[out]`.
#[derive(Debug, Clone, Copy)]
struct Linear {
    weight: usize,
    bias: usize,
}

/// `shared`: state (27) -> 128.
const SHARED: Linear = Linear { weight: 0, bias: 1 };
/// `value_hidden`: 128 -> 512.
const VALUE_HIDDEN: Linear = Linear { weight: 2, bias: 3 };
/// `value`: 512 -> 1.
const VALUE: Linear = Linear { weight: 4, bias: 5 };
/// `advantage_hidden`: 128 -> 512.
const ADVANTAGE_HIDDEN: Linear = Linear { weight: 6, bias: 7 };
/// `advantage`: 512 -> A.
const ADVANTAGE: Linear = Linear { weight: 8, bias: 9 };

/// Every layer in [`TENSORS`] order (each layer's weight, then its bias).
const LAYERS: [Linear; 5] = [SHARED, VALUE_HIDDEN, VALUE, ADVANTAGE_HIDDEN, ADVANTAGE];

/// Storage order of the [`TENSORS`] (by index) in the flat buffer: the value and
/// advantage hidden layers' weights adjacent, then their biases adjacent, so each pair
/// is one `[1024, 128]` weight and one `[1024]` bias.
pub const LAYOUT: [usize; 10] = [
    SHARED.weight,
    SHARED.bias,
    VALUE_HIDDEN.weight,
    ADVANTAGE_HIDDEN.weight,
    VALUE_HIDDEN.bias,
    ADVANTAGE_HIDDEN.bias,
    VALUE.weight,
    VALUE.bias,
    ADVANTAGE.weight,
    ADVANTAGE.bias,
];

/// The operands of the forward and the backward, in storage order. `T` is a view of a
/// buffer laid out as [`LAYOUT`] (the parameters, or their gradients), or, in
/// [`BLOCKS`], the [`TENSORS`] that the view covers.
#[derive(Debug)]
struct Blocks<T = Tensor> {
    /// `shared`: `[128, 27]`, `[128]`.
    w1: T,
    b1: T,
    /// Both streams' hidden layers, value rows first: `[1024, 128]`, `[1024]`.
    w2: T,
    b2: T,
    /// The value head, `[1, 512]`, `[1]`.
    wv: T,
    bv: T,
    /// The advantage head, `[A, 512]`, `[A]`.
    wa: T,
    ba: T,
}

impl<T> Blocks<T> {
    fn map<U>(self, mut f: impl FnMut(T) -> U) -> Blocks<U> {
        let Blocks { w1, b1, w2, b2, wv, bv, wa, ba } = self;
        Blocks { w1: f(w1), b1: f(b1), w2: f(w2), b2: f(b2), wv: f(wv), bv: f(bv), wa: f(wa), ba: f(ba) }
    }
}

/// The [`TENSORS`] each block covers: one tensor, or two stored adjacent in [`LAYOUT`]
/// (the two streams' hidden layers), stacked on dimension 0.
const BLOCKS: Blocks<&[usize]> = Blocks {
    w1: &[SHARED.weight],
    b1: &[SHARED.bias],
    w2: &[VALUE_HIDDEN.weight, ADVANTAGE_HIDDEN.weight],
    b2: &[VALUE_HIDDEN.bias, ADVANTAGE_HIDDEN.bias],
    wv: &[VALUE.weight],
    bv: &[VALUE.bias],
    wa: &[ADVANTAGE.weight],
    ba: &[ADVANTAGE.bias],
};

/// Where each of the [`TENSORS`] sits in a flat buffer laid out as [`LAYOUT`], for a
/// network of a given action count.
#[derive(Debug)]
struct Layout {
    /// Element offset of each tensor of [`TENSORS`] in the buffer.
    offsets: [i64; 10],
    /// The shape of each tensor of [`TENSORS`] ([`ModelMeta::shapes`]).
    shapes: [Vec<i64>; 10],
    /// Elements in all.
    len: i64,
}

impl Layout {
    fn new(actions: usize) -> Layout {
        let shapes: [Vec<i64>; 10] = ModelMeta::new("", actions).shapes().map(|s| s.iter().map(|&d| d as i64).collect());
        let mut offsets = [0i64; 10];
        let mut at = 0i64;
        for i in LAYOUT {
            offsets[i] = at;
            at += shapes[i].iter().product::<i64>();
        }
        Layout { offsets, shapes, len: at }
    }

    /// Tensor `i` of [`TENSORS`] in a buffer laid out as this.
    fn view(&self, flat: &Tensor, i: usize) -> Tensor {
        let n: i64 = self.shapes[i].iter().product();
        flat.narrow(0, self.offsets[i], n).view(self.shapes[i].as_slice())
    }

    /// The [`BLOCKS`] of a buffer laid out as this.
    fn blocks(&self, flat: &Tensor) -> Blocks {
        BLOCKS.map(|covers| {
            let shape = self.block_shape(covers);
            flat.narrow(0, self.offsets[covers[0]], shape.iter().product()).view(shape.as_slice())
        })
    }

    /// The [`BLOCKS`] of k buffers laid out as this, stacked (`[k, len]`): each block
    /// `[k, ...]`, run r's block in row r (a [`Group`]'s operands).
    fn stacked_blocks(&self, flat: &Tensor) -> Blocks {
        let k = flat.size()[0];
        BLOCKS.map(|covers| {
            let shape = self.block_shape(covers);
            let stacked: Vec<i64> = std::iter::once(k).chain(shape.iter().copied()).collect();
            flat.narrow(1, self.offsets[covers[0]], shape.iter().product()).view(stacked.as_slice())
        })
    }

    /// The shape of the block covering `covers` (adjacent tensors stacked on dimension 0).
    fn block_shape(&self, covers: &[usize]) -> Vec<i64> {
        let mut shape = self.shapes[covers[0]].clone();
        shape[0] = covers.iter().map(|&i| self.shapes[i][0]).sum();
        shape
    }
}

// ---------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------

/// The paper's network: 27 -> 128 -> (value 512 -> 1, advantage 512 -> A).
///
/// Every parameter lives in one flat buffer, laid out so that
/// the two streams' hidden layers sit side by side ([`LAYOUT`]): their two 512-wide
/// products are one 1024-wide product, and the optimizer, the gradient clipping and the
/// target copy are each a few ops on one tensor instead of a loop over ten. The
/// parameters by name ([`DuelingDqn::param`], the model file, checkpoints) are views of
/// it, under the PyTorch names of [`crate::model::TENSORS`].
///
/// No autograd: [`DuelingDqn::backward`] writes the gradient of the taken actions' Q
/// values straight into a buffer laid out as `flat`. At batch 32 a train step's
/// arithmetic is about 42 MFLOP, nearly all of it the 1024 x 128 layer (forwards over
/// 96 rows, two backward products over 32); autograd's graph, per-tensor gradients and
/// their gathering into one buffer were about a sixth of the step on the CPU.
#[derive(Debug)]
pub struct DuelingDqn {
    /// Every parameter, end to end in [`LAYOUT`] order.
    flat: Tensor,
    /// The forward's operands, views of `flat` (so an update of `flat` is an update of
    /// them).
    blocks: Blocks,
    actions: usize,
    layout: Layout,
}

/// A forward pass's results that the backward needs: post-ReLU activations and the two
/// heads' outputs, one row per input. One network's (`[N, ...]`) or, in a [`Group`],
/// k networks' stacked (`[k, N, ...]`): rows are the second-to-last dimension and
/// actions the last, so the same code serves both.
struct Activations {
    /// `[N, 128]`
    h1: Tensor,
    /// `[N, 1024]`: the value stream's 512 columns, then the advantage stream's.
    h2: Tensor,
    /// `[N, 1]`
    value: Tensor,
    /// `[N, A]`
    advantage: Tensor,
}

impl Activations {
    /// Rows `start .. start + len` of every activation.
    fn rows(&self, start: i64, len: i64) -> Activations {
        let r = |t: &Tensor| t.narrow(-2, start, len);
        Activations { h1: r(&self.h1), h2: r(&self.h2), value: r(&self.value), advantage: r(&self.advantage) }
    }

    /// Q = V + A - mean(A): the mean keeps V and A identifiable (Wang et al.).
    fn q(&self) -> Tensor {
        &self.value + &self.advantage - self.advantage.mean_dim(-1, true, Kind::Float)
    }

    /// Q(s, a) for one action per row (`actions`: `[N, 1]` int64), `[N]`, computed as
    /// [`Activations::q`] would without the other actions' Q values.
    fn q_of(&self, actions: &Tensor) -> Tensor {
        (&self.value + self.advantage.gather(-1, actions, false) - self.advantage.mean_dim(-1, true, Kind::Float)).squeeze_dim(-1)
    }
}

impl DuelingDqn {
    /// Fresh weights: PyTorch's `nn.Linear` initialisation, uniform in
    /// `±1/sqrt(fan_in)` for weights and biases alike.
    pub fn new(device: Device, actions: usize) -> Self {
        let layout = Layout::new(actions);
        let flat = Tensor::zeros([layout.len], (Kind::Float, device));
        let blocks = layout.blocks(&flat);
        let net = DuelingDqn { flat, blocks, actions, layout };
        for layer in LAYERS {
            // The weight's fan-in, for the bias too (PyTorch's choice).
            let bound = 1.0 / (net.layout.shapes[layer.weight][1] as f64).sqrt();
            for i in [layer.weight, layer.bias] {
                let _ = net.param(i).uniform_(-bound, bound);
            }
        }
        net
    }

    pub fn actions(&self) -> usize {
        self.actions
    }

    /// Keep the weights in `flat` from now on (a buffer laid out as this network's: a
    /// [`Group`]'s row), copying them there first.
    fn move_to(&mut self, mut flat: Tensor) {
        flat.copy_(&self.flat);
        self.blocks = self.layout.blocks(&flat);
        self.flat = flat;
    }

    pub fn device(&self) -> Device {
        self.flat.device()
    }

    /// Tensor `i` of [`TENSORS`]: a view of the flat buffer (writes to it are writes to
    /// the network).
    pub fn param(&self, i: usize) -> Tensor {
        self.view_of(&self.flat, i)
    }

    /// Tensor `i` of [`TENSORS`] in another buffer laid out as this network's (an
    /// optimizer slot).
    fn view_of(&self, flat: &Tensor, i: usize) -> Tensor {
        self.layout.view(flat, i)
    }

    /// The forward, keeping what [`DuelingDqn::backward`] needs.
    fn activations(&self, x: &Tensor) -> Activations {
        let p = &self.blocks;
        let h1 = x.linear(&p.w1, Some(&p.b1)).relu();
        // Both streams' hidden layers in one product: [N, 1024], value half first.
        let h2 = h1.linear(&p.w2, Some(&p.b2)).relu();
        let stream = model::STREAM as i64;
        let value = h2.narrow(1, 0, stream).linear(&p.wv, Some(&p.bv));
        let advantage = h2.narrow(1, stream, stream).linear(&p.wa, Some(&p.ba));
        Activations { h1, h2, value, advantage }
    }

    /// Gradients of `sum_i dq[i] * Q(x_i, actions_i)` with respect to every parameter,
    /// written into `grads` (views of a buffer laid out as the parameters, every element
    /// overwritten). `act` is the forward over the rows of `x`; `actions` `[B, 1]`
    /// int64, `dq` `[B]`. The chain rule by hand, layer by layer from the top.
    fn backward(&self, x: &Tensor, act: &Activations, actions: &Tensor, dq: &Tensor, grads: &Blocks) {
        let p = &self.blocks;
        let rows = x.size()[0];
        let stream = model::STREAM as i64;
        let (h2v, h2a) = (act.h2.narrow(1, 0, stream), act.h2.narrow(1, stream, stream));
        let dq = dq.unsqueeze(1); // [B, 1]
                                  // Q_a = V + A_a - mean_k A_k: dQ_a/dV = 1, dQ_a/dA_k = [k = a] - 1/A.
        let mut d_adv = (&dq * (-1.0 / self.actions as f64)).expand([rows, self.actions as i64], false).contiguous();
        let _ = d_adv.scatter_add_(1, actions, &dq);
        let _ = dq.tr().mm_out(&grads.wv, &h2v);
        let _ = dq.sum_intlist_out(&grads.bv, [0i64].as_slice(), false, Kind::Float);
        let _ = d_adv.tr().mm_out(&grads.wa, &h2a);
        let _ = d_adv.sum_intlist_out(&grads.ba, [0i64].as_slice(), false, Kind::Float);
        // Into both streams' hidden layer: one [B, 1024] gradient, each head's product
        // written into its half.
        let dh2 = Tensor::empty([rows, 2 * stream], (Kind::Float, x.device()));
        let _ = dq.mm_out(&dh2.narrow(1, 0, stream), &p.wv);
        let _ = d_adv.mm_out(&dh2.narrow(1, stream, stream), &p.wa);
        // ReLU passes the gradient where its output is positive.
        let dz2 = act.h2.threshold_backward(&dh2, 0.0);
        let _ = dz2.tr().mm_out(&grads.w2, &act.h1);
        let _ = dz2.sum_intlist_out(&grads.b2, [0i64].as_slice(), false, Kind::Float);
        let dz1 = act.h1.threshold_backward(&dz2.mm(&p.w2), 0.0);
        let _ = dz1.tr().mm_out(&grads.w1, x);
        let _ = dz1.sum_intlist_out(&grads.b1, [0i64].as_slice(), false, Kind::Float);
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
        for (i, w) in weights.iter().enumerate().take(TENSORS.len()) {
            let src = Tensor::from_slice(w).view(self.layout.shapes[i].as_slice()).to_device(self.device());
            self.param(i).copy_(&src);
        }
    }

    /// The model file for these weights.
    pub fn to_model_file(&self, meta: &ModelMeta) -> Result<Vec<u8>, model::ModelError> {
        model::save(meta, &self.weights())
    }
}

impl Module for DuelingDqn {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.activations(x).q()
    }
}

// ---------------------------------------------------------------------------------
// The learner
// ---------------------------------------------------------------------------------

/// What one train step returns: scalars still on the device. Reading them
/// (`f32::try_from`) waits for the step to finish, so do it only now and then.
pub struct TrainOutput {
    /// Mean Huber TD loss of the batch (CleanRL: `losses/td_loss`).
    pub loss: Tensor,
    /// Mean Q(s, a) of the taken actions (CleanRL: `losses/q_values`).
    pub mean_q: Tensor,
    /// Global gradient L2 norm before clipping.
    pub grad_norm: Tensor,
    /// With importance weights (prioritized replay): each transition's |TD error|,
    /// `[batch]`, detached: the rows' new priorities.
    pub td_abs: Option<Tensor>,
}

/// A batch's 57 columns, unpacked (views, no copies).
struct Columns {
    states: Tensor,
    /// `[B, 1]` int64.
    actions: Tensor,
    rewards: Tensor,
    next_states: Tensor,
    terminal: Tensor,
}

impl Columns {
    fn of(batch: &Tensor) -> Columns {
        Self::on_dim(batch, 1)
    }

    /// The columns of k batches stacked, `[k, B, 57]` (each column `[k, B, ...]`).
    fn of_stacked(batch: &Tensor) -> Columns {
        Self::on_dim(batch, 2)
    }

    /// The columns of `batch` whose rows' floats run along dimension `d`.
    fn on_dim(batch: &Tensor, d: i64) -> Columns {
        Columns {
            states: batch.narrow(d, col::STATE as i64, STATE_DIM as i64),
            actions: batch.narrow(d, col::ACTION as i64, 1).to_kind(Kind::Int64),
            rewards: batch.select(d, col::REWARD as i64),
            next_states: batch.narrow(d, col::NEXT_STATE as i64, STATE_DIM as i64),
            terminal: batch.select(d, col::TERMINAL as i64),
        }
    }
}

/// Where a learner keeps its tensors when it trains in a [`Group`]: its rows of the
/// group's buffers, each laid out as the flat parameter buffer.
struct LearnerRows {
    online: Tensor,
    target: Tensor,
    average: Option<Tensor>,
    /// The optimizer's slots, in its order.
    slots: Vec<Tensor>,
    /// Adam's count of updates on the device (`[1]`), `None` for RMSProp.
    device_steps: Option<Tensor>,
    grad: Tensor,
}

/// Online and target networks, optimizer state and the step counter.
pub struct Learner {
    pub online: DuelingDqn,
    pub target: DuelingDqn,
    /// With `publish_average_tau` > 0: the Polyak average of the online weights, which
    /// [`Learner::model_file`] publishes.
    pub average: Option<DuelingDqn>,
    optimizer: Optimizer,
    /// The gradients, laid out as the parameters: each step's backward overwrites them,
    /// and after the step they are the clipped ones it applied.
    grad: Tensor,
    /// Views of `grad`, the backward's outputs.
    grad_blocks: Blocks,
    /// Train steps taken, over the whole run (restored from checkpoints).
    pub step: u64,
    cfg: DqnConfig,
    /// `gamma^n_step`: the discount of the bootstrap term.
    gamma_n: f64,
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
        let optimizer = Optimizer::new(cfg.optimizer_config(), &online.flat);
        let gamma_n = cfg.gamma.powi(cfg.n_step as i32);
        let grad = online.flat.zeros_like();
        let grad_blocks = online.layout.blocks(&grad);
        Ok(Learner { grad, grad_blocks, online, target, average, optimizer, step: 0, cfg: cfg.clone(), gamma_n })
    }

    pub fn config(&self) -> &DqnConfig {
        &self.cfg
    }

    /// Keep every tensor in `rows` from now on (a [`Group`]'s), copying it there first.
    /// Everything this learner does alone (a step, a restore, a checkpoint, the target
    /// sync) then reads and writes those rows.
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
        self.grad_blocks = self.online.layout.blocks(&grad);
        self.grad = grad;
    }

    pub fn device(&self) -> Device {
        self.online.device()
    }

    /// One DQN update on `batch` (`[B, 57]` f32 rows in the wire layout, on the
    /// learner's device). Queues work on the device and returns without waiting.
    pub fn train_step(&mut self, batch: &Tensor) -> TrainOutput {
        self.train_step_weighted(batch, None)
    }

    /// [`Learner::train_step`] with each row's loss scaled by `weights` (`[B]`, the
    /// prioritized replay's importance weights); the output then carries the rows'
    /// |TD errors|. `None` is the plain step.
    pub fn train_step_weighted(&mut self, batch: &Tensor, weights: Option<&Tensor>) -> TrainOutput {
        let out = self.device_step(batch, weights);
        self.finish_step();
        out
    }

    /// [`Learner::train_step_weighted`]'s device work alone: forward, target, loss,
    /// backward, clipping, the optimizer's update, the published average. It only
    /// queues kernels (no read-back, no host decision on a device value), so it can be
    /// captured once as a CUDA graph and replayed; each replay, or each call, is then
    /// counted with [`Learner::finish_step`].
    pub fn device_step(&mut self, batch: &Tensor, weights: Option<&Tensor>) -> TrainOutput {
        let rows = batch.size()[0];
        let Columns { states, actions, rewards, next_states, terminal } = Columns::of(batch);

        // Double DQN's online forward over the next states rides along with the states'
        // in one pass of 2B rows; only the states' half has a backward.
        let (online, next_online) = if self.cfg.double_dqn {
            let both = self.online.activations(&Tensor::cat(&[&states, &next_states], 0));
            (both.rows(0, rows), Some(both.rows(rows, rows)))
        } else {
            (self.online.activations(&states), None)
        };

        // TD target. EASY TO MISS:
        //  - the target is a constant of the loss: no gradient flows into it (the
        //    backward below starts from Q(s, a) alone).
        //  - (1 - terminal): no bootstrap past a real end (a lost stock, the game over).
        //    Time-limit ends are *not* terminal: the worker uploads terminal = 0 for
        //    them, because the state would have continued; bootstrapping is right there.
        //  - gamma^n: with n-step returns the reward column already holds the discounted
        //    sum r_t + gamma r_{t+1} + ... + gamma^{n-1} r_{t+n-1} and next_state is
        //    s_{t+n}, so the bootstrap is discounted n times.
        let next = self.target.activations(&next_states);
        let next_q = match &next_online {
            // Double DQN: the online net chooses, the target net evaluates. The argmax
            // of V + A - mean(A) is the argmax of A.
            Some(online) => next.q_of(&online.advantage.argmax(1, true)),
            None => next.q().amax(1, false),
        };
        let td_target = &rewards + (1.0 - &terminal) * next_q * self.gamma_n;

        let q_taken = online.q_of(&actions);
        let td = &q_taken - &td_target;
        let delta = self.cfg.huber_delta;
        // The loss's slope in Q(s, a): Huber's, clamp(td, -delta, delta), times the row's
        // importance weight (prioritized replay, Schaul et al. Algorithm 1: it undoes the
        // bias of drawing the row more or less often than uniformly), over the mean's B.
        let mut slope = td.clamp(-delta, delta);
        let (loss, td_abs) = match weights {
            None => (q_taken.huber_loss(&td_target, Reduction::Mean, delta), None),
            Some(w) => {
                slope *= w;
                let per_row = q_taken.huber_loss(&td_target, Reduction::None, delta);
                ((per_row * w).mean(Kind::Float), Some(td.abs()))
            }
        };
        let slope = slope * (1.0 / rows as f64);
        self.online.backward(&states, &online, &actions, &slope, &self.grad_blocks);

        // Global L2 norm over all gradients, on the device: no host round trip.
        let grad_norm = self.grad.norm();
        // clip_coef <= 1 always: multiplying by it is a no-op when under the limit, so
        // no branch on the (device-resident) norm is needed. The optimizer applies it.
        let clip_coef = (self.cfg.max_grad_norm > 0.0).then(|| ((&grad_norm + 1e-6).reciprocal() * self.cfg.max_grad_norm).clamp_max(1.0));
        self.optimizer.apply(&mut self.online.flat, &mut self.grad, clip_coef.as_ref());
        if let Some(average) = &mut self.average {
            // Polyak averaging of the iterates: the online weights of two nearby steps
            // can act very differently (one published model survives 9 of 30 matches,
            // the next 21 of 21); their average moves as slowly as the learning does.
            let _ = average.flat.lerp_(&self.online.flat, self.cfg.publish_average_tau);
        }
        TrainOutput { loss, mean_q: q_taken.mean(Kind::Float), grad_norm, td_abs }
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

    /// Each row's |TD error| under the target network alone, `[B]`: `|r + gamma^n (1 -
    /// terminal) max_a Q'(s', a) - Q'(s, a)|`. What an Ape-X actor computes with its
    /// frozen copy of the model as a new row's priority; the target net is the
    /// learner's frozen copy. Changes nothing.
    pub fn frozen_td_abs(&self, batch: &Tensor) -> Tensor {
        let Columns { states, actions, rewards, next_states, terminal } = Columns::of(batch);
        let next_q = self.target.activations(&next_states).q().amax(1, false);
        let td_target = &rewards + (1.0 - &terminal) * next_q * self.gamma_n;
        (self.target.activations(&states).q_of(&actions) - &td_target).abs()
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
        let kind = self.optimizer_kind_name();
        for (slot, flat) in Optimizer::slot_names(self.optimizer.kind()).iter().zip(&self.optimizer.slots) {
            for (i, name) in TENSORS.iter().enumerate() {
                out.push((format!("optim.{kind}.{slot}.{name}"), self.online.view_of(flat, i)));
            }
        }
        out
    }

    fn optimizer_kind_name(&self) -> &'static str {
        match self.optimizer.kind() {
            OptimizerKind::Rmsprop => "rmsprop",
            OptimizerKind::Adam => "adam",
        }
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
        let kind = self.optimizer_kind_name();
        let mut slots = Vec::new();
        for (slot, flat) in Optimizer::slot_names(self.optimizer.kind()).iter().zip(&self.optimizer.slots) {
            for (i, name) in TENSORS.iter().enumerate() {
                let dst = self.online.view_of(flat, i);
                let src = fetch(&format!("optim.{kind}.{slot}.{name}"), &dst);
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
        // Every named parameter has the model file's shape, and together they are the
        // whole flat buffer, each element once.
        let shapes = ModelMeta::new("", 5).shapes();
        let mut total = 0;
        for (i, shape) in shapes.iter().enumerate() {
            let want: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            assert_eq!(net.param(i).size(), want, "{}", TENSORS[i]);
            total += want.iter().product::<i64>();
        }
        assert_eq!(net.flat.size(), vec![total]);
        let marks = net.flat.zeros_like();
        for i in 0..TENSORS.len() {
            let _ = net.view_of(&marks, i).g_add_scalar_(1.0);
        }
        assert_eq!(f32::try_from(marks.min()).unwrap(), 1.0, "no element left out");
        assert_eq!(f32::try_from(marks.max()).unwrap(), 1.0, "no element shared");
    }

    #[test]
    fn the_named_layers_are_the_model_files_tensors_and_each_block_is_stored_whole() {
        let names = ["shared", "value_hidden", "value", "advantage_hidden", "advantage"];
        for (layer, name) in LAYERS.iter().zip(names) {
            assert_eq!((TENSORS[layer.weight], TENSORS[layer.bias]), (format!("{name}.weight").as_str(), format!("{name}.bias").as_str()));
        }
        let mut sorted = LAYOUT;
        sorted.sort();
        assert_eq!(sorted, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "LAYOUT stores every tensor once");
        // A block is one view: the tensors it covers follow each other in LAYOUT, and
        // every tensor is in one block.
        let Blocks { w1, b1, w2, b2, wv, bv, wa, ba } = BLOCKS;
        let mut covered = Vec::new();
        for covers in [w1, b1, w2, b2, wv, bv, wa, ba] {
            let at = LAYOUT.iter().position(|&i| i == covers[0]).unwrap();
            assert_eq!(&LAYOUT[at..at + covers.len()], covers);
            covered.extend_from_slice(covers);
        }
        covered.sort();
        assert_eq!(covered, sorted);
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
            let first = scalar(&l.train_step(&b).loss);
            let mut last = first;
            for _ in 0..200 {
                last = scalar(&l.train_step(&b).loss);
            }
            assert!(last < first * 0.2, "{optimizer:?}: loss {first} -> {last}");
            assert_eq!(l.step, 201);
        }
    }

    #[test]
    fn terminal_rows_do_not_bootstrap() {
        tch::manual_seed(2);
        let mut l = Learner::new(&DqnConfig::default(), 5, Device::Cpu).unwrap();
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
        let got = scalar(&l.train_step(&b).loss) as f64;
        assert!((got - want).abs() < 1e-5, "loss {got}, expected {want} (no bootstrap)");
    }

    /// A learner with 3-step returns at gamma 0.9 and 5 actions whose target net differs
    /// from its online net, so that which net values what matters.
    fn learner_with_distinct_nets(seed: i64) -> Learner {
        tch::manual_seed(seed);
        let cfg = DqnConfig { n_step: 3, gamma: 0.9, ..Default::default() };
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
        let got = scalar(&l.train_step(&b).loss) as f64;
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
        let out = l.train_step(&batch(32, 5, 0.0));
        let before = scalar(&out.grad_norm);
        assert!(before > 1e-2, "the test needs a gradient larger than the limit, got {before}");
        // The gradients left on the parameters are the clipped ones.
        let after = scalar(&l.grad.norm());
        assert!((after - 1e-3).abs() < 1e-5, "norm after clipping {after}");
    }

    #[test]
    fn target_is_synced_every_n_steps_and_only_then() {
        tch::manual_seed(5);
        let cfg = DqnConfig { target_sync_every: 3, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        assert_eq!(l.online.weights(), l.target.weights(), "target starts as a copy");
        let b = batch(16, 5, 0.0);
        l.train_step(&b);
        l.train_step(&b);
        assert_ne!(l.online.weights(), l.target.weights());
        l.train_step(&b);
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
            let p = plain.train_step(&b);
            let w = weighted.train_step_weighted(&b, Some(&ones));
            assert!(p.td_abs.is_none() && w.td_abs.is_some());
            assert_eq!(f64::try_from(&p.loss).unwrap(), f64::try_from(&w.loss).unwrap());
        }
        assert!(plain.online.flat.equal(&weighted.online.flat), "the same weights after three steps");
        // One row at weight 2, the rest 0: the loss is that row's Huber loss of its
        // reported |TD error|, times 2, over the batch.
        let mut one = learner();
        let w = Tensor::zeros([32], (Kind::Float, Device::Cpu));
        let _ = w.narrow(0, 5, 1).fill_(2.0);
        let out = one.train_step_weighted(&b, Some(&w));
        let td = Vec::<f32>::try_from(out.td_abs.as_ref().unwrap()).unwrap();
        assert_eq!(td.len(), 32);
        let huber = |x: f64| if x < 1.0 { 0.5 * x * x } else { x - 0.5 };
        let want = 2.0 * huber(td[5] as f64) / 32.0;
        let got = f64::try_from(&out.loss).unwrap();
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
            a.train_step(&b);
        }
        let saved: HashMap<String, Tensor> = a.state_tensors().into_iter().map(|(k, v)| (k, v.copy())).collect();
        let mut c = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        assert!(c.load_state(&saved, a.step, a.optimizer_steps()).unwrap(), "optimizer state restored");
        assert_eq!(c.step, 5);
        let (la, lc) = (scalar(&a.train_step(&b).loss), scalar(&c.train_step(&b).loss));
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
            l.train_step(&b);
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
        l.train_step(&b);
        r.train_step(&b);
        assert_eq!(r.average.as_ref().unwrap().weights(), l.average.as_ref().unwrap().weights());

        // Turned on over a checkpoint without an average: it starts at the online weights.
        let mut plain = Learner::new(&DqnConfig { lr: 1e-3, ..Default::default() }, 5, Device::Cpu).unwrap();
        plain.train_step(&b);
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
    fn snapshot(l: &Learner) -> HashMap<String, Tensor> {
        l.state_tensors().into_iter().map(|(k, v)| (k, v.copy())).collect()
    }

    /// One train step of `l` checked against the oracle: every output and every tensor
    /// of the learner after it, the clipped gradient too. Returns the margin.
    fn checked_step(l: &mut Learner, b: &Tensor, w: Option<&Tensor>, what: &str) -> f64 {
        let cfg = l.config().clone();
        let before = snapshot(l);
        let case =
            oracle::Case { cfg: &cfg, actions: l.online.actions(), state: &before, steps: l.step, optimizer_steps: l.optimizer_steps(), batch: b, weights: w };
        let want = oracle::expect(&case);
        let out = l.train_step_weighted(b, w);
        let mut margin =
            ["loss", "mean_q", "grad_norm"].iter().zip([&out.loss, &out.mean_q, &out.grad_norm]).map(|(n, t)| want.check(n, t, what)).fold(0.0, f64::max);
        if let Some(td) = &out.td_abs {
            margin = margin.max(want.check("td_abs", td, what));
        }
        for (i, name) in TENSORS.iter().enumerate() {
            margin = margin.max(want.check(&format!("grad.{name}"), &l.online.view_of(&l.grad, i), what));
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
                l.train_step(&b);
            }
            let before = snapshot(&l);
            let case =
                oracle::Case { cfg: &wrong, actions: 5, state: &before, steps: l.step, optimizer_steps: l.optimizer_steps(), batch: &b, weights: Some(&ones) };
            let want = oracle::expect(&case);
            let out = l.train_step_weighted(&b, Some(&ones));
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                want.check("td_abs", out.td_abs.as_ref().unwrap(), why);
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
