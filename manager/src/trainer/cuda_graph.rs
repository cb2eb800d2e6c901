//! CUDA graphs of libtorch work: record a sequence of ops once, then launch all of it
//! with one call. For a network this small, a train step on a GPU costs the time to
//! launch its few hundred kernels, not to run them; a graph replay launches them all at
//! once (Parr's "no input from the host" taken one step further).
//!
//! ```text
//! let pool = GraphPool::new(device)?;          // one per owner of graphs, for its life
//! let mut g = CudaGraph::new()?;
//! g.capture(&pool, || { /* tch ops: recorded, not run */ })?;
//! g.replay()?;   // runs what was recorded, on the same memory
//! memory(device)?                               // (allocated, reserved) bytes
//! empty_cache()?                                // after dropping an owner's graphs
//! ```
//!
//! What a captured region may do (PyTorch's rules for `torch.cuda.graph`): only device
//! work, nothing that reads back to the host (no `f64::try_from`, no `.item()`), no
//! decision on the host that depends on a device value; tensors it reads and writes must
//! keep their memory between replays (parameters updated in place, a replay ring
//! written with `copy_`), and the tensors it creates live in the graph's own memory
//! pool: keep their handles from the capture and read them after each replay. Random
//! ops draw from PyTorch's CUDA generator, which graph capture makes replay-safe (each
//! replay draws new numbers). Host values baked into the recorded kernels (a bound of
//! `randint`, a learning rate, a step count) stay as they were at the capture, so the
//! train step reads every value that changes (the replay's fill level, Adam's count,
//! prioritized sampling's exponent, the group's mask) from tensors written in place,
//! and is captured once for the life of its group.
//!
//! Memory: each owner of graphs (a group of runs) captures into one [`GraphPool`] of
//! its own, on one capture stream of its own, for its life; when it is dropped, its
//! graphs' memory goes back to the device at the next [`empty_cache`].
//!
//! The graph itself is PyTorch's `at::cuda::CUDAGraph`, through the C++ shim in
//! `cuda_graph.cpp` that `build.rs` compiles against the installed PyTorch's headers
//! where that PyTorch has CUDA (`cfg(shine_cuda_graph)`). Elsewhere every call is an
//! error saying so.
//!
//! # Safety
//! The FFI calls take the pointer `shine_cuda_graph_new` returned, which this type owns
//! alone: it is never copied out, it is freed once (in `Drop`), and `CudaGraph` is not
//! `Sync` or `Clone`, so no two calls use it at once. Errors come back as a C string the
//! shim writes into a buffer we own and size; C++ exceptions never cross (the shim
//! catches them).
#![allow(unsafe_code)]

use thiserror::Error;

#[derive(Debug, Error)]
pub enum GraphError {
    #[error("this build of shine-manager has no CUDA graph support (its PyTorch had no CUDA headers at build time); set [trainer] cuda_graph = false")]
    NotBuilt,
    #[error("CUDA graph: {0}")]
    Cuda(String),
}

#[cfg(shine_cuda_graph)]
mod ffi {
    use std::os::raw::{c_char, c_int, c_void};
    extern "C" {
        pub fn shine_cuda_graph_new(err: *mut c_char, len: usize) -> *mut c_void;
        pub fn shine_cuda_graph_free(g: *mut c_void);
        pub fn shine_graph_pool_new(device: c_int, pool_a: *mut u64, pool_b: *mut u64, stream: *mut i64, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_graph_capture_begin(g: *mut c_void, device: c_int, pool_a: u64, pool_b: u64, stream: i64, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_empty_cache(err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_profiler(on: c_int, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_memory(device: c_int, allocated: *mut u64, reserved: *mut u64, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_graph_capture_end(g: *mut c_void, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_graph_replay(g: *mut c_void, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_graph_count(g: *mut c_void, nodes: *mut usize, kernels: *mut usize, err: *mut c_char, len: usize) -> c_int;
        pub fn shine_cuda_graph_kernel_names(
            g: *mut c_void,
            dot: *const c_char,
            out: *mut c_char,
            out_len: usize,
            needed: *mut usize,
            err: *mut c_char,
            len: usize,
        ) -> c_int;
    }
}

/// One captured graph (PyTorch's `at::cuda::CUDAGraph`).
pub struct CudaGraph {
    #[cfg(shine_cuda_graph)]
    ptr: *mut std::os::raw::c_void,
    captured: bool,
}

// The graph may move to the device thread; it is used from one thread at a time.
#[cfg(shine_cuda_graph)]
unsafe impl Send for CudaGraph {}

/// Whether this build can capture graphs at all (a CUDA device is needed besides).
pub const BUILT: bool = cfg!(shine_cuda_graph);

#[cfg(shine_cuda_graph)]
fn call(f: impl FnOnce(*mut std::os::raw::c_char, usize) -> std::os::raw::c_int) -> Result<(), GraphError> {
    let mut buf = [0u8; 512];
    if f(buf.as_mut_ptr().cast(), buf.len()) == 0 {
        return Ok(());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Err(GraphError::Cuda(String::from_utf8_lossy(&buf[..end]).into_owned()))
}

impl CudaGraph {
    #[cfg(shine_cuda_graph)]
    pub fn new() -> Result<CudaGraph, GraphError> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the shim writes at most `len` bytes into the buffer `call` owns.
        call(|err, len| {
            ptr = unsafe { ffi::shine_cuda_graph_new(err, len) };
            i32::from(ptr.is_null())
        })?;
        Ok(CudaGraph { ptr, captured: false })
    }

    #[cfg(not(shine_cuda_graph))]
    pub fn new() -> Result<CudaGraph, GraphError> {
        Err(GraphError::NotBuilt)
    }

    /// Record what `work` does on `pool`'s CUDA device (run nothing of it), into `pool`,
    /// on its capture stream. A failed capture leaves the graph unusable; make a new one.
    #[cfg(shine_cuda_graph)]
    pub fn capture<T>(&mut self, pool: &GraphPool, work: impl FnOnce() -> T) -> Result<T, GraphError> {
        let (a, b) = pool.id;
        // SAFETY: `self.ptr` is ours (module doc); the buffer is `call`'s.
        call(|err, len| unsafe { ffi::shine_cuda_graph_capture_begin(self.ptr, pool.device as i32, a, b, pool.stream, err, len) })?;
        let out = work();
        call(|err, len| unsafe { ffi::shine_cuda_graph_capture_end(self.ptr, err, len) })?;
        self.captured = true;
        Ok(out)
    }

    #[cfg(not(shine_cuda_graph))]
    pub fn capture<T>(&mut self, _pool: &GraphPool, _work: impl FnOnce() -> T) -> Result<T, GraphError> {
        Err(GraphError::NotBuilt)
    }

    /// Run what was captured, on the current stream.
    #[cfg(shine_cuda_graph)]
    pub fn replay(&mut self) -> Result<(), GraphError> {
        if !self.captured {
            return Err(GraphError::Cuda("replay before a capture".into()));
        }
        // SAFETY: as above.
        call(|err, len| unsafe { ffi::shine_cuda_graph_replay(self.ptr, err, len) })
    }

    #[cfg(not(shine_cuda_graph))]
    pub fn replay(&mut self) -> Result<(), GraphError> {
        let _ = self.captured;
        Err(GraphError::NotBuilt)
    }

    /// The captured graph's size: (nodes, of which kernels). What one replay launches.
    #[cfg(shine_cuda_graph)]
    pub fn count(&self) -> Result<(usize, usize), GraphError> {
        if !self.captured {
            return Err(GraphError::Cuda("count before a capture".into()));
        }
        let (mut nodes, mut kernels) = (0usize, 0usize);
        // SAFETY: as above; the two counts are ours to write.
        call(|err, len| unsafe { ffi::shine_cuda_graph_count(self.ptr, &mut nodes, &mut kernels, err, len) })?;
        Ok((nodes, kernels))
    }

    #[cfg(not(shine_cuda_graph))]
    pub fn count(&self) -> Result<(usize, usize), GraphError> {
        Err(GraphError::NotBuilt)
    }

    /// The captured graph's kernels by name (demangled; "(unnamed kernel)" where the
    /// CUDA runtime cannot tell), in node order: what one replay launches. With `dot`,
    /// the graph is also written there in Graphviz form (`cudaGraphDebugDotPrint`).
    #[cfg(shine_cuda_graph)]
    pub fn kernel_names(&self, dot: Option<&std::path::Path>) -> Result<Vec<String>, GraphError> {
        if !self.captured {
            return Err(GraphError::Cuda("kernel names before a capture".into()));
        }
        let dot = match dot {
            Some(p) => Some(std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| GraphError::Cuda(format!("a NUL in {}", p.display())))?),
            None => None,
        };
        let dot_ptr = dot.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        let mut needed = 0usize;
        // SAFETY: as above; `dot_ptr` is null or a NUL-ended string that outlives the
        // call; a null `out` asks for the size only.
        call(|err, len| unsafe { ffi::shine_cuda_graph_kernel_names(self.ptr, dot_ptr, std::ptr::null_mut(), 0, &mut needed, err, len) })?;
        let mut buf = vec![0u8; needed.max(1)];
        // SAFETY: `buf` holds `needed` bytes, the whole list and its NUL (the graph
        // does not change between the calls); no second DOT write.
        call(|err, len| unsafe { ffi::shine_cuda_graph_kernel_names(self.ptr, std::ptr::null(), buf.as_mut_ptr().cast(), buf.len(), &mut needed, err, len) })?;
        let text = std::ffi::CStr::from_bytes_until_nul(&buf).map_err(|_| GraphError::Cuda("kernel names without their end".into()))?;
        Ok(text.to_string_lossy().lines().map(str::to_string).collect())
    }

    #[cfg(not(shine_cuda_graph))]
    pub fn kernel_names(&self, _dot: Option<&std::path::Path>) -> Result<Vec<String>, GraphError> {
        Err(GraphError::NotBuilt)
    }
}

/// A memory pool and a capture stream on one CUDA device, for all the graphs of one
/// owner (a group of runs) over its life: its graphs share the pool instead of each
/// keeping a private one, and the pool's memory goes back when the owner is dropped
/// (and [`empty_cache`] runs).
#[derive(Debug, Clone, Copy)]
pub struct GraphPool {
    device: usize,
    id: (u64, u64),
    stream: i64,
}

impl GraphPool {
    #[cfg(shine_cuda_graph)]
    pub fn new(device: usize) -> Result<GraphPool, GraphError> {
        let (mut a, mut b, mut stream) = (0u64, 0u64, 0i64);
        // SAFETY: the shim writes the three numbers and at most `len` bytes of `call`'s buffer.
        call(|err, len| unsafe { ffi::shine_graph_pool_new(device as i32, &mut a, &mut b, &mut stream, err, len) })?;
        Ok(GraphPool { device, id: (a, b), stream })
    }

    #[cfg(not(shine_cuda_graph))]
    pub fn new(_device: usize) -> Result<GraphPool, GraphError> {
        Err(GraphError::NotBuilt)
    }
}

/// Hand the device memory the caching allocator holds but no tensor uses back to the
/// device (after a group's graphs are dropped). Without CUDA graph support, nothing.
pub fn empty_cache() -> Result<(), GraphError> {
    #[cfg(shine_cuda_graph)]
    // SAFETY: the shim writes at most `len` bytes into the buffer `call` owns.
    call(|err, len| unsafe { ffi::shine_cuda_empty_cache(err, len) })?;
    Ok(())
}

/// Turn the CUDA profiler on or off (`cudaProfilerStart`, `cudaProfilerStop`): under
/// `ncu --profile-from-start off` only the work between the two is profiled.
pub fn profiler(on: bool) -> Result<(), GraphError> {
    #[cfg(shine_cuda_graph)]
    {
        // SAFETY: the shim writes at most `len` bytes into the buffer `call` owns.
        call(|err, len| unsafe { ffi::shine_cuda_profiler(i32::from(on), err, len) })
    }
    #[cfg(not(shine_cuda_graph))]
    {
        let _ = on;
        Err(GraphError::NotBuilt)
    }
}

/// Bytes of CUDA device `device`'s memory in tensors (allocated) and held by the caching
/// allocator (reserved; what nvidia-smi counts of the process, less CUDA's own).
#[cfg(shine_cuda_graph)]
pub fn memory(device: usize) -> Result<(u64, u64), GraphError> {
    let (mut allocated, mut reserved) = (0u64, 0u64);
    // SAFETY: the shim writes the two counts and at most `len` bytes of `call`'s buffer.
    call(|err, len| unsafe { ffi::shine_cuda_memory(device as i32, &mut allocated, &mut reserved, err, len) })?;
    Ok((allocated, reserved))
}

#[cfg(not(shine_cuda_graph))]
pub fn memory(_device: usize) -> Result<(u64, u64), GraphError> {
    Err(GraphError::NotBuilt)
}

/// Kernel names counted, most frequent first (ties by name): `(count, name)`. Each
/// name is cut at its first `(` or `<` beyond 100 characters, so that PyTorch's long
/// template arguments do not hide the kernel (names still differing after the cut
/// are counted apart).
pub fn kernel_counts(names: &[String]) -> Vec<(usize, String)> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for n in names {
        let short = match n.char_indices().find(|&(i, c)| i >= 100 && (c == '(' || c == '<')) {
            Some((i, _)) => format!("{}...", &n[..i]),
            None => n.clone(),
        };
        *counts.entry(short).or_default() += 1;
    }
    let mut out: Vec<(usize, String)> = counts.into_iter().map(|(n, c)| (c, n)).collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    out
}

#[cfg(shine_cuda_graph)]
impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: freed once; nothing else holds the pointer.
        unsafe { ffi::shine_cuda_graph_free(self.ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_are_counted_most_frequent_first_and_long_ones_cut() {
        let long = format!("void at::native::elementwise_kernel<{}>(int)", "x".repeat(120));
        let names: Vec<String> = ["gemm", "add", long.as_str(), "add", long.as_str(), "add"].iter().map(|s| s.to_string()).collect();
        let counts = kernel_counts(&names);
        assert_eq!(counts[0], (3, "add".to_string()));
        assert_eq!(counts[1].0, 2);
        assert!(counts[1].1.len() < long.len() && counts[1].1.starts_with("void at::native::elementwise_kernel<") && counts[1].1.ends_with("..."), "{counts:?}");
        assert_eq!(counts[2], (1, "gemm".to_string()));
    }

    #[test]
    fn without_cuda_a_graph_is_an_error_that_says_what_to_do() {
        if tch::Cuda::is_available() {
            return; // scripts/gpu-check.sh runs the CUDA tests (trainer::graph_tests)
        }
        // Built with the shim (a CUDA PyTorch), a graph can be made but not captured on
        // a machine without a GPU; built without, it cannot be made.
        match CudaGraph::new() {
            Err(e @ GraphError::NotBuilt) => assert!(!BUILT && e.to_string().contains("cuda_graph = false"), "{e}"),
            Err(GraphError::Cuda(m)) => {
                if !BUILT {
                    panic!("a build without the shim says NotBuilt, not {m}")
                }
            }
            Ok(mut g) => {
                if !BUILT {
                    panic!("a build without the shim makes no graph")
                }
                assert!(g.replay().is_err(), "nothing captured");
                let err = match GraphPool::new(0) {
                    Err(e) => e.to_string(),
                    Ok(pool) => g.capture(&pool, || ()).unwrap_err().to_string(),
                };
                assert!(err.contains("CUDA graph"), "{err}");
            }
        }
    }
}
