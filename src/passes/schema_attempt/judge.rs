//! Re-judging: every attempt's answer validated again with the run's JSON Schema, when it is
//! known. The validator settles the outcomes the recording left open, and a recorded verdict it
//! contradicts is a `verdict-drift` finding.

use super::facts::Contract;
use super::findings::{bounded, witness, Checker, VERDICT_DRIFT};
use super::ledger::answer_of;
use super::row::{AttemptRow, Outcome};
use crate::js;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The stage no schema validator can contradict when it accepts the answer.
const CUSTOM_STAGE: &str = "custom-validate";

pub use crate::config::compile_schema;

/// A validator verdict on one answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    Valid,
    /// The answer is not JSON.
    NotJson,
    /// JSON that fails the schema: the failing keyword and the dotted field path.
    Invalid {
        keyword: String,
        path: String,
    },
}

impl Judgement {
    pub fn label(&self) -> &'static str {
        match self {
            Judgement::Valid => "valid",
            Judgement::NotJson => "invalid-json",
            Judgement::Invalid { .. } => "invalid",
        }
    }

    pub(super) fn detail(&self) -> Option<String> {
        match self {
            Judgement::Valid => None,
            Judgement::NotJson => Some("not JSON".into()),
            Judgement::Invalid { keyword, path } => Some(if path.is_empty() {
                format!("`{keyword}` at the root")
            } else {
                format!("`{keyword}` at {}", bounded(path))
            }),
        }
    }

    fn stage(&self) -> Option<&'static str> {
        match self {
            Judgement::Valid => None,
            Judgement::NotJson => Some("json-parse"),
            Judgement::Invalid { .. } => Some("schema-validate"),
        }
    }
}

/// A JSON Pointer as a dotted path (`/a/0/b` -> `a.0.b`).
fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Validate one answer text.
pub fn judge(validator: &jsonschema::Validator, answer: &str) -> Judgement {
    let Ok(value) = js::parse_json(answer) else {
        return Judgement::NotJson;
    };
    let first = validator.iter_errors(&value).next();
    match first {
        None => Judgement::Valid,
        Some(err) => {
            let keyword = err
                .schema_path()
                .as_str()
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string();
            let mut path = dotted(err.instance_path().as_str());
            if let jsonschema::error::ValidationErrorKind::Required { property } = err.kind() {
                if let Some(name) = property.as_str() {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
            }
            Judgement::Invalid { keyword, path }
        }
    }
}

/// The schema an answer must satisfy: the output tool's when it came through one, else the
/// contract's; with several output tools and no tool named, any of them.
fn schema_for_answer(contract: &Contract, tool: Option<&str>) -> Option<Value> {
    if let Some(schema) = &contract.schema {
        return Some(schema.clone());
    }
    if let Some(t) = tool.and_then(|t| contract.tools.get(t)) {
        return Some(t.clone());
    }
    match contract.tools.len() {
        0 => None,
        1 => contract.tools.values().next().cloned(),
        _ => Some(json!({"anyOf": contract.tools.values().cloned().collect::<Vec<_>>()})),
    }
}

/// Re-judge every row's answer; settle inferred outcomes; file drift.
pub(super) fn rejudge(c: &mut Checker<'_, '_>, ledger: &mut [AttemptRow], checks: &mut [RowCheck]) {
    let f = c.f;
    let n = ledger.len();
    let mut compiled: BTreeMap<String, Option<jsonschema::Validator>> = BTreeMap::new();
    for i in 0..n {
        let (answer, tool) = answer_of(f, &ledger[i], i + 1 == n);
        checks[i].answer_fingerprint = answer.as_deref().map(js::fingerprint);
        let Some(answer) = answer else { continue };
        let Some(schema) = schema_for_answer(&f.contract, tool.as_deref()) else {
            continue;
        };
        let key = js::stringify(&schema);
        let validator = compiled
            .entry(key)
            .or_insert_with(|| compile_schema(&schema).ok());
        let Some(validator) = validator.as_ref() else {
            continue;
        };
        let verdict = judge(validator, &answer);
        if ledger[i].inferred {
            settle(&mut ledger[i], &verdict);
        } else if let Some(message) = drift(&ledger[i], &verdict) {
            let row = &ledger[i];
            c.file(
                VERDICT_DRIFT,
                "revalidation",
                Some(row),
                message,
                vec![witness(
                    Some(row),
                    "validator",
                    json!(verdict.label()),
                    match f.contract.schema_source {
                        Some("config") => "JSON Schema from the configuration",
                        _ => "JSON Schema the recording carries",
                    },
                )],
            );
        }
        checks[i].judgement = Some(verdict);
    }
}

/// The validator settles what the recording left open: an inferred row it rejects is exhausted
/// at the validator's stage.
fn settle(row: &mut AttemptRow, verdict: &Judgement) {
    if *verdict != Judgement::Valid {
        row.outcome = Outcome::Exhausted;
        row.stage = verdict.stage().map(str::to_string);
        row.error = verdict.detail();
        if let Judgement::Invalid { path, .. } = verdict {
            row.path = (!path.is_empty()).then(|| path.clone());
        }
    }
}

/// How the validator contradicts a recorded outcome, if it does. A stop reason or a middleware
/// excuses a rejection the schema does not explain.
fn drift(row: &AttemptRow, verdict: &Judgement) -> Option<String> {
    let excused = row.broken_by.is_some() || row.stop_reason.is_some();
    // A rejection by the application's own check came after the schema passed.
    let custom = row.stage.as_deref() == Some(CUSTOM_STAGE);
    match (verdict, &row.outcome) {
        (Judgement::Valid, Outcome::Passed) => None,
        (v, Outcome::Passed) => Some(format!(
            "The framework accepted attempt {}; the validator rejects it ({}).",
            row.attempt,
            v.detail().unwrap_or_default()
        )),
        (Judgement::Valid, _) if !excused && !custom => Some(format!(
            "The framework rejected attempt {} at stage {}; the validator accepts it.",
            row.attempt,
            row.stage.as_deref().unwrap_or("?")
        )),
        (Judgement::Valid, _) => None,
        (v, _) => match (row.stage.as_deref(), v.stage()) {
            (Some(recorded), Some(ours)) if recorded != ours && !excused => Some(format!(
                "The framework failed attempt {} at stage {recorded}; the validator fails \
                 it at stage {ours} ({}).",
                row.attempt,
                v.detail().unwrap_or_default()
            )),
            _ => None,
        },
    }
}

/// What the pass concluded about one ledger row, for the `attempts` table.
#[derive(Debug, Clone, Default)]
pub(super) struct RowCheck {
    pub(super) hash_joined: Option<bool>,
    pub(super) event_joined: Option<bool>,
    /// The joins that apply to the row (`retry-verdict`, `correction-hash`, `unmet-verdict`).
    pub(super) joins: Vec<&'static str>,
    pub(super) judgement: Option<Judgement>,
    pub(super) answer_fingerprint: Option<String>,
}
