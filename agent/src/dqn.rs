//! The Dueling DQN in tch (feature `torch`; only the manager turns it on): the
//! network, and the [`Learner`] that trains it, readable top to bottom in CleanRL's
//! shape: [`DqnConfig`] (documented hyper-parameters), [`DuelingDqn`] (the model),
//! [`Learner::train_step`] (TD target, Huber loss, clipping, optimizer, target sync).
//!
//! Var-store paths are the PyTorch attribute names of [`crate::model::TENSORS`], so
//! `vs.variables()` keys are exactly the `state_dict` keys of the model file.
//!
//! The train step never waits for the device: it reads nothing back to the host (no
//! `f64::try_from`, no `.item()`), so on CUDA the whole step is queued kernels and the
//! host moves on to the next one. Loss and mean Q come back as device scalars that the
//! caller reads only every few hundred steps. The optimizers (RMSProp, Adam) are
//! written here in tensor ops rather than taken from `tch::nn::Optimizer`, because
//! tch's optimizer cannot export its state: ours is plain tensors, so a checkpoint
//! holds it and a restarted manager continues with the same moment estimates.

use crate::experience::col;
use crate::model::{self, ModelMeta, TENSORS};
use crate::state::STATE_DIM;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tch::{nn, nn::Module, Device, Kind, Reduction, Tensor};
use thiserror::Error;

/// The paper's network: 27 -> 128 -> (value 512 -> 1, advantage 512 -> A).
#[derive(Debug)]
pub struct DuelingDqn {
    pub vs: nn::VarStore,
    shared: nn::Linear,
    value_hidden: nn::Linear,
    value: nn::Linear,
    advantage_hidden: nn::Linear,
    advantage: nn::Linear,
    actions: usize,
}

impl DuelingDqn {
    pub fn new(device: Device, actions: usize) -> Self {
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let lin = |name: &str, i, o| nn::linear(&root / name, i, o, Default::default());
        let shared = lin("shared", STATE_DIM as i64, model::SHARED as i64);
        let value_hidden = lin("value_hidden", model::SHARED as i64, model::STREAM as i64);
        let value = lin("value", model::STREAM as i64, 1);
        let advantage_hidden = lin("advantage_hidden", model::SHARED as i64, model::STREAM as i64);
        let advantage = lin("advantage", model::STREAM as i64, actions as i64);
        DuelingDqn { vs, shared, value_hidden, value, advantage_hidden, advantage, actions }
    }

    pub fn actions(&self) -> usize {
        self.actions
    }

    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Weights in [`TENSORS`] order as host vectors (for the model file).
    pub fn weights(&self) -> Vec<Vec<f32>> {
        let vars = self.vs.variables();
        TENSORS
            .iter()
            .map(|name| {
                let t = vars[*name].to_device(Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]);
                Vec::<f32>::try_from(&t).expect("f32 weights")
            })
            .collect()
    }

    /// Overwrite the weights (in [`TENSORS`] order, shapes as [`ModelMeta::shapes`]).
    pub fn set_weights(&mut self, weights: &[Vec<f32>]) {
        let mut vars = self.vs.variables();
        let shapes = ModelMeta::new("", self.actions).shapes();
        tch::no_grad(|| {
            for ((name, w), shape) in TENSORS.iter().zip(weights).zip(shapes.iter()) {
                let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                let src = Tensor::from_slice(w).view(shape.as_slice()).to_device(self.device());
                vars.get_mut(*name).expect("var-store holds every tensor").copy_(&src);
            }
        });
    }

    /// The model file for these weights.
    pub fn to_model_file(&self, meta: &ModelMeta) -> Result<Vec<u8>, model::ModelError> {
        model::save(meta, &self.weights())
    }
}

impl Module for DuelingDqn {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = x.apply(&self.shared).relu();
        let v = h.apply(&self.value_hidden).relu().apply(&self.value);
        let a = h.apply(&self.advantage_hidden).relu().apply(&self.advantage);
        // Q = V + A - mean(A): the mean keeps V and A identifiable (Wang et al.).
        v + &a - a.mean_dim(1, true, Kind::Float)
    }
}

// ---------------------------------------------------------------------------------
// Hyper-parameters
// ---------------------------------------------------------------------------------

/// Which optimizer [`Learner`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// The paper's (and Nature DQN's) choice; PyTorch's `RMSprop` semantics.
    Rmsprop,
    /// `torch.optim.Adam` semantics (what Rainbow and most modern DQNs use).
    Adam,
}

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
}

impl Default for DqnConfig {
    fn default() -> Self {
        DqnConfig {
            gamma: 0.99,
            batch_size: 32,
            lr: 2.5e-4,
            optimizer: OptimizerKind::Rmsprop,
            rmsprop_alpha: 0.99,
            adam_betas: (0.9, 0.999),
            eps: 1e-8,
            double_dqn: true,
            n_step: 1,
            huber_delta: 1.0,
            max_grad_norm: 10.0,
            target_sync_every: 10_000,
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
        Ok(())
    }
}

// ---------------------------------------------------------------------------------
// Optimizers: state is plain tensors, one per parameter per slot, in TENSORS order.
// ---------------------------------------------------------------------------------

struct Optimizer {
    kind: OptimizerKind,
    /// `slots[k][i]`: slot k of parameter `TENSORS[i]` (RMSProp: square_avg; Adam:
    /// exp_avg, exp_avg_sq: PyTorch's names).
    slots: Vec<Vec<Tensor>>,
    /// Updates applied (Adam's bias correction needs it; a host counter, no sync).
    steps: u64,
}

impl Optimizer {
    fn slot_names(kind: OptimizerKind) -> &'static [&'static str] {
        match kind {
            OptimizerKind::Rmsprop => &["square_avg"],
            OptimizerKind::Adam => &["exp_avg", "exp_avg_sq"],
        }
    }

    fn new(kind: OptimizerKind, params: &[Tensor]) -> Self {
        let slots = Self::slot_names(kind).iter().map(|_| params.iter().map(Tensor::zeros_like).collect()).collect();
        Optimizer { kind, slots, steps: 0 }
    }

    /// One update of every parameter from its `.grad()`. Call under `no_grad`.
    fn step(&mut self, cfg: &DqnConfig, params: &[Tensor]) {
        self.steps += 1;
        match self.kind {
            OptimizerKind::Rmsprop => {
                // square_avg = alpha * square_avg + (1 - alpha) * g^2
                // p -= lr * g / (sqrt(square_avg) + eps)
                let a = cfg.rmsprop_alpha;
                for (p, sq) in params.iter().zip(self.slots[0].iter_mut()) {
                    let g = p.grad();
                    let _ = sq.g_mul_scalar_(a).g_add_(&(g.square() * (1.0 - a)));
                    let update = g / (sq.sqrt() + cfg.eps) * cfg.lr;
                    let _ = p.shallow_clone().g_sub_(&update);
                }
            }
            OptimizerKind::Adam => {
                let (b1, b2) = cfg.adam_betas;
                let t = self.steps as i32;
                let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
                let (m, v) = self.slots.split_at_mut(1);
                for ((p, m), v) in params.iter().zip(m[0].iter_mut()).zip(v[0].iter_mut()) {
                    let g = p.grad();
                    let _ = m.g_mul_scalar_(b1).g_add_(&(&g * (1.0 - b1)));
                    let _ = v.g_mul_scalar_(b2).g_add_(&(g.square() * (1.0 - b2)));
                    let denom = v.sqrt() / bc2.sqrt() + cfg.eps;
                    let update = &*m / denom * (cfg.lr / bc1);
                    let _ = p.shallow_clone().g_sub_(&update);
                }
            }
        }
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
}

/// Online and target networks, optimizer state and the step counter.
pub struct Learner {
    pub online: DuelingDqn,
    pub target: DuelingDqn,
    /// The online net's parameters in [`TENSORS`] order (handles sharing storage with
    /// the var-store, so in-place updates are the model's updates).
    params: Vec<Tensor>,
    optimizer: Optimizer,
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
        target.vs.copy(&online.vs).map_err(|e| DqnError::State { name: "target".into(), problem: e.to_string() })?;
        // The target is never trained: no autograd bookkeeping for it.
        target.vs.freeze();
        let vars = online.vs.variables();
        let params: Vec<Tensor> = TENSORS.iter().map(|n| vars[*n].shallow_clone()).collect();
        let optimizer = Optimizer::new(cfg.optimizer, &params);
        let gamma_n = cfg.gamma.powi(cfg.n_step as i32);
        Ok(Learner { online, target, params, optimizer, step: 0, cfg: cfg.clone(), gamma_n })
    }

    pub fn config(&self) -> &DqnConfig {
        &self.cfg
    }

    pub fn device(&self) -> Device {
        self.online.device()
    }

    /// One DQN update on `batch` (`[B, 57]` f32 rows in the wire layout, on the
    /// learner's device). Queues work on the device and returns without waiting.
    pub fn train_step(&mut self, batch: &Tensor) -> TrainOutput {
        // Unpack the 57 columns (views, no copies).
        let states = batch.narrow(1, col::STATE as i64, STATE_DIM as i64);
        let actions = batch.narrow(1, col::ACTION as i64, 1).to_kind(Kind::Int64); // [B, 1]
        let rewards = batch.select(1, col::REWARD as i64);
        let next_states = batch.narrow(1, col::NEXT_STATE as i64, STATE_DIM as i64);
        let terminal = batch.select(1, col::TERMINAL as i64);

        // TD target. EASY TO MISS:
        //  - no_grad: the target is a constant of the loss; gradients through it would
        //    chase a moving target (and cost a second backward).
        //  - (1 - terminal): no bootstrap past a real end (a lost stock, the game over).
        //    Time-limit ends are *not* terminal: the worker uploads terminal = 0 for
        //    them, because the state would have continued; bootstrapping is right there.
        //  - gamma^n: with n-step returns the reward column already holds the discounted
        //    sum r_t + gamma r_{t+1} + ... + gamma^{n-1} r_{t+n-1} and next_state is
        //    s_{t+n}, so the bootstrap is discounted n times.
        let td_target = tch::no_grad(|| {
            let next_q_target = self.target.forward(&next_states);
            let next_q = if self.cfg.double_dqn {
                // Double DQN: the online net chooses, the target net evaluates.
                let best = self.online.forward(&next_states).argmax(1, true);
                next_q_target.gather(1, &best, false).squeeze_dim(1)
            } else {
                next_q_target.max_dim(1, false).0
            };
            &rewards + (1.0 - &terminal) * next_q * self.gamma_n
        });

        let q_taken = self.online.forward(&states).gather(1, &actions, false).squeeze_dim(1);
        let loss = q_taken.huber_loss(&td_target, Reduction::Mean, self.cfg.huber_delta);

        for p in self.params.iter_mut() {
            p.zero_grad();
        }
        loss.backward();

        let grad_norm = tch::no_grad(|| {
            // Global L2 norm over all gradients, on the device: no host round trip.
            let norms: Vec<Tensor> = self.params.iter().map(|p| p.grad().norm()).collect();
            let total = Tensor::stack(&norms, 0).norm();
            if self.cfg.max_grad_norm > 0.0 {
                // clip_coef <= 1 always: multiplying by it is a no-op when under the
                // limit, so no branch on the (device-resident) norm is needed.
                let clip_coef = ((&total + 1e-6).reciprocal() * self.cfg.max_grad_norm).clamp_max(1.0);
                for p in &self.params {
                    let _ = p.grad().g_mul_(&clip_coef);
                }
            }
            self.optimizer.step(&self.cfg, &self.params);
            total
        });

        self.step += 1;
        if self.step.is_multiple_of(self.cfg.target_sync_every) {
            self.sync_target();
        }
        TrainOutput { loss: loss.detach(), mean_q: q_taken.detach().mean(Kind::Float), grad_norm }
    }

    /// Copy the online weights into the target net.
    pub fn sync_target(&mut self) {
        self.target.vs.copy(&self.online.vs).expect("online and target hold the same variable names");
    }

    /// The model file of the online net.
    pub fn model_file(&self, meta: &ModelMeta) -> Result<Vec<u8>, model::ModelError> {
        self.online.to_model_file(meta)
    }

    /// Optimizer updates applied since its state was created or restored.
    pub fn optimizer_steps(&self) -> u64 {
        self.optimizer.steps
    }

    /// Every tensor a checkpoint needs, named `online.<param>`, `target.<param>` and
    /// `optim.<kind>.<slot>.<param>` (e.g. `optim.rmsprop.square_avg.shared.weight`).
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (prefix, net) in [("online", &self.online), ("target", &self.target)] {
            let vars = net.vs.variables();
            for name in TENSORS {
                out.push((format!("{prefix}.{name}"), vars[name].detach()));
            }
        }
        let kind = self.optimizer_kind_name();
        for (slot, tensors) in Optimizer::slot_names(self.optimizer.kind).iter().zip(&self.optimizer.slots) {
            for (name, t) in TENSORS.iter().zip(tensors) {
                out.push((format!("optim.{kind}.{slot}.{name}"), t.shallow_clone()));
            }
        }
        out
    }

    fn optimizer_kind_name(&self) -> &'static str {
        match self.optimizer.kind {
            OptimizerKind::Rmsprop => "rmsprop",
            OptimizerKind::Adam => "adam",
        }
    }

    /// Restore from [`Learner::state_tensors`] output (tensors on any device) and the
    /// counters saved beside it. Weights must all be there with the right shapes (a
    /// different action count is an error). The optimizer state is restored when the
    /// checkpoint has it for the configured optimizer; otherwise it starts fresh and
    /// this returns `Ok(false)` (so switching RMSProp to Adam between runs works).
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
            let vars = net.vs.variables();
            for name in TENSORS {
                weights.push((vars[name].shallow_clone(), fetch(&format!("{prefix}.{name}"), &vars[name])?));
            }
        }
        let kind = self.optimizer_kind_name();
        let mut slots = Vec::new();
        for (slot, tensors) in Optimizer::slot_names(self.optimizer.kind).iter().zip(&self.optimizer.slots) {
            for (name, t) in TENSORS.iter().zip(tensors) {
                slots.push((t.shallow_clone(), fetch(&format!("optim.{kind}.{slot}.{name}"), t)));
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
        self.optimizer.steps = if optimizer_ok { optimizer_steps } else { 0 };
        Ok(optimizer_ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{QNet, Scratch};
    use crate::ActionSet;

    #[test]
    fn tch_forward_runs_on_the_cpu_and_has_the_dueling_shape() {
        let net = DuelingDqn::new(Device::Cpu, 5);
        let x = Tensor::rand([8, STATE_DIM as i64], (Kind::Float, Device::Cpu));
        let q = net.forward(&x);
        assert_eq!(q.size(), vec![8, 5]);
        let names: Vec<String> = {
            let mut v: Vec<_> = net.vs.variables().into_keys().collect();
            v.sort();
            v
        };
        let mut want: Vec<String> = TENSORS.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(names, want, "var-store names are the state_dict names");
    }

    #[test]
    fn pure_rust_inference_equals_tch_for_every_action_set() {
        tch::manual_seed(7);
        for set in ActionSet::ALL {
            let net = DuelingDqn::new(Device::Cpu, set.len());
            let meta = ModelMeta::new(set.name(), set.len());
            let rust = QNet::load(&net.to_model_file(&meta).unwrap()).unwrap();
            // One state (a worker's single environment) and a batch: both kernels.
            for n in [1, 64] {
                let x = Tensor::rand([n, STATE_DIM as i64], (Kind::Float, Device::Cpu)) * 2.0 - 0.5;
                let want = Vec::<f32>::try_from(&net.forward(&x).view([-1])).unwrap();
                let xs = Vec::<f32>::try_from(&x.view([-1])).unwrap();
                let mut got = vec![0.0; n as usize * set.len()];
                rust.forward(&xs, n as usize, &mut got, &mut Scratch::default());
                let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                assert!(worst < 1e-5, "{set}, batch {n}: largest difference {worst}");
            }
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

    #[test]
    fn n_step_bootstrap_uses_gamma_to_the_n_and_double_dqn_lets_online_choose() {
        tch::manual_seed(3);
        let cfg = DqnConfig { n_step: 3, gamma: 0.9, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        // Make the nets differ so that "online chooses, target values" matters.
        l.target.set_weights(&DuelingDqn::new(Device::Cpu, 5).weights());
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
    fn gradients_are_clipped_to_the_global_norm() {
        tch::manual_seed(4);
        let cfg = DqnConfig { max_grad_norm: 1e-3, ..Default::default() };
        let mut l = Learner::new(&cfg, 5, Device::Cpu).unwrap();
        let out = l.train_step(&batch(32, 5, 0.0));
        let before = scalar(&out.grad_norm);
        assert!(before > 1e-2, "the test needs a gradient larger than the limit, got {before}");
        // The gradients left on the parameters are the clipped ones.
        let after: f32 = l.params.iter().map(|p| scalar(&p.grad().square().sum(Kind::Float))).sum::<f32>().sqrt();
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
    fn our_optimizers_match_libtorchs() {
        use tch::nn::OptimizerConfig;
        for kind in [OptimizerKind::Rmsprop, OptimizerKind::Adam] {
            let cfg = DqnConfig { optimizer: kind, lr: 0.01, ..Default::default() };
            let init = Tensor::from_slice(&[1.0f32, -2.0, 0.5, 3.0]);
            let make = || {
                let vs = nn::VarStore::new(Device::Cpu);
                let p = vs.root().var_copy("p", &init);
                (vs, p)
            };
            let loss = |p: &Tensor| (p * p * Tensor::from_slice(&[1.0f32, 0.5, 4.0, 0.1])).sum(Kind::Float);
            let (vs_ref, p_ref) = make();
            let mut reference = match kind {
                OptimizerKind::Rmsprop => nn::RmsProp::default().build(&vs_ref, 0.01).unwrap(),
                OptimizerKind::Adam => nn::Adam::default().build(&vs_ref, 0.01).unwrap(),
            };
            let (_vs, mut p) = make();
            let mut ours = Optimizer::new(kind, std::slice::from_ref(&p));
            for _ in 0..10 {
                reference.backward_step(&loss(&p_ref));
                p.zero_grad();
                loss(&p).backward();
                tch::no_grad(|| ours.step(&cfg, std::slice::from_ref(&p)));
            }
            let (a, b) = (Vec::<f32>::try_from(&p).unwrap(), Vec::<f32>::try_from(&p_ref).unwrap());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-5, "{kind:?}: ours {a:?}, libtorch {b:?}");
            }
            assert_ne!(a, vec![1.0, -2.0, 0.5, 3.0], "the parameters moved");
        }
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

    fn saved_online(saved: &HashMap<String, Tensor>) -> Vec<Vec<f32>> {
        TENSORS.iter().map(|n| Vec::<f32>::try_from(&saved[&format!("online.{n}")].view([-1])).unwrap()).collect()
    }

    #[test]
    fn bad_configs_are_errors_naming_the_field() {
        let cases: [(DqnConfig, &str); 6] = [
            (DqnConfig { gamma: 1.5, ..Default::default() }, "gamma"),
            (DqnConfig { batch_size: 0, ..Default::default() }, "batch_size"),
            (DqnConfig { lr: -1.0, ..Default::default() }, "lr"),
            (DqnConfig { n_step: 0, ..Default::default() }, "n_step"),
            (DqnConfig { target_sync_every: 0, ..Default::default() }, "target_sync_every"),
            (DqnConfig { max_grad_norm: f64::NAN, ..Default::default() }, "max_grad_norm"),
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
