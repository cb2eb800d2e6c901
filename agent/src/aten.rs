//! libtorch calls tch 0.24 does not expose (feature `torch`), through a small C++ shim
//! (`aten.cpp`, compiled by `build.rs` against the installed PyTorch's headers, as
//! torch-sys compiles its own wrapper):
//!
//! - [`count_ops`]: the ops a stretch of work dispatches, on any device: the CPU-side
//!   measure of a train step's cost on a GPU. There a step's time is its kernels one
//!   after another (1-5 us each on an H100, about 1.2 us even when empty), so the ops it
//!   dispatches, each one kernel or a few, are what a change to the step must lower; and
//!   this count needs no GPU, so a test holds it (`docs/benchmarks.md`, "Ops a step
//!   dispatches").
//! - [`fused_adam`]: Adam's fused kernel (`at::_fused_adam_`), its learning rate a
//!   tensor, a held-back run skipped through `found_inf`.
//! - [`addmm_relu`]: `relu(bias + x @ w)` as one op (`at::_addmm_activation`, whose
//!   bias and ReLU cuBLASLt applies in the product's epilogue); tch's own wrapper of it
//!   passes its `use_gelu` where the op takes `beta`, dropping the bias.
//! - [`storage_use_count`]: how many tensors hold a tensor's storage (tests: a dropped
//!   group frees its buffers).
//!
//! ```text
//! let (out, ops) = aten::count_ops(|| group.device_step(&batch, None))?;
//! ops.counted()      // the ops that launch device work, in order
//! ops.not_counted()  // views and metadata (view, narrow, select, expand, empty, ...)
//! ops.syncs()        // ops that would make the host wait for the device: must be none
//! ```
//!
//! What [`count_ops`] notes: every op called from outside another op, on this thread
//! (libtorch's `RecordFunction` observer, thread-local, with a depth counter: `linear`
//! counts once, not also its `addmm`). What counts: every noted op but those in
//! [`NOT_COUNTED`], which make views or set metadata and launch no kernel. What is a
//! sync: an op that reads a value back (`item`, `_local_scalar_dense`, `is_nonzero`,
//! `equal`, `allclose`), one whose result's size depends on the data (`nonzero`,
//! `masked_select`, `unique`), `cpu`, and any op whose tensor inputs or device argument
//! span two devices (a copy between them; a 0-dimensional CPU tensor is a scalar and
//! does not count). On a CPU run the last never shows, since everything is on one
//! device: tch's `f32::try_from` copies a tensor's data to the host through libtorch's `to`,
//! a sync on a GPU (it crosses devices) and a plain op on the CPU.
//!
//! # Safety
//! Each FFI call passes tch's tensor handles, which are pointers to `at::Tensor`
//! (torch-sys's `tensor` type), borrowed for the call only: the shim neither keeps nor
//! frees them. A result tensor comes back as a pointer the shim allocated with `new`,
//! as tch's own wrappers return theirs, and `Tensor::from_ptr` takes it over. It writes only into buffers this module owns and sizes (the error
//! message, the list of ops, a count). No C++ exception crosses into Rust (the shim
//! catches them and returns the message). The op counter's state is thread-local, and
//! [`count_ops`] begins and ends it on the calling thread around `work`.
#![allow(unsafe_code)]

use std::os::raw::{c_char, c_int, c_long};
use tch::Tensor;
use thiserror::Error;

#[derive(Debug, Error)]
#[error("libtorch: {0}")]
pub struct AtenError(String);

mod ffi {
    use std::os::raw::{c_char, c_int, c_long};
    use torch_sys::C_tensor;
    extern "C" {
        pub fn shine_op_count_begin(with_args: c_int, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_op_count_end(out: *mut c_char, out_len: usize, needed: *mut usize, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_fused_adam(
            param: *const C_tensor,
            grad: *const C_tensor,
            exp_avg: *const C_tensor,
            exp_avg_sq: *const C_tensor,
            step: *const C_tensor,
            lr: *const C_tensor,
            beta1: f64,
            beta2: f64,
            eps: f64,
            found_inf: *const C_tensor,
            err: *mut c_char,
            len: usize,
        ) -> c_int;
        pub fn shine_addmm_relu(out: *mut *mut C_tensor, bias: *const C_tensor, mat1: *const C_tensor, mat2: *const C_tensor, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_storage_use_count(t: *const C_tensor, count: *mut c_long, err: *mut c_char, len: usize) -> c_int;
    }
}

fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), AtenError> {
    let mut buf = [0u8; 512];
    if f(buf.as_mut_ptr().cast(), buf.len()) == 0 {
        return Ok(());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Err(AtenError(String::from_utf8_lossy(&buf[..end]).into_owned()))
}

/// Ops that make a view or set metadata: noted, not counted (no kernel on any device).
pub const NOT_COUNTED: &[&str] = &[
    "aten::view",
    "aten::_unsafe_view",
    "aten::view_as",
    "aten::select",
    "aten::narrow",
    "aten::slice",
    "aten::expand",
    "aten::expand_as",
    "aten::as_strided",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::transpose",
    "aten::t",
    "aten::permute",
    "aten::alias",
    "aten::detach",
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::resize_",
];

/// The ops [`count_ops`] noted, in order.
#[derive(Debug, Clone, Default)]
pub struct Ops {
    /// `(name, sync)` of every top-level op.
    pub all: Vec<(String, bool)>,
    /// With [`record_ops`]: each op's arguments as a CUDA graph keeps them (a tensor's
    /// kind, shape and device; every other value as it is), in the order of `all`.
    pub args: Vec<String>,
}

impl Ops {
    /// The ops that launch device work (all but [`NOT_COUNTED`]), in order.
    pub fn counted(&self) -> Vec<&str> {
        self.all.iter().map(|(n, _)| n.as_str()).filter(|n| !NOT_COUNTED.contains(n)).collect()
    }

    /// The views and metadata ops, in order.
    pub fn not_counted(&self) -> Vec<&str> {
        self.all.iter().map(|(n, _)| n.as_str()).filter(|n| NOT_COUNTED.contains(n)).collect()
    }

    /// The ops that would make the host wait for the device.
    pub fn syncs(&self) -> Vec<&str> {
        self.all.iter().filter(|(_, s)| *s).map(|(n, _)| n.as_str()).collect()
    }

    /// The counted ops by name, most frequent first (ties by name): `(count, name)`.
    pub fn by_name(&self) -> Vec<(usize, String)> {
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for n in self.counted() {
            *counts.entry(n).or_default() += 1;
        }
        let mut out: Vec<(usize, String)> = counts.into_iter().map(|(n, c)| (c, n.to_string())).collect();
        out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        out
    }

    /// Each op with its arguments, `name(args)` ([`record_ops`]): what a CUDA graph
    /// captured of the same work would replay. Two runs of a step with equal records
    /// replay alike from one capture: no value that changed between them is baked in.
    pub fn records(&self) -> Vec<String> {
        self.all.iter().zip(&self.args).map(|((n, _), a)| format!("{n}({a})")).collect()
    }
}

/// Run `work` and note the ops it dispatches on this thread.
pub fn count_ops<T>(work: impl FnOnce() -> T) -> Result<(T, Ops), AtenError> {
    noted(false, work)
}

/// [`count_ops`], each op noted with its arguments ([`Ops::records`]).
pub fn record_ops<T>(work: impl FnOnce() -> T) -> Result<(T, Ops), AtenError> {
    noted(true, work)
}

/// Run `work` and note the ops it dispatches on this thread, with their arguments if
/// `with_args`. (Ops libtorch runs on its own threads, such as its intra-op pool's, are
/// inside a top-level op anyway.)
fn noted<T>(with_args: bool, work: impl FnOnce() -> T) -> Result<(T, Ops), AtenError> {
    // SAFETY: the shim writes at most `len` bytes into the buffer `call` owns.
    call(|err, len| unsafe { ffi::shine_op_count_begin(i32::from(with_args), err, len) })?;
    let out = work();
    let mut needed = 0usize;
    // SAFETY: a null `out` asks for the size only; `needed` is ours to write.
    call(|err, len| unsafe { ffi::shine_op_count_end(std::ptr::null_mut(), 0, &mut needed, err, len) })?;
    let mut buf = vec![0u8; needed.max(1)];
    // SAFETY: `buf` holds `needed` bytes, the whole list and its NUL (kept by the shim
    // until the next begin on this thread).
    call(|err, len| unsafe { ffi::shine_op_count_end(buf.as_mut_ptr().cast(), buf.len(), &mut needed, err, len) })?;
    let text = std::ffi::CStr::from_bytes_until_nul(&buf).map_err(|_| AtenError("the list of ops without its end".into()))?;
    let mut ops = Ops::default();
    for line in text.to_string_lossy().lines() {
        let mut fields = line.splitn(3, '\t');
        let name = fields.next().unwrap_or_default().to_string();
        let sync = fields.next() == Some("sync");
        ops.all.push((name, sync));
        if with_args {
            ops.args.push(fields.next().unwrap_or_default().to_string());
        }
    }
    Ok((out, ops))
}

/// One Adam update of `param` (in place, with its moments `exp_avg`, `exp_avg_sq`)
/// by libtorch's fused kernel: PyTorch's Adam, no weight decay, no AMSGrad, the bias
/// corrections from `step` (a 0-dimensional f32, this update's number: count it
/// before), the learning rate `lr` a `[1]` f32 tensor. Where `found_inf` (a `[1]` f32)
/// holds 1 nothing changes. All on one device.
#[allow(clippy::too_many_arguments)]
pub fn fused_adam(param: &Tensor, grad: &Tensor, exp_avg: &Tensor, exp_avg_sq: &Tensor, step: &Tensor, lr: &Tensor, beta1: f64, beta2: f64, eps: f64, found_inf: Option<&Tensor>) -> Result<(), AtenError> {
    let inf = found_inf.map_or(std::ptr::null(), Tensor::as_ptr);
    // SAFETY: every pointer is a live tch handle borrowed for the call (module doc), or
    // null for no `found_inf`; the buffer is `call`'s.
    call(|err, len| unsafe { ffi::shine_fused_adam(param.as_ptr(), grad.as_ptr(), exp_avg.as_ptr(), exp_avg_sq.as_ptr(), step.as_ptr(), lr.as_ptr(), beta1, beta2, eps, inf, err, len) })
}

/// `relu(bias + x @ w)` (`bias` broadcast over the rows of the product) as one op.
pub fn addmm_relu(bias: &Tensor, x: &Tensor, w: &Tensor) -> Result<Tensor, AtenError> {
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    // SAFETY: live tch handles borrowed for the call; on success the shim stores a new
    // `at::Tensor` it allocated in `out`, which `from_ptr` then owns (and frees once).
    call(|err, len| unsafe { ffi::shine_addmm_relu(&mut out, bias.as_ptr(), x.as_ptr(), w.as_ptr(), err, len) })?;
    // SAFETY: as above: a fresh `at::Tensor*`, owned by nothing else.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// How many tensors (views included) hold `t`'s storage, `t` among them: 1 when `t` is
/// the last that keeps it allocated.
pub fn storage_use_count(t: &Tensor) -> Result<usize, AtenError> {
    let mut count: c_long = 0;
    // SAFETY: a live tch handle borrowed for the call; `count` is ours to write.
    call(|err, len| unsafe { ffi::shine_storage_use_count(t.as_ptr(), &mut count, err, len) })?;
    Ok(count as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn top_level_ops_are_noted_views_are_not_counted_and_a_read_back_is_a_sync() {
        let a = Tensor::ones([4, 3], (Kind::Float, Device::Cpu));
        let w = Tensor::ones([2, 3], (Kind::Float, Device::Cpu));
        let ((y, s), ops) = count_ops(|| {
            // linear calls matmul or addmm inside: one op noted.
            let y = a.linear(&w, None::<Tensor>);
            let v = y.narrow(0, 1, 2).view([-1]);
            let s = (&v * 2.0).sum(Kind::Float);
            // A value read back (`item`).
            (y, s.double_value(&[]))
        })
        .unwrap();
        assert_eq!((y.size(), s), (vec![4, 2], 2.0 * 3.0 * 4.0));
        let counted = ops.counted();
        assert_eq!(&counted[..3], ["aten::linear", "aten::mul", "aten::sum"], "{ops:?}");
        assert_eq!(ops.not_counted(), ["aten::narrow", "aten::view"], "{ops:?}");
        assert_eq!(ops.syncs(), ["aten::item"], "reading the sum back: {ops:?}");
        // Counting again starts afresh; nothing is noted outside `count_ops`.
        let _ = &a + &a;
        let (_, again) = count_ops(|| &a * 3.0).unwrap();
        assert_eq!(again.counted(), ["aten::mul"]);
        assert!(again.syncs().is_empty());
    }

    #[test]
    fn a_storage_is_held_by_each_view_and_freed_with_the_last() {
        let t = Tensor::zeros([4], (Kind::Float, Device::Cpu));
        assert_eq!(storage_use_count(&t).unwrap(), 1);
        let v = t.narrow(0, 1, 2);
        assert_eq!(storage_use_count(&t).unwrap(), 2, "a view holds the storage");
        // A shallow clone is the same tensor, not another holder.
        let same = t.shallow_clone();
        assert_eq!(storage_use_count(&same).unwrap(), 2);
        drop(v);
        assert_eq!(storage_use_count(&t).unwrap(), 1);
    }

    #[test]
    fn records_keep_the_values_a_graph_would_bake_in_and_not_the_tensors_contents() {
        let a = Tensor::ones([3], (Kind::Float, Device::Cpu));
        let b = Tensor::zeros([3], (Kind::Float, Device::Cpu));
        let record = |x: &Tensor, k: f64| record_ops(|| x * k).unwrap().1.records();
        // Other contents, the same shape and scalar: the same record.
        assert_eq!(record(&a, 2.0), record(&b, 2.0));
        // Another scalar, or another shape: another record.
        assert_ne!(record(&a, 2.0), record(&a, 3.0));
        assert_ne!(record(&a, 2.0), record(&Tensor::ones([4], (Kind::Float, Device::Cpu)), 2.0));
        let r = record(&a, 2.0);
        assert!(r.len() == 1 && r[0].starts_with("aten::mul(") && r[0].contains("[3]") && r[0].contains('2'), "{r:?}");
    }
}
