//! An audit of raw inputs checks conversations while they are ingested; an audit of a store
//! reads them back. Both must write the same corpus, including for conversations the early
//! check cannot stand for: stored in fragments, stored without runs read before, stitched
//! across files.

mod common;

use common::*;
use traceaudit::config::Config;
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
