//! Filing findings: one per broken invariant (`schema-attempt`), per unmet contract
//! (`contract-unmet`) and per verdict the validator contradicts (`verdict-drift`). Findings name
//! attempts, stages, keywords and bounded field paths, never answers or validator messages.

use super::facts::{retries_known, Facts};
use super::row::{AttemptRow, Outcome};
use crate::corpus::{Draft, FindingColumns, Subject, Witness};
use serde_json::{json, Value};

/// Finding kind of a broken ledger invariant (the predicate names the invariant).
pub(super) const BROKEN_INVARIANT: &str = "schema-attempt";
/// Finding kind of an output contract the run did not meet.
pub(super) const CONTRACT_UNMET: &str = "contract-unmet";
/// Finding kind of a recorded verdict the validator contradicts.
pub(super) const VERDICT_DRIFT: &str = "verdict-drift";

/// Longest field path a finding message carries.
const PATH_LIMIT: usize = 80;

pub(super) fn bounded(path: &str) -> String {
    if path.chars().count() <= PATH_LIMIT {
        path.to_string()
    } else {
        let cut: String = path.chars().take(PATH_LIMIT).collect();
        format!("{cut}...")
    }
}

/// The findings of one run, in the order they are filed (the corpus keeps that order).
pub(super) struct Checker<'f, 'a> {
    pub(super) f: &'f Facts<'a>,
    pub(super) findings: Vec<Draft>,
}

impl Checker<'_, '_> {
    pub(super) fn file(
        &mut self,
        kind: &str,
        predicate: &str,
        row: Option<&AttemptRow>,
        message: String,
        witnesses: Vec<Witness>,
    ) {
        let subject = match row {
            Some(r) => Subject::new("attempt", r.attempt.to_string()),
            None => Subject::new("output-contract", self.f.run.run_id.clone()),
        };
        self.file_about(kind, predicate, row, subject, message, witnesses);
    }

    /// File a finding about `subject` (run-level findings name what they are about, so two of
    /// them never share an identity).
    pub(super) fn file_about(
        &mut self,
        kind: &str,
        predicate: &str,
        row: Option<&AttemptRow>,
        subject: Subject,
        message: String,
        witnesses: Vec<Witness>,
    ) {
        let mut subjects = vec![subject];
        if kind == BROKEN_INVARIANT {
            subjects.push(Subject::new("invariant", predicate));
        }
        self.findings.push(Draft {
            kind: kind.into(),
            seam: "output".into(),
            predicate: predicate.into(),
            advisory: false,
            iteration: row.and_then(|r| r.iteration),
            subjects,
            witnesses,
            message,
            columns: FindingColumns {
                schema_attempt: row.map(|r| r.attempt),
                schema_outcome: row.map(|r| r.outcome.to_string()),
                schema_stage: row.and_then(|r| r.stage.clone()),
                schema_path: row.and_then(|r| r.path.as_deref().map(bounded)),
                schema_hash: row.and_then(|r| r.corrective_message_hash.clone()),
                schema_retries: self
                    .f
                    .contract
                    .retries
                    .or_else(|| retries_known(self.f).map(|r| r.0)),
                ..FindingColumns::default()
            },
        });
    }
}

pub(super) fn witness(
    row: Option<&AttemptRow>,
    predicate: &str,
    value: Value,
    provenance: &str,
) -> Witness {
    let subject = match row {
        Some(r) => Subject::new("attempt", r.attempt.to_string()),
        None => Subject::new("output-contract", ""),
    };
    Witness::asserted(subject, predicate, value, provenance)
}

/// An unmet contract is a finding of its own.
pub(super) fn unmet_findings(c: &mut Checker<'_, '_>, ledger: &[AttemptRow]) {
    for row in ledger.iter().filter(|r| r.outcome == Outcome::Exhausted) {
        let why = match (&row.broken_by, &row.stop_reason) {
            (Some(_), _) => "a middleware rewrite broke an answer that had passed".to_string(),
            (None, Some(stop)) => format!("the provider stopped with `{stop}`"),
            (None, None) => format!(
                "it failed at stage {}{}",
                row.stage.as_deref().unwrap_or("?"),
                row.path
                    .as_deref()
                    .map(|p| format!(" on field {}", bounded(p)))
                    .unwrap_or_default()
            ),
        };
        c.file(
            CONTRACT_UNMET,
            "output-contract",
            Some(row),
            format!(
                "The run's output contract was not met: attempt {} is the last word and {why}{}.",
                row.attempt,
                if row.inferred {
                    " (the recording has no terminal verdict; the validator judged the last \
                     answer)"
                } else {
                    ""
                }
            ),
            vec![witness(
                Some(row),
                "attempts",
                json!(row.attempt),
                "attempts judged, this one included",
            )],
        );
    }
}
