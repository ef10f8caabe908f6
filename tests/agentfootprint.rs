//! The agentfootprint sample end to end: ingest, audit, agreement with the framework's own
//! repeated-call verdicts, determinism across thread counts, and bad input.

mod common;

use common::*;
use traceaudit::Config;
use traceaudit::Store;
use traceaudit::{audit, AuditOptions};
use traceaudit::{ingest, IngestOptions};

fn sample_config() -> Config {
    Config::load(&testdata("traceaudit.toml")).unwrap().0
}

fn audit_with(inputs: &[std::path::PathBuf], out: &std::path::Path, threads: usize) {
    audit(
        inputs,
        out,
        &AuditOptions {
            config: sample_config(),
            threads,
            ..AuditOptions::default()
        },
    )
    .unwrap();
}

#[test]
fn ndjson_and_recording_give_the_same_runs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = IngestOptions {
        threads: 2,
        ..IngestOptions::default()
    };
    let a = ingest(
        &[testdata("agentfootprint/ndjson")],
        &dir.path().join("a"),
        &opts,
    )
    .unwrap();
    let c = &a.manifest.counts;
    assert_eq!(
        (c.files, c.conversations, c.runs, c.landings),
        (9, 20, 23, 30)
    );
    assert_eq!(c.records_read, c.records_stored + c.records_quarantined);
    assert_eq!(c.records_quarantined, 0);

    let b = ingest(
        &[testdata("agentfootprint/recordings")],
        &dir.path().join("b"),
        &opts,
    )
    .unwrap();
    assert_eq!(b.manifest.counts.runs, 6);
    let ndjson = Store::open(&dir.path().join("a")).unwrap();
    let recordings = Store::open(&dir.path().join("b")).unwrap();
    let ndjson_runs = ndjson.runs().unwrap();
    for row in &recordings.runs().unwrap() {
        let twin = ndjson_runs
            .iter()
            .find(|r| r.run.run_id == row.run.run_id)
            .expect("every recorded run is in the NDJSON too");
        assert_eq!(twin.run.conversation_id, row.run.conversation_id);
        assert_eq!(twin.run.turn, row.run.turn);
        assert_eq!(twin.run.answer, row.run.answer);
        assert_eq!(twin.landings, row.landings);
    }
    // Both together: the second copy of each run is skipped and said so.
    let both = ingest(
        &[testdata("agentfootprint")],
        &dir.path().join("both"),
        &opts,
    )
    .unwrap();
    assert_eq!(both.manifest.counts.runs, 23);
    assert_eq!(both.manifest.counts.duplicate_runs, 6);
}

#[test]
fn turns_come_from_the_history() {
    let dir = tempfile::tempdir().unwrap();
    ingest(
        &[testdata(
            "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
        )],
        &dir.path().join("s"),
        &IngestOptions::default(),
    )
    .unwrap();
    let store = Store::open(&dir.path().join("s")).unwrap();
    let conv = store
        .read_part(0)
        .unwrap()
        .into_iter()
        .find(|c| c.id == "sess-f-conv")
        .unwrap();
    let turns: Vec<u32> = conv.runs.iter().map(|r| r.turn).collect();
    assert_eq!(turns, vec![1, 2, 3]);
    // Turn 2 was answered in one iteration: its history comes from the composed messages.
    let history = conv.history_for(1);
    let roles: Vec<&str> = history.iter().map(|m| m.role.as_str()).collect();
    // Four messages of turn 1 and turn 2's question, then the injected system prompt.
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "user", "system"]
    );
    assert!(history[2].text.contains("SHPMAXDLVAP001"));
}

#[test]
fn repeated_call_agrees_with_the_framework() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("corpus");
    audit_with(&[testdata("agentfootprint/ndjson")], &out, 2);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let counts = &manifest["counts"][0];
    assert_eq!(counts["check"], "repeated-call");
    assert_eq!(counts["checked_fail"], 4);
    assert_eq!(counts["findings"], 4);
    assert_eq!(counts["agreement"], serde_json::json!({"agrees": 4}));
    let findings = std::fs::read_to_string(out.join("findings.jsonl")).unwrap();
    let keys: Vec<String> = findings
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["check_name"] == "repeated-call")
        .map(|v| {
            format!(
                "{} {} {}",
                v["key"].as_str().unwrap(),
                v["tool_call_id"].as_str().unwrap(),
                v["occurrences"]
            )
        })
        .collect();
    insta::assert_snapshot!(keys.join("\n"));
    insta::assert_snapshot!("agentfootprint_findings", findings);
}

#[test]
fn corpus_is_identical_at_one_and_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    let two = dir.path().join("two");
    audit_with(&[testdata("agentfootprint/ndjson")], &one, 1);
    audit_with(&[testdata("agentfootprint/ndjson")], &two, 2);
    for table in [
        "findings.parquet",
        "findings.jsonl",
        "dispositions.parquet",
        "ledger.parquet",
        "agreement.parquet",
    ] {
        let a = std::fs::read(one.join(table)).unwrap();
        let b = std::fs::read(two.join(table)).unwrap();
        assert!(a == b, "{table} differs between 1 and 2 threads");
    }
}

#[test]
fn bad_input_is_quarantined_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = traceaudit(&[
        "ingest",
        path_str(&testdata("bad")),
        "--out",
        path_str(&store),
        "-q",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let quarantine = std::fs::read_to_string(store.join("quarantine.jsonl")).unwrap();
    let entries: Vec<serde_json::Value> = quarantine
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<String> = entries
        .iter()
        .map(|e| {
            let file = std::path::Path::new(e["file"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            format!("{file} {} {}", e["locator"], e["reason"].as_str().unwrap())
        })
        .collect();
    insta::assert_snapshot!(reasons.join("\n"));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap())
            .unwrap();
    let c = &manifest["counts"];
    assert_eq!(
        c["records_read"].as_u64().unwrap(),
        c["records_stored"].as_u64().unwrap() + c["records_quarantined"].as_u64().unwrap()
    );
    assert_eq!(
        c["records_quarantined"].as_u64().unwrap(),
        entries
            .iter()
            .filter(|e| e["severity"] == "dropped")
            .count() as u64
    );
    // The good runs of the mixed file are kept.
    assert!(c["runs"].as_u64().unwrap() >= 1);

    // --strict turns quarantined records into a failure.
    let strict = traceaudit(&[
        "ingest",
        path_str(&testdata("bad")),
        "--out",
        path_str(&dir.path().join("s2")),
        "-q",
        "--strict",
    ]);
    assert_eq!(strict.status, 1);
    // Nothing readable at all: exit 2 with a one-line reason.
    let nothing = traceaudit(&[
        "ingest",
        path_str(&testdata("bad/notes.txt")),
        "--out",
        path_str(&dir.path().join("s3")),
        "-q",
    ]);
    assert_eq!(nothing.status, 2);
    assert_eq!(nothing.stderr.lines().count(), 1, "{}", nothing.stderr);
    // A missing input: exit 2.
    let missing = traceaudit(&[
        "ingest",
        "/no/such/input",
        "--out",
        path_str(&dir.path().join("s4")),
    ]);
    assert_eq!(missing.status, 2);
}

#[test]
fn audit_refuses_to_overwrite_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), "keep me").unwrap();
    let out = traceaudit(&[
        "audit",
        path_str(&testdata("agentfootprint/ndjson")),
        "--out",
        path_str(dir.path()),
        "-q",
    ]);
    assert_eq!(out.status, 2);
    assert!(dir.path().join("precious.txt").exists());
}

/// The dispositions the sample's own manifest expects from the newer framework versions
/// (`priorTurnEvidence_newerVersions`), and agreement with every recorded gate judgement.
#[test]
fn prior_turn_evidence_matches_the_sample_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("corpus");
    audit_with(
        &[testdata(
            "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
        )],
        &out,
        2,
    );
    let lines = std::fs::read_to_string(out.join("findings.jsonl")).unwrap();
    let findings: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|f: &serde_json::Value| f["check_name"] == "prior-turn-evidence")
        .collect();
    assert_eq!(findings.len(), 1);
    let f = &findings[0];
    assert_eq!(f["run_id"], "run-1795968650406-2");
    assert_eq!(
        (
            f["grounded_count"].as_u64(),
            f["latest_prior_turn"].as_u64(),
            f["current_turn"].as_u64(),
            f["tool_results_this_turn"].as_u64()
        ),
        (Some(2), Some(1), Some(2), Some(0))
    );
    assert!(f["grounded_values"].is_null());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let counts = manifest["counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "prior-turn-evidence")
        .unwrap()
        .clone();
    // conv t1 pass, t2 fail, t3 pass, unreach, pass, flagged pass, guard-fixed pass.
    assert_eq!(
        (
            counts["checked_pass"].as_u64(),
            counts["checked_fail"].as_u64(),
            counts["unreachable"].as_u64()
        ),
        (Some(5), Some(1), Some(1))
    );
    assert_eq!(counts["agreement"], serde_json::json!({"agrees": 7}));
}

/// A log where other runs' lines come between the runs of one session is stored in fragments
/// (each run is stored once its turn has ended and enough of the file has followed); the store
/// joins them, so the store and the findings are those of the same log without the other lines.
#[test]
fn a_session_stored_in_fragments_is_joined() {
    let original = testdata("agentfootprint/ndjson/f_prior_turn_evidence.ndjson");
    let padded = fragmented_session_ndjson();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("padded")).unwrap();
    let padded_path = dir.path().join("padded/f_prior_turn_evidence.ndjson");
    std::fs::write(&padded_path, padded).unwrap();
    // The adapter hands sess-f-conv on in three fragments.
    let read = traceaudit::read::read_path(&padded_path, None).unwrap();
    let fragments = read
        .conversations
        .iter()
        .filter(|(c, _)| c.id == "sess-f-conv")
        .count();
    assert_eq!(fragments, 3);

    let stored = |input: &std::path::Path, name: &str| {
        let summary = ingest(
            &[input.to_path_buf()],
            &dir.path().join(name),
            &IngestOptions::default(),
        )
        .unwrap();
        let store = Store::open(&dir.path().join(name)).unwrap();
        let mut conversations = Vec::new();
        for part in 0..store.parts {
            for mut c in store.read_part(part).unwrap() {
                for run in &mut c.runs {
                    run.source.clear();
                }
                if c.id != "filler" {
                    conversations.push(c);
                }
            }
        }
        (summary, conversations)
    };
    let (plain_summary, plain) = stored(&original, "plain-store");
    let (padded_summary, joined) = stored(&padded_path, "padded-store");
    assert_eq!(padded_summary.manifest.counts.records_quarantined, 0);
    assert_eq!(
        padded_summary.manifest.counts.conversations,
        plain_summary.manifest.counts.conversations + 1
    );
    let conv = joined.iter().find(|c| c.id == "sess-f-conv").unwrap();
    assert_eq!(conv.runs.len(), 3);
    assert!(
        plain == joined,
        "the joined store differs from the plain one"
    );
}
