//! The checks. A pass is a pure function of one conversation's runs and the configuration: it
//! returns one outcome per run (a disposition with a short reason, findings, and agreement rows
//! where the recording carries the framework's own verdicts). Passes never do I/O and never
//! think about threads; the audit driver runs them.
//!
//! Adding a check = adding a file here and a line in [`registry`]. Names are stable: they are
//! written into every corpus and compared across corpora.

pub mod prior_turn_evidence;
pub mod repeated_call;
pub mod schema_attempt;

use crate::config::Config;
use crate::corpus::{Agreement, AgreementRow, Disposition, Draft};
use crate::model::digest::Digest;
use crate::model::Conversation;

/// Options every pass may read.
#[derive(Debug, Clone, Default)]
pub struct PassContext {
    pub config: Config,
    /// The `[evidence]` table, compiled once.
    pub evidence: crate::evidence::CompiledEvidence,
    /// List data values (for example grounded values) in findings. Off by default: they are
    /// data from tool results.
    pub include_values: bool,
}

/// What a pass concluded for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub disposition: Disposition,
    pub reason: String,
    pub findings: Vec<Draft>,
    /// (key, status, detail) rows comparing the engine with recorded framework verdicts.
    pub agreement: Vec<(String, Agreement, Option<String>)>,
    /// Rows of the pass's own corpus tables (see [`Pass::tables`]): (table name, row).
    pub rows: Vec<(&'static str, serde_json::Value)>,
}

impl RunOutcome {
    pub fn new(disposition: Disposition, reason: impl Into<String>) -> RunOutcome {
        RunOutcome {
            disposition,
            reason: reason.into(),
            findings: Vec::new(),
            agreement: Vec::new(),
            rows: Vec::new(),
        }
    }
}

pub trait Pass: Sync + Send {
    /// The stable name (`repeated-call`).
    fn name(&self) -> &'static str;
    /// The seam the check watches, for the ledger.
    fn seam(&self) -> &'static str;
    /// One outcome per run of the conversation, in the same order.
    fn check(&self, conversation: &Conversation, ctx: &PassContext) -> Vec<RunOutcome>;
    /// Corpus tables of the pass's own (`NAME.parquet`), with their schemas. The rows come
    /// from [`RunOutcome::rows`], in corpus order.
    fn tables(&self) -> Vec<(&'static str, std::sync::Arc<arrow::datatypes::Schema>)> {
        Vec::new()
    }
    /// Source types of `other` rows whose recorded envelope (`payload`) the pass reads. The
    /// store reader loads the envelope of no other `other` row (for agentfootprint those are
    /// most of a store's bytes), so a pass that reads one must name its type here. Verdict
    /// and model-call rows always carry theirs.
    fn other_payloads(&self) -> &'static [&'static str] {
        &[]
    }
    /// What the pass keeps of tool results: the digests it reads in
    /// [`Pass::check_digested`]. The ingest works them out and the store keeps them beside the
    /// text, naming them in its manifest.
    fn digests(&self) -> &'static [&'static dyn Digest] {
        &[]
    }
    /// [`Pass::check`] for a conversation an audit read back from a store without the text of
    /// its tool results and of its other `message` rows (context rows, verdicts and the rest
    /// keep theirs), or `None` when the pass needs that text to check it; the conversation is
    /// then read again whole and given to `check`. Its runs lack the user message they answer
    /// ([`Run::user_message`](crate::model::Run::user_message)), which no check reads, and,
    /// when the store holds the evidence digest (`prior-turn-evidence`'s), their answer. Its
    /// events and answers carry the values of the digests the store holds of those the pass
    /// declares ([`Pass::digests`]); one the store does not hold is missing. The default is
    /// the safe answer.
    fn check_digested(
        &self,
        _conversation: &Conversation,
        _ctx: &PassContext,
    ) -> Option<Vec<RunOutcome>> {
        None
    }
}

/// Every registered pass, in the order they run and report.
pub fn registry() -> Vec<&'static dyn Pass> {
    vec![
        &repeated_call::RepeatedCall,
        &prior_turn_evidence::PriorTurnEvidence,
        &schema_attempt::SchemaAttempt,
    ]
}

/// The registered passes named in `names` (all when `None`); an unknown name is an error.
pub fn select(names: Option<&[String]>) -> crate::error::Result<Vec<&'static dyn Pass>> {
    let all = registry();
    let Some(names) = names else {
        return Ok(all);
    };
    let mut chosen = Vec::new();
    for name in names {
        match all.iter().find(|p| p.name() == name.trim()) {
            Some(p) => chosen.push(*p),
            None => {
                return Err(crate::error::Error::Config(format!(
                    "unknown check {name:?}; known: {}",
                    all.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                )))
            }
        }
    }
    // Keep registry order whatever order they were named in.
    chosen.sort_by_key(|p| all.iter().position(|q| q.name() == p.name()));
    chosen.dedup_by_key(|p| p.name());
    Ok(chosen)
}

/// Turn agreement tuples into corpus rows.
pub fn agreement_rows(
    check: &str,
    conversation: &Conversation,
    run_index: usize,
    source: &str,
    outcome: &RunOutcome,
) -> Vec<AgreementRow> {
    let run = &conversation.runs[run_index];
    outcome
        .agreement
        .iter()
        .map(|(key, status, detail)| AgreementRow {
            check: check.to_string(),
            conversation_id: conversation.id.clone(),
            run_id: run.run_id.clone(),
            source: source.to_string(),
            key: key.clone(),
            status: *status,
            detail: detail.clone(),
        })
        .collect()
}
