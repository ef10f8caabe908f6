//! The house's one rule, checked on the source: data flows one way, so a module may use only the
//! modules below it. Each top-level module of `src/` has a layer; every `crate::MODULE` path in
//! a module's code (tests left out) must point to a lower layer. The few arrows that still point
//! up are listed with the reason they remain; an arrow that is gone must leave the list too, so
//! the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules from the bottom up; one row is one layer (modules of a row do not use each
/// other either).
const LAYERS: &[&[&str]] = &[
    &["js", "terminal", "progress"],
    &["model"],
    &["evidence"],
    &["config"],
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

/// Every `crate::NAME` a module's non-test code names, by top-level module.
fn edges(src: &Path) -> BTreeMap<(String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            let file = rel.to_string_lossy().into_owned();
            if top == "lib" || top == "main" || file.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
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
