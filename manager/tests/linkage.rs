//! The Python package's libtorch is a CUDA build, and the linker drops
//! libtorch_cuda.so as unneeded unless told otherwise; then CUDA is silently
//! unavailable on a GPU machine. `manager/build.rs` keeps it (its comment says how);
//! this checks that it is there.

use std::process::Command;

#[test]
fn shine_manager_links_libtorch_cuda() {
    let bin = env!("CARGO_BIN_EXE_shine-manager");
    let out = Command::new("ldd").arg(bin).output().expect("ldd is installed (Debian: libc-bin)");
    assert!(out.status.success(), "ldd failed: {}", String::from_utf8_lossy(&out.stderr));
    let libs = String::from_utf8_lossy(&out.stdout);
    assert!(libs.contains("libtorch_cpu.so"), "ldd output looks wrong:\n{libs}");
    assert!(libs.contains("libtorch_cuda.so"), "shine-manager does not link libtorch_cuda.so (see manager/build.rs):\n{libs}");
    assert!(!libs.contains("not found"), "a library is not found (rpath?):\n{libs}");
}
