//! The crate's rooms form one stack, and every import points down it.
//!
//! The stack is the one written at the top of `src/lib.rs`; a source scan
//! finds every `crate::ROOM` path outside comments and fails on a room
//! that reaches above itself, on a room missing from the stack, and on a
//! path through the crate root's re-exports (which hide the room an item
//! lives in). Inside a room, the files' `super::` imports form no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The rooms from the bottom up; a room may import from rooms in lower
/// entries only. Keep in step with the map in `src/lib.rs`.
const STACK: &[&[&str]] = &[
    &["sync", "suggest", "clock", "ids"],
    &["sched"],
    &["parcel"],
    &["flow"],
    &["transport"],
    &["action"],
    &["aggregate"],
    &["adapt"],
    &["runtime"],
    &["par"],
    &["counters"],
    &["launch"],
];

fn layer_of(room: &str) -> Option<usize> {
    STACK.iter().position(|layer| layer.contains(&room))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments (doc comments included: a doc link
/// is not an import). A `//` inside a string literal ends nothing.
fn code_of(source: &str) -> String {
    let mut code = String::with_capacity(source.len());
    for line in source.lines() {
        let mut in_string = false;
        let mut prev = ' ';
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            if c == '"' && prev != '\\' {
                in_string = !in_string;
            }
            if !in_string && c == '/' && prev == '/' {
                cut = i - 1;
                break;
            }
            prev = c;
        }
        code.push_str(&line[..cut]);
        code.push('\n');
    }
    code
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segment of every `crate::` path in `code`, a `crate::{..}`
/// group giving one per item.
fn imported_roots(code: &str) -> Vec<String> {
    let mut roots = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` or a longer name
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if depth == 1 && item_start && !c.is_whitespace() => {
                        roots.push(ident_at(&group[i..]).to_string());
                        item_start = false;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            roots.push(ident_at(rest).to_string());
        }
    }
    roots
}

#[test]
fn every_import_points_down_the_stack_of_rooms() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let rooms: Vec<&str> = STACK.iter().flat_map(|l| l.iter().copied()).collect();
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let room = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if room == "lib" {
            continue; // the top: it assembles the public API from every room
        }
        let Some(layer) = layer_of(&room) else {
            wrong.push(format!(
                "{}: room `{room}` is not in the stack",
                rel.display()
            ));
            continue;
        };
        let code = code_of(&fs::read_to_string(file).unwrap());
        for root in imported_roots(&code) {
            if root == room || root.is_empty() {
                continue;
            }
            match layer_of(&root) {
                Some(l) if l < layer => {}
                Some(_) => wrong.push(format!(
                    "{}: `{room}` imports `crate::{root}`, which is not below it",
                    rel.display()
                )),
                None if rooms.contains(&root.as_str()) => unreachable!(),
                None => wrong.push(format!(
                    "{}: `crate::{root}` goes through the crate root; name its room",
                    rel.display()
                )),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that do not point down the stack {STACK:?}:\n{}",
        wrong.join("\n")
    );
}

/// The first segment of every `super::` path in `code`, a group giving
/// one per item.
fn super_roots(code: &str) -> Vec<String> {
    // `super::super::` leaves the directory: not a sibling.
    let mut code = code.to_string();
    while code.contains("super::super::") {
        code = code.replace("super::super::", "outer::");
    }
    imported_roots(
        &code
            .replace("outer::super::", "outer::")
            .replace("super::", "crate::"),
    )
}

/// The files of one directory (a room or a folder inside one) and which
/// sibling each imports through `super::`: a sibling module by name, or an
/// item the directory's `mod.rs` re-exports from one (`use file::{A, B}`).
fn sibling_imports(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let module_of = |path: &Path| path.file_stem().unwrap().to_str().unwrap().to_string();
    let files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    // Items re-exported by mod.rs, by the module that defines them.
    let mut reexported = BTreeMap::new();
    if let Ok(root) = fs::read_to_string(dir.join("mod.rs")) {
        for line in code_of(&root).lines() {
            let Some(rest) = line.trim().split("use ").nth(1) else {
                continue;
            };
            let Some((module, items)) = rest.split_once("::") else {
                continue;
            };
            if !modules.contains(module) {
                continue;
            }
            for item in items.trim_matches(|c| "{};".contains(c)).split(',') {
                let name = item.split(" as ").last().unwrap().trim();
                reexported.insert(name.to_string(), module.to_string());
            }
        }
    }
    let mut edges = BTreeMap::new();
    for file in &files {
        let me = module_of(file);
        if me == "mod" {
            continue; // `super::` there is the room's parent
        }
        let code = code_of(&fs::read_to_string(file).unwrap());
        let targets = super_roots(&code)
            .into_iter()
            .filter_map(|root| {
                if modules.contains(&root) {
                    Some(root)
                } else {
                    reexported.get(&root).cloned()
                }
            })
            .filter(|t| *t != me && t != "mod")
            .collect();
        edges.insert(me, targets);
    }
    edges
}

/// A cycle in `edges`, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if !done.insert(node.to_string()) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_files_of_a_room_import_each_other_in_a_cycle() {
    fn dirs(dir: &Path, out: &mut Vec<PathBuf>) {
        out.push(dir.to_path_buf());
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs(&path, out);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    dirs(&src, &mut all);
    let cycles: Vec<String> = all
        .iter()
        .filter(|d| **d != src)
        .filter_map(|d| {
            find_cycle(&sibling_imports(d)).map(|c| {
                format!(
                    "{}: {}",
                    d.strip_prefix(&src).unwrap().display(),
                    c.join(" -> ")
                )
            })
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "files that import each other:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn a_cycle_is_found() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(find_cycle(&edges).unwrap(), ["a", "b", "c", "a"]);
    let mut acyclic = edges.clone();
    acyclic.get_mut("c").unwrap().clear();
    assert_eq!(find_cycle(&acyclic), None);
}

#[test]
fn the_scan_sees_paths_groups_and_not_comments() {
    let code = code_of(
        "use crate::{a::X, b, c::{d, e}};\n\
         let x = crate::f::g(); // crate::h\n\
         /// [`Y`](crate::i::Y)\n\
         let s = \"// crate::j\"; crate::k::l();\n\
         $crate::m::n();",
    );
    assert_eq!(imported_roots(&code), ["a", "b", "c", "f", "j", "k"]);
}
