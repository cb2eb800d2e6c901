//! A worker VM gets one small binary: `shine-worker` must not link libtorch.
//! (Built in a cargo run of its own, so the agent's `torch` feature is off.)

use std::process::Command;

#[test]
fn shine_worker_does_not_link_libtorch() {
    let bin = env!("CARGO_BIN_EXE_shine-worker");
    let out = Command::new("ldd").arg(bin).output().expect("ldd is installed (Debian: libc-bin)");
    assert!(out.status.success(), "ldd failed: {}", String::from_utf8_lossy(&out.stderr));
    let libs = String::from_utf8_lossy(&out.stdout);
    assert!(libs.contains("libc.so"), "ldd output looks wrong:\n{libs}");
    assert!(!libs.contains("libtorch") && !libs.contains("libc10"), "shine-worker links libtorch:\n{libs}");
}
