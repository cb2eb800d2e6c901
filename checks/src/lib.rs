//! The workspace's checks on its own sources (tests only: `tests/layers.rs`,
//! `tests/unsafe_audit.rs`), and the one source reader they share: every member's
//! `src/**/*.rs` ([`sources`]), each file's code with comments and literals blanked
//! ([`code_only`]), and a few ways of finding words in it.
//!
//! Why a crate of its own: the checks hold every crate to rules about the whole
//! workspace (no import circle in any crate, the manager's layers one way down, `unsafe`
//! only where listed), so they belong to none of them.

#![deny(unsafe_code)]

use std::path::{Path, PathBuf};

/// The workspace's root (this crate sits in it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the checks crate sits in the workspace").to_path_buf()
}

/// The workspace's members, from the root `Cargo.toml`'s `members = [...]`.
pub fn members(root: &Path) -> Vec<String> {
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

/// One source file of a member's `src/`.
pub struct Source {
    /// The member (`agent`, `manager`, ...).
    pub member: String,
    /// The path below the member's `src/`, with `/` (`device/mod.rs`).
    pub in_src: String,
    /// The path from the workspace root, with `/` (`manager/src/device/mod.rs`).
    pub path: String,
    pub text: String,
}

impl Source {
    /// The top-level module the file belongs to: its first path component below
    /// `src/` (`device` for `device/group.rs`); `None` for the crate root and the
    /// binaries' roots (`lib.rs`, `main.rs`, `bin/`).
    pub fn top_module(&self) -> Option<&str> {
        let first = self.in_src.split('/').next()?;
        match first {
            "lib.rs" | "main.rs" | "bin" => None,
            _ => Some(first.trim_end_matches(".rs")),
        }
    }
}

/// Every member's `src/**/*.rs`, sorted by path.
pub fn sources() -> Vec<Source> {
    let root = workspace_root();
    let mut out = Vec::new();
    for member in members(&root) {
        let src = root.join(&member).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for p in files {
            let slash = |p: &Path| p.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            out.push(Source { member: member.clone(), in_src: slash(p.strip_prefix(&src).unwrap()), path: slash(p.strip_prefix(&root).unwrap()), text: std::fs::read_to_string(&p).unwrap() });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `src` with comments and the insides of string and character literals blanked out
/// (newlines kept, so lines keep their numbers): the code the compiler reads.
pub fn code_only(src: &str) -> String {
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
pub fn word_at(code: &str, word: &str) -> Vec<usize> {
    let ident = |ch: Option<char>| ch.is_some_and(|ch| ch.is_alphanumeric() || ch == '_');
    code.match_indices(word).map(|(at, _)| at).filter(|&at| !ident(code[..at].chars().next_back()) && !ident(code[at + word.len()..].chars().next())).collect()
}

/// The line (from 1) of byte offset `at`.
pub fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// The lint attribute naming `unsafe_code` at `at`: the identifier before the nearest
/// `(` to its left (`deny`, `allow`, ...).
pub fn lint_level(code: &str, at: usize) -> &str {
    let before = code[..at].rfind('(').map_or("", |open| code[..open].trim_end());
    let start = before.rfind(|ch: char| !(ch.is_alphanumeric() || ch == '_')).map_or(0, |i| i + 1);
    &before[start..]
}


#[cfg(test)]
mod tests {
    use super::*;

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
}
