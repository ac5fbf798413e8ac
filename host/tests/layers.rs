//! The module direction check: `use crate::` edges between the top-level modules of
//! `host/src` point one way only, adapters -> engine -> broker (the person broker) -> tools ->
//! {mcp client, skills, llm} -> sandbox -> store (the app builder above them all; `config`, `person` and `metrics` read by all), and the modules
//! inside `engine/` form no cycle. A planted upward import fails it (tested below).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules from the top down; a module may use only those in later rows.
/// Modules in one row are peers and may not use each other.
const LAYERS: &[&[&str]] = &[
    &["app"],
    &["adapters"],
    &["engine"],
    &["broker"],
    &["tools"],
    &["mcp"],
    &["skills", "llm"],
    &["sandbox"],
    &["store"],
];

/// Read by every layer; use none (the typed config, and the person at the other end).
const SHARED: &[&str] = &["config", "person", "metrics"];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

/// `(file, its text)` for every `.rs` file under `root`.
fn sources(root: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.strip_prefix(root).unwrap().to_path_buf(), text));
            }
        }
    }
    files
}

/// The code of a file without comments (doc links name modules without using them) and
/// without its `#[cfg(test)]` module's glob imports.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")).map(|(i, l)| (i + 1, l))
}

/// Every `crate::<name>` in `line`.
fn crate_refs(line: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `skillhost_crate::`, not ours
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            refs.push(name);
        }
        // `use crate::{a, b}` names several.
        if let Some(inner) = rest.strip_prefix('{') {
            let group: String = inner.chars().take_while(|c| *c != '}').collect();
            refs.extend(group.split(',').filter_map(|p| p.trim().split("::").next()).map(str::to_owned));
        }
    }
    refs.retain(|r| !r.is_empty());
    refs
}

/// Every upward or sideways edge between top-level modules, as `file:line: a -> b`.
fn violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        let Some(from) =
            path.components().next().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned())
        else {
            continue;
        };
        if from == "lib" || from == "main" || from == "cli" {
            continue; // the crate root and the binary's commands sit above everything
        }
        for (n, line) in code_lines(text) {
            for to in crate_refs(line) {
                if to == from || SHARED.contains(&to.as_str()) {
                    continue;
                }
                let ok = match (rank(&from), rank(&to)) {
                    _ if SHARED.contains(&from.as_str()) => false,
                    (Some(a), Some(b)) => a < b,
                    _ => false,
                };
                if !ok {
                    found.push(format!("{}:{n}: {from} -> {to}", path.display()));
                }
            }
        }
    }
    found
}

/// A cycle among the modules of `engine/`, as `a -> b -> ... -> a`, if there is one.
fn engine_cycle(files: &[(PathBuf, String)]) -> Option<String> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let mut parts = path.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
        if parts.next().as_deref() != Some("engine") {
            continue;
        }
        let Some(file) = parts.next() else { continue };
        let from = file.trim_end_matches(".rs").to_owned();
        if from == "mod" {
            continue;
        }
        let edges = graph.entry(from.clone()).or_default();
        for (_, line) in code_lines(text) {
            for (marker, skip) in [("super::", 0), ("crate::engine::", 0)] {
                let mut rest = line;
                while let Some(at) = rest.find(marker) {
                    rest = &rest[at + marker.len() + skip..];
                    let groups: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                        group
                            .split('}')
                            .next()
                            .unwrap_or("")
                            .split(',')
                            .map(|p| p.trim().split("::").next().unwrap_or("").to_owned())
                            .collect()
                    } else {
                        vec![rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()]
                    };
                    edges.extend(
                        groups.into_iter().filter(|g| {
                            !g.is_empty() && *g != from && g.chars().next().is_some_and(char::is_lowercase)
                        }),
                    );
                }
            }
        }
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle.join(" -> "));
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten().filter(|n| graph.contains_key(*n)) {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, &graph, &mut Vec::new(), &mut done))
}

fn host_sources() -> Vec<(PathBuf, String)> {
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn module_edges_point_down_only() {
    let files = host_sources();
    assert!(files.len() > 50, "read the host's sources: {}", files.len());
    let found = violations(&files);
    assert!(found.is_empty(), "imports that point up or sideways:\n{}", found.join("\n"));
}

#[test]
fn engine_modules_form_no_cycle() {
    assert_eq!(engine_cycle(&host_sources()), None);
}

#[test]
fn a_planted_upward_import_fails_the_check() {
    let mut files = host_sources();
    files.push(("sandbox/planted.rs".into(), "use crate::engine::Engine;\n".into()));
    files.push(("store/planted.rs".into(), "fn f() { crate::skills::Skill::kind; }\n".into()));
    files.push(("llm/planted.rs".into(), "use crate::{skills::Skill, store};\n".into()));
    files.push(("config/planted.rs".into(), "use crate::store::StateStore;\n".into()));
    files.push(("person.rs".into(), "use crate::engine::Engine;\n".into()));
    let found = violations(&files);
    for edge in ["sandbox -> engine", "store -> skills", "llm -> skills", "config -> store", "person -> engine"] {
        assert!(found.iter().any(|v| v.ends_with(edge)), "{edge} is caught: {found:?}");
    }
    let doc = vec![("sandbox/doc.rs".into(), "//! See [`crate::engine::Engine`].\n".into())];
    assert!(violations(&doc).is_empty(), "a doc link is no import");
}

#[test]
fn a_planted_cycle_inside_the_engine_fails_the_check() {
    let mut files = host_sources();
    files.push(("engine/deadline.rs".into(), "use super::turn::Engine;\n".into()));
    let cycle = engine_cycle(&files).expect("the cycle is found");
    assert!(cycle.contains("deadline") && cycle.contains("turn"), "{cycle}");
}
