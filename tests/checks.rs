//! Per-check fixtures: every file `tests/fixtures/checks/<check>/<case>.<ext>` is audited with that
//! check alone (and `<case>.toml` beside it as the configuration, when present), and the
//! dispositions and findings it gets are one named snapshot, `<check>__<case>`. Adding a case is
//! adding a file, its row in the folder's `README.md` and its accepted snapshot.
//!
//! The README's table states each case's dispositions, run by run; they are asserted here as
//! well, so a snapshot accepted by mistake still fails the test.

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use traceaudit::Config;
use traceaudit::{audit, AuditOptions};

fn fixtures(rel: &str) -> PathBuf {
    crate_dir().join("tests/fixtures/checks").join(rel)
}

/// Files in a check's folder that are not cases.
fn is_case(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    path.is_file() && !name.ends_with(".toml") && name != "SOURCE.txt" && name != "LICENSE"
}

/// Every case, as `(check, case name, path)`, in name order.
fn cases() -> Vec<(String, String, PathBuf)> {
    let root = fixtures("");
    let registered: Vec<&str> = traceaudit::checks::all().iter().map(|p| p.name()).collect();
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let check = dir.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            registered.contains(&check.as_str()),
            "tests/fixtures/checks/{check} names no registered check ({registered:?})"
        );
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if is_case(&path) {
                let case = path.file_stem().unwrap().to_str().unwrap().to_string();
                out.push((check.clone(), case, path));
            }
        }
    }
    out.sort();
    out
}

/// The README table: `(check, case) -> dispositions, run by run`.
fn expected() -> BTreeMap<(String, String), Vec<String>> {
    let text = std::fs::read_to_string(fixtures("README.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.trim().split('|').map(str::trim).collect();
        // `| check | case | what it shows | dispositions |`: six pieces around five bars.
        if cells.len() != 6 || !cells[1].starts_with('`') {
            continue;
        }
        let unquote = |s: &str| s.trim_matches('`').to_string();
        let dispositions = cells[4].split(',').map(|d| unquote(d.trim())).collect();
        let previous = out.insert((unquote(cells[1]), unquote(cells[2])), dispositions);
        assert!(previous.is_none(), "README lists {line} twice");
    }
    out
}

/// The rows of a corpus's `dispositions.parquet`, as JSON objects.
fn disposition_rows(corpus: &Path) -> Vec<Value> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let file = std::fs::File::open(corpus.join("dispositions.parquet")).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in reader {
        let mut writer = arrow::json::ArrayWriter::new(Vec::new());
        writer.write_batches(&[&batch.unwrap()]).unwrap();
        writer.finish().unwrap();
        let text = writer.into_inner();
        if !text.is_empty() {
            rows.extend(serde_json::from_slice::<Vec<Value>>(&text).unwrap());
        }
    }
    rows
}

/// A case's audit with its check alone, as the readable value that is snapshot.
fn audit_case(check: &str, case: &Path) -> Value {
    let config_file = case.with_extension("toml");
    let config = if config_file.exists() {
        Config::load(&config_file).unwrap().0
    } else {
        Config::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("corpus");
    let options = AuditOptions {
        checks: Some(vec![check.to_string()]),
        config,
        threads: 1,
        ..AuditOptions::default()
    };
    audit(&[case.to_path_buf()], &out, &options).unwrap();

    let mut dispositions: Vec<Value> = disposition_rows(&out)
        .into_iter()
        .map(|r| {
            assert_eq!(r["check_name"], check);
            json!({
                "run_id": r["run_id"],
                "turn": r["turn"],
                "disposition": r["disposition"],
                "reason": r["reason"],
            })
        })
        .collect();
    dispositions.sort_by_key(|d| d["turn"].as_u64());
    let findings: Vec<Value> = std::fs::read_to_string(out.join("findings.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Value = serde_json::from_str(l).unwrap();
            assert_eq!(f["check_name"], check);
            json!({
                "run_id": f["run_id"],
                "kind": f["kind"],
                "predicate": f["predicate"],
                "key": f["key"],
                "advisory": f["advisory"],
                "message": f["message"],
            })
        })
        .collect();
    json!({ "dispositions": dispositions, "findings": findings })
}

#[test]
fn every_check_fixture() {
    let cases = cases();
    let mut expected = expected();
    assert!(!cases.is_empty(), "no case under tests/fixtures/checks");
    for check in traceaudit::checks::all() {
        assert!(
            cases.iter().any(|(c, _, _)| c == check.name()),
            "{} has no fixture under tests/fixtures/checks",
            check.name()
        );
    }
    for (check, case, path) in &cases {
        let value = audit_case(check, path);
        let want = expected
            .remove(&(check.clone(), case.clone()))
            .unwrap_or_else(|| {
                panic!("{check}/{case} has no row in tests/fixtures/checks/README.md")
            });
        let got: Vec<String> = value["dispositions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["disposition"].as_str().unwrap().to_string())
            .collect();
        insta::assert_json_snapshot!(format!("{check}__{case}"), value);
        assert_eq!(
            got, want,
            "{check}/{case}: the dispositions the README states"
        );
    }
    assert!(
        expected.is_empty(),
        "README rows without a case file: {:?}",
        expected.keys().collect::<Vec<_>>()
    );
}
