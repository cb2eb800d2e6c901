//! The DQN train step in plain autograd: **read this first.** (Tests only.)
//!
//! `dqn.rs` computes the same thing fused (one flat parameter buffer, the two
//! streams' hidden layers as one product, the gradients written by hand, the optimizer
//! in one pass over host memory), which is fast and hard to read. This file is the
//! definition: CleanRL's `dqn.py` (`cleanrl/dqn.py` in vwxyzjn/cleanrl) in Rust, top
//! to bottom: config, model, one train step (TD target, loss, gradients, clipping,
//! optimizer), target sync. The test `the_lean_step_computes_what_the_step_before_it_did`
//! (in `dqn.rs`) runs both from the same state for twenty steps and holds them equal:
//! both optimizers, Double DQN on and off, 3-step returns, terminal rows, importance
//! weights, active clipping and a target sync.
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

use super::{DqnConfig, Learner, Linear, OptimizerKind, ADVANTAGE, ADVANTAGE_HIDDEN, SHARED, VALUE, VALUE_HIDDEN};
use crate::experience::col;
use crate::model::TENSORS;
use crate::optim::Optimizer;
use crate::state::STATE_DIM;
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
    let linear = |x: &Tensor, layer: Linear| x.linear(&params[layer.weight], Some(&params[layer.bias]));
    let h = linear(x, SHARED).relu();
    let value = linear(&linear(&h, VALUE_HIDDEN).relu(), VALUE); // [N, 1]
    let advantage = linear(&linear(&h, ADVANTAGE_HIDDEN).relu(), ADVANTAGE); // [N, A]

    // Dueling (Wang et al. 2016): subtracting the mean keeps V and A identifiable.
    value + &advantage - advantage.mean_dim(1, true, Kind::Float)
}

/// The learner: online and target networks, the optimizer's state, the step counter.
pub(super) struct Reference {
    /// The online network's parameters in [`TENSORS`] order: autograd leaves.
    pub(super) online: Vec<Tensor>,
    /// The target network's: plain tensors, never trained, only copied into.
    pub(super) target: Vec<Tensor>,
    /// The optimizer's state, `slots[k][i]` for parameter `i` (RMSProp: `square_avg`;
    /// Adam: `exp_avg`, `exp_avg_sq`: PyTorch's names).
    slots: Vec<Vec<Tensor>>,
    /// Train steps taken.
    steps: u64,
    cfg: DqnConfig,
}

impl Reference {
    // -----------------------------------------------------------------------------
    // One train step
    // -----------------------------------------------------------------------------

    /// One DQN update on `batch` (`[B, 57]` rows in the wire layout, `experience::col`),
    /// each row's loss scaled by `weights` (`[B]`, prioritized replay's importance
    /// weights) if given. Returns the loss, of the weights before the update.
    pub(super) fn step(&mut self, batch: &Tensor, weights: Option<&Tensor>) -> f32 {
        let cfg = self.cfg.clone();
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
            Some(w) => (q_taken.huber_loss(&td_target, Reduction::None, cfg.huber_delta) * w).mean(Kind::Float),
        };

        // 3. Gradients (optimizer.zero_grad(); loss.backward()).
        for p in self.online.iter_mut() {
            p.zero_grad();
        }
        loss.backward();
        self.steps += 1;

        tch::no_grad(|| {
            // 4. Clip the gradients to one global L2 norm over all of them
            //    (torch.nn.utils.clip_grad_norm_).
            if cfg.max_grad_norm > 0.0 {
                let norms: Vec<Tensor> = self.online.iter().map(|p| p.grad().norm()).collect();
                let total = Tensor::stack(&norms, 0).norm();
                let clip = ((&total + 1e-6).reciprocal() * cfg.max_grad_norm).clamp_max(1.0);
                for p in &self.online {
                    let _ = p.grad().g_mul_(&clip);
                }
            }
            // 5. The optimizer (optimizer.step()).
            self.optimizer_step();
            // 6. Target sync: a copy of the online weights every `target_sync_every` steps.
            if self.steps.is_multiple_of(cfg.target_sync_every) {
                for (t, p) in self.target.iter_mut().zip(&self.online) {
                    t.copy_(p);
                }
            }
        });
        f32::try_from(&loss).expect("a scalar loss")
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
                let t = self.steps as i32;
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
    // For the equality test: start from, and catch up with, a fused `Learner`
    // -----------------------------------------------------------------------------

    /// A reference learner with `from`'s weights and a fresh optimizer.
    pub(super) fn new(cfg: &DqnConfig, from: &Learner) -> Reference {
        let take = |net: &super::DuelingDqn, grad: bool| (0..TENSORS.len()).map(|i| net.param(i).detach().copy().set_requires_grad(grad)).collect::<Vec<_>>();
        let online = take(&from.online, true);
        let slots = Optimizer::slot_names(cfg.optimizer).iter().map(|_| online.iter().map(Tensor::zeros_like).collect()).collect();
        Reference { target: take(&from.target, false), online, slots, steps: 0, cfg: cfg.clone() }
    }

    /// Continue from `lean`'s weights and optimizer state.
    pub(super) fn take_state(&mut self, lean: &Learner) {
        tch::no_grad(|| {
            for i in 0..TENSORS.len() {
                self.online[i].copy_(&lean.online.param(i));
                self.target[i].copy_(&lean.target.param(i));
                for (slot, flat) in self.slots.iter_mut().zip(&lean.optimizer.slots) {
                    slot[i].copy_(&lean.online.view_of(flat, i));
                }
            }
        });
    }
}
