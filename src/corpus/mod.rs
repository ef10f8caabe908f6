//! What an audit produces: findings, dispositions, the disposition ledger, agreement with the
//! recording framework's own verdicts, and the writers for all of them.
//!
//! A corpus is a directory:
//! - `findings.parquet` and `findings.jsonl`: the same rows;
//! - `dispositions.parquet`: one row per run x check;
//! - `ledger.parquet`: per check x seam, the counts summed over the corpus;
//! - `agreement.parquet`: per run x check x key, whether the engine and the recorded framework
//!   verdicts agree;
//! - `manifest.json`: engine version, configuration and its hash, inputs, counts, time taken.
//!
//! An audit distributed over a store's parts writes each table as a folder of part files
//! instead, and its manifest lists them ([`layout`]).

pub mod layout;
pub mod write;

use serde::{Deserialize, Serialize};

pub use crate::model::vocab::{Agreement, Disposition};

/// What a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Subject {
    pub kind: String,
    pub id: String,
}

impl Subject {
    pub fn new(kind: &str, id: impl Into<String>) -> Subject {
        Subject {
            kind: kind.to_string(),
            id: id.into(),
        }
    }
}

/// One piece of evidence behind a finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Witness {
    pub subject: Subject,
    pub predicate: String,
    /// The witnessed value as JSON text.
    pub value: String,
    /// `asserted` or `quoted`.
    pub stratum: String,
    pub provenance: String,
}

impl Witness {
    pub fn asserted(
        subject: Subject,
        predicate: &str,
        value: serde_json::Value,
        provenance: impl Into<String>,
    ) -> Witness {
        Witness {
            subject,
            predicate: predicate.to_string(),
            value: value.to_string(),
            stratum: "asserted".into(),
            provenance: provenance.into(),
        }
    }
}

/// The typed columns each check owns (null for the others).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingColumns {
    // repeated-call
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub key: Option<String>,
    pub args_fingerprint: Option<String>,
    pub result_fingerprint: Option<String>,
    pub mode: Option<String>,
    pub occurrences: Option<u32>,
    pub wasted_landings: Option<u32>,
    pub wasted_ms: Option<f64>,
    // prior-turn-evidence
    pub grounded_count: Option<u32>,
    pub grounded_values: Option<Vec<String>>,
    pub latest_prior_turn: Option<u32>,
    pub current_turn: Option<u32>,
    pub turns_back: Option<u32>,
    pub tool_results_this_turn: Option<u32>,
    // schema-attempt (left out of JSON when null, so other checks' JSON lines keep their shape)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_stage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_retries: Option<u32>,
}

/// The name of the column that says which check a corpus row belongs to, in every table and in
/// `findings.jsonl`. Not `check`: that is a reserved word in DuckDB, PostgreSQL and Spark SQL,
/// where `select check from ...` is a syntax error. Corpora written before the rename hold
/// `check`; the reports read both.
pub const CHECK_COLUMN: &str = "check_name";

/// One filed observation, as the corpus stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub finding_id: String,
    #[serde(rename = "check_name", alias = "check")]
    pub check: String,
    pub kind: String,
    pub seam: String,
    pub predicate: String,
    pub advisory: bool,
    pub source: String,
    pub conversation_id: String,
    pub run_id: String,
    pub turn: u32,
    pub iteration: Option<u32>,
    pub subjects: Vec<Subject>,
    pub witnesses: Vec<Witness>,
    pub message: String,
    #[serde(flatten)]
    pub columns: FindingColumns,
}

/// The part of a finding a check decides; the framework adds where it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub kind: String,
    pub seam: String,
    pub predicate: String,
    pub advisory: bool,
    pub iteration: Option<u32>,
    pub subjects: Vec<Subject>,
    pub witnesses: Vec<Witness>,
    pub message: String,
    pub columns: FindingColumns,
}

/// The stable identity of a finding: check, run, kind, seam, the sorted subjects, predicate and
/// epoch (iteration), hashed. The same finding in two corpora has the same id.
pub fn finding_id(check: &str, run_id: &str, draft: &Draft) -> String {
    use sha2::{Digest, Sha256};
    let mut subjects: Vec<String> = draft
        .subjects
        .iter()
        .map(|s| format!("{} {}", s.kind, s.id))
        .collect();
    subjects.sort();
    let identity = [
        check,
        run_id,
        &draft.kind,
        &draft.seam,
        &subjects.join("\u{1e}"),
        &draft.predicate,
        &draft.iteration.map(|i| i.to_string()).unwrap_or_default(),
    ]
    .join("\u{1f}");
    let digest = Sha256::digest(identity.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the engine and the recording framework agree about one key of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgreementRow {
    #[serde(rename = "check_name", alias = "check")]
    pub check: String,
    pub conversation_id: String,
    pub run_id: String,
    pub source: String,
    /// What is compared, for example a repeated-call key `tool:argsFp:resultFp`.
    pub key: String,
    pub status: Agreement,
    /// What differs, in words, when `differs`.
    pub detail: Option<String>,
}

/// One run's disposition under one check: a row of the dispositions table, borrowed from
/// what an audit holds of the run, its conversation and its check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DispositionRow<'a> {
    pub run_id: &'a str,
    pub conversation_id: &'a str,
    pub turn: u32,
    pub source: &'a str,
    #[serde(rename = "check_name")]
    pub check: &'a str,
    pub disposition: Disposition,
    pub reason: &'a str,
}

/// The disposition ledger row of one check x seam.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerRow {
    #[serde(rename = "check_name", alias = "check")]
    pub check: String,
    pub seam: String,
    /// checked-pass + checked-fail.
    pub checked: u64,
    /// checked-fail.
    pub findings: u64,
    pub not_applicable: u64,
    pub unreachable: u64,
    pub passed: u64,
    /// Findings filed (a failed run may file several).
    pub finding_rows: u64,
}
