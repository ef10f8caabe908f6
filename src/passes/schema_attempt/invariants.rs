//! The ledger invariants: an ordered table of named rules, each checked by its own function.
//! A broken rule is a finding of kind `schema-attempt` whose predicate is the rule's name.
//!
//! A name may head two rules: a join is checked from the ledger row (the row has its verdict or
//! correction) and swept from the other side (every verdict or correction has its row).

use super::facts::{retries_known, Facts, RetryVerdict, UnmetVerdict};
use super::findings::{witness, Checker, BROKEN_INVARIANT};
use super::judge::RowCheck;
use super::ledger::answer_of;
use super::row::{AttemptRow, Outcome};
use crate::corpus::{Subject, Witness};
use crate::model::Role;
use serde_json::json;

/// The stages an answer fails at: not JSON; JSON that fails the schema; or, after the schema
/// passed, a check of the application's own (an output function or validator asking again).
const STAGES: [&str; 3] = ["json-parse", "schema-validate", "custom-validate"];

/// One named rule of the ledger.
pub struct Invariant {
    /// The predicate of the findings that report the rule broken.
    pub name: &'static str,
    /// The rule, in one line (`schemas/corpus.md` lists every rule; a test keeps the two alike).
    #[cfg_attr(not(test), allow(dead_code))]
    pub rule: &'static str,
    pub(super) check: Check,
}

/// How a rule is checked: on one ledger row at a time, or on the whole ledger.
#[derive(Clone, Copy)]
pub(super) enum Check {
    Row(fn(&mut Filer<'_, '_, '_>, &AttemptRow, &mut RowCheck)),
    Ledger(fn(&mut Filer<'_, '_, '_>, &[AttemptRow], &mut [RowCheck])),
}

/// The invariants, in the order they are checked (and their findings filed).
pub const INVARIANTS: &[Invariant] = &[
    Invariant {
        name: "contiguous-numbering",
        rule: "Attempts are numbered 1..n in ledger order, without gaps.",
        check: Check::Ledger(contiguous_numbering),
    },
    Invariant {
        name: "known-outcome",
        rule: "Every row's outcome is passed, retried or exhausted.",
        check: Check::Row(known_outcome),
    },
    Invariant {
        name: "hash-only-on-retried",
        rule: "A retried row carries a corrective-message hash (where the framework defines \
               one), no other row does.",
        check: Check::Row(hash_only_on_retried),
    },
    Invariant {
        name: "failure-fields",
        rule: "A failed row has a stage and an error, a passed row neither.",
        check: Check::Row(failure_fields),
    },
    Invariant {
        name: "known-stage",
        rule: "A row's stage is json-parse, schema-validate or custom-validate.",
        check: Check::Row(known_stage),
    },
    Invariant {
        name: "broken-by-only-on-exhausted",
        rule: "Only an exhausted row names the middleware that broke it.",
        check: Check::Row(broken_by_only_on_exhausted),
    },
    Invariant {
        name: "refusal-not-retried",
        rule: "An answer that ended in a refusal is final at once (exhausted).",
        check: Check::Row(refusal_not_retried),
    },
    Invariant {
        name: "nothing-after-exhausted",
        rule: "No attempt follows the exhausted one.",
        check: Check::Ledger(nothing_after_exhausted),
    },
    Invariant {
        name: "retry-answered",
        rule: "A retry is answered: the last row is not retried.",
        check: Check::Ledger(retry_answered),
    },
    Invariant {
        name: "retry-budget",
        rule: "Retries stay within the budget, exhaustion spends it, and corrections count it \
               right.",
        check: Check::Ledger(retry_budget),
    },
    Invariant {
        name: "retry-verdict-join",
        rule: "A retried row has exactly one retry verdict, and it agrees with the row.",
        check: Check::Row(retry_verdict_join),
    },
    Invariant {
        name: "correction-join",
        rule: "A retried row's corrective-message hash is the hash of a history message.",
        check: Check::Row(correction_join),
    },
    Invariant {
        name: "correction-after-answer",
        rule: "A retried row's correction comes right after the answer that failed.",
        check: Check::Row(correction_after_answer),
    },
    Invariant {
        name: "correction-join",
        rule: "Every correction of the turn is the correction of a retried row.",
        check: Check::Ledger(every_correction_claimed),
    },
    Invariant {
        name: "retry-verdict-join",
        rule: "Every retry verdict belongs to a retried row.",
        check: Check::Ledger(every_retry_verdict_claimed),
    },
    Invariant {
        name: "unmet-verdict-join",
        rule: "An exhausted row has exactly one unmet verdict, and it agrees with the row.",
        check: Check::Row(unmet_verdict_join),
    },
    Invariant {
        name: "unmet-verdict-join",
        rule: "Every unmet verdict belongs to an exhausted row.",
        check: Check::Ledger(every_unmet_verdict_claimed),
    },
];

impl Invariant {
    fn per_row(&self) -> bool {
        matches!(self.check, Check::Row(_))
    }
}

/// Files the findings of one invariant, under its name: a finding's predicate is always a name
/// of the table.
pub(super) struct Filer<'c, 'f, 'a> {
    checker: &'c mut Checker<'f, 'a>,
    name: &'static str,
}

impl<'f, 'a> Filer<'_, 'f, 'a> {
    fn facts(&self) -> &'f Facts<'a> {
        self.checker.f
    }

    /// The rule is broken on a ledger row.
    fn row(&mut self, row: &AttemptRow, message: String, witnesses: Vec<Witness>) {
        self.checker
            .file(BROKEN_INVARIANT, self.name, Some(row), message, witnesses);
    }

    /// The rule is broken on something of the run no ledger row stands for.
    fn about(&mut self, subject: Subject, message: String, witnesses: Vec<Witness>) {
        self.checker.file_about(
            BROKEN_INVARIANT,
            self.name,
            None,
            subject,
            message,
            witnesses,
        );
    }
}

/// Check every invariant of the ledger, in table order; returns per-row conclusions.
/// Consecutive row rules run row by row, so one row's findings stay together.
pub(super) fn check_invariants(c: &mut Checker<'_, '_>, ledger: &[AttemptRow]) -> Vec<RowCheck> {
    let mut checks = vec![RowCheck::default(); ledger.len()];
    for group in INVARIANTS.chunk_by(|a, b| a.per_row() && b.per_row()) {
        if let [Invariant {
            name,
            check: Check::Ledger(check),
            ..
        }] = group
        {
            let mut filer = Filer {
                checker: &mut *c,
                name,
            };
            check(&mut filer, ledger, &mut checks);
            continue;
        }
        for (row, row_check) in ledger.iter().zip(checks.iter_mut()) {
            for invariant in group {
                if let Check::Row(check) = invariant.check {
                    let mut filer = Filer {
                        checker: &mut *c,
                        name: invariant.name,
                    };
                    check(&mut filer, row, row_check);
                }
            }
        }
    }
    checks
}

/// The row rules after `known-outcome` judge only rows whose outcome is known: a row outside
/// the vocabulary is reported once, by that rule.
fn outcome_known(row: &AttemptRow) -> bool {
    row.outcome.is_known()
}

fn opt_eq(a: &Option<String>, b: &Option<String>) -> bool {
    a.as_deref().unwrap_or("") == b.as_deref().unwrap_or("")
}

/// Row `i` of the ledger is attempt `i`.
fn contiguous_numbering(c: &mut Filer<'_, '_, '_>, ledger: &[AttemptRow], _: &mut [RowCheck]) {
    for (i, row) in ledger.iter().enumerate() {
        if row.attempt != i as u32 + 1 {
            c.row(
                row,
                format!(
                    "Ledger row {} is numbered attempt {}; attempts must run 1..n without gaps.",
                    i + 1,
                    row.attempt
                ),
                vec![witness(
                    Some(row),
                    "position",
                    json!(i + 1),
                    "order of the ledger rows",
                )],
            );
        }
    }
}

/// The outcome is one of passed, retried, exhausted.
fn known_outcome(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, _: &mut RowCheck) {
    if !outcome_known(row) {
        c.row(
            row,
            format!(
                "Attempt {} has an outcome outside passed, retried and exhausted.",
                row.attempt
            ),
            vec![],
        );
    }
}

/// The hash exactly on retried rows (when the framework defines one at all).
fn hash_only_on_retried(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, _: &mut RowCheck) {
    if !outcome_known(row) {
        return;
    }
    let retried = row.outcome == Outcome::Retried;
    let has_hash = row.corrective_message_hash.is_some();
    let misplaced = if retried {
        c.facts().contract.correction_hashes && !has_hash
    } else {
        has_hash
    };
    if misplaced {
        c.row(
            row,
            format!(
                "Attempt {} is {} but {} a corrective-message hash; only a retried row \
                 carries one.",
                row.attempt,
                row.outcome,
                if retried { "lacks" } else { "carries" }
            ),
            vec![],
        );
    }
}

/// Stage and error exactly on failed rows.
fn failure_fields(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, _: &mut RowCheck) {
    if !outcome_known(row) {
        return;
    }
    let has_stage = row.stage.is_some();
    let has_error = row.error.is_some();
    let expected = row.failed();
    if has_stage != expected || has_error != expected {
        c.row(
            row,
            format!(
                "Attempt {} is {} with stage {} and error {}; a passed row has neither, a \
                 failed row both.",
                row.attempt,
                row.outcome,
                if has_stage { "present" } else { "absent" },
                if has_error { "present" } else { "absent" },
            ),
            vec![],
        );
    }
}

/// A stated stage is one of the three.
fn known_stage(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, _: &mut RowCheck) {
    if !outcome_known(row) {
        return;
    }
    if let Some(stage) = &row.stage {
        if !STAGES.contains(&stage.as_str()) {
            c.row(
                row,
                format!(
                    "Attempt {} names a stage other than json-parse, schema-validate or \
                     custom-validate.",
                    row.attempt
                ),
                vec![],
            );
        }
    }
}

/// `brokenBy` only on exhausted rows.
fn broken_by_only_on_exhausted(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, _: &mut RowCheck) {
    if !outcome_known(row) {
        return;
    }
    if row.broken_by.is_some() && row.outcome != Outcome::Exhausted {
        c.row(
            row,
            format!(
                "Attempt {} is {} yet names the middleware that broke it; only an exhausted \
                 row does.",
                row.attempt, row.outcome
            ),
            vec![],
        );
    }
}

/// A refusal is never asked again.
fn refusal_not_retried(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, _: &mut RowCheck) {
    if !outcome_known(row) {
        return;
    }
    if row.stop_reason.as_deref() == Some("refusal") && row.outcome != Outcome::Exhausted {
        c.row(
            row,
            format!(
                "Attempt {} ended in a refusal and is {}; a refusal is final at once.",
                row.attempt, row.outcome
            ),
            vec![],
        );
    }
}

/// The first exhausted row is the last row.
fn nothing_after_exhausted(c: &mut Filer<'_, '_, '_>, ledger: &[AttemptRow], _: &mut [RowCheck]) {
    if let Some(row) = ledger.iter().find(|r| r.outcome == Outcome::Exhausted) {
        let after = ledger.iter().filter(|r| r.attempt > row.attempt).count();
        if after > 0 {
            c.row(
                row,
                format!(
                    "Attempt {} exhausted the contract, yet {after} attempt(s) follow it.",
                    row.attempt
                ),
                vec![],
            );
        }
    }
}

/// The last row is not retried.
fn retry_answered(c: &mut Filer<'_, '_, '_>, ledger: &[AttemptRow], _: &mut [RowCheck]) {
    if let Some(last) = ledger.last().filter(|r| r.outcome == Outcome::Retried) {
        c.row(
            last,
            format!(
                "Attempt {} was asked again, but the run judged no later answer.",
                last.attempt
            ),
            vec![],
        );
    }
}

/// With a known budget: no retry past it, no unexplained exhaustion before it, and every
/// correction's `attempt A of T` counts budget + 1 attempts.
fn retry_budget(c: &mut Filer<'_, '_, '_>, ledger: &[AttemptRow], _: &mut [RowCheck]) {
    let f = c.facts();
    let Some((budget, from)) = retries_known(f) else {
        return;
    };
    for row in ledger {
        if row.outcome == Outcome::Retried && row.attempt > budget {
            c.row(
                row,
                format!(
                    "Attempt {} was asked again with a budget of {budget} retries (read \
                     from {from}).",
                    row.attempt
                ),
                vec![witness(Some(row), "retries", json!(budget), from)],
            );
        }
        let early = row.outcome == Outcome::Exhausted
            && row.attempt <= budget
            && row.broken_by.is_none()
            && row.stop_reason.as_deref() != Some("refusal")
            && !row.inferred;
        if early {
            c.row(
                row,
                format!(
                    "Attempt {} was declared exhausted with retries left (budget {budget}, \
                     read from {from}) and no middleware or refusal to explain it.",
                    row.attempt
                ),
                vec![witness(Some(row), "retries", json!(budget), from)],
            );
        }
    }
    for corr in &f.corrections {
        if let Some((_, total)) = corr.attempt_of {
            if total != budget + 1 {
                c.about(
                    Subject::new("history-message", (corr.index + 1).to_string()),
                    format!(
                        "A correction speaks of {total} attempts in all, but the budget is \
                         {budget} retries ({} attempts).",
                        budget + 1
                    ),
                    vec![],
                );
            }
        }
    }
}

/// A retried row joins exactly one retry verdict of its attempt, equal in every field.
fn retry_verdict_join(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, check: &mut RowCheck) {
    if row.outcome != Outcome::Retried {
        return;
    }
    let f = c.facts();
    let matching: Vec<&RetryVerdict> = f
        .retries
        .iter()
        .filter(|r| r.attempt == Some(row.attempt))
        .collect();
    let joined = match matching.as_slice() {
        [] => {
            c.row(
                row,
                format!(
                    "Attempt {} is retried but no retry verdict for that attempt was \
                     recorded.",
                    row.attempt
                ),
                vec![],
            );
            false
        }
        [r] => {
            let differences = retry_differences(r, row, retries_known(f).map(|b| b.0));
            if !differences.is_empty() {
                c.row(
                    row,
                    format!(
                        "Attempt {}'s retry verdict differs from the ledger row in: {}.",
                        row.attempt,
                        differences.join(", ")
                    ),
                    vec![witness(
                        Some(row),
                        "differing-fields",
                        json!(differences),
                        "ledger row versus the retry verdict of the same attempt",
                    )],
                );
            }
            differences.is_empty()
        }
        many => {
            c.row(
                row,
                format!(
                    "Attempt {} has {} retry verdicts; it must have exactly one.",
                    row.attempt,
                    many.len()
                ),
                vec![],
            );
            false
        }
    };
    check.event_joined = Some(joined);
    check.joins.push("retry-verdict");
}

/// The fields in which a retry verdict differs from its ledger row; `retriesRemaining` is
/// compared when the budget is known.
fn retry_differences(r: &RetryVerdict, row: &AttemptRow, budget: Option<u32>) -> Vec<&'static str> {
    let mut differences = Vec::new();
    if !opt_eq(&r.stage, &row.stage) {
        differences.push("stage");
    }
    if !opt_eq(&r.error, &row.error) {
        differences.push("error");
    }
    if !opt_eq(&r.path, &row.path) {
        differences.push("path");
    }
    if !opt_eq(&r.hash, &row.corrective_message_hash) {
        differences.push("hash");
    }
    if r.iteration.is_some() && row.iteration.is_some() && r.iteration != row.iteration {
        differences.push("iteration");
    }
    if let (Some(remaining), Some(b)) = (r.retries_remaining, budget) {
        if remaining as i64 != b as i64 - row.attempt as i64 {
            differences.push("retriesRemaining");
        }
    }
    differences
}

/// The correction-hash join applies to a retried row where the framework defines the hash and
/// a history was recorded to find the correction in.
fn hash_join_applies(f: &Facts<'_>, row: &AttemptRow) -> bool {
    row.outcome == Outcome::Retried && !f.history.is_empty() && f.contract.correction_hashes
}

/// The history message (a user or tool message) the row's corrective-message hash names.
fn correction_of(f: &Facts<'_>, row: &AttemptRow) -> Option<usize> {
    let hash = row.corrective_message_hash.as_deref()?;
    // The framework writes the hash as `js::hash_hex` does (lowercase, no leading zeros): a
    // hash written any other way names no message.
    let wanted = u32::from_str_radix(hash, 16)
        .ok()
        .filter(|h| format!("{h:x}") == hash)?;
    f.history_hashes().iter().position(|h| *h == Some(wanted))
}

/// A retried row's hash is the hash of a message of the history.
fn correction_join(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, check: &mut RowCheck) {
    let f = c.facts();
    if !hash_join_applies(f, row) {
        return;
    }
    check.joins.push("correction-hash");
    if correction_of(f, row).is_none() {
        let hash = row.corrective_message_hash.as_deref().unwrap_or("");
        c.row(
            row,
            format!(
                "No message of the history hashes to attempt {}'s corrective-message \
                 hash.",
                row.attempt
            ),
            vec![witness(
                Some(row),
                "corrective-message-hash",
                json!(hash),
                "the ledger row",
            )],
        );
        check.hash_joined = Some(false);
    }
}

/// The closest earlier message that is not a tool result is the assistant's, and holds the
/// failed answer when it is known.
fn correction_after_answer(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, check: &mut RowCheck) {
    let f = c.facts();
    if !hash_join_applies(f, row) {
        return;
    }
    let Some(index) = correction_of(f, row) else {
        return;
    };
    let before = f.history[..index]
        .iter()
        .rev()
        .find(|m| m.role != Role::Tool);
    let (answer, _) = answer_of(f, row, false);
    let correction_is_user = f.history[index].role == Role::User;
    let placed = match before {
        Some(m) if m.role == Role::Assistant => {
            !correction_is_user || answer.as_deref().is_none_or(|a| same_answer(m.text, a))
        }
        _ => false,
    };
    if !placed {
        c.row(
            row,
            format!(
                "Attempt {}'s correction is in the history (message {}), but not \
                 right after the answer that failed.",
                row.attempt,
                index + 1
            ),
            vec![],
        );
    }
    check.hash_joined = Some(placed);
}

/// Is the assistant message `text` the judged answer `answer`? Equal text, or the answer after
/// the model's reasoning that a provider folds into the re-sent turn (`<think>...</think>`).
fn same_answer(text: &str, answer: &str) -> bool {
    if text == answer {
        return true;
    }
    match text.trim_start().strip_prefix("<think>") {
        Some(rest) => rest
            .split_once("</think>")
            .is_some_and(|(_, after)| after.trim() == answer.trim()),
        None => false,
    }
}

/// Every correction of this turn (where the framework hashes them) is claimed by a retried row.
fn every_correction_claimed(c: &mut Filer<'_, '_, '_>, ledger: &[AttemptRow], _: &mut [RowCheck]) {
    let f = c.facts();
    if !f.contract.correction_hashes {
        return;
    }
    for corr in &f.corrections {
        let claimed = ledger.iter().any(|r| {
            r.outcome == Outcome::Retried
                && r.corrective_message_hash.as_deref() == Some(corr.hash.as_str())
        });
        if !claimed {
            c.about(
                Subject::new("history-message", (corr.index + 1).to_string()),
                format!(
                    "History message {} is a schema correction that no retried attempt \
                     accounts for.",
                    corr.index + 1
                ),
                vec![witness(
                    None,
                    "corrective-message-hash",
                    json!(corr.hash),
                    "FNV-1a of the message",
                )],
            );
        }
    }
}

/// Every retry verdict names the attempt of a retried row.
fn every_retry_verdict_claimed(
    c: &mut Filer<'_, '_, '_>,
    ledger: &[AttemptRow],
    _: &mut [RowCheck],
) {
    for r in &c.facts().retries {
        let claimed = ledger
            .iter()
            .any(|row| row.outcome == Outcome::Retried && Some(row.attempt) == r.attempt);
        if !claimed {
            c.about(
                Subject::new(
                    "retry-verdict",
                    r.attempt.map(|a| a.to_string()).unwrap_or_default(),
                ),
                format!(
                    "A retry verdict for attempt {} has no retried ledger row.",
                    r.attempt
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "?".into())
                ),
                vec![],
            );
        }
    }
}

/// An exhausted row (where the source records terminal verdicts and the outcome was recorded)
/// joins exactly one unmet verdict naming its attempt, equal in every field.
fn unmet_verdict_join(c: &mut Filer<'_, '_, '_>, row: &AttemptRow, check: &mut RowCheck) {
    let f = c.facts();
    if row.outcome != Outcome::Exhausted || !f.contract.terminal_verdicts || row.inferred {
        return;
    }
    check.joins.push("unmet-verdict");
    let matching: Vec<&UnmetVerdict> = f
        .unmet
        .iter()
        .filter(|u| u.attempts == Some(row.attempt))
        .collect();
    let joined = match matching.as_slice() {
        [u] => {
            let differences = unmet_differences(u, row);
            if !differences.is_empty() {
                c.row(
                    row,
                    format!(
                        "Attempt {}'s unmet-contract verdict differs from the ledger row \
                         in: {}.",
                        row.attempt,
                        differences.join(", ")
                    ),
                    vec![witness(
                        Some(row),
                        "differing-fields",
                        json!(differences),
                        "ledger row versus the unmet verdict with attempts = this attempt",
                    )],
                );
            }
            differences.is_empty()
        }
        other => {
            c.row(
                row,
                format!(
                    "Attempt {} is exhausted and {} unmet-contract verdicts name it; \
                     exactly one must.",
                    row.attempt,
                    other.len()
                ),
                vec![],
            );
            false
        }
    };
    check.event_joined = Some(joined);
}

/// The fields in which an unmet verdict differs from its exhausted ledger row.
fn unmet_differences(u: &UnmetVerdict, row: &AttemptRow) -> Vec<&'static str> {
    let mut differences = Vec::new();
    if u.retries_spent != Some(row.attempt.saturating_sub(1)) {
        differences.push("retriesSpent");
    }
    if !opt_eq(&u.stage, &row.stage) {
        differences.push("stage");
    }
    if !opt_eq(&u.error, &row.error) {
        differences.push("error");
    }
    if !opt_eq(&u.path, &row.path) {
        differences.push("path");
    }
    if !opt_eq(&u.broken_by, &row.broken_by) {
        differences.push("brokenBy");
    }
    differences
}

/// Every unmet verdict names the attempt of an exhausted row.
fn every_unmet_verdict_claimed(
    c: &mut Filer<'_, '_, '_>,
    ledger: &[AttemptRow],
    _: &mut [RowCheck],
) {
    for u in &c.facts().unmet {
        let claimed = ledger
            .iter()
            .any(|row| row.outcome == Outcome::Exhausted && Some(row.attempt) == u.attempts);
        if !claimed {
            c.about(
                Subject::new(
                    "unmet-verdict",
                    u.attempts.map(|a| a.to_string()).unwrap_or_default(),
                ),
                format!(
                    "An unmet-contract verdict for {} attempt(s) has no exhausted ledger row.",
                    u.attempts
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "?".into())
                ),
                vec![],
            );
        }
    }
}
