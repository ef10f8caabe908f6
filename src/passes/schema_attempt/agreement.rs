//! Agreement: when the recording carries the framework's own ledger, the rebuilt ledger is
//! compared with it row by row (`agrees`, `differs`, `recorded-only`, `engine-only`).

use super::row::AttemptRow;
use crate::corpus::Agreement;

/// Compare the rebuilt ledger with the recorded one.
pub(super) fn agreement(
    rebuilt: &[AttemptRow],
    recorded: &[AttemptRow],
) -> Vec<(String, Agreement, Option<String>)> {
    let mut rows = Vec::new();
    for r in recorded {
        let key = format!("attempt {}", r.attempt);
        match rebuilt.iter().find(|b| b.attempt == r.attempt) {
            None => rows.push((key, Agreement::RecordedOnly, None)),
            Some(b) => {
                let differences = differing_fields(b, r);
                if differences.is_empty() {
                    rows.push((key, Agreement::Agrees, None));
                } else {
                    rows.push((
                        key,
                        Agreement::Differs,
                        Some(format!(
                            "rebuilt and recorded differ in {}",
                            differences.join(", ")
                        )),
                    ));
                }
            }
        }
    }
    for b in rebuilt {
        if !recorded.iter().any(|r| r.attempt == b.attempt) {
            rows.push((
                format!("attempt {}", b.attempt),
                Agreement::EngineOnly,
                None,
            ));
        }
    }
    rows
}

/// The recorded fields (by their ledger names) in which a rebuilt row differs from the
/// recorded row of the same attempt.
fn differing_fields(b: &AttemptRow, r: &AttemptRow) -> Vec<&'static str> {
    let mut differences = Vec::new();
    if b.iteration != r.iteration {
        differences.push("iteration");
    }
    if b.outcome != r.outcome {
        differences.push("outcome");
    }
    if b.stage != r.stage {
        differences.push("stage");
    }
    if b.error != r.error {
        differences.push("error");
    }
    if b.path != r.path {
        differences.push("path");
    }
    if b.corrective_message_hash != r.corrective_message_hash {
        differences.push("correctiveMessageHash");
    }
    if b.broken_by != r.broken_by {
        differences.push("brokenBy");
    }
    if b.stop_reason != r.stop_reason {
        differences.push("stopReason");
    }
    differences
}
