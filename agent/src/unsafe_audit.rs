//! Where the workspace may use `unsafe`, held to a list (tests only).
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

use std::path::{Path, PathBuf};

/// The files allowed `unsafe` (paths from the workspace root), and why.
const ALLOWED: &[(&str, &str)] = &[
    ("agent/src/hostmem.rs", "CPU tensors as slices (the optimizer, the manager's prioritized sampling); MXCSR; vector-unit dispatch"),
    ("agent/src/model/sgemm.rs", "matrixmultiply's sgemm, behind a bounds-checked function"),
    ("manager/src/nice.rs", "setpriority: the trainer thread's nice value"),
    ("manager/src/trainer/cuda_graph.rs", "FFI to the CUDA-graph shim (at::cuda::CUDAGraph) that build.rs compiles"),
    ("bridge/src/dolphin/sys.rs", "mmap of Dolphin's RAM, atomics on it, mkfifo"),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the agent crate sits in the workspace").to_path_buf()
}

/// The workspace's members, from the root `Cargo.toml`'s `members = [...]`.
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.trim_start().starts_with("members")).expect("a members line");
    let list = &line[line.find('[').unwrap() + 1..line.find(']').expect("members on one line")];
    list.split(',').map(|m| m.trim().trim_matches('"').to_string()).filter(|m| !m.is_empty()).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every member's `src/**/*.rs`: (path from the root with `/`, contents).
fn sources() -> Vec<(String, String)> {
    let root = workspace_root();
    let mut files = Vec::new();
    for member in members(&root) {
        rust_files(&root.join(&member).join("src"), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap().components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            (rel, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// `src` with comments and the insides of string and character literals blanked out
/// (newlines kept, so lines keep their numbers): the code the compiler reads.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            loop {
                if i + 1 < c.len() && c[i] == '/' && c[i + 1] == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if i + 1 < c.len() && c[i] == '*' && c[i + 1] == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                } else {
                    break;
                }
            }
        } else if c[i] == 'r' && (i == 0 || !ident(c[i - 1]) || (i == 1 || !ident(c[i - 2])) && matches!(c[i - 1], 'b' | 'c')) && {
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            c.get(i + 1 + hashes) == Some(&'"')
        } {
            // A raw string: r"...", r#"..."#, br"...", cr"...".
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            out.push('r');
            i += 1;
            for _ in 0..hashes + 1 {
                out.push(' ');
                i += 1;
            }
            while i < c.len() && !(c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes) {
                blank(&mut out, c[i]);
                i += 1;
            }
            for _ in 0..(hashes + 1).min(c.len().saturating_sub(i)) {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\''); anything else after ' is a lifetime.
            out.push(' ');
            i += 1;
            if c[i] == '\\' {
                // The backslash and the character it escapes (which may be a quote).
                out.push_str("  ");
                i += 2;
            }
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Byte offsets at which `word` stands as a whole identifier in `code`.
fn word_at(code: &str, word: &str) -> Vec<usize> {
    let ident = |ch: Option<char>| ch.is_some_and(|ch| ch.is_alphanumeric() || ch == '_');
    code.match_indices(word).map(|(at, _)| at).filter(|&at| !ident(code[..at].chars().next_back()) && !ident(code[at + word.len()..].chars().next())).collect()
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// The lint attribute naming `unsafe_code` at `at`: the identifier before the nearest
/// `(` to its left (`deny`, `allow`, ...).
fn lint_level(code: &str, at: usize) -> &str {
    let before = code[..at].rfind('(').map_or("", |open| code[..open].trim_end());
    let start = before.rfind(|ch: char| !(ch.is_alphanumeric() || ch == '_')).map_or(0, |i| i + 1);
    &before[start..]
}

fn allowed(path: &str) -> bool {
    ALLOWED.iter().any(|(p, _)| *p == path)
}

#[test]
fn unsafe_appears_only_in_the_listed_modules() {
    let files = sources();
    assert!(files.len() > 50 && files.iter().any(|(p, _)| p == "agent/src/lib.rs"), "the scan found the sources ({} files)", files.len());
    let mut found = Vec::new();
    for (path, src) in &files {
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

#[test]
fn the_scan_reads_code_not_comments_strings_or_characters() {
    let src = r###"// unsafe in a line comment
/* unsafe in a block /* nested unsafe */ still comment unsafe */
let s = "unsafe \" still a string unsafe";
let r = r#"unsafe "raw" unsafe"#;
let b = br"unsafe";
let q = '"'; let e = '\''; fn f<'a>(x: &'a u8) {}
let not_unsafe_code = unsafe_fn_name + my_unsafe;
unsafe { real() }
let t = "after"; unsafe impl Send for X {}
#![allow(dead_code, unsafe_code)]
#![deny(unsafe_code)]
"###;
    let code = code_only(src);
    assert_eq!(code.lines().count(), src.lines().count(), "lines keep their numbers");
    let lines: Vec<usize> = word_at(&code, "unsafe").into_iter().map(|at| line_of(&code, at)).collect();
    assert_eq!(lines, [8, 9], "{code}");
    let levels: Vec<&str> = word_at(&code, "unsafe_code").into_iter().map(|at| lint_level(&code, at)).collect();
    assert_eq!(levels, ["allow", "deny"]);
}
