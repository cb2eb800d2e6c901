//! Host memory (feature `torch`): a CPU tensor's elements as a Rust slice, and loops
//! over such slices at the CPU's full speed. One of the two modules of `shine-agent`
//! allowed `unsafe`, with `model::sgemm` (every crate root says
//! `#![deny(unsafe_code)]`; `checks/tests/unsafe_audit.rs` lists the few modules that lift it,
//! across the workspace).
//!
//! Who uses it: the optimizer's RMSProp pass (`optim`) and the manager's
//! prioritized sampling (`shine_manager::storage::prioritized`), both of which run plain loops
//! over tensors on the CPU, where a libtorch op per step would cost more than the work.
//!
//! # Safety
//!
//! Three kinds of `unsafe`, each with what it assumes and why that holds.
//!
//! **A tensor's memory as a slice** ([`f32_slice`], [`f32_slice_mut`]:
//! `slice::from_raw_parts{,_mut}` over `Tensor::data_ptr`). The slice must cover `len`
//! initialised, aligned `f32`s that stay allocated while it lives, and nothing else
//! may write them while it lives (nor, for the `&mut` one, read them).
//! - *Checked on every call* (a panic otherwise): the tensor is on the CPU, of kind
//!   f32 and contiguous, so its `numel` elements lie end to end from its data pointer,
//!   aligned for f32 (libtorch's allocator aligns a storage to 64 bytes, and a view
//!   starts a whole number of elements into it); an empty tensor, whose pointer may
//!   be null, is an empty slice without touching the pointer. Every bit pattern is a
//!   valid `f32`, and libtorch's CPU tensors live in memory it allocated and wrote
//!   (zeros, a copy, random numbers: every tensor passed here is written first).
//! - *Follows from the signature*: the slice borrows the `Tensor` handle, and a handle
//!   holds a reference to its storage, so the storage outlives the slice; with
//!   `f32_slice_mut`'s `&mut`, that handle cannot be used to write, resize
//!   (`resize_`, `set_`) or even read the tensor while the slice lives.
//! - *Assumed, not checked*: no other handle to the same storage (a `shallow_clone`, a
//!   view such as `narrow` or the network's named parameters over its flat buffer, a
//!   handle on another thread) is used while a slice lives: to write during an
//!   `f32_slice`, to read or write during an `f32_slice_mut`; two slices taken at
//!   once are of two storages. Rust's borrow rules cannot see this (libtorch counts
//!   the handles of a storage; tch gives them out through `&`), so the callers keep it:
//!   the optimizer views the learner's flat parameters, its gradient buffer and its
//!   own slot, three storages made apart (`zeros_like`), during the learner's
//!   `&mut self` train step, when nothing else runs on the network (its parameter
//!   views are not used inside the optimizer step, and the learner belongs to one
//!   thread); `Priorities` views its own private tensors, never handed out or
//!   shallow-cloned, and a `Tensor::rand` result it just made. A new caller must make
//!   the same promise.
//!
//! **Subnormals flushed** ([`with_subnormals_flushed`]: `_mm_getcsr`, `_mm_setcsr` on
//! x86-64). Writing MXCSR's flush-to-zero and denormals-are-zero bits changes only how
//! this thread's SSE/AVX arithmetic treats subnormal numbers (read and written as
//! zero), no memory; the previous value is restored when the closure returns or
//! unwinds, so code outside sees the mode it had.
//!
//! **The widest vector unit** ([`run_widest`]: calling a `#[target_feature]` function).
//! Sound when the CPU has the feature; each call is behind
//! `is_x86_feature_detected!` for exactly the feature the function enables.
#![allow(unsafe_code)]

use tch::{Device, Kind, Tensor};

/// Whether [`f32_slice`] and [`f32_slice_mut`] take `t`: a contiguous f32 tensor on the
/// CPU.
pub fn is_host_f32(t: &Tensor) -> bool {
    t.device() == Device::Cpu && t.kind() == Kind::Float && t.is_contiguous()
}

fn check(t: &Tensor) -> usize {
    assert!(is_host_f32(t), "hostmem: a contiguous f32 CPU tensor, not {:?} {:?} (contiguous: {})", t.device(), t.kind(), t.is_contiguous());
    t.numel()
}

/// The elements of a contiguous f32 CPU tensor (panics on any other), to read.
///
/// While the slice lives, nothing may write the tensor's storage through another
/// handle: the module doc's `# Safety`.
pub fn f32_slice(t: &Tensor) -> &[f32] {
    let n = check(t);
    if n == 0 {
        return &[];
    }
    // SAFETY: `check`: CPU, f32, contiguous, so `n` aligned, initialised f32s from
    // `data_ptr`; the borrow of `t` keeps the storage alive; no writer through another
    // handle while the slice lives is the callers' promise (module doc).
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, n) }
}

/// The elements of a contiguous f32 CPU tensor (panics on any other), to write.
///
/// While the slice lives, nothing may read or write the tensor's storage through
/// another handle: the module doc's `# Safety`.
pub fn f32_slice_mut(t: &mut Tensor) -> &mut [f32] {
    let n = check(t);
    if n == 0 {
        return &mut [];
    }
    // SAFETY: as in `f32_slice`; `&mut t` excludes every other use of this handle while
    // the slice lives, and other handles are the callers' promise (module doc).
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, n) }
}

/// Runs `f` with subnormal floats (below 1.2e-38) read and written as zero by this
/// thread's vector arithmetic (x86-64's MXCSR flush-to-zero and denormals-are-zero
/// bits), restoring the previous mode after, also if `f` panics. Elsewhere: just `f`.
pub fn with_subnormals_flushed<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        // _mm_getcsr / _mm_setcsr are deprecated in favour of inline assembly, which
        // would say the same thing less plainly.
        #[allow(deprecated)]
        use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
        const FLUSH_TO_ZERO: u32 = 1 << 15;
        const DENORMALS_ARE_ZERO: u32 = 1 << 6;
        struct Restore(u32);
        impl Drop for Restore {
            #[allow(deprecated)]
            fn drop(&mut self) {
                // SAFETY: writes back the mode read below (module doc).
                unsafe { _mm_setcsr(self.0) };
            }
        }
        // SAFETY: reading MXCSR, then setting its two flush bits, changes only how this
        // thread's vector floating point treats subnormals (module doc).
        #[allow(deprecated)]
        let _restore = unsafe {
            let saved = _mm_getcsr();
            _mm_setcsr(saved | FLUSH_TO_ZERO | DENORMALS_ARE_ZERO);
            Restore(saved)
        };
        f()
    }
    #[cfg(not(target_arch = "x86_64"))]
    f()
}

/// A loop over host memory that [`run_widest`] compiles once per vector unit.
/// Implementations mark `run` `#[inline(always)]` (and what it calls in the loop), so
/// that it is compiled into each `#[target_feature]` copy rather than called from it.
pub trait VectorLoop {
    fn run(self);
}

/// Runs `l` compiled for the widest vector unit this CPU has, chosen at run time (the
/// release build targets plain x86-64): AVX-512F, else AVX2, else the baseline.
pub fn run_widest<L: VectorLoop>(l: L) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, the one feature `avx512` enables.
            return unsafe { avx512(l) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, the one feature `avx2` enables.
            return unsafe { avx2(l) };
        }
    }
    l.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512<L: VectorLoop>(l: L) {
    l.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2<L: VectorLoop>(l: L) {
    l.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_the_tensors_elements_and_writes_land_in_the_tensor() {
        let mut t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).view([2, 3]);
        assert_eq!(f32_slice(&t), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        f32_slice_mut(&mut t)[4] = -1.0;
        assert_eq!(Vec::<f32>::try_from(t.view([-1])).unwrap(), vec![1.0, 2.0, 3.0, 4.0, -1.0, 6.0]);
        // Empty: an empty slice. 0-dimensional: one element.
        let mut e = Tensor::zeros([0], (Kind::Float, Device::Cpu));
        assert!(f32_slice(&e).is_empty() && f32_slice_mut(&mut e).is_empty());
        let mut s = Tensor::ones([], (Kind::Float, Device::Cpu));
        f32_slice_mut(&mut s)[0] = 7.0;
        assert_eq!(f32::try_from(&s).unwrap(), 7.0);
    }

    #[test]
    fn tensors_that_are_not_contiguous_f32_on_the_cpu_are_refused() {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).view([2, 2]);
        let refused = |t: Tensor| std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f32_slice(&t).len())).is_err();
        assert!(!is_host_f32(&t.tr()) && refused(t.tr()), "a transposed view");
        assert!(!is_host_f32(&t.to_kind(Kind::Double)) && refused(t.to_kind(Kind::Double)), "f64");
        assert!(!is_host_f32(&t.to_kind(Kind::Int64)) && refused(t.to_kind(Kind::Int64)), "int64");
        assert!(is_host_f32(&t) && !refused(t.shallow_clone()));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn subnormals_are_flushed_inside_only_even_when_the_closure_panics() {
        let tiny = || std::hint::black_box(1e-20f32);
        assert!(tiny() * tiny() > 0.0, "1e-40 is a subnormal, not zero, by default");
        assert_eq!(with_subnormals_flushed(|| tiny() * tiny()), 0.0);
        assert!(tiny() * tiny() > 0.0, "the mode is restored after");
        let panicked = std::panic::catch_unwind(|| with_subnormals_flushed(|| panic!("inside"))).is_err();
        assert!(panicked && tiny() * tiny() > 0.0, "and after a panic inside");
    }

    #[test]
    fn the_widest_loop_runs_once() {
        struct Count<'a>(&'a mut [f32]);
        impl VectorLoop for Count<'_> {
            #[inline(always)]
            fn run(self) {
                for x in self.0 {
                    *x += 1.0;
                }
            }
        }
        let mut v = vec![0.0f32; 1001];
        run_widest(Count(&mut v));
        assert!(v.iter().all(|&x| x == 1.0));
    }
}
