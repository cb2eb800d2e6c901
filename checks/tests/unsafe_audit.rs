//! Where the workspace may use `unsafe`, held to a list.
//!
//! Every crate root (each member's `src/lib.rs`, `src/main.rs`, `src/bin/**`) says
//! `#![deny(unsafe_code)]`, so the compiler refuses `unsafe` anywhere in code it builds,
//! unless a module lifts the lint with `#[allow(unsafe_code)]`. The compiler alone is
//! not enough: any module can add that `allow` and nothing would notice, and code
//! behind a `cfg` that this build leaves out (another architecture, another OS, a
//! feature off) is never linted. So these tests read the sources themselves (every
//! member's `src/**/*.rs`, comments and string literals left out) and fail when:
//! - `unsafe` appears in a file not in [`ALLOWED`];
//! - the lint `unsafe_code` is named anywhere but in a `deny` or `forbid`, except
//!   for the `allow` of an [`ALLOWED`] file;
//! - a crate root lacks `#![deny(unsafe_code)]`;
//! - an [`ALLOWED`] file has no `unsafe` left (the list would be stale), no
//!   `#![allow(unsafe_code)]`, or no `# Safety` section in its module doc.
//!
//! Integration tests and examples (`tests/`, `examples/`) are crates of their own and
//! not covered (a test may need `pre_exec`, which is `unsafe`).
//!
//! To add `unsafe`: put it in one small module, give that module
//! `#![allow(unsafe_code)]` and a `# Safety` section (what is assumed, why it holds),
//! and add the file here, where review sees it.

use shine_checks::{code_only, line_of, lint_level, members, sources, word_at, workspace_root};

/// The files allowed `unsafe` (paths from the workspace root), and why.
const ALLOWED: &[(&str, &str)] = &[
    ("agent/src/hostmem.rs", "CPU tensors as slices (the optimizer, the manager's prioritized sampling); MXCSR; vector-unit dispatch"),
    ("agent/src/aten.rs", "FFI to the libtorch shim (aten.cpp) that build.rs compiles: the op counter, fused Adam, addmm with bias and ReLU, a storage's use count"),
    ("agent/src/model/sgemm.rs", "matrixmultiply's sgemm, behind a bounds-checked function"),
    ("manager/src/nice.rs", "setpriority: the trainer thread's nice value"),
    ("manager/src/trainer/cuda_graph.rs", "FFI to the CUDA-graph shim (at::cuda::CUDAGraph) that build.rs compiles"),
    ("bridge/src/dolphin/sys.rs", "mmap of Dolphin's RAM, atomics on it, mkfifo"),
];

fn allowed(path: &str) -> bool {
    ALLOWED.iter().any(|(p, _)| *p == path)
}

#[test]
fn unsafe_appears_only_in_the_listed_modules() {
    let files = sources();
    assert!(files.len() > 50 && files.iter().any(|f| f.path == "agent/src/lib.rs"), "the scan found the sources ({} files)", files.len());
    let mut found = Vec::new();
    for f in &files {
        let (path, src) = (&f.path, &f.text);
        let code = code_only(src);
        let line = |at: usize| src.lines().nth(line_of(&code, at) - 1).unwrap_or("").trim().to_string();
        if !allowed(path) {
            for at in word_at(&code, "unsafe") {
                found.push(format!("{path}:{}: `unsafe` outside the listed modules: {}", line_of(&code, at), line(at)));
            }
        }
        for at in word_at(&code, "unsafe_code") {
            let level = lint_level(&code, at);
            let ok = matches!(level, "deny" | "forbid") || (level == "allow" && allowed(path));
            if !ok {
                found.push(format!("{path}:{}: `{level}(unsafe_code)` outside the listed modules: {}", line_of(&code, at), line(at)));
            }
        }
    }
    assert!(found.is_empty(), "unsafe_audit.rs lists the modules allowed `unsafe` (and says how to add one):\n{}", found.join("\n"));
}

#[test]
fn every_listed_module_has_unsafe_its_allow_and_a_safety_section() {
    let root = workspace_root();
    for (path, why) in ALLOWED {
        let src = std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path} ({why}): {e}"));
        let code = code_only(&src);
        assert!(!word_at(&code, "unsafe").is_empty(), "{path} has no `unsafe` left: take it off the list");
        assert!(code.split_whitespace().collect::<String>().contains("#![allow(unsafe_code)]"), "{path}: `#![allow(unsafe_code)]` at the top");
        assert!(src.lines().any(|l| l.trim() == "//! # Safety"), "{path}: a `# Safety` section in the module doc");
    }
}

#[test]
fn every_crate_root_denies_unsafe_code() {
    let root = workspace_root();
    let mut roots = Vec::new();
    for member in members(&root) {
        let src = root.join(&member).join("src");
        roots.extend(["lib.rs", "main.rs"].map(|f| src.join(f)).into_iter().filter(|p| p.exists()));
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            for bin in bins {
                let p = bin.unwrap().path();
                roots.push(if p.is_dir() { p.join("main.rs") } else { p });
            }
        }
    }
    // agent, bridge, manager and worker libraries; manager, worker and the Dolphin peer binaries at least.
    assert!(roots.len() >= 7, "{roots:?}");
    for path in roots {
        let code = code_only(&std::fs::read_to_string(&path).unwrap()).split_whitespace().collect::<String>();
        assert!(code.contains("#![deny(unsafe_code)]"), "{}: `#![deny(unsafe_code)]` at the crate root", path.display());
    }
}
