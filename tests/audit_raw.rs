//! An audit of raw inputs checks conversations while they are ingested; an audit of a store
//! reads them back. Both must write the same corpus, including for conversations the early
//! check cannot stand for: stored in fragments, stored without runs read before, stitched
//! across files.

mod common;

use common::*;
use traceaudit::Config;
use traceaudit::{audit, AuditOptions};
use traceaudit::{ingest, IngestOptions};

const TABLES: [&str; 6] = [
    "findings.parquet",
    "findings.jsonl",
    "dispositions.parquet",
    "ledger.parquet",
    "agreement.parquet",
    "attempts.parquet",
];

fn options(threads: usize) -> AuditOptions {
    AuditOptions {
        config: Config::load(&testdata("traceaudit.toml")).unwrap().0,
        threads,
        ..AuditOptions::default()
    }
}

#[test]
fn raw_and_store_audits_write_the_same_corpus() {
    let dir = tempfile::tempdir().unwrap();
    // Every bundled format and the bad inputs; a copy of one recording in a later input (its
    // runs are duplicates, its conversation ids met again); a session in fragments.
    let extra = dir.path().join("zz-extra");
    std::fs::create_dir(&extra).unwrap();
    std::fs::copy(
        testdata("agentfootprint/ndjson/a_repeated_identical_call.ndjson"),
        extra.join("copy.ndjson"),
    )
    .unwrap();
    std::fs::write(extra.join("f_padded.ndjson"), fragmented_session_ndjson()).unwrap();
    let inputs = [testdata(""), extra.clone()];

    for threads in [1, 2] {
        let raw = dir.path().join(format!("raw-{threads}"));
        let summary = audit(&inputs, &raw, &options(threads)).unwrap();
        assert!(
            summary.manifest.findings >= 10,
            "{:?}",
            summary.manifest.counts
        );
        assert!(
            !raw.join("checked-during-ingest").exists(),
            "what was checked during the ingest is not left in the corpus"
        );

        let store = dir.path().join(format!("store-{threads}"));
        ingest(
            &inputs,
            &store,
            &IngestOptions {
                threads,
                ..IngestOptions::default()
            },
        )
        .unwrap();
        let from_store = dir.path().join(format!("from-store-{threads}"));
        let again = audit(&[store], &from_store, &options(threads)).unwrap();
        assert_eq!(summary.manifest.conversations, again.manifest.conversations);
        assert_eq!(summary.manifest.runs, again.manifest.runs);
        assert_eq!(summary.manifest.counts, again.manifest.counts);
        for table in TABLES {
            let a = std::fs::read(raw.join(table)).unwrap();
            let b = std::fs::read(from_store.join(table)).unwrap();
            assert!(
                a == b,
                "{table} differs between the raw and the store audit"
            );
        }
    }
}

/// Rewrite a store's manifest with `edit`.
fn edit_manifest(store: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = store.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
}

/// A store names the digests and envelope types it keeps; one whose manifest names no digests
/// is audited from the text of its results, and one written before manifests named them is
/// read as holding the digests of that time (evidence 1, which this engine does not read): all
/// give the corpus the store gives as ingested.
#[test]
fn a_store_is_audited_with_the_digests_its_manifest_names() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = [testdata("agentfootprint"), testdata("tau2")];
    let store = dir.path().join("store");
    ingest(&inputs, &store, &IngestOptions::default()).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["digests"],
        serde_json::json!([
            {"name": "arguments-fingerprint", "version": 1},
            {"name": "result-fingerprint", "version": 1},
            {"name": "evidence", "version": 2}
        ])
    );
    assert_eq!(
        manifest["envelope_types"],
        serde_json::json!(["output-contract", "agentfootprint.agent.route_decided"])
    );
    let corpus = |name: &str| {
        let out = dir.path().join(name);
        audit(std::slice::from_ref(&store), &out, &options(2)).unwrap();
        out
    };
    let as_ingested = corpus("as-ingested");

    edit_manifest(&store, |m| m["digests"] = serde_json::json!([]));
    let without_digests = corpus("without-digests");
    edit_manifest(&store, |m| {
        let m = m.as_object_mut().unwrap();
        m.remove("digests");
        m.remove("envelope_types");
    });
    let older = corpus("older");
    for table in TABLES {
        let expected = std::fs::read(as_ingested.join(table)).unwrap();
        for other in [&without_digests, &older] {
            assert!(
                std::fs::read(other.join(table)).unwrap() == expected,
                "{table} differs in {}",
                other.display()
            );
        }
    }
}

/// A store that does not keep the envelopes of a row type a check reads would hand those rows
/// back without them: the audit refuses it, naming the type, instead of passing them.
#[test]
fn a_store_without_an_envelope_type_a_check_reads_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ingest(
        &[testdata("agentfootprint")],
        &store,
        &IngestOptions::default(),
    )
    .unwrap();
    edit_manifest(&store, |m| {
        m["envelope_types"] = serde_json::json!(["output-contract"]);
    });
    let err = audit(
        std::slice::from_ref(&store),
        &dir.path().join("corpus"),
        &options(1),
    )
    .err()
    .expect("the store is refused");
    let message = err.to_string();
    assert!(
        message.contains("`agentfootprint.agent.route_decided`")
            && message.contains("schema-attempt")
            && message.contains("ingest its inputs again")
            && !message.contains('\n'),
        "{message}"
    );
    // A check that reads no such envelope audits it.
    let only = AuditOptions {
        checks: Some(vec!["repeated-call".into()]),
        ..options(1)
    };
    audit(
        std::slice::from_ref(&store),
        &dir.path().join("repeated-only"),
        &only,
    )
    .unwrap();
}
