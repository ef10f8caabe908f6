//! `schema-attempt`: the output-schema attempt ledger of a run, its invariants, and a second
//! opinion on every judged answer.
//!
//! An agent with an output contract judges each would-be-final answer. A failed answer is either
//! asked again (the history gains the answer and a correction, and the framework files a retry
//! verdict whose hash joins the correction) or it is the last word (the contract is unmet). This
//! pass works in three steps:
//!
//! 1. **The ledger.** When the recording carries the framework's own ledger (an
//!    `output-attempts` verdict row), that is the ledger. Otherwise it is rebuilt from what the
//!    run recorded: the judged answers (model calls whose answer was routed to judgement, or the
//!    neutral answer marks an ingest wrote), the retry verdicts (`schema-retry`), the unmet
//!    verdicts (`contract-unmet`) and the corrections in the history. When both exist, the
//!    rebuilt ledger is compared with the recorded one (agreement rows).
//! 2. **The invariants.** Numbering without gaps; the hash exactly on retried rows; failure
//!    fields exactly on failed rows; `brokenBy` only on exhausted rows; the retry budget; every
//!    retried row joins its retry verdict and its correction (hashed with
//!    [`crate::js::hash_hex`]) placed right after the failed answer; every exhausted row joins
//!    one unmet verdict; a refusal is never asked again. They are the table [`INVARIANTS`], a
//!    name and a one-line rule each. Each broken invariant is a finding of kind
//!    `schema-attempt` whose predicate names it. An unmet contract is a finding of its own (`contract-unmet`). A join
//!    applies only where the source defines what it joins: no correction-hash join for a
//!    framework without corrective-message hashes (pydantic-ai's spans), no unmet join for a
//!    source without terminal verdicts; each ledger row names the joins that applied. A source
//!    that omitted the answers' content is not judged (`not-applicable`).
//! 3. **Re-judging.** When the run's JSON Schema is known (configuration, or the contract the
//!    recording carries), every attempt's answer is validated again. A recorded verdict the
//!    validator contradicts is a `verdict-drift` finding.
//!
//! Findings never quote answers or validator messages: they name attempts, stages, keywords and
//! (bounded) field paths. The recorded validator errors stay in the `attempts` table, which is
//! the ledger itself.
//!
//! One topic per file: `facts.rs` reads what a run recorded about its contract; `ledger.rs`
//! holds the attempt rows and rebuilds the ledger; `invariants.rs` is the table of named
//! invariants, one function each; `judge.rs` re-judges the answers; `findings.rs` files
//! findings; `agreement.rs` compares the rebuilt ledger with the recorded one; `table.rs` is the
//! `attempts` table.

mod agreement;
mod facts;
mod findings;
mod invariants;
mod judge;
mod ledger;
mod row;
mod table;

#[cfg(test)]
use facts::correction_error;
#[cfg(test)]
use invariants::INVARIANTS;
#[cfg(test)]
use judge::{compile_schema, judge, Judgement};
pub use row::{AttemptRow, Outcome};
pub use table::{attempts_schema, TABLE};

use crate::corpus::{Disposition, Draft};
use crate::model::{vocab, Conversation, EventKind};
use crate::passes::{Pass, PassContext, RunOutcome};
use arrow::datatypes::Schema;
use facts::gather;
use findings::{Checker, BROKEN_INVARIANT, CONTRACT_UNMET, VERDICT_DRIFT};
use std::sync::Arc;

pub struct SchemaAttempt;

impl Pass for SchemaAttempt {
    fn name(&self) -> &'static str {
        "schema-attempt"
    }

    fn seam(&self) -> &'static str {
        "output"
    }

    fn other_payloads(&self) -> &'static [&'static str] {
        &[vocab::OUTPUT_CONTRACT, "agentfootprint.agent.route_decided"]
    }

    fn check(&self, conversation: &Conversation, ctx: &PassContext) -> Vec<RunOutcome> {
        (0..conversation.runs.len())
            .map(|i| check_run(conversation, i, ctx))
            .collect()
    }

    /// A run that shows no output contract is judged without its history; one that does
    /// reads the history's messages, tool results included (a correction may be a tool
    /// message, found by its hash). A history of recorded context rows keeps its text; one
    /// made of the conversation's messages has messages without theirs. A judgement that
    /// falls back on the run's answer needs its text, which such a read leaves out.
    fn check_digested(
        &self,
        conversation: &Conversation,
        ctx: &PassContext,
    ) -> Option<Vec<RunOutcome>> {
        let mut outcomes = Vec::with_capacity(conversation.runs.len());
        for (i, run) in conversation.runs.iter().enumerate() {
            let Some(facts) = gather(conversation, i, ctx) else {
                outcomes.push(no_contract());
                continue;
            };
            // A run with a contract reads its history: recorded context rows keep their
            // text; without them the history is the conversation's messages, read whole.
            let has_context = run.events_of(EventKind::Context).next().is_some();
            if !has_context {
                return None;
            }
            let outcome = judge_facts(&facts);
            if facts.read_run_answer.get() && run.answer.is_none() {
                return None;
            }
            outcomes.push(outcome);
        }
        Some(outcomes)
    }

    fn tables(&self) -> Vec<(&'static str, Arc<Schema>)> {
        vec![(TABLE, attempts_schema())]
    }
}

/// Judge one run.
pub fn check_run(conversation: &Conversation, index: usize, ctx: &PassContext) -> RunOutcome {
    judge_run(conversation, index, ctx).0
}

/// Judge one run, and say whether the judgement read the run's answer ([`Run::answer`]).
fn judge_run(conversation: &Conversation, index: usize, ctx: &PassContext) -> (RunOutcome, bool) {
    let Some(facts) = gather(conversation, index, ctx) else {
        return (no_contract(), false);
    };
    let outcome = judge_facts(&facts);
    (outcome, facts.read_run_answer.get())
}

/// The outcome of a run that shows no output contract.
fn no_contract() -> RunOutcome {
    RunOutcome::new(
        Disposition::NotApplicable,
        "no output contract: the recording shows none and the configuration gives no schema",
    )
}

/// Judge one run whose output contract is known.
fn judge_facts(facts: &facts::Facts<'_>) -> RunOutcome {
    if facts.recorded.is_none() && facts.contract.content_omitted {
        // Like the other checks: a source that dropped content cannot be judged either way.
        return RunOutcome::new(
            Disposition::NotApplicable,
            format!(
                "an output contract is recorded and {} answer(s) were given under it, but the \
                 source omitted the answers or the messages rejecting them: no ledger can be \
                 rebuilt and nothing re-judged",
                facts.candidates.len()
            ),
        );
    }
    let rebuilt = ledger::rebuild(facts);
    let (mut ledger, source) = match &facts.recorded {
        Some(recorded) => (recorded.clone(), "recorded"),
        None => (rebuilt.clone(), "rebuilt"),
    };
    if ledger.is_empty() {
        return RunOutcome::new(
            Disposition::Unreachable,
            "an output contract is known, but the run judged no answer against it",
        );
    }
    let mut checker = Checker {
        f: facts,
        findings: Vec::new(),
    };
    let mut checks = invariants::check_invariants(&mut checker, &ledger);
    judge::rejudge(&mut checker, &mut ledger, &mut checks);
    findings::unmet_findings(&mut checker, &ledger);
    let findings = checker.findings;

    let (disposition, reason) = conclusion(&ledger, &findings);
    let mut outcome = RunOutcome::new(disposition, reason);
    outcome.findings = findings;
    if let Some(recorded) = &facts.recorded {
        outcome.agreement = agreement::agreement(&rebuilt, recorded);
    }
    outcome.rows = ledger
        .iter()
        .zip(&checks)
        .map(|(row, check)| (TABLE, table::table_row(facts.run, row, check, source)))
        .collect();
    outcome
}

/// The run passes when nothing was filed and the last answer passed; otherwise the reason
/// counts what was filed.
fn conclusion(ledger: &[AttemptRow], findings: &[Draft]) -> (Disposition, String) {
    let last = ledger.last().expect("non-empty ledger");
    if findings.is_empty() && last.outcome == Outcome::Passed {
        return (
            Disposition::CheckedPass,
            format!(
                "{} attempt(s), every invariant holds, the last answer passed",
                ledger.len()
            ),
        );
    }
    let unmet = findings.iter().any(|f| f.kind == CONTRACT_UNMET);
    let broken = findings
        .iter()
        .filter(|f| f.kind == BROKEN_INVARIANT)
        .count();
    let drift = findings.iter().filter(|f| f.kind == VERDICT_DRIFT).count();
    let mut parts = Vec::new();
    if unmet {
        parts.push("the output contract was not met".to_string());
    }
    if broken > 0 {
        parts.push(format!("{broken} ledger invariant(s) broken"));
    }
    if drift > 0 {
        parts.push(format!("{drift} verdict(s) the validator contradicts"));
    }
    if parts.is_empty() {
        parts.push(format!("the last attempt is {}", last.outcome));
    }
    (Disposition::CheckedFail, parts.join("; "))
}

#[cfg(test)]
mod tests;
