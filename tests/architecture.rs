//! The house's one rule, checked on the source: data flows one way, so a module may use only the
//! modules below it, and inside a folder no two files import each other, directly or around a
//! circle. Each top-level module of `src/` has a layer; every `crate::MODULE` path in
//! a module's code (tests left out) must point to a lower layer. The few arrows that still point
//! up are listed with the reason they remain; an arrow that is gone must leave the list too, so
//! the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules from the bottom up; one row is one layer (modules of a row do not use each
/// other either).
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["js", "terminal", "progress"],
    &["model"],
    &["evidence"],
    &["config"],
    &["source"],
    &["ingest"],
    &["store"],
    &["corpus"],
    &["passes"],
    &["pipeline"],
    &["report"],
    &["cli"],
];

/// Arrows that still point up, each with what removes it.
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

/// Every `.rs` file of `src/` but the crate roots and test files, as paths relative to `src/`
/// (`ingest/otel/mod.rs`).
fn source_files(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel.ends_with(".rs")
                && rel != "lib.rs"
                && rel != "main.rs"
                && !rel.ends_with("tests.rs")
            {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// Every `crate::NAME` a module's non-test code names, by top-level module.
fn edges(src: &Path) -> BTreeMap<(String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in source_files(src) {
        let top = file
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(src.join(&file)).unwrap();
        // Unit tests may reach anywhere.
        let code = text.split("\n#[cfg(test)]").next().unwrap_or("");
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name != top && layer_of(&name).is_some() {
                out.entry((top.clone(), name))
                    .or_default()
                    .push(file.clone());
            }
        }
    }
    out
}

#[test]
fn every_module_is_in_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let module = name.trim_end_matches(".rs");
        if module != "lib" && module != "main" && layer_of(module).is_none() {
            missing.push(module.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "give these modules a layer: {missing:?}"
    );
}

/// The facade is what `src/lib.rs` re-exports, documented: no module of it is hidden from the
/// docs, and no module of the crate is public but those that are facade modules by design.
#[test]
fn the_facade_hides_nothing() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(!lib.contains("doc(hidden)"), "a hidden item in src/lib.rs");
    let public: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches([';', '{', ' ']))
        .collect();
    assert_eq!(
        public,
        [
            "evidence",
            "model",
            "read",
            "checks",
            "tables",
            "distributed",
            "front_door",
            "fingerprint",
            "output",
            "allocator"
        ],
        "a module made public: re-export what other programs need instead"
    );
}

#[test]
fn data_flows_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = edges(&src);
    let known: BTreeSet<(&str, &str)> = KNOWN_UPWARD.iter().map(|(a, b, _)| (*a, *b)).collect();
    let mut up = Vec::new();
    let mut still_known = BTreeSet::new();
    for ((from, to), files) in &found {
        let (Some(a), Some(b)) = (layer_of(from), layer_of(to)) else {
            continue;
        };
        if a > b {
            continue;
        }
        if known.contains(&(from.as_str(), to.as_str())) {
            still_known.insert((from.as_str(), to.as_str()));
            continue;
        }
        let mut files = files.clone();
        files.sort();
        files.dedup();
        up.push(format!("{from} -> {to} (in {})", files.join(", ")));
    }
    assert!(
        up.is_empty(),
        "modules reaching sideways or up the layers:\n{}",
        up.join("\n")
    );
    let gone: Vec<_> = known.difference(&still_known).collect();
    assert!(
        gone.is_empty(),
        "these arrows are gone: take them off KNOWN_UPWARD: {gone:?}"
    );
}

/// Each source file by its module path (`ingest/otel/mod.rs` is `ingest::otel`).
fn module_files(src: &Path) -> BTreeMap<Vec<String>, String> {
    source_files(src)
        .into_iter()
        .map(|rel| {
            let mut module: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_string)
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            (module, rel)
        })
        .collect()
}

/// Every path a file's code names from `crate::`, `super::` or `self::` (grouped imports
/// `a::{b, c::d}` expanded, and `use child::...` of its own submodules), as module paths. Test
/// code, comments and `pub use` re-exports (a folder's facade naming what its files hold) are
/// left out.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let code = text.split("\n#[cfg(test)]").next().unwrap_or("");
    let code: String = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .filter(|l| {
            !l.trim_start().starts_with("pub use") && !l.trim_start().starts_with("pub(crate) use")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut paths: Vec<String> = Vec::new();
    for (i, _) in code.match_indices("::") {
        // The path this `::` belongs to, from its first segment.
        let start = code[..i]
            .rfind(|c: char| !(ident(c) || c == ':'))
            .map_or(0, |p| p + 1);
        let head = &code[start..i];
        let first = head.split("::").next().unwrap_or("");
        if !matches!(first, "crate" | "super" | "self") || !head.starts_with(first) {
            continue;
        }
        let rest = &code[i + 2..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                let item = item.split(" as ").next().unwrap_or("").trim();
                if !item.is_empty() && !item.contains('{') {
                    paths.push(format!("{head}::{item}"));
                }
            }
        } else {
            let tail: String = rest
                .chars()
                .take_while(|c| ident(*c) || *c == ':')
                .collect();
            paths.push(format!("{head}::{tail}"));
        }
    }
    for line in code.lines() {
        let Some(rest) = line.trim_start().strip_prefix("use ") else {
            continue;
        };
        let first: String = rest.chars().take_while(|c| ident(*c)).collect();
        if rest[first.len()..].starts_with("::")
            && !matches!(first.as_str(), "crate" | "super" | "self")
            && first.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        {
            paths.push(format!("self::{first}"));
        }
    }
    paths
        .into_iter()
        .map(|p| {
            let mut segments = p.split("::").filter(|s| !s.is_empty());
            let mut base: Vec<String> = module.to_vec();
            let mut out = Vec::new();
            match segments.next() {
                Some("crate") => base.clear(),
                Some("self") => {}
                Some("super") => {
                    base.pop();
                }
                _ => {}
            }
            for s in segments {
                if s == "super" && out.is_empty() {
                    base.pop();
                } else {
                    out.push(s.to_string());
                }
            }
            base.extend(out);
            base
        })
        .collect()
}

#[test]
fn no_two_files_import_each_other() {
    // One-way inside folders too: an arrow between two files of one folder that is answered,
    // directly or through others, is a circle; the shared piece belongs in a file below both.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = module_files(&src);
    let resolve = |path: &[String]| -> Option<&String> {
        (1..=path.len()).rev().find_map(|n| files.get(&path[..n]))
    };
    let mut edges: BTreeMap<&String, BTreeSet<&String>> = BTreeMap::new();
    for (module, rel) in &files {
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        for path in named_paths(module, &text) {
            if let Some(to) = resolve(&path).filter(|to| *to != rel) {
                edges.entry(rel).or_default().insert(to);
            }
        }
    }
    // A file is in a circle when it reaches itself.
    let mut circles = BTreeSet::new();
    for start in files.values() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = edges.get(start).into_iter().flatten().copied().collect();
        while let Some(f) = stack.pop() {
            if f == start {
                circles.insert(start.clone());
                break;
            }
            if seen.insert(f) {
                stack.extend(edges.get(f).into_iter().flatten().copied());
            }
        }
    }
    assert!(
        circles.is_empty(),
        "files in import circles (move the shared piece into a file below them): {circles:?}"
    );
}
