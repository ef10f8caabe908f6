//! The attempt ledger: its rows as the framework records them, and the ledger rebuilt from the
//! judged answers, the verdicts and the history when the recording carries none.

use super::facts::{correction_error, Candidate, Correction, Facts};
use super::row::{AttemptRow, Outcome};
use crate::js;
use crate::model::Role;

/// Stops under which a structured answer fails whatever its text says.
const NATIVE_STOPS: [&str; 3] = ["refusal", "max_tokens", "model_context_window_exceeded"];

/// Rebuild the ledger from the run's judged answers, verdicts and history.
pub(super) fn rebuild(f: &Facts<'_>) -> Vec<AttemptRow> {
    let mut rows = Vec::new();
    let n = f.candidates.len();
    for (k, c) in f.candidates.iter().enumerate() {
        let attempt = k as u32 + 1;
        let same_iteration = |i: Option<u32>| i.is_some() && i == c.iteration;
        let retry = f
            .retries
            .iter()
            .find(|r| same_iteration(r.iteration))
            .or_else(|| {
                f.retries
                    .iter()
                    .find(|r| r.iteration.is_none() && r.attempt == Some(attempt))
            });
        let unmet = f.unmet.iter().find(|u| same_iteration(u.iteration));
        let native_stop = c
            .stop_reason
            .clone()
            .filter(|s| NATIVE_STOPS.contains(&s.as_str()));
        let mut row = AttemptRow {
            attempt,
            iteration: c.iteration,
            ..AttemptRow::default()
        };
        if let Some(r) = retry {
            row.outcome = Outcome::Retried;
            row.stage = r.stage.clone();
            row.error = r.error.clone();
            row.path = r.path.clone();
            row.corrective_message_hash = r.hash.clone();
            row.stop_reason = native_stop;
        } else if let Some(u) = unmet {
            row.outcome = Outcome::Exhausted;
            row.stage = u.stage.clone();
            row.error = u.error.clone();
            row.path = u.path.clone();
            row.broken_by = u.broken_by.clone();
            row.stop_reason = native_stop;
        } else if c.routed_retry {
            // Asked again, but no retry verdict was recorded: take what the correction says.
            row.outcome = Outcome::Retried;
            if let Some(corr) = correction_after(f, c) {
                let text = f.history[corr.index].text;
                row.error = correction_error(text).map(str::to_string);
                row.corrective_message_hash = Some(corr.hash.clone());
            }
            row.stop_reason = native_stop;
        } else if !f.contract.declared || (k + 1 == n && !f.contract.terminal_verdicts) {
            // Only the configuration knows of a contract (the framework judged nothing), or
            // nothing followed the last answer and the source records no terminal verdict:
            // the validator says what became of it (see `rejudge`).
            row.outcome = Outcome::Passed;
            row.inferred = true;
        } else {
            row.outcome = Outcome::Passed;
        }
        rows.push(row);
    }
    rows
}

/// The correction right after a candidate's answer in the history.
fn correction_after<'f>(f: &'f Facts<'_>, c: &Candidate) -> Option<&'f Correction> {
    let answer = c.answer.as_deref()?;
    f.corrections.iter().find(|corr| {
        corr.index > 0
            && f.history[corr.index - 1].role == Role::Assistant
            && f.history[corr.index - 1].text == answer
    })
}

/// The answer text of a ledger row: the judged answer of the same iteration, else the
/// assistant message the row's correction follows, else (last row) the run's answer.
pub(super) fn answer_of(
    f: &Facts<'_>,
    row: &AttemptRow,
    is_last: bool,
) -> (Option<String>, Option<String>) {
    if let Some(c) = f
        .candidates
        .iter()
        .find(|c| c.iteration.is_some() && c.iteration == row.iteration)
    {
        if c.answer.is_some() {
            return (c.answer.clone(), c.tool.clone());
        }
    }
    if let Some(hash) = &row.corrective_message_hash {
        if let Some(i) = f.history.iter().position(|m| js::hash_hex(m.text) == *hash) {
            if let Some(m) = f.history[..i]
                .iter()
                .rev()
                .find(|m| m.role != Role::Tool)
                .filter(|m| m.role == Role::Assistant)
            {
                return (Some(m.text.to_string()), None);
            }
        }
    }
    if is_last {
        f.read_run_answer.set(true);
        return (f.run.answer.clone(), None);
    }
    (None, None)
}
