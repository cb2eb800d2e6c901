//! The learner's optimizers (RMSProp, Adam), their configuration ([`OptimizerConfig`],
//! the optimizer's keys of `[dqn]`) and state ([`Optimizer`]), and their update over
//! the rows of a group of runs (`[k, P]`, each row one run's flat buffer, each run with
//! its own hyper-parameters).
//!
//! Written here rather than taken from `tch::nn::Optimizer`, because tch's optimizer
//! cannot export its state: ours is plain tensors laid out as the parameters, so a
//! checkpoint holds it and a restarted manager continues with the same moment
//! estimates. Element by element, so one pass over a buffer updates every parameter.
//!
//! Three forms of the update, one per place it runs:
//! - RMSProp in five tensor ops over the rows ([`Rows::rmsprop_tensors`]): what a GPU
//!   runs, each op one kernel, capturable in a CUDA graph.
//! - RMSProp as one loop over host memory ([`Rows::rmsprop_host`]), on the CPU: there
//!   the tensor ops each make a pass over the 145,000 parameters and allocate a
//!   temporary of their size, and libtorch's square root goes through MKL's slow,
//!   exception-checking vector kernel; together they were a fifth of a train step at
//!   batch 32 (`perf`, docs/benchmarks.md). The loop sees the tensors' memory through
//!   [`crate::hostmem`], which holds its `unsafe`.
//! - Adam through libtorch's fused kernel (`at::_fused_adam_`, [`crate::aten`]), one
//!   call per run, on any device: one kernel on a GPU, vectorised on the CPU. Its
//!   learning rate is a tensor, and a held-back run passes `found_inf` = 1, which the
//!   kernel reads on the device: a captured graph needs no host value.
//!
//! Held back (a group's mask): a run whose mask is 0 changes in nothing, not its
//! parameters, moments nor count, even where its gradient row holds a NaN (its batch
//! may be rows a replay never wrote): every update of such a row is a `where`, a skip or
//! `found_inf`, never a multiplication by 0.

use crate::aten;
use crate::hostmem;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// Which optimizer the learner runs (`[dqn] optimizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// The paper's (and Nature DQN's) choice; PyTorch's `RMSprop` semantics.
    Rmsprop,
    /// `torch.optim.Adam` semantics (what Rainbow and most modern DQNs use).
    Adam,
}

/// What an [`Optimizer`] needs: the `[dqn]` keys `optimizer`, `lr`, `rmsprop_alpha`,
/// `adam_betas` and `eps` (documented on the learner's config, which holds them and
/// hands them over). The defaults are the learner's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimizerConfig {
    pub kind: OptimizerKind,
    /// Learning rate (paper: 2.5e-4, with RMSProp).
    pub lr: f64,
    /// RMSProp smoothing constant (PyTorch default 0.99).
    pub rmsprop_alpha: f64,
    /// Adam's first and second moment decay (PyTorch defaults 0.9, 0.999).
    pub adam_betas: (f64, f64),
    /// Added to the RMS in the denominator, both optimizers (PyTorch default 1e-8).
    pub eps: f64,
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        OptimizerConfig { kind: OptimizerKind::Rmsprop, lr: 2.5e-4, rmsprop_alpha: 0.99, adam_betas: (0.9, 0.999), eps: 1e-8 }
    }
}

/// One learner's optimizer state: its slots, laid out as the parameters, and its count.
pub(crate) struct Optimizer {
    /// Which optimizer (its hyper-parameters are each run's, in the group's
    /// [`RowConstants`]).
    kind: OptimizerKind,
    /// `slots[k]`: slot k for every parameter, laid out as the network's flat buffer
    /// (RMSProp: square_avg; Adam: exp_avg, exp_avg_sq: PyTorch's names).
    pub(crate) slots: Vec<Tensor>,
    /// Updates applied (the checkpoint's count; a host counter, no sync).
    pub(crate) steps: u64,
    /// Adam only: the updates applied, a 0-dimensional f32 tensor on the parameters'
    /// device (the fused kernel's `state_steps`), counted by the step itself: the bias
    /// correction is computed from it there, so a captured graph stays right at every
    /// replay. Equal to `steps` between updates (exact up to 2^24 updates; past that
    /// the correction is 1 to within float32 anyway).
    pub(crate) device_steps: Option<Tensor>,
}

impl Optimizer {
    pub(crate) fn slot_names(kind: OptimizerKind) -> &'static [&'static str] {
        match kind {
            OptimizerKind::Rmsprop => &["square_avg"],
            OptimizerKind::Adam => &["exp_avg", "exp_avg_sq"],
        }
    }

    /// The checkpoint's name of `slot` (one of [`Optimizer::slot_names`]) of parameter
    /// tensor `tensor`, for `kind`'s state: `optim.<kind>.<slot>.<tensor>`.
    pub(crate) fn slot_key(kind: OptimizerKind, slot: &str, tensor: &str) -> String {
        let kind = match kind {
            OptimizerKind::Rmsprop => "rmsprop",
            OptimizerKind::Adam => "adam",
        };
        format!("optim.{kind}.{slot}.{tensor}")
    }

    pub(crate) fn new(kind: OptimizerKind, flat: &Tensor) -> Self {
        let slots = Self::slot_names(kind).iter().map(|_| flat.zeros_like()).collect();
        let device_steps = (kind == OptimizerKind::Adam).then(|| Tensor::zeros([], (Kind::Float, flat.device())));
        Optimizer { kind, slots, steps: 0, device_steps }
    }

    /// Set the count of updates applied (a restore), on the host and the device.
    pub(crate) fn set_steps(&mut self, n: u64) {
        self.steps = n;
        if let Some(t) = &mut self.device_steps {
            let _ = t.fill_(n as f64);
        }
    }

    pub(crate) fn kind(&self) -> OptimizerKind {
        self.kind
    }

    /// Count one update applied.
    pub(crate) fn count_step(&mut self) {
        self.steps += 1;
    }
}

/// The rows of k runs' buffers that an update writes (`[k, P]` each), and each run's
/// hyper-parameters.
pub(crate) struct Rows<'a> {
    pub p: &'a Tensor,
    /// The clipped gradient.
    pub g: &'a Tensor,
    pub slots: &'a [Tensor],
    pub cfgs: &'a [OptimizerConfig],
}

/// Per-run constants of the tensor forms, `[k, 1]` on the device (made once per group).
pub(crate) struct RowConstants {
    /// RMSProp: `1 - alpha`, `-1 / lr`, `-eps / lr`.
    one_minus_alpha: Tensor,
    neg_inv_lr: Tensor,
    neg_eps_over_lr: Tensor,
    /// Adam: each run's learning rate, `[1]` f32 (the fused kernel's tensor `lr`).
    adam_lr: Vec<Tensor>,
}

impl RowConstants {
    pub(crate) fn new(cfgs: &[OptimizerConfig], device: Device) -> RowConstants {
        let col = |f: &dyn Fn(&OptimizerConfig) -> f64| {
            let v: Vec<f64> = cfgs.iter().map(f).collect();
            Tensor::from_slice(&v).view([-1, 1]).to_kind(Kind::Float).to_device(device)
        };
        RowConstants {
            one_minus_alpha: col(&|c| 1.0 - c.rmsprop_alpha),
            neg_inv_lr: col(&|c| -1.0 / c.lr),
            neg_eps_over_lr: col(&|c| -c.eps / c.lr),
            adam_lr: cfgs.iter().map(|c| Tensor::from_slice(&[c.lr as f32]).to_device(device)).collect(),
        }
    }
}

impl Rows<'_> {
    /// RMSProp in tensor ops, each row with its own alpha, lr and eps:
    /// `s = alpha s + (1 - alpha) g^2` (as `lerp(s, g^2, 1 - alpha)`), then
    /// `p += g / d` with `d = -(sqrt(s) + eps) / lr` (one `addcmul` folds the learning
    /// rate in). `moves` (`[k, 1]` bool) holds back the rows where it is false; `None`
    /// moves every row (a run alone: no held-back row, no `where`).
    pub(crate) fn rmsprop_tensors(&self, c: &RowConstants, moves: Option<&Tensor>) {
        let sq = &self.slots[0];
        let g2 = self.g.square();
        match moves {
            None => {
                let _ = sq.shallow_clone().lerp_tensor_(&g2, &c.one_minus_alpha);
            }
            Some(m) => {
                let new = sq.lerp_tensor(&g2, &c.one_minus_alpha);
                sq.shallow_clone().copy_(&new.where_self(m, sq));
            }
        }
        let d = c.neg_eps_over_lr.addcmul(&sq.sqrt(), &c.neg_inv_lr);
        match moves {
            None => {
                let _ = self.p.shallow_clone().addcdiv_(self.g, &d);
            }
            Some(m) => {
                let _ = self.p.shallow_clone().g_add_(&(self.g / d).where_scalarother(m, 0.0));
            }
        }
    }

    /// RMSProp as [`Rows::rmsprop_tensors`] computes it, as one pass over each moving
    /// row's host memory (contiguous f32 CPU tensors, checked by `hostmem`), with its
    /// gradient first multiplied by the row's `scale` (the clipping coefficient), so
    /// that afterwards the gradient buffer holds the gradient applied.
    pub(crate) fn rmsprop_host(&self, scale: &[f32], moves: &[bool]) {
        for (r, cfg) in self.cfgs.iter().enumerate().filter(|&(r, _)| moves[r]) {
            let row = |t: &Tensor| t.get(r as i64);
            let (mut p, mut g, mut sq) = (row(self.p), row(self.g), row(&self.slots[0]));
            // The constants as libtorch rounds its scalar operands: to the tensors' f32.
            let (alpha, lr, eps) = (cfg.rmsprop_alpha, cfg.lr, cfg.eps);
            let h = Rmsprop { scale: scale[r], alpha: alpha as f32, one_minus_alpha: (1.0 - alpha) as f32, neg_lr: -lr as f32, eps: eps as f32 };
            // Three distinct buffers (the group's parameters, gradient and slot), each
            // touched by nothing else while the slices live: hostmem's `# Safety`.
            let (p, g, sq) = (hostmem::f32_slice_mut(&mut p), hostmem::f32_slice_mut(&mut g), hostmem::f32_slice_mut(&mut sq));
            assert!(g.len() == p.len() && sq.len() == p.len(), "parameters, gradient and square_avg laid out alike");
            // Subnormals flushed while the loop runs. Why: as training goes on, the
            // squared gradients of rarely active units fall below f32's normal range
            // (1.2e-38), and on Intel cores every subnormal operand costs a microcode
            // assist: in a learn.sh run on a 2-vCPU Intel Xeon this loop took 54 % of the
            // trainer thread (perf), and the run made 34,000 steps a minute where the
            // benchmark's 0.66 ms step allows about 90,000 (the benchmark's random
            // gradients are never subnormal). What is lost is below 1.2e-38 in a running
            // average of squares, whose square root (1e-19) is nothing beside `eps` (1e-8
            // by default) in the denominator.
            hostmem::with_subnormals_flushed(|| hostmem::run_widest(RmspropLoop { p, g, sq, h: &h }));
        }
    }

    /// Adam through libtorch's fused kernel, one call per row. Each moving row's count
    /// (`steps`, `[k]` f32) goes up by one first (the kernel reads it); `found_inf[r]`,
    /// when given, is 1 for a row held back (the kernel then leaves it alone) and its
    /// count does not move (`moves`, `[k]` f32, is added to it).
    pub(crate) fn adam_fused(&self, c: &RowConstants, steps: &Tensor, moves: Option<(&Tensor, &[Tensor])>) -> Result<(), aten::AtenError> {
        for (r, cfg) in self.cfgs.iter().enumerate() {
            let row = |t: &Tensor| t.get(r as i64);
            let mut count = row(steps);
            let found_inf = match moves {
                None => {
                    let _ = count.g_add_scalar_(1.0);
                    None
                }
                Some((m, found_inf)) => {
                    let _ = count.g_add_(&m.get(r as i64));
                    Some(&found_inf[r])
                }
            };
            let (b1, b2) = cfg.adam_betas;
            aten::fused_adam(&row(self.p), &row(self.g), &row(&self.slots[0]), &row(&self.slots[1]), &count, &c.adam_lr[r], b1, b2, cfg.eps, found_inf)?;
        }
        Ok(())
    }
}

struct Rmsprop {
    scale: f32,
    alpha: f32,
    one_minus_alpha: f32,
    neg_lr: f32,
    eps: f32,
}

/// One RMSProp pass over the three buffers, compiled by [`hostmem::run_widest`] for the
/// widest vector unit the CPU has.
struct RmspropLoop<'a> {
    p: &'a mut [f32],
    g: &'a mut [f32],
    sq: &'a mut [f32],
    h: &'a Rmsprop,
}

impl hostmem::VectorLoop for RmspropLoop<'_> {
    #[inline(always)]
    fn run(self) {
        rmsprop_loop(self.p, self.g, self.sq, self.h)
    }
}

/// Each element as libtorch's ops compute it, in their order (no fused multiply-add):
/// g *= scale; sq = sq * alpha + g * (g * (1 - alpha)); p += (g * -lr) / (sqrt(sq) + eps).
#[inline(always)]
fn rmsprop_loop(p: &mut [f32], g: &mut [f32], sq: &mut [f32], h: &Rmsprop) {
    for ((p, g), sq) in p.iter_mut().zip(g.iter_mut()).zip(sq.iter_mut()) {
        let gi = *g * h.scale;
        *g = gi;
        *sq = *sq * h.alpha + gi * (gi * h.one_minus_alpha);
        *p += (gi * h.neg_lr) / (sq.sqrt() + h.eps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    const U: f64 = 1.0 / 16_777_216.0;

    fn gamma(n: usize) -> f64 {
        n as f64 * U / (1.0 - n as f64 * U)
    }

    /// `[lo, hi]` around a float64 value `v`: where every float32 evaluation of the same
    /// formulas, in any order of their operations, stays.
    #[derive(Clone, Copy, Debug)]
    struct Iv {
        v: f64,
        lo: f64,
        hi: f64,
    }

    impl Iv {
        fn exact(v: f64) -> Iv {
            Iv { v, lo: v, hi: v }
        }
        /// `f` at `v` and over the box of its arguments' corners (f monotone in each
        /// argument on the box), widened by `rel` of the largest value.
        fn corners(a: Iv, b: Iv, rel: f64, f: impl Fn(f64, f64) -> f64) -> Iv {
            let c = [f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)];
            let (lo, hi) = (c.iter().copied().fold(f64::INFINITY, f64::min), c.iter().copied().fold(f64::NEG_INFINITY, f64::max));
            let r = rel * lo.abs().max(hi.abs());
            Iv { v: f(a.v, b.v), lo: lo - r, hi: hi + r }
        }
        fn sq(self) -> Iv {
            let (a, b) = (self.lo * self.lo, self.hi * self.hi);
            let lo = if self.lo <= 0.0 && self.hi >= 0.0 { 0.0 } else { a.min(b) };
            Iv { v: self.v * self.v, lo, hi: a.max(b) }
        }
    }

    /// What float32 can make of `steps` updates of one parameter by `kind` on the loss
    /// `c p^2` from `p0` (libtorch's or ours, in any order of their operations): each
    /// step's gradient `2 c p` and moments over the intervals of the last, every
    /// operation's rounding added (`u` each; the second moment as `beta s + (1 - beta) g^2`
    /// in any form, `γ(3)` plus a lerp's `u (3 w / min(w, 1 - w) + 1)`).
    fn trajectory(kind: OptimizerKind, cfg: &OptimizerConfig, p0: f64, c: f64, steps: usize) -> Iv {
        let (mut p, mut s1, mut s2) = (Iv::exact(p0), Iv::exact(0.0), Iv::exact(0.0));
        let moment2 = |s: Iv, beta: f64, g2: Iv| {
            let w = 1.0 - beta;
            let rho = gamma(3) + U * (3.0 * w / w.min(1.0 - w) + 1.0);
            Iv::corners(s, g2, rho, |s, g2| beta * s + w * g2)
        };
        for t in 1..=steps {
            let g = Iv::corners(p, Iv::exact(c), gamma(3), |p, c| 2.0 * c * p);
            let update = match kind {
                OptimizerKind::Rmsprop => {
                    s1 = moment2(s1, cfg.rmsprop_alpha, g.sq());
                    Iv::corners(g, s1, 6.0 * U, |g, s| cfg.lr * g / (s.sqrt() + cfg.eps))
                }
                OptimizerKind::Adam => {
                    let (b1, b2) = cfg.adam_betas;
                    s1 = Iv::corners(s1, g, gamma(3), |m, g| b1 * m + (1.0 - b1) * g);
                    s2 = moment2(s2, b2, g.sq());
                    let (bc1, bc2) = (1.0 - b1.powi(t as i32), 1.0 - b2.powi(t as i32));
                    Iv::corners(s1, s2, 8.0 * U, |m, v| cfg.lr / bc1 * m / (v.sqrt() / bc2.sqrt() + cfg.eps))
                }
            };
            p = Iv::corners(p, update, U, |p, u| p - u);
        }
        p
    }

    /// One run's rows (`[1, n]`) of parameters, gradient and slots, as a group holds
    /// them, and one update of them by `form`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Form {
        HostLoop,
        Tensors,
        Fused,
    }

    fn update(form: Form, cfg: &OptimizerConfig, p: &Tensor, g: &Tensor, slots: &[Tensor], steps: &Tensor) {
        let cfgs = [*cfg];
        let rows = Rows { p, g, slots, cfgs: &cfgs };
        let c = RowConstants::new(&cfgs, Device::Cpu);
        match form {
            Form::HostLoop => rows.rmsprop_host(&[1.0], &[true]),
            Form::Tensors => rows.rmsprop_tensors(&c, None),
            Form::Fused => rows.adam_fused(&c, &steps.view([1]), None).unwrap(),
        }
    }

    /// Ours (each form) and libtorch's optimizers over ten steps of a quadratic loss:
    /// each inside what float32 can make of the same updates computed in float64
    /// (`trajectory`).
    #[test]
    fn numerics_our_optimizers_match_libtorchs() {
        use tch::nn;
        use tch::nn::OptimizerConfig as _;
        let init = [1.0f32, -2.0, 0.5, 3.0];
        let scales = [1.0f32, 0.5, 4.0, 0.1];
        for (kind, form) in [(OptimizerKind::Rmsprop, Form::HostLoop), (OptimizerKind::Rmsprop, Form::Tensors), (OptimizerKind::Adam, Form::Fused)] {
            let cfg = OptimizerConfig { kind, lr: 0.01, ..Default::default() };
            let init_t = Tensor::from_slice(&init);
            let make = || {
                let vs = nn::VarStore::new(Device::Cpu);
                let p = vs.root().var_copy("p", &init_t);
                (vs, p)
            };
            let loss = |p: &Tensor| (p * p * Tensor::from_slice(&scales)).sum(Kind::Float);
            let (vs_ref, p_ref) = make();
            let mut reference = match kind {
                OptimizerKind::Rmsprop => nn::RmsProp::default().build(&vs_ref, 0.01).unwrap(),
                OptimizerKind::Adam => nn::Adam::default().build(&vs_ref, 0.01).unwrap(),
            };
            let (_vs, mut p) = make();
            let ours = Optimizer::new(cfg.kind, &p.view([1, 4]));
            let steps = Tensor::zeros([], (Kind::Float, Device::Cpu));
            for _ in 0..10 {
                reference.backward_step(&loss(&p_ref));
                p.zero_grad();
                loss(&p).backward();
                let g = p.grad();
                tch::no_grad(|| update(form, &cfg, &p.view([1, 4]), &g.view([1, 4]), &ours.slots, &steps));
            }
            let (a, b) = (Vec::<f32>::try_from(&p).unwrap(), Vec::<f32>::try_from(&p_ref).unwrap());
            let mut margin = 0.0f64;
            for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                let want = trajectory(kind, &cfg, init[i] as f64, scales[i] as f64, 10);
                let room = (want.hi - want.v).max(want.v - want.lo) + U * want.v.abs();
                for (who, got) in [("ours", x), ("libtorch's", y)] {
                    let off = (got as f64 - want.v).abs();
                    assert!(off <= room, "{kind:?} ({form:?}), element {i}: {who} {got}, float64 {}, off by {off:e} > {room:e}", want.v);
                    margin = margin.max(off / room);
                }
            }
            assert_ne!(a, init.to_vec(), "the parameters moved");
            if form == Form::Fused {
                assert_eq!(steps.double_value(&[]), 10.0, "the fused kernel's count, counted by us");
            }
            println!("{kind:?} ({form:?}): largest error / bound {margin:.2e}");
        }
    }

    /// The host loop and the tensor ops each within float32 rounding of the same RMSProp
    /// update in float64, one step at a time from the same state (the two compute each
    /// element alike, but MKL's vector square root may round otherwise than the loop's).
    #[test]
    fn numerics_rmsprop_in_one_pass_computes_what_the_tensor_ops_do() {
        let cfg = OptimizerConfig { lr: 1e-3, ..Default::default() };
        let n = 100_003; // not a multiple of any vector width: the tail runs too
        let start = Tensor::randn([n], (Kind::Float, Device::Cpu));
        let (p_ops, mut p_host) = (start.copy().view([1, n]), start.copy().view([1, n]));
        let (ops, host) = (Optimizer::new(cfg.kind, &p_ops), Optimizer::new(cfg.kind, &p_host));
        let none = Tensor::zeros([], (Kind::Float, Device::Cpu));
        let f64s = |t: &Tensor| Vec::<f32>::try_from(&t.view([-1])).unwrap().into_iter().map(f64::from).collect::<Vec<f64>>();
        let alpha = cfg.rmsprop_alpha;
        let w = 1.0 - alpha;
        let rho = gamma(3) + U * (3.0 * w / w.min(1.0 - w) + 1.0);
        let mut margin = 0.0f64;
        for step in 0..5 {
            // From the same state: the host loop takes the tensor ops' parameters and moments.
            p_host.copy_(&p_ops);
            host.slots[0].shallow_clone().copy_(&ops.slots[0]);
            // Some exact zeros (a dead ReLU's gradient) among the values.
            let g = Tensor::randn([1, n], (Kind::Float, Device::Cpu)) * Tensor::rand([1, n], (Kind::Float, Device::Cpu)).gt(0.1);
            let (g_ops, g_host) = (g.copy(), g.copy());
            let scale = 0.25f32 + step as f32 * 0.2;
            let _ = g_ops.shallow_clone().g_mul_scalar_(scale as f64);
            let (p0, s0, g0) = (f64s(&p_ops), f64s(&ops.slots[0]), f64s(&g_ops));
            update(Form::Tensors, &cfg, &p_ops, &g_ops, &ops.slots, &none);
            let cfgs = [cfg];
            Rows { p: &p_host, g: &g_host, slots: &host.slots, cfgs: &cfgs }.rmsprop_host(&[scale], &[true]);
            assert!(
                g_host.allclose(&g_ops, 0.0, 0.0, false),
                "step {step}: the gradient left behind is the scaled one (one rounded product, equal everywhere)"
            );
            let (ph, po, sh, so) = (f64s(&p_host), f64s(&p_ops), f64s(&host.slots[0]), f64s(&ops.slots[0]));
            for i in 0..n as usize {
                // The same (scaled) gradient on both sides: only the update's own roundings
                // differ: the moment (rho), its root, the sum with eps, the quotient, the
                // product by lr, the sum with p (that last one rounds p0 - u, at most
                // |p1| + |u| in size).
                let s1 = alpha * s0[i] + w * g0[i] * g0[i];
                let u = cfg.lr * g0[i] / (s1.sqrt() + cfg.eps);
                let p1 = p0[i] - u;
                let (room_p, room_s) = (u.abs() * (rho / 2.0 + 5.0 * U) + (p1.abs() + u.abs()) * U, s1 * rho + f64::MIN_POSITIVE);
                for (what, got, want, room) in [
                    ("parameter", ph[i], p1, room_p),
                    ("parameter (ops)", po[i], p1, room_p),
                    ("square_avg", sh[i], s1, room_s),
                    ("square_avg (ops)", so[i], s1, room_s),
                ] {
                    let off = (got - want).abs();
                    assert!(off <= room, "step {step}, element {i}: {what} {got}, float64 {want}, off by {off:e} > {room:e}");
                    margin = margin.max(off / room);
                }
            }
        }
        assert!(!p_host.allclose(&start.view([1, n]), 1e-4, 1e-4, false), "the parameters moved");
        println!("largest error / bound {margin:.2e}");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn subnormals_are_flushed_inside_the_loop_only() {
        // A gradient of 1e-20 adds 1e-20 * (1e-20 * 0.01) = 1e-42 to its running average,
        // a subnormal in f32: flushed, the average stays 0. A normal one beside it is kept.
        let cfg = OptimizerConfig { lr: 1e-3, ..Default::default() };
        let p = Tensor::zeros([1, 2], (Kind::Float, Device::Cpu));
        let opt = Optimizer::new(cfg.kind, &p);
        let g = Tensor::from_slice(&[1e-20f32, 0.5]).view([1, 2]);
        let cfgs = [cfg];
        Rows { p: &p, g: &g, slots: &opt.slots, cfgs: &cfgs }.rmsprop_host(&[1.0], &[true]);
        let sq = Vec::<f32>::try_from(&opt.slots[0].view([-1])).unwrap();
        let expect = 0.5 * (0.5 * (1.0 - cfg.rmsprop_alpha) as f32); // the loop's order
        assert_eq!(sq[0], 0.0, "the subnormal square is flushed to zero");
        assert!((sq[1] - expect).abs() <= 1e-6 * expect, "a normal square is kept: {} against {expect}", sq[1]);
        // Outside the loop subnormals are still subnormals: the thread's mode was restored.
        let tiny = std::hint::black_box(1e-20f32);
        assert!(tiny * tiny > 0.0, "the flush stayed on after the step");
    }
}
