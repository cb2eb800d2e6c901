//! The crates' module graphs, read from the source (`shine_checks::sources`): no two
//! top-level modules of a crate import each other, even through others (no import
//! circle), and the manager's layers are used one way down: `api` -> `run` -> `device`
//! -> `trainer` -> `storage` (`manager/src/lib.rs`).
//!
//! An edge is any `crate::<module>` path in a module's code (imports and inline paths,
//! tests included; comments and string literals are not code), from the top-level
//! module the file belongs to. Paths inside one top-level module (its own submodules,
//! `super::`) are not edges.

use shine_checks::{code_only, sources};
use std::collections::{BTreeMap, BTreeSet};

/// The top-level modules `code` names through `crate::`.
fn named(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // `use crate::{a, b::c}`: each item of the group.
            if name.is_empty() && after.starts_with('{') {
                let group = &after[1..after.find('}').unwrap_or(after.len())];
                for item in group.split(',') {
                    let item: String = item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if !item.is_empty() {
                        out.insert(item);
                    }
                }
            } else if !name.is_empty() {
                out.insert(name);
            }
            rest = after;
        }
    }
    out
}

/// `krate`'s module graph: top-level module -> the top-level modules it names.
fn graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<_> = sources().into_iter().filter(|f| f.member == krate).collect();
    let tops: BTreeSet<String> = files.iter().filter_map(|f| f.top_module().map(str::to_string)).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = tops.iter().map(|t| (t.clone(), BTreeSet::new())).collect();
    for f in &files {
        let Some(from) = f.top_module() else { continue };
        for to in named(&code_only(&f.text)) {
            if to != from && tops.contains(&to) {
                g.get_mut(from).unwrap().insert(to);
            }
        }
    }
    g
}

/// A circle through `start`, if there is one: the modules along it.
fn circle_through(g: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    // Depth-first search for a path from start's successors back to start.
    let mut stack: Vec<(String, Vec<String>)> = g[start].iter().map(|n| (n.clone(), vec![start.to_string(), n.clone()])).collect();
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        if node == start {
            return Some(path);
        }
        if !seen.insert(node.clone()) {
            continue;
        }
        for next in g.get(&node).into_iter().flatten() {
            let mut p = path.clone();
            p.push(next.clone());
            stack.push((next.clone(), p));
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle() {
    for krate in ["bridge", "agent", "worker", "manager"] {
        let g = graph(krate);
        assert!(g.len() > 3, "{krate}: read its modules: {g:?}");
        for m in g.keys() {
            if let Some(circle) = circle_through(&g, m) {
                panic!("{krate}: the modules {} import each other", circle.join(" -> "));
            }
        }
    }
}

#[test]
fn the_managers_layers_are_used_one_way_down() {
    let g = graph("manager");
    // Lower layers first; a module may use its own layer's and those below.
    let layers: [&[&str]; 5] = [&["storage"], &["trainer"], &["device"], &["run"], &["api"]];
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    for (from, tos) in &g {
        let Some(lf) = layer_of(from) else { continue };
        for to in tos {
            if let Some(lt) = layer_of(to) {
                assert!(lt <= lf, "{from} (layer {lf}) uses {to} (layer {lt}): the layers are api -> run -> device -> trainer -> storage");
            }
        }
    }
    // Below the API nothing knows of HTTP or of the state the handlers share.
    for m in ["run", "device", "trainer", "storage"] {
        for up in ["api", "app_state", "error", "server"] {
            assert!(!g[m].contains(up), "{m} uses {up}");
        }
    }
    // And the graph read is the real one: the edges the layers are made of are there.
    for (from, to) in [("api", "run"), ("run", "device"), ("device", "trainer"), ("trainer", "storage")] {
        assert!(g[from].contains(to), "{from} -> {to} not found: {g:?}");
    }
}
