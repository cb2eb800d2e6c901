// With the `torch` feature, torch-sys (links = "tch") tells us where libtorch lives:
// - an rpath to it lets this crate's tests run without LD_LIBRARY_PATH;
// - src/aten.cpp, the shim for the libtorch calls tch does not expose (the op counter,
//   Adam's fused kernel, addmm with its bias and ReLU, a storage's handle count), is compiled against the installed
//   PyTorch's headers, as torch-sys compiles its own wrapper (no CUDA headers needed).
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-changed=src/aten.cpp");
    let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else { return };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    if std::env::var_os("CARGO_FEATURE_TORCH").is_none() {
        return;
    }
    let include = PathBuf::from(&dir).parent().expect("torch/lib has a parent").join("include");
    // PyTorch's wheels since 2.7 are built with the C++11 ABI (torch-sys reads the same
    // from `torch._C._GLIBCXX_USE_CXX11_ABI`; LIBTORCH_CXX11_ABI overrides, as there).
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    cc::Build::new()
        .cpp(true)
        .file("src/aten.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        // As libtorch itself is built: some of its classes (RecordFunction) have
        // members only without NDEBUG, so a shim built without it would see another layout.
        .define("NDEBUG", None)
        .warnings(false)
        .compile("shine_aten");
    // The shim calls into these; they are loaded with libtorch anyway.
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
}
