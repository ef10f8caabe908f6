//! Partition values: the `key=value` folders of the inputs' paths are kept per run in the
//! store (`runs.partitions`) and `report --by partition:KEY` and `diff --by partition:KEY`
//! group by them; a key no run has is refused with the keys there are, and a value is escaped
//! in HTML like any recorded text.

mod common;

use common::*;
use std::path::Path;

/// A night of agentfootprint logs under `day=.../env=...` folders.
fn night(root: &Path) {
    let files = [
        (
            "day=2026-12-01/env=prod",
            "a_repeated_identical_call.ndjson",
        ),
        ("day=2026-12-01/env=dev", "f_prior_turn_evidence.ndjson"),
        ("day=2026-12-02/env=prod", "g_output_schema.ndjson"),
        // A value that is markup: shown as text, never as markup.
        ("day=<b>late&x/env=prod", "j_json_answer_gate.ndjson"),
        ("unpartitioned", "e_per_run_ledger.ndjson"),
    ];
    for (folder, name) in files {
        let to = root.join(folder);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(
            testdata(&format!("agentfootprint/ndjson/{name}")),
            to.join(name),
        )
        .unwrap();
    }
}

/// The corpus of [`night`]'s audit, under `dir`.
fn audited_night(dir: &Path) -> std::path::PathBuf {
    let inputs = dir.join("night");
    night(&inputs);
    let corpus = dir.join("corpus");
    let run = traceaudit(&[
        "audit",
        path_str(&inputs),
        "--quiet",
        "--out",
        path_str(&corpus),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    corpus
}

fn run_partitions(store: &Path) -> Vec<(String, Vec<(String, String)>)> {
    use arrow::array::{Array, AsArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut files: Vec<_> = std::fs::read_dir(store.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for batch in files.iter().flat_map(|path| {
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap()
    }) {
        let batch = batch.unwrap();
        let sources = batch.column_by_name("source").unwrap().as_string::<i32>();
        let maps = batch.column_by_name("partitions").unwrap().as_map();
        for row in 0..batch.num_rows() {
            assert!(!maps.is_null(row));
            let entries = maps.value(row);
            let keys = entries.column(0).as_string::<i32>();
            let values = entries.column(1).as_string::<i32>();
            let pairs = (0..entries.len())
                .map(|i| (keys.value(i).to_string(), values.value(i).to_string()))
                .collect();
            out.push((sources.value(row).to_string(), pairs));
        }
    }
    out
}

#[test]
fn runs_keep_the_partition_values_of_their_paths_and_reports_group_by_them() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = audited_night(dir.path());

    let rows = run_partitions(&corpus.join("store"));
    assert!(rows.len() >= 5, "{rows:?}");
    for (source, pairs) in &rows {
        let expected: Vec<(String, String)> = if source.contains("unpartitioned") {
            Vec::new()
        } else {
            let folders = Path::new(source).parent().unwrap();
            let env = folders.file_name().unwrap().to_str().unwrap();
            let day = folders
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap();
            [day, env]
                .iter()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect()
        };
        assert_eq!(pairs, &expected, "{source}");
    }

    let table = traceaudit(&["report", path_str(&corpus), "--by", "partition:day"]);
    assert_eq!(table.status, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("Per partition:day"),
        "{}",
        table.stdout
    );
    for group in ["2026-12-01", "2026-12-02", "<b>late&x", "(unrecorded)"] {
        assert!(table.stdout.contains(group), "{group}: {}", table.stdout);
    }

    let json = traceaudit(&[
        "report",
        path_str(&corpus),
        "--by",
        "partition:env",
        "--format",
        "json",
    ]);
    assert_eq!(json.status, 0, "{}", json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["by"], "partition:env");
    let groups: std::collections::BTreeSet<&str> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        ["(unrecorded)", "dev", "prod"].into_iter().collect(),
        "{}",
        json.stdout
    );

    let html = traceaudit(&[
        "report",
        path_str(&corpus),
        "--by",
        "partition:day",
        "--format",
        "html",
    ]);
    assert_eq!(html.status, 0, "{}", html.stderr);
    assert!(!html.stdout.contains("<b>late"), "unescaped value");
    assert!(html.stdout.contains("&lt;b&gt;late&amp;x"));

    // A diff groups alike (a corpus against itself: no change in any group).
    let diff = traceaudit(&[
        "diff",
        path_str(&corpus),
        path_str(&corpus),
        "--by",
        "partition:env",
    ]);
    assert_eq!(diff.status, 0, "{}", diff.stderr);
    assert!(diff.stdout.contains("partition:env"), "{}", diff.stdout);
}

#[test]
fn a_partition_key_no_run_has_is_refused_with_the_keys_there_are() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = audited_night(dir.path());
    let typo = traceaudit(&["report", path_str(&corpus), "--by", "partition:dya"]);
    assert_eq!(typo.status, 2, "{}", typo.stdout);
    assert!(
        typo.stderr
            .contains("no run's input path has a `dya=` folder; the keys there are: day, env"),
        "{}",
        typo.stderr
    );
    for bad in ["partition:", "partition:a=b", "agnet"] {
        let r = traceaudit(&["report", path_str(&corpus), "--by", bad]);
        assert_eq!(r.status, 2, "{bad}");
        assert!(r.stderr.contains("partition"), "{bad}: {}", r.stderr);
    }
}
