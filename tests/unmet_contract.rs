//! prior-turn-evidence on runs whose output contract was not met, read from the agentfootprint
//! library's own recordings: its evidence gate never judges an answer that exhausted the schema's
//! attempts, so the check gives no grounding verdict there and says why.

mod common;

use common::*;
use traceaudit::checks::PriorTurnEvidence;
use traceaudit::checks::{Pass, PassContext};
use traceaudit::read::read_path;

fn dispositions(rel: &str) -> Vec<(String, String, String)> {
    let sink = read_path(&testdata(rel), None).unwrap();
    let ctx = PassContext::default();
    let mut out = Vec::new();
    for (conv, _) in &sink.conversations {
        for outcome in PriorTurnEvidence.check(conv, &ctx) {
            out.push((
                conv.id.clone(),
                outcome.disposition.as_str().to_string(),
                outcome.reason,
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn exhausted_schema_runs_are_not_judged() {
    // The NDJSON stream (the unmet contract as an `output_contract_unmet` event) and the
    // Recording of the same run (with its snapshot's `outputAttempts` ledger as well).
    let stream = dispositions("agentfootprint/ndjson/g_output_schema.ndjson");
    let judged: Vec<_> = stream
        .iter()
        .map(|(c, d, _)| (c.as_str(), d.as_str()))
        .collect();
    assert_eq!(
        judged,
        [
            ("sess-g-exhausted", "not-applicable"),
            ("sess-g-first-pass", "checked-pass"),
            ("sess-g-retry-pass", "checked-pass"),
            ("sess-g-zero", "not-applicable"),
        ]
    );
    for (conv, disposition, reason) in &stream {
        if disposition == "not-applicable" {
            assert!(
                reason.contains("output contract was not met"),
                "{conv}: {reason}"
            );
        }
    }
    for file in [
        "g-02-sess-g-exhausted-turn1.json",
        "g-03-sess-g-zero-turn1.json",
    ] {
        let recorded = dispositions(&format!("agentfootprint/recordings/{file}"));
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].1, "not-applicable", "{file}: {}", recorded[0].2);
    }
}
