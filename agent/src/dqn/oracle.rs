//! The numerics tests' oracle (tests only): what one train step must give, in float64,
//! and how far a float32 computation of it may stray, element by element, derived from
//! float32 rounding.
//!
//! Why derived bounds and not one tolerance: the tests hold several computations of the
//! same step (a run alone, a run in a group, the optimizers' tensor form and host loop)
//! to one definition, and each sums its products in its own order; worse, the order
//! changes with the CPU (MKL and libtorch's kernels take other paths with AVX-512, AVX2
//! or SSE4.2). A tolerance tuned on one CPU failed on another (1.4e-5 against 1e-5 on
//! an Intel Xeon with AVX-512). So each test compares a computation with the float64
//! result of the autograd reference (`reference.rs`, run in float64) and allows what
//! float32 rounding can account for, in any order:
//!
//! - a sum or dot product of `K` terms computed in float32, in any order, is within
//!   `γ(K) Σ|terms|` of the exact value, `γ(K) = K u / (1 - K u)`, `u = 2^-24` (Higham,
//!   "Accuracy and Stability of Numerical Algorithms", 2nd ed., (3.5) and Lemma 3.1);
//!   one rounding of a result is within `u |result|`;
//! - an error already in an operand carries through by the operation's Lipschitz
//!   constant (a product by `|W|`, a ReLU or a clamp by 1, the Huber loss by `delta`);
//! - where a discrete choice depends on values within their errors (a ReLU input near 0,
//!   Double DQN's argmax between near-equal advantages, clipping at its threshold) every
//!   choice is allowed;
//! - the optimizers are evaluated over the whole interval the clipped gradient may be in:
//!   RMSProp's update `lr g / (sqrt(alpha s + (1 - alpha) g^2) + eps)` is increasing in
//!   `g`, Adam's is a quotient of intervals. This is where float32 loses most: a
//!   gradient element that is a near-cancelling sum has a sign float32 cannot fix, and
//!   a fresh RMSProp then moves its parameter by about `lr / sqrt(1 - alpha)` one way
//!   or the other.
//!
//! Each value is carried with its magnitude `m` (a bound on the sum of |terms| its
//! rounding scales with) and its error bound `e` ([`Tracked`]); first-order terms only,
//! as in Higham's analyses (the `u^2` terms are below 1e-13 of the values here). The
//! bounds are worst cases: a test prints its margin, the largest `|got - want| / bound`
//! it saw. It is about 0.5 or less on the machines tried, nearer 1 only where a discrete
//! choice went the other way (a ReLU input within its error of 0: the bound there is the
//! whole of the other branch, which a float32 step can take, and up to 0.999 was seen
//! where that one element made up nearly all of a value).

use super::reference::{RefOut, Reference};
use super::{DqnConfig, OptimizerKind};
use crate::experience::col;
use crate::model::TENSORS;
use crate::optim::Optimizer;
use crate::state::STATE_DIM;
use std::collections::HashMap;
use tch::{Kind, Tensor};

/// float32's unit roundoff.
pub(super) const U: f64 = 1.0 / 16_777_216.0;

/// `γ(n) = n u / (1 - n u)`: the relative error bound of `n` roundings.
pub(super) fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

/// Terms each product sums, counting only the terms that are not exactly zero: an
/// implementation may pad a sum with zeros (the state to 32 inputs, the two heads as one
/// product over both streams), but adding an exact zero is exact, so padding adds no
/// rounding. The first layer: 27 inputs (its bias is one more term, as for every layer).
const K_STATE: usize = 27;
/// A head: one stream's 512 units.
const K_HEAD: usize = crate::model::STREAM;
/// The dueling combination `V + A_a - mean(A)` as one sum of `1 + A` terms, however it
/// is computed, and the rounding of its coefficients (`1/A`).
fn k_q(actions: usize) -> usize {
    actions + 2
}

const F64: (Kind, tch::Device) = (Kind::Double, tch::Device::Cpu);

/// A float64 value `v` with, element by element, a bound `m` on the magnitude of the
/// terms a float32 computation of it adds up and a bound `e` on how far that
/// computation may be from `v`.
pub(super) struct Tracked {
    pub v: Tensor,
    pub m: Tensor,
    pub e: Tensor,
}

impl Tracked {
    /// An input known exactly (a float32 datum).
    pub fn exact(x: &Tensor) -> Tracked {
        let v = x.to_kind(Kind::Double).to_device(tch::Device::Cpu);
        Tracked { m: v.abs(), e: v.zeros_like(), v }
    }

    fn map(&self, f: impl Fn(&Tensor) -> Tensor) -> Tracked {
        Tracked { v: f(&self.v), m: f(&self.m), e: f(&self.e) }
    }

    /// `|computed|` can reach: the magnitude plus the error.
    fn reach(&self) -> Tensor {
        &self.m + &self.e
    }

    /// `x W^T + b` over `k` inputs, `W` and `b` exact.
    pub fn linear(&self, w: &Tensor, b: &Tensor, k: usize) -> Tracked {
        let wa = w.abs().tr();
        let v = self.v.matmul(&w.tr()) + b;
        let m = self.reach().matmul(&wa) + b.abs();
        let e = self.e.matmul(&wa) + &m * gamma(k + 1);
        Tracked { v, m, e }
    }

    /// `self @ other`, both computed, summing over `k` terms.
    pub fn mm(&self, other: &Tracked, k: usize) -> Tracked {
        let (ra, rb) = (self.reach(), other.reach());
        let v = self.v.matmul(&other.v);
        let m = ra.matmul(&rb);
        let e = self.e.matmul(&rb) + self.m.matmul(&other.e) + &m * gamma(k);
        Tracked { v, m, e }
    }

    /// Sum over dimension `d` of `n` terms.
    pub fn sum(&self, d: i64) -> Tracked {
        let n = self.v.size()[d as usize] as usize;
        let s = |t: &Tensor| t.sum_dim_intlist([d].as_slice(), false, Kind::Double);
        let m = s(&self.reach());
        Tracked { v: s(&self.v), e: s(&self.e) + &m * gamma(n), m }
    }

    /// Where the input is surely negative, the output is exactly 0: nothing of its
    /// magnitude or error is left.
    pub fn relu(&self) -> Tracked {
        let off = self.v.le(0.0).logical_and(&self.v.abs().gt_tensor(&self.e));
        let zero = self.v.zeros_like();
        Tracked { v: self.v.relu(), m: zero.where_self(&off, &self.m), e: zero.where_self(&off, &self.e) }
    }

    /// The gradient through `relu(z)`: `self` where `z > 0`. Where `z` is within its
    /// error of 0 a float32 computation may take either side, so the error covers the
    /// whole of `self` there.
    pub fn relu_backward(&self, z: &Tracked) -> Tracked {
        let on = z.v.gt(0.0);
        let sure = z.v.abs().gt_tensor(&z.e);
        let zero = self.v.zeros_like();
        let v = self.v.where_self(&on, &zero);
        let m = self.m.where_self(&(on.logical_or(&sure.logical_not())), &zero);
        let e_on = self.e.where_self(&on, &zero);
        let e = e_on.where_self(&sure, &(self.v.abs() + &self.e));
        Tracked { v, m, e }
    }

    /// `self + sign * other`, one rounding.
    pub fn add(&self, other: &Tracked, sign: f64) -> Tracked {
        let m = &self.m + &other.m;
        Tracked { v: &self.v + &other.v * sign, e: &self.e + &other.e + &m * U, m }
    }

    /// `self * c` for an exact `c` (a tensor broadcasting, or a scalar), `n` roundings.
    pub fn scale(&self, c: &Tensor, n: usize) -> Tracked {
        let ca = c.abs();
        let m = &self.m * &ca;
        Tracked { v: &self.v * c, e: &self.e * &ca + &m * gamma(n), m }
    }
}

/// One network's forward over rows `x`, every stage tracked.
struct Forward {
    z1: Tracked,
    h1: Tracked,
    z2v: Tracked,
    h2v: Tracked,
    z2a: Tracked,
    h2a: Tracked,
    /// `[N, A]`
    advantage: Tracked,
    /// `[N, A]`: `V + A - mean(A)`.
    q: Tracked,
}

/// The ten parameters in [`TENSORS`] order, float64.
type Params = Vec<Tensor>;

fn forward(p: &Params, x: &Tracked, actions: usize) -> Forward {
    let z1 = x.linear(&p[0], &p[1], K_STATE);
    let h1 = z1.relu();
    let z2v = h1.linear(&p[2], &p[3], crate::model::SHARED);
    let z2a = h1.linear(&p[6], &p[7], crate::model::SHARED);
    let (h2v, h2a) = (z2v.relu(), z2a.relu());
    let value = h2v.linear(&p[4], &p[5], K_HEAD);
    let advantage = h2a.linear(&p[8], &p[9], K_HEAD);
    // Q = V + A - mean(A), as a sum of K_Q terms (however it is computed).
    let mean = |t: &Tensor| t.mean_dim([1i64].as_slice(), true, Kind::Double);
    let v = &value.v + &advantage.v - mean(&advantage.v);
    let m = value.reach() + advantage.reach() + mean(&advantage.reach());
    let e = &value.e + &advantage.e + mean(&advantage.e) + &m * gamma(k_q(actions));
    Forward { z1, h1, z2v, h2v, z2a, h2a, advantage, q: Tracked { v, m, e } }
}

/// One train step to check: the learner's state before it and what it trains on.
pub(super) struct Case<'a> {
    pub cfg: &'a DqnConfig,
    pub actions: usize,
    /// `Learner::state_tensors()` before the step (float32, any device).
    pub state: &'a HashMap<String, Tensor>,
    /// Train steps before this one (the target sync is due when this one's number is a
    /// multiple of `target_sync_every`).
    pub steps: u64,
    /// Optimizer updates before this one (Adam's `t - 1`).
    pub optimizer_steps: u64,
    /// `[B, 57]` float32 rows, the wire layout.
    pub batch: &'a Tensor,
    /// Prioritized replay's importance weights, `[B]`.
    pub weights: Option<&'a Tensor>,
}

/// What a step must give: each output's float64 value and its bound, by name: every
/// tensor of `Learner::state_tensors()` after the step, `grad.<param>` (the clipped
/// gradient applied), and `loss`, `mean_q`, `grad_norm` (before clipping), `td_abs`.
pub(super) struct Expected {
    want: HashMap<String, (Tensor, Tensor)>,
}

impl Expected {
    /// `got` against the value named `name`: every element within its bound (plus the
    /// rounding of the value itself to float32). Returns the margin, the largest
    /// `|got - value| / bound`; panics naming the element that is off.
    pub fn check(&self, name: &str, got: &Tensor, what: &str) -> f64 {
        let (v, e) = self.want.get(name).unwrap_or_else(|| panic!("{what}: the oracle has no {name}"));
        let got = got.to_kind(Kind::Double).to_device(tch::Device::Cpu).reshape(v.size());
        let bound = e + v.abs() * U + f64::MIN_POSITIVE;
        let off = (&got - v).abs();
        let ratio = &off / &bound;
        let worst = f64::try_from(ratio.max()).unwrap();
        if !(worst <= 1.0) {
            let i = i64::try_from(ratio.view([-1]).argmax(0, false)).unwrap();
            let at = |t: &Tensor| f64::try_from(t.view([-1]).get(i)).unwrap();
            panic!(
                "{what}: {name}[{i}] = {:e}, the float64 reference {:e}: off by {:e}, more than float32 rounding allows ({:e})",
                at(&got),
                at(v),
                at(&off),
                at(&bound)
            );
        }
        worst
    }

    /// Every tensor of a learner's state (`Learner::state_tensors()` after the step)
    /// against the oracle. Returns the margin.
    pub fn check_state(&self, state: &[(String, Tensor)], what: &str) -> f64 {
        state.iter().map(|(name, t)| self.check(name, t, what)).fold(0.0, f64::max)
    }
}

/// The float64 reference's result of `case` and the bounds of every output.
pub(super) fn expect(case: &Case) -> Expected {
    let cfg = case.cfg;
    let state64: HashMap<String, Tensor> = case.state.iter().map(|(k, t)| (k.clone(), t.to_kind(Kind::Double).to_device(tch::Device::Cpu))).collect();
    let batch = case.batch.to_kind(Kind::Double).to_device(tch::Device::Cpu);
    let weights = case.weights.map(|w| w.to_kind(Kind::Double).to_device(tch::Device::Cpu));

    // The values: the autograd reference, in float64.
    let mut reference = Reference::from_state(cfg, &state64, case.steps, case.optimizer_steps);
    let out = reference.step(&batch, weights.as_ref());

    // The bounds: the same step once more, every stage tracked.
    let net = |prefix: &str| -> Params { TENSORS.iter().map(|n| state64[&format!("{prefix}.{n}")].shallow_clone()).collect() };
    let (online, target) = (net("online"), net("target"));
    let b = batch.size()[0];
    let states = Tracked::exact(&batch.narrow(1, col::STATE as i64, STATE_DIM as i64));
    let next_states = Tracked::exact(&batch.narrow(1, col::NEXT_STATE as i64, STATE_DIM as i64));
    let taken = batch.narrow(1, col::ACTION as i64, 1).to_kind(Kind::Int64);
    let rewards = batch.select(1, col::REWARD as i64);
    let terminal = batch.select(1, col::TERMINAL as i64);
    let w = weights.unwrap_or_else(|| Tensor::ones([b], F64));

    let fo = forward(&online, &states, case.actions);
    let ft = forward(&target, &next_states, case.actions);
    let q_taken = fo.q.map(|t| t.gather(1, &taken, false).squeeze_dim(1));
    let next_q = if cfg.double_dqn {
        // Every action whose advantage may be the largest once computed in float32.
        let a = forward(&online, &next_states, case.actions).advantage;
        let floor = (&a.v - &a.e).amax([1i64].as_slice(), true);
        let candidate = (&a.v + &a.e).ge_tensor(&floor);
        let chosen = a.v.argmax(1, true);
        let v = ft.q.v.gather(1, &chosen, false);
        let spread = ((&ft.q.v - &v).abs() + &ft.q.e).where_self(&candidate, &ft.q.v.zeros_like());
        let m = ft.q.reach().where_self(&candidate, &ft.q.v.zeros_like());
        Tracked { v: v.squeeze_dim(1), m: m.amax([1i64].as_slice(), false), e: spread.amax([1i64].as_slice(), false) }
    } else {
        let amax = |t: &Tensor| t.amax([1i64].as_slice(), false);
        Tracked { v: amax(&ft.q.v), m: amax(&ft.q.reach()), e: amax(&ft.q.e) }
    };
    // y = r + gamma^n (1 - terminal) max Q': gamma^n and the product rounded, the sum.
    let discount = (1.0 - &terminal) * cfg.gamma.powi(cfg.n_step as i32);
    let y_m = rewards.abs() + &discount * next_q.reach();
    let y = Tracked { v: &rewards + &discount * &next_q.v, e: &discount * &next_q.e + &y_m * gamma(4), m: y_m };
    // The TD error, maybe computed as one sum with the loss's 1/B folded in and scaled
    // back: a few more roundings.
    let td = q_taken.add(&y, -1.0);
    let td = Tracked { e: &td.e + &td.m * gamma(3), v: td.v, m: td.m };

    // The loss: Huber, each row times its weight, the mean. Huber is delta-Lipschitz.
    let delta = cfg.huber_delta;
    let huber = |x: &Tensor| {
        let a = x.abs();
        (&a * &a * 0.5).where_self(&a.le(delta), &((&a - delta * 0.5) * delta))
    };
    let row_m = huber(&td.reach());
    let row_e = &td.e * delta + &row_m * gamma(4);
    let loss_e = ((&row_e * &w).sum(Kind::Double) + (&row_m * &w).sum(Kind::Double) * gamma(b as usize + 2)) / b as f64;
    // Mean Q, maybe reduced from the TD errors and targets (Q(s, a) = td + y): their
    // errors, the sum's rounding and the mean's.
    let q_back = td.add(&y, 1.0);
    let mean_q_e = q_back.e.mean(Kind::Double) + q_back.reach().mean(Kind::Double) * gamma(b as usize + 1);

    // The loss's slope in each row's Q(s, a): clamp(td, -delta, delta) w / B.
    let wb = &w / b as f64;
    let slope_v = td.v.clamp(-delta, delta) * &wb;
    let slope_m = td.reach().clamp_max(delta) * &wb;
    let slope = Tracked { e: &td.e * &wb + &slope_m * gamma(3), v: slope_v, m: slope_m }.map(|t| t.unsqueeze(1)); // [B, 1]
                                                                                                                  // Into the heads' outputs: dQ_a/dV = 1, dQ_a/dA_k = [k = a] - 1/A.
    let onehot = Tensor::zeros([b, case.actions as i64], F64).scatter_value(1, &taken, 1.0);
    let coefficients = onehot - 1.0 / case.actions as f64;
    let d_value = slope.map(|t| t.shallow_clone());
    let d_adv = slope.scale(&coefficients, 2);

    let t = |x: &Tracked| x.map(|t| t.tr());
    let g_wv = t(&d_value).mm(&fo.h2v, b as usize);
    let g_bv = d_value.sum(0);
    let g_wa = t(&d_adv).mm(&fo.h2a, b as usize);
    let g_ba = d_adv.sum(0);
    // Into the streams' units: the value head's one output, the advantage head's A.
    let dh2v = d_value.mm(&Tracked::exact(&online[4]), 1).relu_backward(&fo.z2v);
    let dh2a = d_adv.mm(&Tracked::exact(&online[8]), case.actions).relu_backward(&fo.z2a);
    let g_wvh = t(&dh2v).mm(&fo.h1, b as usize);
    let g_bvh = dh2v.sum(0);
    let g_wah = t(&dh2a).mm(&fo.h1, b as usize);
    let g_bah = dh2a.sum(0);
    // Back into the shared layer: both streams' 1,024 units as one sum.
    let (wvh, wah) = (Tracked::exact(&online[2]), Tracked::exact(&online[6]));
    let (pv, pa) = (dh2v.mm(&wvh, 2 * crate::model::STREAM), dh2a.mm(&wah, 2 * crate::model::STREAM));
    let dh1 = Tracked { v: &pv.v + &pa.v, m: &pv.m + &pa.m, e: &pv.e + &pa.e }.relu_backward(&fo.z1);
    let g_w1 = t(&dh1).mm(&states, b as usize);
    let g_b1 = dh1.sum(0);
    let grads = [g_w1, g_b1, g_wvh, g_bvh, g_wv, g_bv, g_wah, g_bah, g_wa, g_ba];
    // Each matches its parameter's shape ([1] biases of one head come out as [1]).
    let grads: Vec<Tracked> = grads.into_iter().zip(&online).map(|(g, p)| g.map(|x| x.reshape(p.size()))).collect();

    // The global norm: |‖ĝ‖ - ‖g‖| <= ‖ĝ - g‖, then the rounding of a sum of squares
    // over every element (padding included: twice the parameters bounds it) and its root.
    let elements: i64 = online.iter().map(Tensor::numel).map(|n| n as i64).sum();
    let sq = |f: &dyn Fn(&Tracked) -> &Tensor| grads.iter().map(|g| f(g).square().sum(Kind::Double)).fold(Tensor::zeros([], F64), |a, x| a + x).sqrt();
    let norm_v = sq(&|g| &g.v);
    let norm_carry = sq(&|g| &g.e);
    let norm_e = &norm_carry + (&norm_v + &norm_carry) * (gamma(2 * elements as usize + 1) / 2.0 + U);
    // The clipping coefficient min(1, max / (norm + 1e-6)) over the norm's interval.
    let (coef, coef_e) = if cfg.max_grad_norm > 0.0 {
        let c = |n: &Tensor| (cfg.max_grad_norm / (n + 1e-6)).clamp_max(1.0);
        let (v, lo, hi) = (c(&norm_v), c(&(&norm_v + &norm_e)), c(&(&norm_v - &norm_e).clamp_min(0.0)));
        let e = (&hi - &v).maximum(&(&v - lo)) + &v * gamma(3);
        (v, e)
    } else {
        (Tensor::ones([], F64), Tensor::zeros([], F64))
    };
    let clipped: Vec<Tracked> = grads
        .iter()
        .map(|g| {
            let v = &g.v * &coef;
            let e = &g.e * &coef + g.v.abs() * &coef_e + &g.e * &coef_e + v.abs() * U;
            Tracked { m: g.m.shallow_clone(), v, e }
        })
        .collect();

    // The optimizer over each clipped gradient's interval.
    let kind = cfg.optimizer;
    let slot_names = Optimizer::slot_names(cfg.optimizer);
    let t_adam = (case.optimizer_steps + 1) as f64;
    let sync = (case.steps + 1).is_multiple_of(cfg.target_sync_every);
    let mut bounds: HashMap<String, Tensor> = HashMap::new();
    for (i, name) in TENSORS.iter().enumerate() {
        let g = &clipped[i];
        let (lo, hi) = (&g.v - &g.e, &g.v + &g.e);
        let p0 = &online[i];
        let slot = |k: usize| state64[&Optimizer::slot_key(kind, slot_names[k], name)].shallow_clone();
        let (p_e, slot_e): (Tensor, Vec<Tensor>) = match cfg.optimizer {
            OptimizerKind::Rmsprop => {
                let (alpha, s0) = (cfg.rmsprop_alpha, slot(0));
                let (_, s_e) = moment2(&s0, alpha, &g.v, &lo, &hi);
                let update = |g: &Tensor| (g * cfg.lr) / ((&s0 * alpha + g.square() * (1.0 - alpha)).sqrt() + cfg.eps);
                let (u_v, u_lo, u_hi) = (update(&g.v), update(&lo), update(&hi));
                let u_max = u_lo.abs().maximum(&u_hi.abs());
                let rho = second_moment_rounding(alpha);
                let e = (&u_hi - &u_v).maximum(&(&u_v - &u_lo)) + &u_max * (rho / 2.0 + 5.0 * U) + (p0.abs() + &u_max) * U;
                (e, vec![s_e])
            }
            OptimizerKind::Adam => {
                let (b1, b2) = cfg.adam_betas;
                let (m0, v0) = (slot(0), slot(1));
                let m_at = |g: &Tensor| &m0 * b1 + g * (1.0 - b1);
                let m_round = (m0.abs() * b1 + lo.abs().maximum(&hi.abs()) * (1.0 - b1)) * gamma(3);
                let (m_lo, m_hi) = (m_at(&lo) - &m_round, m_at(&hi) + &m_round);
                let m_e = (&m_hi - m_at(&g.v)).maximum(&(m_at(&g.v) - &m_lo));
                let (v_v, v_e) = moment2(&v0, b2, &g.v, &lo, &hi);
                let (v_lo, v_hi) = ((&v_v - &v_e).clamp_min(0.0), &v_v + &v_e);
                // The bias corrections 1 - beta^t, maybe computed in float32 on the
                // device (beta^t as exp(t ln beta): relative error (t |ln beta| + 4) u).
                let bc = |beta: f64| {
                    let p = beta.powf(t_adam);
                    (1.0 - p, (t_adam * beta.ln().abs() + 4.0) * U * p / (1.0 - p) + U)
                };
                let ((bc1, bc1_e), (bc2, bc2_e)) = (bc(b1), bc(b2));
                let widen = bc2_e / 2.0 + 3.0 * U;
                let d_lo = v_lo.sqrt() / bc2.sqrt() * (1.0 - widen) + cfg.eps;
                let d_hi = v_hi.sqrt() / bc2.sqrt() * (1.0 + widen) + cfg.eps;
                let corners = [&m_lo / &d_lo, &m_lo / &d_hi, &m_hi / &d_lo, &m_hi / &d_hi];
                let r_lo = corners.iter().skip(1).fold(corners[0].shallow_clone(), |a, c| a.minimum(c));
                let r_hi = corners.iter().skip(1).fold(corners[0].shallow_clone(), |a, c| a.maximum(c));
                let step = cfg.lr / bc1;
                let u_v = m_at(&g.v) / ((&v_v).sqrt() / bc2.sqrt() + cfg.eps) * step;
                let u_lo = &r_lo * step * (1.0 - bc1_e - 3.0 * U) - r_lo.abs() * step * 2.0 * (bc1_e + 3.0 * U);
                let u_hi = &r_hi * step * (1.0 + bc1_e + 3.0 * U) + r_hi.abs() * step * 2.0 * (bc1_e + 3.0 * U);
                let u_max = u_lo.abs().maximum(&u_hi.abs());
                let e = (&u_hi - &u_v).maximum(&(&u_v - &u_lo)) + (p0.abs() + &u_max) * U;
                (e, vec![m_e, v_e])
            }
        };
        bounds.insert(format!("online.{name}"), p_e.shallow_clone());
        if sync {
            bounds.insert(format!("target.{name}"), p_e.shallow_clone());
        } else {
            bounds.insert(format!("target.{name}"), p0.zeros_like());
        }
        if cfg.publish_average_tau > 0.0 {
            let tau = cfg.publish_average_tau;
            let a0 = &state64[&format!("average.{name}")];
            let p1 = &out.online[i];
            bounds.insert(format!("average.{name}"), &p_e * tau + (a0.abs() * (1.0 + tau) + p1.abs() * tau) * gamma(3));
        }
        for (k, e) in slot_e.into_iter().enumerate() {
            bounds.insert(Optimizer::slot_key(kind, slot_names[k], name), e);
        }
        bounds.insert(format!("grad.{name}"), g.e.shallow_clone());
    }

    let mut want: HashMap<String, (Tensor, Tensor)> = HashMap::new();
    let RefOut { loss, mean_q, grad_norm, td_abs, grads: ref_grads, online: ref_online, target: ref_target, slots: ref_slots, average: ref_average } = out;
    for (i, name) in TENSORS.iter().enumerate() {
        let mut put = |key: String, v: &Tensor| {
            let e = bounds.remove(&key).unwrap_or_else(|| panic!("no bound for {key}"));
            want.insert(key, (v.shallow_clone(), e));
        };
        put(format!("online.{name}"), &ref_online[i]);
        put(format!("target.{name}"), &ref_target[i]);
        put(format!("grad.{name}"), &ref_grads[i]);
        if let Some(avg) = &ref_average {
            put(format!("average.{name}"), &avg[i]);
        }
        for (k, slot) in ref_slots.iter().enumerate() {
            put(Optimizer::slot_key(kind, slot_names[k], name), &slot[i]);
        }
    }
    want.insert("loss".into(), (loss, loss_e));
    want.insert("mean_q".into(), (mean_q, mean_q_e));
    want.insert("grad_norm".into(), (grad_norm, norm_e));
    want.insert("td_abs".into(), (td_abs, td.e.shallow_clone()));
    // The tracked pass computes the same values as the reference (a check on the bounds'
    // own derivation: they belong to this step).
    for (name, got) in [("td_abs", td.v.abs()), ("grad_norm", norm_v)] {
        let (v, _) = &want[name];
        let off = f64::try_from((&got - v).abs().max()).unwrap();
        assert!(off <= 1e-9 * (1.0 + f64::try_from(v.abs().max()).unwrap()), "the oracle's bound pass and its reference disagree on {name} by {off}");
    }
    Expected { want }
}

/// A second moment `beta s0 + (1 - beta) g^2` over `g`'s interval `[lo, hi]`: its
/// value at `g` and its bound (the interval, then the formula's rounding).
fn moment2(s0: &Tensor, beta: f64, g: &Tensor, lo: &Tensor, hi: &Tensor) -> (Tensor, Tensor) {
    let g2 = g.square();
    let (lo2, hi2) = (lo.square(), hi.square());
    let spans_zero = lo.le(0.0).logical_and(&hi.ge(0.0));
    let g2_min = lo2.minimum(&hi2).where_self(&spans_zero.logical_not(), &g2.zeros_like());
    let g2_max = lo2.maximum(&hi2);
    let v = s0 * beta + &g2 * (1.0 - beta);
    let e = ((&g2_max - &g2).maximum(&(&g2 - g2_min))) * (1.0 - beta) + (s0 * beta + g2_max * (1.0 - beta)) * second_moment_rounding(beta);
    (v, e)
}

/// The relative rounding of `beta s + (1 - beta) g^2` in float32, however it is
/// written: as `beta s + (1 - beta) (g g)` (three roundings of positive terms, `γ(3)`),
/// or as `lerp(s, g^2, w)` with `w = 1 - beta` (`s + w (g^2 - s)`: its four roundings
/// are at most `u (3 w (s + g^2) + result)`, and the result is at least `min(w, 1 - w)
/// (s + g^2)`).
fn second_moment_rounding(beta: f64) -> f64 {
    let w = 1.0 - beta;
    gamma(3) + U * (3.0 * w / w.min(1.0 - w) + 1.0)
}
