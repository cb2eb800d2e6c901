//! The learner's optimizers (RMSProp, Adam) over one flat parameter buffer, and their
//! configuration ([`OptimizerConfig`], the optimizer's keys of `[dqn]`).
//!
//! Written here rather than taken from `tch::nn::Optimizer`, because tch's optimizer
//! cannot export its state: ours is plain tensors laid out as the parameters, so a
//! checkpoint holds it and a restarted manager continues with the same moment
//! estimates. Element by element, so one pass over the buffer updates every parameter.
//!
//! On the CPU, RMSProp (the default) runs as one loop over host memory instead of six
//! tensor ops: the ops each make a pass over the 140,000 parameters and allocate a
//! temporary of their size, and libtorch's square root goes through MKL's slow,
//! exception-checking vector kernel. Together they were a fifth of a train step at
//! batch 32 (`perf`, docs/benchmarks.md). On a GPU the tensor ops stay: they are
//! queued kernels, and the host loop would need the data on the host. The loop sees
//! the tensors' memory through [`crate::hostmem`], which holds its `unsafe`.

use crate::hostmem;
use serde::{Deserialize, Serialize};
use tch::Tensor;

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

pub(crate) struct Optimizer {
    pub(crate) cfg: OptimizerConfig,
    /// `slots[k]`: slot k for every parameter, laid out as the network's flat buffer
    /// (RMSProp: square_avg; Adam: exp_avg, exp_avg_sq: PyTorch's names).
    pub(crate) slots: Vec<Tensor>,
    /// Updates applied (the checkpoint's count; a host counter, no sync).
    pub(crate) steps: u64,
    /// Adam only: the updates applied, as an f64 `[1]` tensor on the parameters'
    /// device, counted by the update itself. Adam's bias correction is computed from it
    /// there, so a captured CUDA graph of the step stays right at every replay (a host
    /// count would be a constant of the graph). Equal to `steps` between updates.
    pub(crate) device_steps: Option<Tensor>,
}

impl Optimizer {
    pub(crate) fn slot_names(kind: OptimizerKind) -> &'static [&'static str] {
        match kind {
            OptimizerKind::Rmsprop => &["square_avg"],
            OptimizerKind::Adam => &["exp_avg", "exp_avg_sq"],
        }
    }

    pub(crate) fn new(cfg: OptimizerConfig, flat: &Tensor) -> Self {
        let slots = Self::slot_names(cfg.kind).iter().map(|_| flat.zeros_like()).collect();
        let device_steps = (cfg.kind == OptimizerKind::Adam).then(|| Tensor::zeros([1], (tch::Kind::Double, flat.device())));
        Optimizer { cfg, slots, steps: 0, device_steps }
    }

    /// Set the count of updates applied (a restore), on the host and the device.
    pub(crate) fn set_steps(&mut self, n: u64) {
        self.steps = n;
        if let Some(t) = &mut self.device_steps {
            let _ = t.fill_(n as f64);
        }
    }

    pub(crate) fn kind(&self) -> OptimizerKind {
        self.cfg.kind
    }

    /// One update of the flat parameter buffer `p` with the gradient `g`, first
    /// multiplied in place by `scale` (a scalar tensor: the clipping coefficient), so
    /// that afterwards `g` holds the gradient applied. Call under `no_grad` if `p` is
    /// tracked by autograd. `p`, `g` and the slots are three distinct buffers. (The
    /// learner applies and counts apart: [`Optimizer::apply`], [`Optimizer::count_step`].)
    #[cfg(test)]
    pub(crate) fn step(&mut self, p: &mut Tensor, g: &mut Tensor, scale: Option<&Tensor>) {
        self.apply(p, g, scale);
        self.count_step();
    }

    /// [`Optimizer::step`]'s update without counting it: device work only, which is
    /// what a captured CUDA graph replays; the count is [`Optimizer::count_step`]'s.
    pub(crate) fn apply(&mut self, p: &mut Tensor, g: &mut Tensor, scale: Option<&Tensor>) {
        let host = [&*p, &*g, &self.slots[0]].into_iter().all(hostmem::is_host_f32);
        if self.kind() == OptimizerKind::Rmsprop && host {
            // On the CPU reading the scalar is a load, not a wait for a device.
            let scale = scale.map_or(1.0, |s| f32::try_from(s).expect("a scalar"));
            self.rmsprop_host(p, g, scale);
        } else {
            if let Some(s) = scale {
                let _ = g.g_mul_(s);
            }
            self.step_tensors(p, g);
        }
    }

    /// Count one update applied (Adam's bias correction reads the count).
    pub(crate) fn count_step(&mut self) {
        self.steps += 1;
    }

    /// The update in tensor ops, on any device.
    fn step_tensors(&mut self, p: &Tensor, g: &Tensor) {
        let cfg = self.cfg;
        match cfg.kind {
            OptimizerKind::Rmsprop => {
                // square_avg = alpha * square_avg + (1 - alpha) * g^2
                // p -= lr * g / (sqrt(square_avg) + eps)
                let a = cfg.rmsprop_alpha;
                let sq = &mut self.slots[0];
                let _ = sq.g_mul_scalar_(a).addcmul_(g, &g.g_mul_scalar(1.0 - a));
                let _ = p.shallow_clone().addcdiv_(&g.g_mul_scalar(-cfg.lr), &(sq.sqrt() + cfg.eps));
            }
            OptimizerKind::Adam => {
                let (b1, b2) = cfg.adam_betas;
                // This update's number, on the device: the ones counted so far, and this one.
                let count = self.device_steps.as_mut().expect("Adam counts its updates on the device");
                let t = &*count + 1.0;
                // The bias corrections in f64, as on the host before: -lr / (1 - b1^t) and
                // sqrt(1 - b2^t), with b^t = exp(t ln b); then the f32 the update uses.
                let power = |b: f64| (&t * b.ln()).exp();
                let step_size = ((1.0f64 - power(b1)).reciprocal() * -cfg.lr).to_kind(tch::Kind::Float);
                let bc2_sqrt = (1.0f64 - power(b2)).sqrt().to_kind(tch::Kind::Float);
                count.copy_(&t);
                let (m, v) = self.slots.split_at_mut(1);
                let (m, v) = (&mut m[0], &mut v[0]);
                let _ = m.g_mul_scalar_(b1).g_add_(&(g * (1.0 - b1)));
                let _ = v.g_mul_scalar_(b2).addcmul_(g, &g.g_mul_scalar(1.0 - b2));
                let denom = v.sqrt() / bc2_sqrt + cfg.eps;
                let _ = p.shallow_clone().addcdiv_(&(&*m * step_size), &denom);
            }
        }
    }

    /// RMSProp as [`Optimizer::step_tensors`] computes it, in one pass over host memory
    /// (contiguous f32 CPU tensors, checked by the caller and again by `hostmem`).
    fn rmsprop_host(&mut self, p: &mut Tensor, g: &mut Tensor, scale: f32) {
        let cfg = self.cfg;
        // The constants as libtorch rounds its scalar operands: to the tensors' f32.
        let (alpha, lr, eps) = (cfg.rmsprop_alpha, cfg.lr, cfg.eps);
        let h = Rmsprop { scale, alpha: alpha as f32, one_minus_alpha: (1.0 - alpha) as f32, neg_lr: -lr as f32, eps: eps as f32 };
        // Three distinct buffers (the learner's parameters and gradient, our slot), each
        // touched by nothing else while the slices live: hostmem's `# Safety`.
        let (p, g, sq) = (hostmem::f32_slice_mut(p), hostmem::f32_slice_mut(g), hostmem::f32_slice_mut(&mut self.slots[0]));
        assert!(g.len() == p.len() && sq.len() == p.len(), "parameters, gradient and square_avg laid out alike");
        // Subnormals flushed while the loop runs. Why: as training goes on, the squared
        // gradients of rarely active units fall below f32's normal range (1.2e-38), and
        // on Intel cores every subnormal operand costs a microcode assist: in a learn.sh
        // run on a 2-vCPU Intel Xeon this loop took 54 % of the trainer thread (perf),
        // and the run made 34,000 steps a minute where the benchmark's 0.66 ms step
        // allows about 90,000 (the benchmark's random gradients are never subnormal).
        // What is lost is below 1.2e-38 in a running average of squares, whose square
        // root (1e-19) is nothing beside `eps` (1e-8 by default) in the denominator.
        hostmem::with_subnormals_flushed(|| hostmem::run_widest(RmspropLoop { p, g, sq, h: &h }));
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

    /// Ours and libtorch's optimizers over ten steps of a quadratic loss: both inside
    /// what float32 can make of the same updates computed in float64 (`trajectory`).
    #[test]
    fn numerics_our_optimizers_match_libtorchs() {
        use tch::nn;
        use tch::nn::OptimizerConfig as _;
        let init = [1.0f32, -2.0, 0.5, 3.0];
        let scales = [1.0f32, 0.5, 4.0, 0.1];
        for kind in [OptimizerKind::Rmsprop, OptimizerKind::Adam] {
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
            let mut ours = Optimizer::new(cfg, &p);
            for _ in 0..10 {
                reference.backward_step(&loss(&p_ref));
                p.zero_grad();
                loss(&p).backward();
                let mut g = p.grad();
                tch::no_grad(|| ours.step(&mut p, &mut g, None));
            }
            let (a, b) = (Vec::<f32>::try_from(&p).unwrap(), Vec::<f32>::try_from(&p_ref).unwrap());
            let mut margin = 0.0f64;
            for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                let want = trajectory(kind, &cfg, init[i] as f64, scales[i] as f64, 10);
                let room = (want.hi - want.v).max(want.v - want.lo) + U * want.v.abs();
                for (who, got) in [("ours", x), ("libtorch's", y)] {
                    let off = (got as f64 - want.v).abs();
                    assert!(off <= room, "{kind:?}, element {i}: {who} {got}, float64 {}, off by {off:e} > {room:e}", want.v);
                    margin = margin.max(off / room);
                }
            }
            assert_ne!(a, init.to_vec(), "the parameters moved");
            println!("{kind:?}: largest error / bound {margin:.2e}");
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
        let (p_ops, mut p_host) = (start.copy(), start.copy());
        let (mut ops, mut host) = (Optimizer::new(cfg, &p_ops), Optimizer::new(cfg, &p_host));
        let f64s = |t: &Tensor| Vec::<f32>::try_from(t).unwrap().into_iter().map(f64::from).collect::<Vec<f64>>();
        let alpha = cfg.rmsprop_alpha;
        let w = 1.0 - alpha;
        let rho = gamma(3) + U * (3.0 * w / w.min(1.0 - w) + 1.0);
        let mut margin = 0.0f64;
        for step in 0..5 {
            // From the same state: the host loop takes the tensor ops' parameters and moments.
            p_host.copy_(&p_ops);
            host.slots[0].copy_(&ops.slots[0]);
            // Some exact zeros (a dead ReLU's gradient) among the values.
            let g = Tensor::randn([n], (Kind::Float, Device::Cpu)) * Tensor::rand([n], (Kind::Float, Device::Cpu)).gt(0.1);
            let (g_ops, mut g_host) = (g.copy(), g.copy());
            let scale = Tensor::from(0.25f32 + step as f32 * 0.2);
            let _ = g_ops.shallow_clone().g_mul_(&scale);
            let (p0, s0, g0) = (f64s(&p_ops), f64s(&ops.slots[0]), f64s(&g_ops));
            ops.step_tensors(&p_ops, &g_ops);
            ops.count_step();
            host.step(&mut p_host, &mut g_host, Some(&scale));
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
        assert_eq!((host.steps, ops.steps), (5, 5));
        assert!(!p_host.allclose(&start, 1e-4, 1e-4, false), "the parameters moved");
        println!("largest error / bound {margin:.2e}");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn subnormals_are_flushed_inside_the_loop_only() {
        // A gradient of 1e-20 adds 1e-20 * (1e-20 * 0.01) = 1e-42 to its running average,
        // a subnormal in f32: flushed, the average stays 0. A normal one beside it is kept.
        let cfg = OptimizerConfig { lr: 1e-3, ..Default::default() };
        let mut p = Tensor::zeros([2], (Kind::Float, Device::Cpu));
        let mut opt = Optimizer::new(cfg, &p);
        let mut g = Tensor::from_slice(&[1e-20f32, 0.5]);
        opt.step(&mut p, &mut g, None);
        let sq = Vec::<f32>::try_from(&opt.slots[0]).unwrap();
        let expect = 0.5 * (0.5 * (1.0 - cfg.rmsprop_alpha) as f32); // the loop's order
        assert_eq!(sq[0], 0.0, "the subnormal square is flushed to zero");
        assert!((sq[1] - expect).abs() <= 1e-6 * expect, "a normal square is kept: {} against {expect}", sq[1]);
        // Outside the loop subnormals are still subnormals: the thread's mode was restored.
        let tiny = std::hint::black_box(1e-20f32);
        assert!(tiny * tiny > 0.0, "the flush stayed on after the step");
    }
}
