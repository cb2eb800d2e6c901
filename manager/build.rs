// torch-sys (links = "tch") tells us where libtorch lives.
//
// - An rpath to that directory: `shine-manager` and its tests find libtorch without
//   LD_LIBRARY_PATH.
// - The Python package's libtorch is a CUDA build, and nothing in our code references a
//   symbol of `libtorch_cuda.so` directly (CUDA kernels register themselves when the
//   library loads). With `--as-needed` (the default on Debian/Ubuntu toolchains) the
//   linker drops it as unneeded, and CUDA is then silently unavailable on a GPU
//   machine. `--no-as-needed` around `-ltorch_cuda` keeps it in DT_NEEDED;
//   `tests/linkage.rs` checks with ldd. A CPU-only libtorch has no libtorch_cuda.so,
//   and then nothing is added.
// - With a CUDA libtorch and the CUDA runtime's headers (the `nvidia-*` wheels PyTorch
//   installs beside it), src/trainer/cuda_graph.cpp, the shim over at::cuda::CUDAGraph, is
//   compiled as torch-sys compiles its own wrapper, and `cfg(shine_cuda_graph)` turns on
//   src/trainer/cuda_graph.rs. Without them the graph path reports that it was not built.
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-changed=src/trainer/cuda_graph.cpp");
    println!("cargo::rustc-check-cfg=cfg(shine_cuda_graph)");
    let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else { return };
    let lib = PathBuf::from(&dir);
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    if !lib.join("libtorch_cuda.so").exists() {
        return;
    }
    println!("cargo:rustc-link-arg=-L{dir}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch_cuda");
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
    if let Some(cuda_include) = cuda_include(&lib) {
        compile_shim(&lib, &cuda_include);
        println!("cargo:rustc-cfg=shine_cuda_graph");
    } else {
        println!("cargo:warning=CUDA headers not found beside {dir}: shine-manager is built without CUDA graphs");
    }
}

/// The CUDA runtime's headers: the `nvidia` wheels' (site-packages/nvidia/cu13 for
/// CUDA 13, nvidia/cuda_runtime for CUDA 12), or a toolkit's (`CUDA_HOME`).
fn cuda_include(torch_lib: &Path) -> Option<PathBuf> {
    let site = torch_lib.parent()?.parent()?;
    let mut candidates: Vec<PathBuf> = ["nvidia/cu13/include", "nvidia/cuda_runtime/include"].iter().map(|p| site.join(p)).collect();
    if let Ok(home) = std::env::var("CUDA_HOME") {
        candidates.push(Path::new(&home).join("include"));
    }
    candidates.push("/usr/local/cuda/include".into());
    candidates.into_iter().find(|d| d.join("cuda_runtime_api.h").exists())
}

fn compile_shim(torch_lib: &Path, cuda_include: &Path) {
    let include = torch_lib.parent().expect("torch/lib has a parent").join("include");
    // PyTorch's wheels since 2.7 are built with the C++11 ABI (torch-sys reads the same
    // from `torch._C._GLIBCXX_USE_CXX11_ABI`; LIBTORCH_CXX11_ABI overrides, as there).
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    cc::Build::new()
        .cpp(true)
        .file("src/trainer/cuda_graph.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .include(cuda_include)
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        // As libtorch itself is built: some of its classes (RecordFunction) have
        // members only without NDEBUG, so a shim built without it would see another layout.
        .define("NDEBUG", None)
        .warnings(false)
        .compile("shine_cuda_graph");
    // The shim calls into these; they are loaded with libtorch anyway.
    println!("cargo:rustc-link-lib=dylib=c10_cuda");
    println!("cargo:rustc-link-lib=dylib=c10");
    // And into the CUDA runtime (events, streams), which ships versioned only
    // (libcudart.so.13) beside its headers, where libtorch_cuda finds it too.
    let cudart_dir = cuda_include.parent().expect("include has a parent").join("lib");
    if let Some(cudart) = std::fs::read_dir(&cudart_dir).ok().into_iter().flatten().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).find(|n| n.starts_with("libcudart.so")) {
        println!("cargo:rustc-link-arg=-L{}", cudart_dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", cudart_dir.display());
        println!("cargo:rustc-link-arg=-l:{cudart}");
    } else {
        println!("cargo:rustc-link-lib=dylib=cudart");
    }
}
