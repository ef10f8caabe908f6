//! VCR cassettes end to end: the bundled excerpts audited with the schema-attempt check, and,
//! when the shared data is present, every cassette of it.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use traceaudit::checks::SchemaAttempt;
use traceaudit::checks::{Pass, PassContext};
use traceaudit::read::{read_path, Severity};
use traceaudit::Config;

fn yaml_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// What the check made of a set of cassettes.
#[derive(Debug, Default)]
struct Tally {
    files: usize,
    runs: usize,
    runs_with_contract: usize,
    attempts: usize,
    retries: usize,
    exhausted: usize,
    records_dropped: usize,
    dropped_reasons: Vec<String>,
    modes: BTreeMap<String, usize>,
    dispositions: BTreeMap<String, usize>,
    findings: BTreeMap<String, usize>,
    lines: Vec<String>,
}

fn tally(files: &[std::path::PathBuf]) -> Tally {
    let ctx = PassContext {
        config: Config::default(),
        ..PassContext::default()
    };
    let mut t = Tally::default();
    for file in files {
        t.files += 1;
        let sink = read_path(file, None).expect("a cassette never fails the reader");
        for q in &sink.quarantined {
            if q.severity == Severity::Dropped {
                t.records_dropped += 1;
                t.dropped_reasons.push(q.reason.clone());
            }
        }
        for (conv, _) in &sink.conversations {
            let outcomes = SchemaAttempt.check(conv, &ctx);
            for (run, out) in conv.runs.iter().zip(&outcomes) {
                t.runs += 1;
                *t.dispositions
                    .entry(out.disposition.as_str().to_string())
                    .or_default() += 1;
                let mode = run
                    .events
                    .iter()
                    .find(|e| e.source_type.as_deref() == Some("output-contract"))
                    .and_then(|e| e.text.clone());
                if let Some(mode) = mode {
                    t.runs_with_contract += 1;
                    *t.modes.entry(mode).or_default() += 1;
                }
                for f in &out.findings {
                    *t.findings
                        .entry(format!("{} {}", f.kind, f.predicate))
                        .or_default() += 1;
                }
                for (_, row) in &out.rows {
                    t.attempts += 1;
                    match row["outcome"].as_str().unwrap() {
                        "retried" => t.retries += 1,
                        "exhausted" => t.exhausted += 1,
                        _ => {}
                    }
                    t.lines.push(row_line(row));
                }
            }
        }
    }
    t
}

fn row_line(row: &Value) -> String {
    format!(
        "{} #{} it{} {} {} {} hash={} joined={}/{} revalidated={}",
        row["conversation_id"].as_str().unwrap(),
        row["attempt"],
        row["iteration"],
        row["outcome"].as_str().unwrap(),
        row["stage"].as_str().unwrap_or("-"),
        row["path"].as_str().unwrap_or("-"),
        row["corrective_message_hash"].as_str().unwrap_or("-"),
        row["hash_joined"],
        row["event_joined"],
        row["revalidated"].as_str().unwrap_or("-"),
    )
}

#[test]
fn bundled_cassettes() {
    let mut files = Vec::new();
    yaml_files(&testdata("cassettes"), &mut files);
    assert_eq!(files.len(), 15);
    let t = tally(&files);
    assert_eq!(t.records_dropped, 0);
    assert_eq!(t.retries, 3);
    assert!(t.findings.is_empty(), "{:?}", t.findings);
    let mut report = vec![
        format!(
            "runs {} (with an output contract {})",
            t.runs, t.runs_with_contract
        ),
        format!("modes {:?}", t.modes),
        format!("dispositions {:?}", t.dispositions),
    ];
    report.extend(t.lines);
    insta::assert_snapshot!(report.join("\n"));
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn every_shared_cassette_is_read() {
    let Some(root) = shared_data("pydantic-ai-cassettes") else {
        return;
    };
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    let t = tally(&files);
    eprintln!(
        "{} cassettes, {} runs, {} with structured output {:?}, {} attempts, {} retried, {} \
         exhausted; dispositions {:?}; findings {:?}",
        t.files,
        t.runs,
        t.runs_with_contract,
        t.modes,
        t.attempts,
        t.retries,
        t.exhausted,
        t.dispositions,
        t.findings
    );
    assert!(t.files >= 140, "{} cassettes", t.files);
    // Every cassette yields runs; only a token count is dropped.
    assert!(t.runs >= t.files, "{} runs", t.runs);
    assert!(
        t.dropped_reasons.iter().all(|r| r.contains("token count")),
        "{:?}",
        t.dropped_reasons
    );
    // The structured-output runs, their attempts and the real retries among them.
    assert!(t.runs_with_contract >= 100, "{}", t.runs_with_contract);
    assert!(t.attempts >= 100, "{}", t.attempts);
    assert!(t.retries >= 6, "{}", t.retries);
    // Every retry joins its correction and its verdict, so no invariant breaks on real data.
    assert!(t.findings.is_empty(), "{:?}", t.findings);
}

/// A library's forced output tool (Mirascope's `__mirascope_formatted_output_tool__`, forced
/// through `tool_choice`), whose answer the next request sends back as assistant text: each
/// run's answer is the call's arguments under a `tool` output contract, the call is no landing,
/// and the schema-attempt check reads it.
#[test]
fn a_forced_library_output_tool_is_a_structured_answer() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mirascope/resume_tool_format.yaml");
    let sink = read_path(&path, None).unwrap();
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.conversations.len(), 1);
    let conv = &sink.conversations[0].0;
    let answers: Vec<Option<&str>> = conv.runs.iter().map(|r| r.answer.as_deref()).collect();
    assert_eq!(
        answers,
        [
            Some(r#"{"title":"The Name of the Wind","author":"Patrick Rothfuss","rating":9}"#),
            Some(r#"{"title":"A Wizard of Earthsea","author":"Ursula K. Le Guin","rating":9}"#),
        ]
    );
    let ctx = PassContext {
        config: Config::default(),
        ..PassContext::default()
    };
    let outcomes = SchemaAttempt.check(conv, &ctx);
    for (run, out) in conv.runs.iter().zip(&outcomes) {
        assert_eq!(
            run.landings().count(),
            0,
            "{}: the output call is no landing",
            run.run_id
        );
        let contract: Vec<Value> = run
            .events
            .iter()
            .filter(|e| e.source_type.as_deref() == Some("output-contract"))
            .map(|e| serde_json::from_str(e.payload.as_deref().unwrap()).unwrap())
            .collect();
        assert_eq!(contract.len(), 1, "{}", run.run_id);
        assert_eq!(contract[0]["mode"], "tool");
        assert_eq!(
            contract[0]["tools"]["__mirascope_formatted_output_tool__"]["required"],
            serde_json::json!(["title", "author", "rating"])
        );
        assert_eq!(out.disposition.as_str(), "checked-pass", "{}", run.run_id);
    }
}
