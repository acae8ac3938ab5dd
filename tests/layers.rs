//! The layer rule of `docs/architecture.md`, checked on the source: a module imports only from the modules its
//! row allows, and no two sibling files of a module import each other.
//!
//! Imports are read from the code lines (comments and doc comments left out) of every `src/**/*.rs` file up to
//! its inline `#[cfg(test)]` module; `tests.rs` files are test code and not checked. A module import is any
//! `crate::<module>` path; a sibling import is `super::<name>` in a non-`mod.rs` file, or the full
//! `crate::<parent>::<name>` path, where `<name>` is another file of the same folder.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module and the modules it may import.
const LAYERS: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("bundle", &["model"]),
    ("store", &["model"]),
    ("config", &["model", "bundle"]),
    ("coordination", &["model", "store"]),
    ("paths", &["model", "bundle", "store"]),
    ("testing", &["model", "bundle", "store", "config", "paths"]),
    ("core", &["model", "bundle", "config"]),
    ("routing", &["model", "bundle", "store", "paths"]),
    (
        "runtime",
        &[
            "model",
            "bundle",
            "store",
            "config",
            "coordination",
            "paths",
            "core",
        ],
    ),
    ("sim", &["model", "bundle", "config", "core", "runtime"]),
    (
        "cli",
        &[
            "model",
            "bundle",
            "store",
            "config",
            "coordination",
            "paths",
            "testing",
            "core",
            "routing",
            "runtime",
            "sim",
        ],
    ),
];

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

/// The code lines of a file, up to its inline test module.
fn code_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            if let Some(next) = lines.peek() {
                if next.trim_start().starts_with("mod ") {
                    break;
                }
            }
        }
        if t.starts_with("//") {
            continue;
        }
        out.push(line.split("//").next().unwrap_or(""));
    }
    out
}

/// Every `prefix<ident>` in `line`.
fn names_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `prefix{a, b::c, d as e, f::{g, h}}`: the first name of each item of the group.
            let (mut depth, mut start, mut end) = (0usize, 0usize, group.len());
            for (at, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = at;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.extend(first_name(&group[start..at]));
                        start = at + 1;
                    }
                    _ => {}
                }
            }
            out.extend(first_name(&group[start..end]));
            rest = &group[end..];
        } else {
            out.extend(first_name(after));
            rest = after;
        }
    }
    out
}

/// The identifier a path item starts with, if any.
fn first_name(item: &str) -> Option<&str> {
    let item = item.trim_start();
    let end = item
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(item.len());
    (end > 0).then(|| &item[..end])
}

/// `src/a/b.rs` → ["a", "b"]; `src/a/mod.rs` → ["a"]; `src/lib.rs` → [].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_owned());
    }
    parts
}

#[test]
fn modules_import_only_from_the_layers_below_and_siblings_not_from_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let allowed: BTreeMap<&str, BTreeSet<&str>> = LAYERS
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut violations = Vec::new();
    // (folder, file) → sibling names it imports.
    let mut sibling_edges: BTreeMap<(PathBuf, String), BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        let path = module_path(&src, file);
        let Some(top) = path.first() else {
            continue; // lib.rs, main.rs
        };
        let folder = file.parent().unwrap().to_path_buf();
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let is_mod = stem == "mod";
        let siblings: BTreeSet<String> = fs::read_dir(&folder)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                if p.is_dir() {
                    p.join("mod.rs")
                        .exists()
                        .then(|| p.file_name().unwrap().to_string_lossy().into_owned())
                } else {
                    p.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .filter(|s| {
                            s != "mod" && s != "tests" && p.extension().is_some_and(|e| e == "rs")
                        })
                }
            })
            .collect();
        let parent_path = if is_mod {
            path[..path.len().saturating_sub(1)].join("::")
        } else {
            path[..path.len() - 1].join("::")
        };
        // The code as one text, so that a `use` group spread over lines is read whole.
        let code = code_lines(&text).join("\n");
        for m in names_after(&code, "crate::") {
            if m != top.as_str() && allowed.contains_key(m) && !allowed[top.as_str()].contains(m) {
                violations.push(format!("{}: module {top} imports {m}", file.display()));
            }
        }
        if !is_mod && !path.is_empty() {
            let own = path.last().unwrap();
            let mut names = names_after(&code, "super::");
            let full = format!("crate::{parent_path}::");
            if !parent_path.is_empty() {
                names.extend(names_after(&code, &full));
            }
            for n in names {
                if n != own && siblings.contains(n) {
                    sibling_edges
                        .entry((folder.clone(), own.clone()))
                        .or_default()
                        .insert(n.to_owned());
                }
            }
        }
    }
    for ((folder, a), targets) in &sibling_edges {
        for b in targets {
            let back = sibling_edges
                .get(&(folder.clone(), b.clone()))
                .is_some_and(|t| t.contains(a));
            if back && a < b {
                violations.push(format!(
                    "{}: {a}.rs and {b}.rs import each other",
                    folder.display()
                ));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_checker_sees_imports() {
    assert_eq!(
        names_after("use crate::core::leader;", "crate::"),
        vec!["core"]
    );
    assert_eq!(
        names_after("x(super::a::b, super::c)", "super::"),
        vec!["a", "c"]
    );
    // Groups, nested groups and groups over several lines.
    assert_eq!(
        names_after(
            "use super::{a, b::c, d as e, f::{g, h}};\nuse crate::{\n    core,\n    sim::x,\n};",
            "super::"
        ),
        vec!["a", "b", "d", "f"]
    );
    assert_eq!(
        names_after("use crate::{\n    core,\n    sim::x,\n};", "crate::"),
        vec!["core", "sim"]
    );
    let lines =
        code_lines("use a;\n// use crate::sim;\n#[cfg(test)]\nmod tests {\nuse crate::sim;\n}");
    assert_eq!(lines, vec!["use a;"]);
    assert_eq!(
        module_path(Path::new("src"), Path::new("src/core/leader/mod.rs")),
        vec!["core", "leader"]
    );
    assert_eq!(
        module_path(Path::new("src"), Path::new("src/core/leader/io.rs")),
        vec!["core", "leader", "io"]
    );
}
