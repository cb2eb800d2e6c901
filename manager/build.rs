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
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        if std::path::Path::new(&dir).join("libtorch_cuda.so").exists() {
            println!("cargo:rustc-link-arg=-L{dir}");
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
            println!("cargo:rustc-link-arg=-ltorch_cuda");
            println!("cargo:rustc-link-arg=-Wl,--as-needed");
        }
    }
}
