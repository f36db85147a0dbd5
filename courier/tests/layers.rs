//! The crate's rooms form one stack, and every import points down it.
//!
//! The stack is the one written at the top of `src/lib.rs`; a source scan
//! finds every `crate::ROOM` path outside comments and fails on a room
//! that reaches above itself, on a room missing from the stack, and on a
//! path through the crate root's re-exports (which hide the room an item
//! lives in).

use std::fs;
use std::path::{Path, PathBuf};

/// The rooms from the bottom up; a room may import from rooms in lower
/// entries only. Keep in step with the map in `src/lib.rs`.
const STACK: &[&[&str]] = &[
    &["sync", "suggest", "clock", "ids"],
    &["sched"],
    &["parcel"],
    &["transport"],
    &["action"],
    &["aggregate"],
    &["runtime"],
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
