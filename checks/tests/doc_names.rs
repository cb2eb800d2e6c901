//! The names the docs use exist: every backticked file path and Rust path in
//! `README.md`, `docs/*.md` and the crates' doc comments (`//!`, `///`), and every
//! relative link of the Markdown docs, names a file or an item of this workspace, so a
//! module, file or type renamed while a doc still names it fails here. (The test
//! command also runs `cargo doc` with broken intra-doc links denied, which checks the
//! doc comments' links; this reads what rustdoc does not: plain backticks, and the
//! Markdown docs.)
//!
//! What is a claim on this workspace, and what it must name:
//! - a path whose first component is a top-level folder of the repository
//!   (`manager/src/trainer/mod.rs`, `docs/api.md`, `scripts/tests`): that file or folder;
//! - a `.rs` path or file name elsewhere (`trainer/graph.rs`, `dqn.rs`): the end of some
//!   file's path;
//! - a relative Markdown link (`[api](api.md)`): that file, from the document's folder;
//! - a Rust path `a::b::C`, read from `crate`, `self` or `super` (in a doc comment, from
//!   its module), from a crate's name (`shine_agent`) or folder (`agent`), or else from
//!   the end of any module's path (`group::tests`, `dqn::Learner`): the longest run of
//!   leading segments that names a module, then an item defined or re-exported there
//!   (`fn`, `struct`, `enum`, `trait`, `type`, `const`, `static`, `mod`, `macro_rules!`,
//!   `pub use`), then any further segments (a method, a variant, a field) identifiers of
//!   the workspace's code. A path that starts with a type (`Learner::finish_step`) needs
//!   the type defined in the workspace. A lower-case first segment that is neither a
//!   module here nor one of the names below is an error: a module renamed or gone.
//!
//! Not claims: other projects' paths (libmelee's `enums.py`, Dolphin's
//! `Config/Dolphin.ini`, a data folder's `runs/NAME/`: not under a folder of the
//! repository, not `.rs`); Rust paths that start with a dependency (`tch::Device`; the
//! names come from `Cargo.lock`), the standard library, libtorch's C++ namespaces
//! (`at::`, `c10::`, `torch::`), a primitive type (`f32::MAX`), a file's own `use ... as`
//! alias, or a type the workspace does not define (`Tensor::zeros`).

use shine_checks::{code_only, members, sources, workspace_root};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Folders never read: build outputs, environments, data (`.gitignore`'s).
const SKIPPED: &[&str] = &[".git", "target", ".venv", "node_modules", "__pycache__", "data", "out"];

/// First segments that belong to no module of the workspace (beside `Cargo.lock`'s).
const FOREIGN: &[&str] = &[
    "std", "core", "alloc", "at", "c10", "torch", "cuda", "f32", "f64", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "usize",
    "isize", "str", "bool", "char", "slice",
];

/// The repository's files and folders, as the docs name them.
struct Repo {
    /// Every file and folder, as a path from the root with `/`.
    paths: BTreeSet<String>,
    /// The top-level folders.
    tops: BTreeSet<String>,
    /// Every path's tails after a `/` (`graph.rs`, `trainer/graph.rs` for
    /// `manager/src/trainer/graph.rs`).
    tails: BTreeSet<String>,
}

impl Repo {
    fn new() -> Repo {
        let paths = repository_paths();
        let tops = paths.iter().filter_map(|p| p.split_once('/').map(|(top, _)| top.to_string())).collect();
        let tails = paths.iter().flat_map(|p| p.match_indices('/').map(|(at, _)| p[at + 1..].to_string()).collect::<Vec<_>>()).collect();
        Repo { paths, tops, tails }
    }
}

/// Every file and folder of the repository, as paths from its root with `/`.
fn repository_paths() -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if SKIPPED.contains(&name.as_str()) {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            out.insert(rel);
            if path.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let root = workspace_root();
    let mut out = BTreeSet::new();
    walk(&root, &root, &mut out);
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifiers of `code`, in order.
fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !is_ident_char(c)).filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// The word after each `keyword ` in `code` (`fn name`, `struct Name`, ...).
fn after_keyword<'a>(code: &'a str, keyword: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut words = code.split(|c: char| !is_ident_char(c) && c != '!').filter(|w| !w.is_empty()).peekable();
    while let Some(w) = words.next() {
        if w == keyword {
            if let Some(next) = words.peek() {
                out.push(next.trim_end_matches('!'));
            }
        }
    }
    out
}

/// The workspace as the docs name it: its crates, modules, the items each defines.
struct Index {
    /// Crate folder (`agent`) -> crate name (`shine_agent`); binaries as `folder/bin/NAME`.
    crates: BTreeMap<String, String>,
    /// (crate name, module path) -> the names defined or re-exported there.
    modules: BTreeMap<(String, Vec<String>), BTreeSet<String>>,
    /// Every item name defined anywhere, and every identifier of the code.
    defined: BTreeSet<String>,
    words: BTreeSet<String>,
    /// Per source file: the aliases its `use ... as NAME` introduces.
    aliases: BTreeMap<String, BTreeSet<String>>,
    /// Dependencies' crate names (`Cargo.lock`).
    foreign: BTreeSet<String>,
}

/// A source file's crate and module path: `manager/src/device/group.rs` is
/// (`shine_manager`, [device, group]); a binary's files are crates of their own.
fn module_of(crates: &BTreeMap<String, String>, member: &str, in_src: &str) -> (String, Vec<String>) {
    let mut parts: Vec<String> = in_src.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    let mut krate = crates[member].clone();
    if parts[0] == "bin" {
        // `bin/NAME.rs` is the binary's root; `bin/NAME/main.rs` and its modules too.
        krate = format!("{member}/bin/{}", parts[1]);
        parts.drain(..parts.len().min(2));
    }
    if matches!(parts.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        parts.pop();
    }
    (krate, parts)
}

impl Index {
    fn new() -> Index {
        let root = workspace_root();
        let crates: BTreeMap<String, String> = members(&root)
            .into_iter()
            .map(|m| {
                let manifest = std::fs::read_to_string(root.join(&m).join("Cargo.toml")).unwrap();
                let name = manifest.lines().find_map(|l| l.strip_prefix("name = \"")).expect("a package name").trim_end_matches('"');
                let name = name.replace('-', "_");
                (m, name)
            })
            .collect();
        let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
        let mut foreign: BTreeSet<String> = lock.lines().filter_map(|l| l.strip_prefix("name = \"")).map(|n| n.trim_end_matches('"').replace('-', "_")).collect();
        for c in crates.values() {
            foreign.remove(c);
        }
        foreign.extend(FOREIGN.iter().map(|s| s.to_string()));
        let mut index = Index { crates, modules: BTreeMap::new(), defined: BTreeSet::new(), words: BTreeSet::new(), aliases: BTreeMap::new(), foreign };
        for f in sources() {
            let code = code_only(&f.text);
            let key = module_of(&index.crates, &f.member, &f.in_src);
            let mut names = BTreeSet::new();
            for keyword in ["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union", "macro_rules!"] {
                names.extend(after_keyword(&code, keyword).into_iter().map(str::to_string));
            }
            // Re-exports: the last name of each item of a `pub use` (or its `as` name).
            for (at, _) in code.match_indices("use ") {
                let head = code[..at].trim_end();
                if !(head.ends_with("pub") || head.ends_with(')') && head.contains("pub(")) {
                    continue;
                }
                let stmt = &code[at + 4..at + 4 + code[at + 4..].find(';').unwrap_or(0)];
                for item in stmt.split([',', '{', '}']) {
                    if let Some(last) = identifiers(item).last() {
                        names.insert(last.to_string());
                    }
                }
            }
            let aliases: BTreeSet<String> = code.match_indices(" as ").filter_map(|(at, _)| identifiers(&code[at + 4..]).next().map(str::to_string)).collect();
            index.aliases.insert(f.path.clone(), aliases);
            index.words.extend(identifiers(&code).map(str::to_string));
            index.defined.extend(names.iter().cloned());
            // Inline modules (`mod tests { ... }`) are modules too; they may use the
            // file's names.
            for inner in after_keyword(&code, "mod") {
                let mut path = key.1.clone();
                path.push(inner.to_string());
                index.modules.entry((key.0.clone(), path)).or_default().extend(names.iter().cloned());
            }
            index.modules.entry(key).or_default().extend(names);
        }
        index
    }

    /// The modules that `segments` names: in `krate` exactly, or (no crate) any module
    /// whose path ends with them.
    fn modules_named(&self, krate: Option<&str>, segments: &[String]) -> Vec<&BTreeSet<String>> {
        self.modules
            .iter()
            .filter(|((c, path), _)| match krate {
                Some(k) => c == k && path == segments,
                None => !segments.is_empty() && path.ends_with(segments),
            })
            .map(|(_, names)| names)
            .collect()
    }

    /// Whether the Rust path `path`, written in the docs of `from` (a source file's path,
    /// crate and module; `None` for a Markdown doc), names something of the workspace;
    /// `None` when it is not a claim on the workspace.
    fn resolves(&self, path: &str, from: Option<(&str, &str, &[String])>) -> Option<bool> {
        let mut segments: Vec<String> = path.split("::").map(str::to_string).collect();
        let mut krate: Option<String> = None;
        let first = segments[0].clone();
        if first == "crate" {
            krate = from.map(|(_, c, _)| c.to_string());
            segments.remove(0);
        } else if first == "self" || first == "super" {
            let (_, c, module) = from?;
            let mut module = module.to_vec();
            while let Some(s) = segments.first().filter(|s| *s == "self" || *s == "super") {
                if s == "super" {
                    module.pop();
                }
                segments.remove(0);
            }
            krate = Some(c.to_string());
            segments = module.into_iter().chain(segments).collect();
        } else if let Some(name) = self.crates.iter().find(|(folder, name)| **folder == first || **name == first).map(|(_, n)| n.clone()) {
            krate = Some(name);
            segments.remove(0);
        } else if self.foreign.contains(&first) || from.is_some_and(|(file, _, _)| self.aliases[file].contains(&first)) {
            return None;
        }
        for k in (0..=segments.len()).rev() {
            let modules = match (k, &krate) {
                (0, Some(c)) => self.modules_named(Some(c), &[]),
                (0, None) => Vec::new(),
                (_, c) => self.modules_named(c.as_deref(), &segments[..k]),
            };
            let rest = &segments[k..];
            if !modules.is_empty() && (rest.is_empty() || modules.iter().any(|m| m.contains(&rest[0])) && rest[1..].iter().all(|w| self.words.contains(w))) {
                return Some(true);
            }
        }
        if krate.is_some() {
            return Some(false);
        }
        // A path from a type: one the workspace defines, or another crate's. A
        // lower-case first segment that is no module here is a module gone.
        if !segments[0].starts_with(|c: char| c.is_ascii_uppercase()) {
            return Some(false);
        }
        self.defined.contains(&segments[0]).then(|| segments[1..].iter().all(|w| self.words.contains(w)))
    }
}

/// The spans between backticks on `line`.
fn backticked(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The Rust paths in `text` (`a::b::C`, two segments or more; generics and calls cut off).
fn rust_paths(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = (chars[i].is_ascii_alphabetic() || chars[i] == '_') && (i == 0 || !(is_ident_char(chars[i - 1]) || matches!(chars[i - 1], '.' | ':')));
        if !starts {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        loop {
            let start = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            segments.push(chars[start..i].iter().collect::<String>());
            let more = chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') && chars.get(i + 2).is_some_and(|c| c.is_ascii_alphabetic() || *c == '_');
            if !more {
                break;
            }
            i += 2;
        }
        if segments.len() > 1 {
            out.push(segments.join("::"));
        }
    }
    out
}

/// Whether the backticked word `word`, in a doc in folder `dir`, names a path of the
/// repository that exists; `None` when it is not a claim on the repository.
fn path_exists(word: &str, dir: &str, repo: &Repo) -> Option<bool> {
    let paths = &repo.paths;
    // `file.rs:120` and trailing punctuation name the file.
    let word = word.trim_end_matches(['.', ',', ';', ')']);
    let word = match word.rsplit_once(':') {
        Some((file, line)) if !line.is_empty() && line.chars().all(|c| c.is_ascii_digit() || c == '-') => file,
        _ => word,
    };
    if word.is_empty() || word.starts_with(['/', '$', '~', '-']) || word.starts_with("http") || word.contains(|c: char| "{}<>*=()[]'\"|,@:".contains(c)) {
        return None;
    }
    if let Some(up) = word.strip_prefix("../") {
        // Up from a doc's folder: inside the repository, or not a claim on it.
        let base = Path::new(dir).parent()?.to_string_lossy().to_string();
        let joined = if base.is_empty() { up.to_string() } else { format!("{base}/{up}") };
        return Some(paths.contains(joined.trim_end_matches('/')));
    }
    let word = word.trim_end_matches('/');
    if word.split_once('/').is_some_and(|(top, _)| repo.tops.contains(top)) {
        return Some(paths.contains(word));
    }
    if word.ends_with(".rs") {
        return Some(paths.contains(word) || repo.tails.contains(word));
    }
    None
}

/// The relative targets of the Markdown links on `line` (`[text](target#anchor)`).
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let target = &rest[..rest.find(')')?];
            let target = target.split('#').next().unwrap();
            (!target.is_empty() && !target.contains("://") && !target.starts_with("mailto:")).then_some(target)
        })
        .collect()
}

/// What the check found: each doc line's unresolved names, and how many it resolved.
fn unresolved(index: &Index, repo: &Repo, overrides: &BTreeMap<String, String>) -> (Vec<String>, usize) {
    let (root, paths) = (workspace_root(), &repo.paths);
    let read = |p: &str| overrides.get(p).cloned().unwrap_or_else(|| std::fs::read_to_string(root.join(p)).unwrap());
    let mut bad = Vec::new();
    let mut resolved = 0;
    let mut check = |place: String, ok: Option<bool>, what: &str| match ok {
        Some(true) => resolved += 1,
        Some(false) => bad.push(format!("{place}: `{what}` names nothing in the workspace")),
        None => {}
    };
    // The Markdown docs.
    let docs: Vec<&String> = paths.iter().filter(|p| *p == "README.md" || p.starts_with("docs/") && p.ends_with(".md") && p.matches('/').count() == 1).collect();
    assert!(docs.len() > 5, "the docs were found: {docs:?}");
    for doc in docs {
        let dir = Path::new(doc).parent().unwrap().to_string_lossy().to_string();
        let text = read(doc);
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            let place = format!("{doc}:{}", n + 1);
            // Fenced blocks are checked whole: their commands name scripts, their
            // diagrams modules.
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            let spans: Vec<&str> = if fenced { vec![line] } else { backticked(line) };
            for span in spans {
                for word in span.split_whitespace() {
                    check(place.clone(), path_exists(word, &dir, repo), word);
                }
                for p in rust_paths(span) {
                    check(place.clone(), index.resolves(&p, None), &p);
                }
            }
            for target in link_targets(line) {
                let joined = if dir.is_empty() { target.to_string() } else { format!("{dir}/{target}") };
                let normal = joined.split('/').fold(Vec::<&str>::new(), |mut v, c| {
                    match c {
                        ".." => {
                            v.pop();
                        }
                        "." | "" => {}
                        c => v.push(c),
                    }
                    v
                });
                check(place.clone(), Some(paths.contains(&normal.join("/"))), target);
            }
        }
    }
    // The crates' doc comments.
    for f in sources() {
        let (krate, module) = module_of(&index.crates, &f.member, &f.in_src);
        let dir = Path::new(&f.path).parent().unwrap().to_string_lossy().to_string();
        // The text `sources` read, unless the test put another in its place.
        let text = overrides.get(&f.path).cloned().unwrap_or(f.text);
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            let Some(doc) = trimmed.strip_prefix("//!").or_else(|| trimmed.strip_prefix("///")) else { continue };
            let place = format!("{}:{}", f.path, n + 1);
            for span in backticked(doc) {
                for word in span.split_whitespace() {
                    check(place.clone(), path_exists(word, &dir, repo), word);
                }
                for p in rust_paths(span) {
                    check(place.clone(), index.resolves(&p, Some((&f.path, &krate, &module))), &p);
                }
            }
        }
    }
    (bad, resolved)
}

#[test]
fn every_path_and_rust_name_the_docs_give_exists() {
    let (index, repo) = (Index::new(), Repo::new());
    let (bad, resolved) = unresolved(&index, &repo, &BTreeMap::new());
    assert!(bad.is_empty(), "{} names in the docs name nothing (rename them in the doc, or say it in words if it is history):\n{}", bad.len(), bad.join("\n"));
    assert!(resolved > 800, "the check resolved {resolved} names: it read the docs");
    println!("{resolved} names resolved");
}

/// The check catches what it is for: a doc that still names a module, a file, a type or
/// a method after it was renamed.
#[test]
fn a_doc_naming_a_renamed_module_file_or_item_fails() {
    let (index, repo) = (Index::new(), Repo::new());
    let doc = "docs/architecture.md".to_string();
    let original = std::fs::read_to_string(workspace_root().join(&doc)).unwrap();
    for (stale, why) in [
        ("`crate::state::AppState`", "a module renamed (state is app_state now)"),
        ("`shine_manager::wal::recover`", "a module moved (wal is in storage now)"),
        ("`worker::duel::Duel`", "a module moved (duel is in games now)"),
        ("`manager/src/state.rs`", "a file renamed"),
        ("`trainer/graph_step.rs`", "a file a short path names"),
        ("`dqn::Learner::lone_step`", "a method removed"),
        ("`shine_agent::dqn::LoneStep`", "an item gone"),
        ("[the api](api-v2.md)", "a link to a file gone"),
    ] {
        let overrides = BTreeMap::from([(doc.clone(), format!("{original}\nStale: {stale}.\n"))]);
        let (bad, _) = unresolved(&index, &repo, &overrides);
        assert!(bad.iter().any(|b| b.starts_with(&doc)), "{why}: {stale} was not caught");
    }
    // And what resolves today still does (the names above, correct).
    for fresh in ["`crate::app_state::AppState`", "`shine_manager::storage::wal`", "`shine_agent::dqn::Group`", "`trainer/graph.rs`", "`dqn::Learner::finish_step`"] {
        let overrides = BTreeMap::from([(doc.clone(), format!("{original}\nFresh: {fresh}.\n"))]);
        let (bad, _) = unresolved(&index, &repo, &overrides);
        assert!(bad.is_empty(), "{fresh}: {bad:?}");
    }
}
