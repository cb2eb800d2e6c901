//! The crates' module graphs, read from the source (`shine_checks::sources`): no two
//! top-level modules of a crate import each other, even through others (no import
//! circle), and the manager's layers are used one way down: `api` -> `run` -> `device`
//! -> `trainer` -> `storage` (`manager/src/lib.rs`).
//!
//! An edge is any `crate::<module>` path in a module's code (imports and inline paths,
//! tests included; comments and string literals are not code), from the top-level
//! module the file belongs to. Paths inside one top-level module (its own submodules,
//! `super::`) are not edges. A folder listed in [`NAMESPACES`] only groups modules (its
//! `mod.rs` declares them and holds no code): each of its modules is a node of its own
//! (`dashboard::views`), and a `super::` path between them is an edge.
//!
//! Every top-level module of the manager has a declared place ([`PLACES`]): a layer, the
//! service's start-up, the state the handlers share, a service module, or a leaf that
//! imports nothing of the crate.

use shine_checks::{code_only, sources, Source};
use std::collections::{BTreeMap, BTreeSet};

/// Folders that only group modules, each of which is placed on its own.
const NAMESPACES: &[(&str, &str)] = &[("manager", "dashboard")];

/// Where each of the manager's top-level modules (and each module of a namespace) sits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    /// A layer, 0 the lowest: it uses only its own and those below.
    Layer(usize),
    /// Start-up and shutdown: may use anything.
    Server,
    /// The one state the HTTP handlers share: only `api` and `server` use it.
    AppState,
    /// A module of the service beside the layers: uses neither `api`, `server` nor
    /// `app_state`.
    Service,
    /// Uses nothing of the crate.
    Leaf,
}

const PLACES: &[(&str, Place)] = &[
    ("storage", Place::Layer(0)),
    ("trainer", Place::Layer(1)),
    ("device", Place::Layer(2)),
    ("run", Place::Layer(3)),
    ("api", Place::Layer(4)),
    ("server", Place::Server),
    ("app_state", Place::AppState),
    ("config", Place::Service),
    ("error", Place::Service),
    ("fleet", Place::Service),
    ("history", Place::Service),
    ("metrics", Place::Service),
    ("dashboard::views", Place::Service),
    ("dashboard::sampler", Place::Service),
    ("dashboard::series", Place::Leaf),
    ("dashboard::live", Place::Leaf),
    ("league", Place::Leaf),
    ("play", Place::Leaf),
    ("launch", Place::Leaf),
    ("nice", Place::Leaf),
];

/// The node a file of `krate` belongs to: its top-level module, or for a namespace's
/// module `namespace::module`; `None` for the crate's roots and a namespace's `mod.rs`.
fn node(krate: &str, f: &Source) -> Option<String> {
    let top = f.top_module()?;
    if !NAMESPACES.contains(&(krate, top)) {
        return Some(top.to_string());
    }
    let inner = f.in_src.split('/').nth(1)?.trim_end_matches(".rs");
    (inner != "mod").then(|| format!("{top}::{inner}"))
}

/// The first identifier of `s`, and what follows it.
fn ident(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// The nodes `code` names: each `crate::` path's first module (and its second, for a
/// namespace: `crate::dashboard::views`), each item of a `use crate::{a, b::c}` group;
/// in a namespace's module (`namespace`), each `super::` path's first module.
fn named(code: &str, namespaces: &[&str], namespace: Option<&str>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let note = |path: &str, out: &mut BTreeSet<String>| {
        let (first, rest) = ident(path.trim());
        if first.is_empty() {
            return;
        }
        match rest.strip_prefix("::").map(ident) {
            Some((second, _)) if namespaces.contains(&first) && !second.is_empty() => out.insert(format!("{first}::{second}")),
            _ => out.insert(first.to_string()),
        };
    };
    for line in code.lines() {
        for (prefix, within) in [("crate::", None), ("super::", namespace)] {
            if prefix == "super::" && within.is_none() {
                continue;
            }
            let mut rest = line;
            while let Some(i) = rest.find(prefix) {
                let after = &rest[i + prefix.len()..];
                let scoped = |p: &str| within.map_or(p.to_string(), |ns| format!("{ns}::{p}"));
                if let Some(group) = after.strip_prefix('{') {
                    // `use crate::{a, b::c}`: each item of the group.
                    for item in group[..group.find('}').unwrap_or(group.len())].split(',') {
                        note(&scoped(item.trim()), &mut out);
                    }
                } else {
                    note(&scoped(after), &mut out);
                }
                rest = after;
            }
        }
    }
    out
}

/// `krate`'s module graph: node (top-level module, or a namespace's module) -> the
/// nodes it names.
fn graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<_> = sources().into_iter().filter(|f| f.member == krate).collect();
    let namespaces: Vec<&str> = NAMESPACES.iter().filter(|(k, _)| *k == krate).map(|(_, n)| *n).collect();
    let nodes: BTreeSet<String> = files.iter().filter_map(|f| node(krate, f)).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = nodes.iter().map(|t| (t.clone(), BTreeSet::new())).collect();
    for f in &files {
        let Some(from) = node(krate, f) else { continue };
        let namespace = from.split_once("::").map(|(ns, _)| ns);
        for to in named(&code_only(&f.text), &namespaces, namespace) {
            if to != from && nodes.contains(&to) {
                g.get_mut(&from).unwrap().insert(to);
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
    let place = |m: &str| PLACES.iter().find(|(n, _)| *n == m).map(|(_, p)| *p);
    for (from, tos) in &g {
        let Some(Place::Layer(lf)) = place(from) else { continue };
        for to in tos {
            if let Some(Place::Layer(lt)) = place(to) {
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

#[test]
fn every_module_of_the_manager_has_its_place_and_keeps_to_it() {
    let g = graph("manager");
    let nodes: BTreeSet<&str> = g.keys().map(String::as_str).collect();
    let placed: BTreeSet<&str> = PLACES.iter().map(|(n, _)| *n).collect();
    assert_eq!(nodes, placed, "the manager's modules (left) and PLACES (right) differ: place each new module, drop each gone one");
    for (from, tos) in &g {
        let place = PLACES.iter().find(|(n, _)| n == from).unwrap().1;
        match place {
            Place::Leaf => assert!(tos.is_empty(), "{from} is a leaf but uses {tos:?}"),
            Place::Service => {
                for up in ["api", "server", "app_state"] {
                    assert!(!tos.contains(up), "{from} (a service module) uses {up}");
                }
            }
            Place::AppState => assert!(!tos.contains("api") && !tos.contains("server"), "app_state uses {tos:?}"),
            Place::Layer(_) | Place::Server => {}
        }
        if from != "api" && from != "server" {
            assert!(!tos.contains("app_state"), "{from} uses app_state: only api and server do");
        }
    }
    // The namespace's modules are read as nodes of their own (an edge between two of
    // them is seen): the sampler takes samples of the series' type.
    assert!(g["dashboard::sampler"].contains("dashboard::series"), "{g:?}");
}
