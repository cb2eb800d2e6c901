//! The DQN train step in plain autograd: **read this first.** (Tests only.)
//!
//! `dqn.rs` and `dqn/group.rs` compute the same thing fused (the runs' parameters in
//! padded rows, the two streams' hidden layers and heads as one product each, the
//! gradients written by hand, the optimizer in a few ops or one pass over host memory),
//! which is fast and hard to read. This file is the definition: CleanRL's `dqn.py`
//! (`cleanrl/dqn.py` in vwxyzjn/cleanrl) in Rust, top to bottom: config, model, one
//! train step (TD target, loss, gradients, clipping, optimizer), target sync. The
//! oracle (`dqn/oracle.rs`) runs it in float64 from a learner's state, and the tests
//! `numerics_each_step_is_the_float64_reference_within_float32_rounding` (`dqn.rs`) and
//! `numerics_a_grouped_step_is_each_runs_float64_reference` (`dqn/group.rs`) hold every
//! step to it within float32 rounding: both optimizers, Double DQN on and off, 3-step
//! returns, terminal rows, importance weights, active clipping and a target sync.
//!
//! The lines that are easy to get wrong are marked `EASY TO MISS`:
//! - terminal against time-limit ends: only a real end stops the bootstrap;
//! - the TD target is computed without gradients;
//! - Double DQN: the online net chooses the next action, the target net values it;
//! - n-step returns: the bootstrap is discounted `gamma^n`, not `gamma`.
//!
//! What differs from CleanRL's `dqn.py`: a Dueling network, the Huber loss (Nature
//! DQN's error clipping) instead of the squared error, global gradient-norm clipping,
//! RMSProp as the default optimizer, n-step returns, Double DQN and importance weights
//! (prioritized replay). The replay buffer, exploration and the environment loop are
//! elsewhere (the manager's replay, the workers).

use super::{DqnConfig, OptimizerKind};
use crate::experience::col;
use crate::model::TENSORS;
use crate::optim::Optimizer;
use crate::state::STATE_DIM;
use std::collections::HashMap;
use tch::{Kind, Reduction, Tensor};

// ---------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------
//
// The hyper-parameters are `DqnConfig`'s (`dqn.rs`, the `[dqn]` section of
// `configs/manager.toml`), each documented there. A train step uses `gamma`, `n_step`,
// `double_dqn`, `huber_delta`, `max_grad_norm`, `optimizer`, `lr`, `rmsprop_alpha`,
// `adam_betas`, `eps` and `target_sync_every`.

// ---------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------

/// The Dueling Q-network (`model.rs` draws it) over its ten parameters, `params[i]`
/// being `TENSORS[i]` (PyTorch's `state_dict` order):
///
/// ```text
/// state (27) ─ shared 128, ReLU ─┬─ value_hidden 512, ReLU ─ value 1 ──────────┐
///                                └─ advantage_hidden 512, ReLU ─ advantage A ─ Q = V + A - mean(A)
/// ```
fn q_network(params: &[Tensor], x: &Tensor) -> Tensor {
    // Layer `l` of the five: TENSORS[2l] is its weight, TENSORS[2l + 1] its bias.
    let linear = |x: &Tensor, l: usize| x.linear(&params[2 * l], Some(&params[2 * l + 1]));
    let (shared, value_hidden, value, advantage_hidden, advantage) = (0, 1, 2, 3, 4);
    let h = linear(x, shared).relu();
    let value = linear(&linear(&h, value_hidden).relu(), value); // [N, 1]
    let advantage = linear(&linear(&h, advantage_hidden).relu(), advantage); // [N, A]

    // Dueling (Wang et al. 2016): subtracting the mean keeps V and A identifiable.
    value + &advantage - advantage.mean_dim(1, true, advantage.kind())
}

/// The learner: online and target networks, the optimizer's state, the step counters.
pub(super) struct Reference {
    /// The online network's parameters in [`TENSORS`] order: autograd leaves.
    online: Vec<Tensor>,
    /// The target network's: plain tensors, never trained, only copied into.
    target: Vec<Tensor>,
    /// The published average of the online weights (`publish_average_tau` > 0).
    average: Option<Vec<Tensor>>,
    /// The optimizer's state, `slots[k][i]` for parameter `i` (RMSProp: `square_avg`;
    /// Adam: `exp_avg`, `exp_avg_sq`: PyTorch's names).
    slots: Vec<Vec<Tensor>>,
    /// Train steps taken (the target sync counts them).
    steps: u64,
    /// Optimizer updates applied (Adam's bias correction counts them).
    optimizer_steps: u64,
    cfg: DqnConfig,
}

/// What one reference step gives: the loss and its by-products, the clipped gradients it
/// applied, and the learner's tensors after it (each in [`TENSORS`] order).
pub(super) struct RefOut {
    /// Mean (weighted) Huber loss, of the weights before the update.
    pub loss: Tensor,
    /// Mean Q(s, a) of the taken actions.
    pub mean_q: Tensor,
    /// The global gradient norm before clipping.
    pub grad_norm: Tensor,
    /// Each row's |TD error|, `[B]`.
    pub td_abs: Tensor,
    pub grads: Vec<Tensor>,
    pub online: Vec<Tensor>,
    pub target: Vec<Tensor>,
    pub slots: Vec<Vec<Tensor>>,
    pub average: Option<Vec<Tensor>>,
}

impl Reference {
    // -----------------------------------------------------------------------------
    // One train step
    // -----------------------------------------------------------------------------

    /// One DQN update on `batch` (`[B, 57]` rows in the wire layout, `experience::col`),
    /// each row's loss scaled by `weights` (`[B]`, prioritized replay's importance
    /// weights) if given.
    pub(super) fn step(&mut self, batch: &Tensor, weights: Option<&Tensor>) -> RefOut {
        let cfg = self.cfg.clone();
        let kind = batch.kind();
        let states = batch.narrow(1, col::STATE as i64, STATE_DIM as i64);
        let actions = batch.narrow(1, col::ACTION as i64, 1).to_kind(Kind::Int64); // [B, 1]

        // With n-step returns (`n_step` > 1) the worker has already summed the rewards:
        // r_t + gamma r_{t+1} + ... + gamma^{n-1} r_{t+n-1}, and next_state is s_{t+n}.
        let rewards = batch.select(1, col::REWARD as i64);
        let next_states = batch.narrow(1, col::NEXT_STATE as i64, STATE_DIM as i64);
        // EASY TO MISS: 1 only where the episode really ended (a lost stock, the game
        // over). An episode cut by the time limit uploads terminal = 0: its state would
        // have gone on, so bootstrapping from it is right.
        let terminal = batch.select(1, col::TERMINAL as i64);

        // 1. The TD target. EASY TO MISS: under no_grad, a constant of the loss: no
        //    gradient flows into the target network or through the next states.
        let td_target = tch::no_grad(|| {
            let next_q_target = q_network(&self.target, &next_states);
            let next_q = if cfg.double_dqn {
                // EASY TO MISS: Double DQN (van Hasselt et al. 2016): the online net
                // chooses the next action, the target net values it.
                let best = q_network(&self.online, &next_states).argmax(1, true);
                next_q_target.gather(1, &best, false).squeeze_dim(1)
            } else {
                next_q_target.max_dim(1, false).0
            };
            // EASY TO MISS: (1 - terminal) stops the bootstrap at a real end, and the
            // bootstrap is discounted gamma^n (n-step returns), not gamma.
            &rewards + (1.0 - &terminal) * next_q * cfg.gamma.powi(cfg.n_step as i32)
        });

        // 2. The loss: Huber (Nature DQN's error clipping) between Q(s, a) of the taken
        //    actions and the target, each row times its importance weight.
        let q_taken = q_network(&self.online, &states).gather(1, &actions, false).squeeze_dim(1);
        let loss = match weights {
            None => q_taken.huber_loss(&td_target, Reduction::Mean, cfg.huber_delta),
            Some(w) => (q_taken.huber_loss(&td_target, Reduction::None, cfg.huber_delta) * w).mean(kind),
        };

        // 3. Gradients (optimizer.zero_grad(); loss.backward()).
        for p in self.online.iter_mut() {
            p.zero_grad();
        }
        loss.backward();
        self.steps += 1;
        self.optimizer_steps += 1;

        let grad_norm = tch::no_grad(|| {
            // 4. Clip the gradients to one global L2 norm over all of them
            //    (torch.nn.utils.clip_grad_norm_).
            let norms: Vec<Tensor> = self.online.iter().map(|p| p.grad().norm()).collect();
            let total = Tensor::stack(&norms, 0).norm();
            if cfg.max_grad_norm > 0.0 {
                let clip = ((&total + 1e-6).reciprocal() * cfg.max_grad_norm).clamp_max(1.0);
                for p in &self.online {
                    let _ = p.grad().g_mul_(&clip);
                }
            }
            // 5. The optimizer (optimizer.step()).
            self.optimizer_step();
            // 6. The published average: a Polyak average of the online weights.
            if let Some(average) = &mut self.average {
                for (a, p) in average.iter_mut().zip(&self.online) {
                    let _ = a.lerp_(p, cfg.publish_average_tau);
                }
            }
            // 7. Target sync: a copy of the online weights every `target_sync_every` steps.
            if self.steps.is_multiple_of(cfg.target_sync_every) {
                for (t, p) in self.target.iter_mut().zip(&self.online) {
                    t.copy_(p);
                }
            }
            total
        });
        let copies = |ts: &[Tensor]| ts.iter().map(|t| t.detach().copy()).collect::<Vec<_>>();
        RefOut {
            loss: loss.detach(),
            mean_q: q_taken.detach().mean(kind),
            grad_norm,
            td_abs: (q_taken.detach() - td_target).abs(),
            grads: self.online.iter().map(|p| p.grad().copy()).collect(),
            online: copies(&self.online),
            target: copies(&self.target),
            slots: self.slots.iter().map(|s| copies(s)).collect(),
            average: self.average.as_deref().map(copies),
        }
    }

    /// `torch.optim.RMSprop` or `torch.optim.Adam` (default settings but `lr`, `alpha`,
    /// `betas`, `eps`), written out over the ten parameters.
    fn optimizer_step(&mut self) {
        let cfg = &self.cfg;
        match cfg.optimizer {
            OptimizerKind::Rmsprop => {
                let a = cfg.rmsprop_alpha;
                for (p, sq) in self.online.iter().zip(self.slots[0].iter_mut()) {
                    let g = p.grad();
                    // square_avg = alpha * square_avg + (1 - alpha) * g^2
                    let _ = sq.g_mul_scalar_(a).g_add_(&(g.square() * (1.0 - a)));
                    // p -= lr * g / (sqrt(square_avg) + eps)
                    let _ = p.shallow_clone().g_sub_(&(g / (sq.sqrt() + cfg.eps) * cfg.lr));
                }
            }
            OptimizerKind::Adam => {
                let (b1, b2) = cfg.adam_betas;
                let t = self.optimizer_steps as i32;
                let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
                let (m, v) = self.slots.split_at_mut(1);
                for ((p, m), v) in self.online.iter().zip(m[0].iter_mut()).zip(v[0].iter_mut()) {
                    let g = p.grad();
                    // exp_avg = b1 * exp_avg + (1 - b1) * g; exp_avg_sq likewise with g^2
                    let _ = m.g_mul_scalar_(b1).g_add_(&(&g * (1.0 - b1)));
                    let _ = v.g_mul_scalar_(b2).g_add_(&(g.square() * (1.0 - b2)));
                    // p -= lr / bc1 * exp_avg / (sqrt(exp_avg_sq) / sqrt(bc2) + eps)
                    let _ = p.shallow_clone().g_sub_(&(&*m / (v.sqrt() / bc2.sqrt() + cfg.eps) * (cfg.lr / bc1)));
                }
            }
        }
    }

    // -----------------------------------------------------------------------------
    // For the numerics tests: start from a learner's state
    // -----------------------------------------------------------------------------

    /// A reference learner holding `state` (`Learner::state_tensors()`, copied, in the
    /// tensors' own kind: the oracle passes float64), `steps` train steps and
    /// `optimizer_steps` updates taken. Optimizer slots missing from `state` start at
    /// zero, as a fresh optimizer's.
    pub(super) fn from_state(cfg: &DqnConfig, state: &HashMap<String, Tensor>, steps: u64, optimizer_steps: u64) -> Reference {
        let net = |prefix: &str| -> Option<Vec<Tensor>> { TENSORS.iter().map(|n| state.get(&format!("{prefix}.{n}")).map(|t| t.detach().copy())).collect() };
        let online: Vec<Tensor> = net("online").expect("the state has the online weights").into_iter().map(|t| t.set_requires_grad(true)).collect();
        let kind = cfg.optimizer;
        let slots = Optimizer::slot_names(cfg.optimizer)
            .iter()
            .map(|slot| {
                online
                    .iter()
                    .zip(TENSORS)
                    .map(|(p, n)| state.get(&Optimizer::slot_key(kind, slot, n)).map_or_else(|| p.detach().zeros_like(), |t| t.copy()))
                    .collect()
            })
            .collect();
        let average = (cfg.publish_average_tau > 0.0).then(|| net("average").expect("the state has the published average"));
        Reference { target: net("target").expect("the state has the target weights"), online, average, slots, steps, optimizer_steps, cfg: cfg.clone() }
    }
}
