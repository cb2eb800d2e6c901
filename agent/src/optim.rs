//! The learner's optimizers (RMSProp, Adam) over one flat parameter buffer.
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
//! queued kernels, and the host loop would need the data on the host.

use crate::dqn::{DqnConfig, OptimizerKind};
use tch::{Device, Kind, Tensor};

pub(crate) struct Optimizer {
    pub(crate) kind: OptimizerKind,
    /// `slots[k]`: slot k for every parameter, laid out as the network's flat buffer
    /// (RMSProp: square_avg; Adam: exp_avg, exp_avg_sq: PyTorch's names).
    pub(crate) slots: Vec<Tensor>,
    /// Updates applied (Adam's bias correction needs it; a host counter, no sync).
    pub(crate) steps: u64,
}

impl Optimizer {
    pub(crate) fn slot_names(kind: OptimizerKind) -> &'static [&'static str] {
        match kind {
            OptimizerKind::Rmsprop => &["square_avg"],
            OptimizerKind::Adam => &["exp_avg", "exp_avg_sq"],
        }
    }

    pub(crate) fn new(kind: OptimizerKind, flat: &Tensor) -> Self {
        let slots = Self::slot_names(kind).iter().map(|_| flat.zeros_like()).collect();
        Optimizer { kind, slots, steps: 0 }
    }

    /// One update of the flat parameter buffer `p` with the gradient `g`, first
    /// multiplied in place by `scale` (a scalar tensor: the clipping coefficient), so
    /// that afterwards `g` holds the gradient applied. Call under `no_grad` if `p` is
    /// tracked by autograd.
    pub(crate) fn step(&mut self, cfg: &DqnConfig, p: &Tensor, g: &Tensor, scale: Option<&Tensor>) {
        let host = [p, g, &self.slots[0]].iter().all(|t| t.device() == Device::Cpu && t.kind() == Kind::Float && t.is_contiguous());
        if self.kind == OptimizerKind::Rmsprop && host {
            // On the CPU reading the scalar is a load, not a wait for a device.
            let scale = scale.map_or(1.0, |s| f32::try_from(s).expect("a scalar"));
            self.rmsprop_host(cfg, p, g, scale);
        } else {
            if let Some(s) = scale {
                let _ = g.shallow_clone().g_mul_(s);
            }
            self.step_tensors(cfg, p, g);
        }
    }

    /// The update in tensor ops, on any device.
    fn step_tensors(&mut self, cfg: &DqnConfig, p: &Tensor, g: &Tensor) {
        self.steps += 1;
        match self.kind {
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
                let t = self.steps as i32;
                let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
                let (m, v) = self.slots.split_at_mut(1);
                let (m, v) = (&mut m[0], &mut v[0]);
                let _ = m.g_mul_scalar_(b1).g_add_(&(g * (1.0 - b1)));
                let _ = v.g_mul_scalar_(b2).addcmul_(g, &g.g_mul_scalar(1.0 - b2));
                let denom = v.sqrt() / bc2.sqrt() + cfg.eps;
                let _ = p.shallow_clone().addcdiv_(&m.g_mul_scalar(-cfg.lr / bc1), &denom);
            }
        }
    }

    /// RMSProp as [`Optimizer::step_tensors`] computes it, in one pass over host memory
    /// (contiguous f32 CPU tensors, checked by the caller).
    fn rmsprop_host(&mut self, cfg: &DqnConfig, p: &Tensor, g: &Tensor, scale: f32) {
        self.steps += 1;
        let n = p.numel();
        assert!(g.numel() == n && self.slots[0].numel() == n, "parameters, gradient and square_avg laid out alike");
        // The constants as libtorch rounds its scalar operands: to the tensors' f32.
        let h = Rmsprop { scale, alpha: cfg.rmsprop_alpha as f32, one_minus_alpha: (1.0 - cfg.rmsprop_alpha) as f32, neg_lr: -cfg.lr as f32, eps: cfg.eps as f32 };
        // SAFETY: three distinct buffers (the parameters, their gradient, the slot),
        // each a contiguous f32 CPU tensor of n elements, none touched by anything
        // else while the slices live.
        let (p, g, sq) = unsafe {
            (host_f32(p, n), host_f32(g, n), host_f32(&self.slots[0], n))
        };
        rmsprop_dispatch(p, g, sq, &h);
    }
}

/// The elements of a contiguous f32 CPU tensor of `n` elements.
///
/// # Safety
/// No other reference to the tensor's storage may be used while the slice lives.
// A tensor handle is shared (libtorch counts references to its storage), so the one
// we are given is `&`; the caller's promise above is what makes the `&mut` sound.
#[allow(clippy::mut_from_ref)]
unsafe fn host_f32(t: &Tensor, n: usize) -> &mut [f32] {
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, n) }
}

struct Rmsprop {
    scale: f32,
    alpha: f32,
    one_minus_alpha: f32,
    neg_lr: f32,
    eps: f32,
}

/// Subnormal floats (below 1.2e-38) read and written as zero while the loop runs (the
/// x86 control register's flush-to-zero and denormals-are-zero bits, restored after).
/// Why: as training goes on, the squared gradients of rarely active units fall below
/// f32's normal range, and on Intel cores every subnormal operand costs a microcode
/// assist: in a learn.sh run on a 2-vCPU Intel Xeon this loop took 54 % of the trainer
/// thread (perf), and the run made 34,000 steps a minute where the benchmark's 0.66 ms
/// step allows about 90,000 (the benchmark's random gradients are never subnormal). What is
/// lost is below 1.2e-38 in a running average of squares, whose square root (1e-19) is
/// nothing beside `eps` (1e-8 by default) in the update's denominator.
fn rmsprop_dispatch(p: &mut [f32], g: &mut [f32], sq: &mut [f32], h: &Rmsprop) {
    #[cfg(target_arch = "x86_64")]
    {
        // _mm_getcsr / _mm_setcsr are deprecated in favour of inline assembly, which
        // would say the same thing less plainly.
        #[allow(deprecated)]
        use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
        const FLUSH_TO_ZERO: u32 = 1 << 15;
        const DENORMALS_ARE_ZERO: u32 = 1 << 6;
        // SAFETY: reading and writing MXCSR's two flush bits changes only how this
        // thread's vector floating point treats subnormals, and the old value returns.
        #[allow(deprecated)]
        unsafe {
            let saved = _mm_getcsr();
            _mm_setcsr(saved | FLUSH_TO_ZERO | DENORMALS_ARE_ZERO);
            rmsprop_widest(p, g, sq, h);
            _mm_setcsr(saved);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    rmsprop_widest(p, g, sq, h)
}

/// The widest vector unit this CPU has, chosen at run time (the release build targets
/// plain x86-64).
fn rmsprop_widest(p: &mut [f32], g: &mut [f32], sq: &mut [f32], h: &Rmsprop) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { rmsprop_avx512(p, g, sq, h) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { rmsprop_avx2(p, g, sq, h) };
        }
    }
    rmsprop_loop(p, g, sq, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn rmsprop_avx512(p: &mut [f32], g: &mut [f32], sq: &mut [f32], h: &Rmsprop) {
    rmsprop_loop(p, g, sq, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn rmsprop_avx2(p: &mut [f32], g: &mut [f32], sq: &mut [f32], h: &Rmsprop) {
    rmsprop_loop(p, g, sq, h)
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

    #[test]
    fn our_optimizers_match_libtorchs() {
        use tch::nn;
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
            let mut ours = Optimizer::new(kind, &p);
            for _ in 0..10 {
                reference.backward_step(&loss(&p_ref));
                p.zero_grad();
                loss(&p).backward();
                tch::no_grad(|| ours.step(&cfg, &p, &p.grad(), None));
            }
            let (a, b) = (Vec::<f32>::try_from(&p).unwrap(), Vec::<f32>::try_from(&p_ref).unwrap());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-5, "{kind:?}: ours {a:?}, libtorch {b:?}");
            }
            assert_ne!(a, vec![1.0, -2.0, 0.5, 3.0], "the parameters moved");
        }
    }

    #[test]
    fn rmsprop_in_one_pass_computes_what_the_tensor_ops_do() {
        let cfg = DqnConfig { lr: 1e-3, ..Default::default() };
        let n = 100_003; // not a multiple of any vector width: the tail runs too
        let start = Tensor::randn([n], (Kind::Float, Device::Cpu));
        let (p_ops, p_host) = (start.copy(), start.copy());
        let (mut ops, mut host) = (Optimizer::new(OptimizerKind::Rmsprop, &p_ops), Optimizer::new(OptimizerKind::Rmsprop, &p_host));
        for step in 0..5 {
            // Some exact zeros (a dead ReLU's gradient) among the values.
            let g = Tensor::randn([n], (Kind::Float, Device::Cpu)) * Tensor::rand([n], (Kind::Float, Device::Cpu)).gt(0.1);
            let (g_ops, g_host) = (g.copy(), g.copy());
            let scale = Tensor::from(0.25f32 + step as f32 * 0.2);
            let _ = g_ops.shallow_clone().g_mul_(&scale);
            ops.step_tensors(&cfg, &p_ops, &g_ops);
            host.step(&cfg, &p_host, &g_host, Some(&scale));
            assert!(g_host.allclose(&g_ops, 0.0, 0.0, false), "step {step}: the gradient left behind is the scaled one");
            for (what, a, b) in [("square_avg", &host.slots[0], &ops.slots[0]), ("parameters", &p_host, &p_ops)] {
                let worst = f64::try_from((a - b).abs().max()).unwrap();
                assert!(worst < 1e-6, "step {step}: {what} differ by {worst}");
            }
        }
        assert_eq!((host.steps, ops.steps), (5, 5));
        assert!(!p_host.allclose(&start, 1e-4, 1e-4, false), "the parameters moved");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn subnormals_are_flushed_inside_the_loop_only() {
        // A gradient of 1e-20 adds 1e-20 * (1e-20 * 0.01) = 1e-42 to its running average,
        // a subnormal in f32: flushed, the average stays 0. A normal one beside it is kept.
        let cfg = DqnConfig { lr: 1e-3, ..Default::default() };
        let p = Tensor::zeros([2], (Kind::Float, Device::Cpu));
        let mut opt = Optimizer::new(OptimizerKind::Rmsprop, &p);
        let g = Tensor::from_slice(&[1e-20f32, 0.5]);
        opt.step(&cfg, &p, &g, None);
        let sq = Vec::<f32>::try_from(&opt.slots[0]).unwrap();
        let expect = 0.5 * (0.5 * (1.0 - cfg.rmsprop_alpha) as f32); // the loop's order
        assert_eq!(sq[0], 0.0, "the subnormal square is flushed to zero");
        assert!((sq[1] - expect).abs() <= 1e-6 * expect, "a normal square is kept: {} against {expect}", sq[1]);
        // Outside the loop subnormals are still subnormals: the thread's mode was restored.
        let tiny = std::hint::black_box(1e-20f32);
        assert!(tiny * tiny > 0.0, "the flush stayed on after the step");
    }
}
