//! `cargo xtask lint`'s check that inside each crate the top-level modules form no import
//! circle (ARCHITECTURE.md's rule): a module names another through `crate::<module>`
//! (plain, or inside a `use crate::{…}` group), and those names must draw a DAG.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every crate's import circles, one line each (`crate: the modules in it`); empty when none.
pub fn import_circles(crates: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crates)
        .map_err(|e| format!("cannot list {}: {e}", crates.display()))?
        .filter_map(|entry| Some(entry.ok()?.path().join("src")))
        .filter(|src| src.is_dir())
        .collect();
    dirs.sort();
    for src in dirs {
        let graph = module_graph(&src)?;
        for circle in circles(&graph) {
            let name = src.parent().and_then(Path::file_name).unwrap_or_default();
            found.push(format!("{}: {}", name.to_string_lossy(), circle.join(", ")));
        }
    }
    Ok(found)
}

/// Top-level module → the top-level modules its files name.
fn module_graph(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in
        std::fs::read_dir(src).map_err(|e| format!("cannot list {}: {e}", src.display()))?
    {
        let path = entry.map_err(|e| e.to_string())?.path();
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if stem == "lib" || stem == "main" {
            continue;
        }
        if path.is_dir() {
            files.entry(stem).or_default().extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.entry(stem).or_default().push(path);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, paths) in &files {
        let mut named = BTreeSet::new();
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            named.extend(
                crate_paths(&code_of(&text))
                    .into_iter()
                    .filter(|m| m != module && modules.contains(m)),
            );
        }
        graph.insert(module.clone(), named);
    }
    Ok(graph)
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?
    {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            out.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(out)
}

/// `text` without its comments (a doc link to a module is no import).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment after each `crate::`, and each first segment inside `crate::{…}`.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_word = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_word {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            out.extend(group_heads(group));
        } else {
            out.insert(ident(rest).to_owned());
        }
    }
    out
}

/// The first segment of every path at the top level of a `{…}` group.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut at_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_start = true,
            c if at_start && depth == 0 && (c.is_alphabetic() || c == '_') => {
                heads.push(ident(&group[i..]).to_owned());
                at_start = false;
            }
            _ => {}
        }
    }
    heads
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// One circle per strongly connected component of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a str) {
        let at = walk.index.len();
        walk.index.insert(node, at);
        walk.low.insert(node, at);
        walk.stack.push(node);
        for next in walk.graph.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[node].min(walk.low[next]);
                walk.low.insert(node, low);
            } else if walk.stack.contains(&next) {
                let low = walk.low[node].min(walk.index[next]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut component = Vec::new();
            while let Some(member) = walk.stack.pop() {
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                walk.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_groups_name_their_first_segment() {
        let text = "use crate::error::{A, B};\nuse crate::{graph::Graph, fold::{x, y}, z};\n\
                    let k = crate::merge::Key; let s = mycrate::other::X;";
        let named: Vec<String> = crate_paths(text).into_iter().collect();
        assert_eq!(named, ["error", "fold", "graph", "merge", "z"]);
        let documented = "/// See [`crate::fold`].\nuse crate::graph::Graph; // not crate::merge\n";
        let named: Vec<String> = crate_paths(&code_of(documented)).into_iter().collect();
        assert_eq!(named, ["graph"]);
    }

    #[test]
    fn a_circle_is_found_and_a_dag_is_not() {
        let graph = |edges: &[(&str, &str)]| {
            let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (a, b) in edges {
                g.entry((*a).to_owned())
                    .or_default()
                    .insert((*b).to_owned());
                g.entry((*b).to_owned()).or_default();
            }
            g
        };
        assert!(circles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
        assert_eq!(
            circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
            [["a", "b", "c"]]
        );
    }
}
