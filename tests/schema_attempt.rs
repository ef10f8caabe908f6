//! The schema-attempt check on the agentfootprint output-schema sample: the attempt rows equal
//! the ledger the framework recorded, every corrective-message hash joins its correction, and
//! the corpus gets its `attempts` table.

mod common;

use common::*;
use serde_json::Value;
use traceaudit::checks::SchemaAttempt;
use traceaudit::checks::{Pass, PassContext, RunOutcome};
use traceaudit::read::read_path;
use traceaudit::Config;
use traceaudit::{audit, AuditOptions};

fn sample_config() -> Config {
    Config::load(&testdata("traceaudit.toml")).unwrap().0
}

fn check_file(path: &std::path::Path) -> Vec<(String, RunOutcome)> {
    let sink = read_path(path, None).unwrap();
    let ctx = PassContext {
        config: sample_config(),
        ..PassContext::default()
    };
    let mut out = Vec::new();
    for (conv, _) in &sink.conversations {
        for (run, outcome) in conv.runs.iter().zip(SchemaAttempt.check(conv, &ctx)) {
            out.push((run.run_id.clone(), outcome));
        }
    }
    out
}

/// The recorded ledger of a Recording file, with the engine's column names.
fn recorded_ledger(path: &std::path::Path) -> Vec<Value> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["snapshot"]["sharedState"]["outputAttempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::json!({
                "attempt": r["attempt"], "iteration": r["iteration"], "outcome": r["outcome"],
                "stage": r["stage"], "error": r["error"], "path": r["path"],
                "corrective_message_hash": r["correctiveMessageHash"],
                "broken_by": r["brokenBy"], "stop_reason": r["stopReason"],
            })
        })
        .collect()
}

fn ledger_columns(row: &Value) -> Value {
    let keys = [
        "attempt",
        "iteration",
        "outcome",
        "stage",
        "error",
        "path",
        "corrective_message_hash",
        "broken_by",
        "stop_reason",
    ];
    Value::Object(
        keys.iter()
            .map(|k| (k.to_string(), row[*k].clone()))
            .collect(),
    )
}

fn recordings() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(testdata("agentfootprint/recordings"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("g-"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);
    files
}

#[test]
fn recorded_ledgers_are_reproduced_and_every_hash_joins() {
    let ndjson = check_file(&testdata("agentfootprint/ndjson/g_output_schema.ndjson"));
    let mut snapshot = Vec::new();
    for file in recordings() {
        let recorded = recorded_ledger(&file);
        let outcomes = check_file(&file);
        assert_eq!(outcomes.len(), 1);
        let (run_id, out) = &outcomes[0];
        let rows: Vec<&Value> = out.rows.iter().map(|(_, r)| r).collect();
        let ours: Vec<Value> = rows.iter().map(|r| ledger_columns(r)).collect();
        assert_eq!(ours, recorded, "{}", file.display());
        for row in &rows {
            assert_eq!(row["ledger"], "recorded");
            match row["outcome"].as_str().unwrap() {
                "retried" => {
                    assert_eq!(row["hash_joined"], true, "{row}");
                    assert_eq!(row["event_joined"], true, "{row}");
                }
                "exhausted" => assert_eq!(row["event_joined"], true, "{row}"),
                _ => {}
            }
        }
        // The ledger rebuilt from the events agrees with the recorded one, attempt by attempt.
        assert!(!out.agreement.is_empty());
        assert!(
            out.agreement
                .iter()
                .all(|(_, status, _)| status.as_str() == "agrees"),
            "{:?}",
            out.agreement
        );
        // The NDJSON copy of the same run rebuilds the same ledger from its events alone.
        let (_, twin) = ndjson.iter().find(|(id, _)| id == run_id).unwrap();
        let rebuilt: Vec<Value> = twin.rows.iter().map(|(_, r)| ledger_columns(r)).collect();
        assert_eq!(rebuilt, recorded, "NDJSON twin of {run_id}");
        assert_eq!(twin.disposition, out.disposition);
        let kinds: Vec<String> = out
            .findings
            .iter()
            .map(|f| format!("{} {}", f.kind, f.predicate))
            .collect();
        snapshot.push(format!(
            "{} {} [{}]",
            file.file_name().unwrap().to_string_lossy(),
            out.disposition.as_str(),
            kinds.join(", ")
        ));
        for row in rows {
            snapshot.push(format!(
                "  {} {} {} hash={} joined={}/{} revalidated={} {}",
                row["attempt"],
                row["outcome"].as_str().unwrap(),
                row["stage"].as_str().unwrap_or("-"),
                row["corrective_message_hash"].as_str().unwrap_or("-"),
                row["hash_joined"],
                row["event_joined"],
                row["revalidated"].as_str().unwrap_or("-"),
                row["revalidation_detail"].as_str().unwrap_or(""),
            ));
        }
    }
    insta::assert_snapshot!(snapshot.join("\n"));
}

#[test]
fn json_answer_gate_runs_pass_under_one_retry() {
    let outcomes = check_file(&testdata("agentfootprint/ndjson/j_json_answer_gate.ndjson"));
    assert_eq!(outcomes.len(), 2);
    for (_, out) in &outcomes {
        assert_eq!(out.disposition.as_str(), "checked-pass", "{}", out.reason);
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.rows[0].1["revalidated"], "valid");
    }
}

#[test]
fn audit_writes_the_attempts_table() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = tempfile::tempdir().unwrap();
    let corpus = |name: &str, threads: usize| {
        let out = dir.path().join(name);
        audit(
            &[testdata("agentfootprint/ndjson")],
            &out,
            &AuditOptions {
                config: sample_config(),
                threads,
                checks: Some(vec!["schema-attempt".into()]),
                ..AuditOptions::default()
            },
        )
        .unwrap();
        out
    };
    let out = corpus("two", 2);
    let one = corpus("one", 1);
    assert!(
        std::fs::read(out.join("attempts.parquet")).unwrap()
            == std::fs::read(one.join("attempts.parquet")).unwrap(),
        "attempts.parquet differs between 1 and 2 threads"
    );
    let file = std::fs::File::open(out.join("attempts.parquet")).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    // g: 3 + 3 + 1 + 1 attempts; i (its claims scenario also has an output schema): 1 + 1 + 1;
    // j: 1 + 1.
    assert_eq!(rows, 13);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let counts = &manifest["counts"][0];
    assert_eq!(counts["check"], "schema-attempt");
    assert_eq!(counts["checked_pass"], 7);
    assert_eq!(counts["checked_fail"], 2);
    assert_eq!(counts["not_applicable"], 14);
}

/// The store reader loads envelopes only where a pass says it reads them
/// (`Pass::other_payloads`): every pass over every sample, read back from a store, concludes
/// what it concludes with every recorded envelope in place.
#[test]
fn checks_read_back_from_a_store_miss_no_envelope_they_read() {
    use std::collections::HashMap;
    use traceaudit::Store;
    use traceaudit::{expand_inputs, ingest, IngestOptions};
    let samples: Vec<std::path::PathBuf> = ["agentfootprint", "cassettes", "otel", "inspect-ai"]
        .iter()
        .map(|d| testdata(d))
        .collect();
    // Every envelope as the adapters read it, by run and row; the first copy of a run wins,
    // as in the store.
    let mut envelopes: HashMap<(String, u32), Option<String>> = HashMap::new();
    let mut seen_runs = std::collections::HashSet::new();
    for file in expand_inputs(&samples).unwrap() {
        for (conv, _) in read_path(&file, None).unwrap().conversations {
            for run in conv.runs {
                if !seen_runs.insert(run.run_id.clone()) {
                    continue;
                }
                for e in run.events {
                    envelopes.insert((run.run_id.clone(), e.seq), e.payload);
                }
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    ingest(&samples, &dir.path().join("s"), &IngestOptions::default()).unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    let ctx = PassContext {
        config: sample_config(),
        ..PassContext::default()
    };
    let (mut runs, mut left_out) = (0, 0);
    for part in 0..store.parts {
        for read in store.read_part(part).unwrap() {
            let mut whole = read.clone();
            for run in &mut whole.runs {
                for e in &mut run.events {
                    let recorded = envelopes[&(run.run_id.clone(), e.seq)].clone();
                    if e.payload.is_none() && recorded.is_some() {
                        left_out += 1;
                    }
                    e.payload = recorded;
                }
            }
            for pass in traceaudit::checks::all() {
                let a = pass.check(&read, &ctx);
                let b = pass.check(&whole, &ctx);
                assert_eq!(a, b, "{} on {}", pass.name(), read.id);
            }
            runs += read.runs.len();
        }
    }
    assert!(runs > 50, "{runs} runs");
    // The comparison means something: the reader did leave envelopes out.
    assert!(left_out > 100, "{left_out} envelopes left out");
}
