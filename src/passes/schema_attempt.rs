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
//!    retried row joins its retry verdict and its correction (hashed with [`js::hash_hex`]) placed
//!    right after the failed answer; every exhausted row joins one unmet verdict; a refusal is
//!    never asked again. Each broken invariant is a finding of kind `schema-attempt` whose
//!    predicate names it. An unmet contract is a finding of its own (`contract-unmet`). A join
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

use crate::corpus::{Disposition, Draft, FindingColumns, Subject, Witness};
use crate::js;
use crate::model::vocab::{self, SCHEMA_FRAME_PREFIX, TURN_NEUTRAL_FRAMES};
use crate::model::{Conversation, Event, EventKind, HistoryMessage, Role, Run};
use crate::passes::{Pass, PassContext, RunOutcome};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub struct SchemaAttempt;

/// The corpus table this pass owns.
pub const TABLE: &str = "attempts";

/// The stages an answer fails at: not JSON; JSON that fails the schema; or, after the schema
/// passed, a check of the application's own (an output function or validator asking again).
const STAGES: [&str; 3] = ["json-parse", "schema-validate", "custom-validate"];

/// The stage no schema validator can contradict when it accepts the answer.
const CUSTOM_STAGE: &str = "custom-validate";

/// Stops under which a structured answer fails whatever its text says.
const NATIVE_STOPS: [&str; 3] = ["refusal", "max_tokens", "model_context_window_exceeded"];

/// Longest field path a finding message carries.
const PATH_LIMIT: usize = 80;

/// One row of an attempt ledger, recorded or rebuilt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptRow {
    /// 1-based; 0 when the recorded row had no usable number.
    pub attempt: u32,
    pub iteration: Option<u32>,
    pub outcome: String,
    pub stage: Option<String>,
    pub error: Option<String>,
    pub path: Option<String>,
    pub corrective_message_hash: Option<String>,
    pub broken_by: Option<String>,
    pub stop_reason: Option<String>,
    /// The outcome was not recorded: the engine concluded it (a source that records no terminal
    /// verdict, judged by the validator).
    pub inferred: bool,
}

impl AttemptRow {
    /// Read a recorded ledger row (`{attempt, iteration, outcome, stage?, ...}`).
    pub fn from_recorded(v: &Value) -> AttemptRow {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        AttemptRow {
            attempt: u32_of(v.get("attempt")).unwrap_or(0),
            iteration: u32_of(v.get("iteration")),
            outcome: s("outcome").unwrap_or_default(),
            stage: s("stage"),
            error: s("error"),
            path: s("path"),
            corrective_message_hash: s("correctiveMessageHash"),
            broken_by: s("brokenBy"),
            stop_reason: s("stopReason"),
            inferred: false,
        }
    }

    fn failed(&self) -> bool {
        self.outcome != "passed"
    }
}

fn u32_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_f64)
        .filter(|n| *n >= 0.0 && n.fract() == 0.0 && *n <= u32::MAX as f64)
        .map(|n| n as u32)
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The `payload` member of a verdict row's recorded envelope.
fn envelope_payload(e: &Event) -> Option<Value> {
    let v = js::parse_json(e.payload.as_deref()?).ok()?;
    match v {
        Value::Object(mut m) => m.remove("payload"),
        _ => None,
    }
}

/// A retry verdict: the framework asked again after a failed answer.
#[derive(Debug, Clone, PartialEq)]
struct RetryVerdict {
    attempt: Option<u32>,
    retries_remaining: Option<u32>,
    iteration: Option<u32>,
    stage: Option<String>,
    error: Option<String>,
    path: Option<String>,
    hash: Option<String>,
}

/// An unmet-contract verdict: the last answer failed and stands.
#[derive(Debug, Clone, PartialEq)]
struct UnmetVerdict {
    attempts: Option<u32>,
    retries_spent: Option<u32>,
    iteration: Option<u32>,
    stage: Option<String>,
    error: Option<String>,
    path: Option<String>,
    broken_by: Option<String>,
}

/// A would-be-final answer the framework judged.
#[derive(Debug, Clone, PartialEq)]
struct Candidate {
    iteration: Option<u32>,
    answer: Option<String>,
    stop_reason: Option<String>,
    /// Tool-output contracts: the output tool the answer came through.
    tool: Option<String>,
    /// The framework routed this answer to a re-ask (agentfootprint `output-retry`).
    routed_retry: bool,
}

/// A correction found in the history.
#[derive(Debug, Clone)]
struct Correction {
    index: usize,
    hash: String,
    /// `attempt A of T`, when the text says so.
    attempt_of: Option<(u32, u32)>,
}

/// The output contract as the recording or the configuration states it.
#[derive(Debug, Clone, Default)]
struct Contract {
    /// The recording shows an output contract (framework ledger, verdicts, instructions, or an
    /// ingest's `output-contract` row).
    declared: bool,
    /// `tool`, `native`, `prompted` when the recording says.
    mode: Option<String>,
    /// The schema every answer must satisfy, when known.
    schema: Option<Value>,
    /// Where the schema came from: `config` or `recording`.
    schema_source: Option<&'static str>,
    /// Tool-output contracts: the schema of each output tool.
    tools: BTreeMap<String, Value>,
    /// False when the source records no terminal verdict (the last answer's fate is inferred).
    terminal_verdicts: bool,
    /// False when the framework defines no corrective-message hash (pydantic-ai's spans): the
    /// correction-hash join does not apply, and a retried row carries no hash.
    correction_hashes: bool,
    /// The source dropped the judged answers or the messages rejecting them
    /// (`include_content=False`): the ledger cannot be rebuilt.
    content_omitted: bool,
    /// Configured retry budget.
    retries: Option<u32>,
}

/// Everything the pass reads from one run.
struct Facts<'a> {
    run: &'a Run,
    recorded: Option<Vec<AttemptRow>>,
    retries: Vec<RetryVerdict>,
    unmet: Vec<UnmetVerdict>,
    candidates: Vec<Candidate>,
    history: Vec<HistoryMessage<'a>>,
    corrections: Vec<Correction>,
    contract: Contract,
}

/// What the run says about its output contract, or `None` when it shows none and the
/// configuration gives no schema (the history, corrections and answers are then not gathered:
/// that is most runs of most sources).
fn gather<'a>(
    conversation: &'a Conversation,
    index: usize,
    ctx: &PassContext,
) -> Option<Facts<'a>> {
    let run = &conversation.runs[index];
    let mut recorded = None;
    let mut retries = Vec::new();
    let mut unmet = Vec::new();
    let mut contract = Contract {
        terminal_verdicts: true,
        correction_hashes: true,
        ..Contract::default()
    };
    for e in run.events_of(EventKind::Verdict) {
        match e.text.as_deref() {
            Some(vocab::OUTPUT_ATTEMPTS) => {
                contract.declared = true;
                if let Some(Value::Array(items)) = envelope_payload(e) {
                    recorded = Some(items.iter().map(AttemptRow::from_recorded).collect());
                }
            }
            Some(vocab::SCHEMA_RETRY) => {
                contract.declared = true;
                let p = envelope_payload(e).unwrap_or(Value::Null);
                retries.push(RetryVerdict {
                    attempt: u32_of(p.get("attempt")),
                    retries_remaining: u32_of(p.get("retriesRemaining")),
                    iteration: u32_of(p.get("iteration")).or(e.iteration),
                    stage: str_of(&p, "stage"),
                    error: str_of(&p, "error"),
                    path: str_of(&p, "path"),
                    hash: str_of(&p, "correctiveMessageHash"),
                });
            }
            Some(vocab::CONTRACT_UNMET) => {
                contract.declared = true;
                let p = envelope_payload(e).unwrap_or(Value::Null);
                unmet.push(UnmetVerdict {
                    attempts: u32_of(p.get("attempts")),
                    retries_spent: u32_of(p.get("retriesSpent")),
                    iteration: u32_of(p.get("iteration")).or(e.iteration),
                    stage: str_of(&p, "stage"),
                    error: str_of(&p, "error"),
                    path: str_of(&p, "path"),
                    broken_by: str_of(&p, "brokenBy"),
                });
            }
            _ => {}
        }
    }
    // Contract declarations among the other rows.
    for e in run.events_of(EventKind::Other) {
        match e.source_type.as_deref() {
            Some(vocab::OUTPUT_CONTRACT) => {
                contract.declared = true;
                let p = e
                    .payload
                    .as_deref()
                    .and_then(|t| js::parse_json(t).ok())
                    .unwrap_or(Value::Null);
                contract.mode = str_of(&p, "mode").or_else(|| e.text.clone());
                if let Some(schema) = p.get("schema").filter(|s| !s.is_null()) {
                    contract.schema = Some(schema.clone());
                    contract.schema_source = Some("recording");
                }
                if let Some(Value::Object(tools)) = p.get("tools") {
                    for (name, schema) in tools {
                        contract.tools.insert(name.clone(), schema.clone());
                    }
                    if contract.schema_source.is_none() && !contract.tools.is_empty() {
                        contract.schema_source = Some("recording");
                    }
                }
                if p.get("terminalVerdicts").and_then(Value::as_bool) == Some(false) {
                    contract.terminal_verdicts = false;
                }
                if p.get("correctionHashes").and_then(Value::as_bool) == Some(false) {
                    contract.correction_hashes = false;
                }
                if p.get("contentOmitted").and_then(Value::as_bool) == Some(true) {
                    contract.content_omitted = true;
                }
            }
            // The ingest keeps an injection's `sourceId` in `text`.
            Some("agentfootprint.context.injected")
                if e.text.as_deref() == Some("output-schema") =>
            {
                contract.declared = true;
            }
            _ => {}
        }
    }
    if let Some(configured) = ctx.config.schema_for(run.agent.as_deref(), &run.source) {
        if let Some(schema) = &configured.resolved {
            // The configuration overrides what the recording carries.
            contract.schema = Some(schema.clone());
            contract.tools.clear();
            contract.schema_source = Some("config");
        }
        contract.retries = configured.retries;
    }
    let schema_known = contract.schema.is_some() || !contract.tools.is_empty();
    if !contract.declared && !schema_known {
        return None;
    }
    let history = conversation.history_for(index);
    let corrections = corrections_of(&history);
    Some(Facts {
        run,
        recorded,
        retries,
        unmet,
        candidates: candidates_of(run),
        history,
        corrections,
        contract,
    })
}

/// The judged answers of a run, in order.
fn candidates_of(run: &Run) -> Vec<Candidate> {
    // agentfootprint: the route chosen after each iteration's model call.
    let mut routes: BTreeMap<u32, String> = BTreeMap::new();
    for e in run.events_of(EventKind::Other) {
        if e.source_type.as_deref() == Some("agentfootprint.agent.route_decided") {
            if let (Some(p), Some(i)) = (envelope_payload(e), e.iteration) {
                if let Some(chosen) = str_of(&p, "chosen") {
                    routes.insert(i, chosen);
                }
            }
        }
    }
    let mut out = Vec::new();
    for e in run.events_of(EventKind::ModelCall) {
        if e.source_type.as_deref() == Some("agentfootprint.stream.llm_end") {
            let p = envelope_payload(e).unwrap_or(Value::Null);
            if u32_of(p.get("toolCallCount")).unwrap_or(0) > 0 {
                continue;
            }
            let route = e.iteration.and_then(|i| routes.get(&i));
            if route.is_some_and(|r| r != "final" && r != "output-retry") {
                continue;
            }
            out.push(Candidate {
                iteration: e.iteration,
                answer: e.text.clone(),
                stop_reason: str_of(&p, "stopReason"),
                tool: None,
                routed_retry: route.is_some_and(|r| r == "output-retry"),
            });
            continue;
        }
        // The neutral mark an ingest writes on a model call whose response was a would-be-final
        // answer: `{"answer": {"text": ..., "tool": ...}, "stopReason": ...}`.
        let Some(p) = e.payload.as_deref().and_then(|t| js::parse_json(t).ok()) else {
            continue;
        };
        if let Some(answer) = p.get("answer").filter(|a| a.is_object()) {
            out.push(Candidate {
                iteration: e.iteration,
                answer: str_of(answer, "text"),
                stop_reason: str_of(&p, "stopReason"),
                tool: str_of(answer, "tool"),
                routed_retry: false,
            });
        }
    }
    out
}

/// The `attempt A of T` a correction states.
fn attempt_of(text: &str) -> Option<(u32, u32)> {
    let at = text.find("(attempt ")?;
    let rest = &text[at + "(attempt ".len()..];
    let (a, rest) = rest.split_once(" of ")?;
    let end = rest.find(')')?;
    Some((a.trim().parse().ok()?, rest[..end].trim().parse().ok()?))
}

/// The corrections of the current turn (after the last user message that starts a turn).
fn corrections_of(history: &[HistoryMessage<'_>]) -> Vec<Correction> {
    let turn_start = history
        .iter()
        .rposition(|m| {
            m.role == Role::User && !TURN_NEUTRAL_FRAMES.iter().any(|f| m.text.starts_with(f))
        })
        .unwrap_or(0);
    history
        .iter()
        .enumerate()
        .skip(turn_start)
        .filter(|(_, m)| m.role == Role::User && m.text.starts_with(SCHEMA_FRAME_PREFIX))
        .map(|(index, m)| Correction {
            index,
            hash: js::hash_hex(m.text),
            attempt_of: attempt_of(m.text),
        })
        .collect()
}

/// The text after the correction's frame: the validator's error, verbatim.
pub fn correction_error(text: &str) -> Option<&str> {
    text.split_once("\n\n").map(|(_, e)| e)
}

/// Rebuild the ledger from the run's judged answers, verdicts and history.
fn rebuild(f: &Facts<'_>) -> Vec<AttemptRow> {
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
            row.outcome = "retried".into();
            row.stage = r.stage.clone();
            row.error = r.error.clone();
            row.path = r.path.clone();
            row.corrective_message_hash = r.hash.clone();
            row.stop_reason = native_stop;
        } else if let Some(u) = unmet {
            row.outcome = "exhausted".into();
            row.stage = u.stage.clone();
            row.error = u.error.clone();
            row.path = u.path.clone();
            row.broken_by = u.broken_by.clone();
            row.stop_reason = native_stop;
        } else if c.routed_retry {
            // Asked again, but no retry verdict was recorded: take what the correction says.
            row.outcome = "retried".into();
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
            row.outcome = "passed".into();
            row.inferred = true;
        } else {
            row.outcome = "passed".into();
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
fn answer_of(f: &Facts<'_>, row: &AttemptRow, is_last: bool) -> (Option<String>, Option<String>) {
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
        return (f.run.answer.clone(), None);
    }
    (None, None)
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

/// Compile a JSON Schema (draft from `$schema`, 2020-12 by default). Remote references are
/// never fetched: the crate is built without its resolvers.
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .build(schema)
        .map_err(|e| format!("{} (at {})", kind_name(e.kind()), e.schema_path().as_str()))
}

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

    fn detail(&self) -> Option<String> {
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

fn kind_name(kind: &jsonschema::error::ValidationErrorKind) -> String {
    let debug = format!("{kind:?}");
    let name: String = debug.chars().take_while(|c| c.is_alphanumeric()).collect();
    name
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

fn bounded(path: &str) -> String {
    if path.chars().count() <= PATH_LIMIT {
        path.to_string()
    } else {
        let cut: String = path.chars().take(PATH_LIMIT).collect();
        format!("{cut}...")
    }
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

/// What the pass concluded about one ledger row, for the `attempts` table.
#[derive(Debug, Clone, Default)]
struct RowCheck {
    hash_joined: Option<bool>,
    event_joined: Option<bool>,
    /// The joins that apply to the row (`retry-verdict`, `correction-hash`, `unmet-verdict`).
    joins: Vec<&'static str>,
    judgement: Option<Judgement>,
    answer_fingerprint: Option<String>,
}

struct Checker<'f, 'a> {
    f: &'f Facts<'a>,
    findings: Vec<Draft>,
}

impl Checker<'_, '_> {
    fn file(
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
    fn file_about(
        &mut self,
        kind: &str,
        predicate: &str,
        row: Option<&AttemptRow>,
        subject: Subject,
        message: String,
        witnesses: Vec<Witness>,
    ) {
        let mut subjects = vec![subject];
        if kind == "schema-attempt" {
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
                schema_outcome: row.map(|r| r.outcome.clone()),
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

fn witness(row: Option<&AttemptRow>, predicate: &str, value: Value, provenance: &str) -> Witness {
    let subject = match row {
        Some(r) => Subject::new("attempt", r.attempt.to_string()),
        None => Subject::new("output-contract", ""),
    };
    Witness::asserted(subject, predicate, value, provenance)
}

/// The retry budget and where it was read: configuration, the corrections' `attempt A of T`,
/// or the retry verdicts' `attempt + retriesRemaining`.
fn retries_known(f: &Facts<'_>) -> Option<(u32, &'static str)> {
    if let Some(r) = f.contract.retries {
        return Some((r, "configuration"));
    }
    if let Some((_, total)) = f.corrections.iter().find_map(|c| c.attempt_of) {
        return Some((total.saturating_sub(1), "the corrections' `attempt A of T`"));
    }
    f.retries.iter().find_map(|r| {
        Some((
            r.attempt? + r.retries_remaining?,
            "the retry verdicts' attempt + retriesRemaining",
        ))
    })
}

fn opt_eq(a: &Option<String>, b: &Option<String>) -> bool {
    a.as_deref().unwrap_or("") == b.as_deref().unwrap_or("")
}

/// Check every invariant of the ledger; returns per-row conclusions.
fn check_invariants(c: &mut Checker<'_, '_>, ledger: &[AttemptRow]) -> Vec<RowCheck> {
    let f = c.f;
    let mut checks = vec![RowCheck::default(); ledger.len()];

    // Numbering: 1..n without gaps.
    for (i, row) in ledger.iter().enumerate() {
        if row.attempt != i as u32 + 1 {
            c.file(
                "schema-attempt",
                "contiguous-numbering",
                Some(row),
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
    for row in ledger {
        // The outcome vocabulary.
        if !matches!(row.outcome.as_str(), "passed" | "retried" | "exhausted") {
            c.file(
                "schema-attempt",
                "known-outcome",
                Some(row),
                format!(
                    "Attempt {} has an outcome outside passed, retried and exhausted.",
                    row.attempt
                ),
                vec![],
            );
            continue;
        }
        // The hash exactly on retried rows (when the framework defines one at all).
        let retried = row.outcome == "retried";
        let has_hash = row.corrective_message_hash.is_some();
        let misplaced = if retried {
            f.contract.correction_hashes && !has_hash
        } else {
            has_hash
        };
        if misplaced {
            c.file(
                "schema-attempt",
                "hash-only-on-retried",
                Some(row),
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
        // Failure fields exactly on failed rows.
        let has_stage = row.stage.is_some();
        let has_error = row.error.is_some();
        let expected = row.failed();
        if has_stage != expected || has_error != expected {
            c.file(
                "schema-attempt",
                "failure-fields",
                Some(row),
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
        if let Some(stage) = &row.stage {
            if !STAGES.contains(&stage.as_str()) {
                c.file(
                    "schema-attempt",
                    "known-stage",
                    Some(row),
                    format!(
                        "Attempt {} names a stage other than json-parse, schema-validate or \
                         custom-validate.",
                        row.attempt
                    ),
                    vec![],
                );
            }
        }
        // brokenBy only on exhausted rows.
        if row.broken_by.is_some() && row.outcome != "exhausted" {
            c.file(
                "schema-attempt",
                "broken-by-only-on-exhausted",
                Some(row),
                format!(
                    "Attempt {} is {} yet names the middleware that broke it; only an exhausted \
                     row does.",
                    row.attempt, row.outcome
                ),
                vec![],
            );
        }
        // A refusal is never asked again.
        if row.stop_reason.as_deref() == Some("refusal") && row.outcome != "exhausted" {
            c.file(
                "schema-attempt",
                "refusal-not-retried",
                Some(row),
                format!(
                    "Attempt {} ended in a refusal and is {}; a refusal is final at once.",
                    row.attempt, row.outcome
                ),
                vec![],
            );
        }
    }
    if let Some(row) = ledger.iter().find(|r| r.outcome == "exhausted") {
        let after = ledger.iter().filter(|r| r.attempt > row.attempt).count();
        if after > 0 {
            c.file(
                "schema-attempt",
                "nothing-after-exhausted",
                Some(row),
                format!(
                    "Attempt {} exhausted the contract, yet {after} attempt(s) follow it.",
                    row.attempt
                ),
                vec![],
            );
        }
    }
    if let Some(last) = ledger.last().filter(|r| r.outcome == "retried") {
        c.file(
            "schema-attempt",
            "retry-answered",
            Some(last),
            format!(
                "Attempt {} was asked again, but the run judged no later answer.",
                last.attempt
            ),
            vec![],
        );
    }

    // The retry budget.
    if let Some((budget, from)) = retries_known(f) {
        for row in ledger {
            if row.outcome == "retried" && row.attempt > budget {
                c.file(
                    "schema-attempt",
                    "retry-budget",
                    Some(row),
                    format!(
                        "Attempt {} was asked again with a budget of {budget} retries (read \
                         from {from}).",
                        row.attempt
                    ),
                    vec![witness(Some(row), "retries", json!(budget), from)],
                );
            }
            let early = row.outcome == "exhausted"
                && row.attempt <= budget
                && row.broken_by.is_none()
                && row.stop_reason.as_deref() != Some("refusal")
                && !row.inferred;
            if early {
                c.file(
                    "schema-attempt",
                    "retry-budget",
                    Some(row),
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
                    c.file_about(
                        "schema-attempt",
                        "retry-budget",
                        None,
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

    // Joins: retried rows with their retry verdict and their correction.
    let budget = retries_known(f).map(|b| b.0);
    let has_history = !f.history.is_empty();
    for (i, row) in ledger.iter().enumerate() {
        if row.outcome != "retried" {
            continue;
        }
        let matching: Vec<&RetryVerdict> = f
            .retries
            .iter()
            .filter(|r| r.attempt == Some(row.attempt))
            .collect();
        let event_ok = match matching.as_slice() {
            [] => {
                c.file(
                    "schema-attempt",
                    "retry-verdict-join",
                    Some(row),
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
                if r.iteration.is_some() && row.iteration.is_some() && r.iteration != row.iteration
                {
                    differences.push("iteration");
                }
                if let (Some(remaining), Some(b)) = (r.retries_remaining, budget) {
                    if remaining as i64 != b as i64 - row.attempt as i64 {
                        differences.push("retriesRemaining");
                    }
                }
                if !differences.is_empty() {
                    c.file(
                        "schema-attempt",
                        "retry-verdict-join",
                        Some(row),
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
                c.file(
                    "schema-attempt",
                    "retry-verdict-join",
                    Some(row),
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
        checks[i].event_joined = Some(event_ok);
        checks[i].joins.push("retry-verdict");

        // The correction-hash join: only where the framework defines the hash, and a history
        // was recorded to find the correction in.
        if !has_history || !f.contract.correction_hashes {
            continue;
        }
        checks[i].joins.push("correction-hash");
        let hash = row.corrective_message_hash.as_deref().unwrap_or("");
        let found = f.history.iter().enumerate().find(|(_, m)| {
            matches!(m.role, Role::User | Role::Tool) && js::hash_hex(m.text) == hash
        });
        let joined = match found {
            None => {
                c.file(
                    "schema-attempt",
                    "correction-join",
                    Some(row),
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
                false
            }
            Some((index, _)) => {
                // Right after the failed answer: the closest earlier message that is not a tool
                // result must be the assistant's, and hold the answer when we know it.
                let before = f.history[..index]
                    .iter()
                    .rev()
                    .find(|m| m.role != Role::Tool);
                let (answer, _) = answer_of(f, row, false);
                let correction_is_user = f.history[index].role == Role::User;
                let placed = match before {
                    Some(m) if m.role == Role::Assistant => {
                        !correction_is_user
                            || answer.as_deref().is_none_or(|a| same_answer(m.text, a))
                    }
                    _ => false,
                };
                if !placed {
                    c.file(
                        "schema-attempt",
                        "correction-after-answer",
                        Some(row),
                        format!(
                            "Attempt {}'s correction is in the history (message {}), but not \
                             right after the answer that failed.",
                            row.attempt,
                            index + 1
                        ),
                        vec![],
                    );
                }
                placed
            }
        };
        checks[i].hash_joined = Some(joined);
    }
    // Every correction of this turn and every retry verdict belongs to a retried row.
    let hashed_corrections = if f.contract.correction_hashes {
        f.corrections.as_slice()
    } else {
        &[]
    };
    for corr in hashed_corrections {
        let claimed = ledger.iter().any(|r| {
            r.outcome == "retried"
                && r.corrective_message_hash.as_deref() == Some(corr.hash.as_str())
        });
        if !claimed {
            c.file_about(
                "schema-attempt",
                "correction-join",
                None,
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
    for r in &f.retries {
        let claimed = ledger
            .iter()
            .any(|row| row.outcome == "retried" && Some(row.attempt) == r.attempt);
        if !claimed {
            c.file_about(
                "schema-attempt",
                "retry-verdict-join",
                None,
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

    // Exhausted rows with their unmet verdict.
    for (i, row) in ledger.iter().enumerate() {
        if row.outcome != "exhausted" || !f.contract.terminal_verdicts || row.inferred {
            continue;
        }
        checks[i].joins.push("unmet-verdict");
        let matching: Vec<&UnmetVerdict> = f
            .unmet
            .iter()
            .filter(|u| u.attempts == Some(row.attempt))
            .collect();
        let ok = match matching.as_slice() {
            [u] => {
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
                if !differences.is_empty() {
                    c.file(
                        "schema-attempt",
                        "unmet-verdict-join",
                        Some(row),
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
                c.file(
                    "schema-attempt",
                    "unmet-verdict-join",
                    Some(row),
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
        checks[i].event_joined = Some(ok);
    }
    for u in &f.unmet {
        let claimed = ledger
            .iter()
            .any(|row| row.outcome == "exhausted" && Some(row.attempt) == u.attempts);
        if !claimed {
            c.file_about(
                "schema-attempt",
                "unmet-verdict-join",
                None,
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
    checks
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
fn rejudge(c: &mut Checker<'_, '_>, ledger: &mut [AttemptRow], checks: &mut [RowCheck]) {
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
        let row = &mut ledger[i];
        if row.inferred {
            // The validator settles what the recording left open.
            if verdict != Judgement::Valid {
                row.outcome = "exhausted".into();
                row.stage = verdict.stage().map(str::to_string);
                row.error = verdict.detail();
                if let Judgement::Invalid { path, .. } = &verdict {
                    row.path = (!path.is_empty()).then(|| path.clone());
                }
            }
            checks[i].judgement = Some(verdict);
            continue;
        }
        let row = row.clone();
        let excused = row.broken_by.is_some() || row.stop_reason.is_some();
        // A rejection by the application's own check came after the schema passed.
        let custom = row.stage.as_deref() == Some(CUSTOM_STAGE);
        let drift: Option<String> = match (&verdict, row.outcome.as_str()) {
            (Judgement::Valid, "passed") => None,
            (v, "passed") => Some(format!(
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
        };
        if let Some(message) = drift {
            c.file(
                "verdict-drift",
                "revalidation",
                Some(&row),
                message,
                vec![witness(
                    Some(&row),
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

/// An unmet contract is a finding of its own.
fn unmet_findings(c: &mut Checker<'_, '_>, ledger: &[AttemptRow]) {
    for row in ledger.iter().filter(|r| r.outcome == "exhausted") {
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
            "contract-unmet",
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

/// Compare the rebuilt ledger with the recorded one.
fn agreement(
    rebuilt: &[AttemptRow],
    recorded: &[AttemptRow],
) -> Vec<(String, &'static str, Option<String>)> {
    let mut rows = Vec::new();
    for r in recorded {
        let key = format!("attempt {}", r.attempt);
        match rebuilt.iter().find(|b| b.attempt == r.attempt) {
            None => rows.push((key, "recorded-only", None)),
            Some(b) => {
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
                if differences.is_empty() {
                    rows.push((key, "agrees", None));
                } else {
                    rows.push((
                        key,
                        "differs",
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
            rows.push((format!("attempt {}", b.attempt), "engine-only", None));
        }
    }
    rows
}

/// One `attempts` table row.
fn table_row(run: &Run, row: &AttemptRow, check: &RowCheck, ledger_source: &str) -> Value {
    let mut m = Map::new();
    m.insert("run_id".into(), json!(run.run_id));
    m.insert("conversation_id".into(), json!(run.conversation_id));
    m.insert("turn".into(), json!(run.turn));
    m.insert("source".into(), json!(vocab::source_family(&run.format)));
    m.insert("attempt".into(), json!(row.attempt));
    m.insert("iteration".into(), json!(row.iteration));
    m.insert("outcome".into(), json!(row.outcome));
    m.insert("stage".into(), json!(row.stage));
    m.insert("error".into(), json!(row.error));
    m.insert("path".into(), json!(row.path));
    m.insert(
        "corrective_message_hash".into(),
        json!(row.corrective_message_hash),
    );
    m.insert("broken_by".into(), json!(row.broken_by));
    m.insert("stop_reason".into(), json!(row.stop_reason));
    m.insert("hash_joined".into(), json!(check.hash_joined));
    m.insert("event_joined".into(), json!(check.event_joined));
    m.insert("joins".into(), json!(check.joins));
    m.insert(
        "revalidated".into(),
        json!(check.judgement.as_ref().map(Judgement::label)),
    );
    m.insert(
        "revalidation_detail".into(),
        json!(check.judgement.as_ref().and_then(Judgement::detail)),
    );
    m.insert("ledger".into(), json!(ledger_source));
    m.insert("outcome_inferred".into(), json!(row.inferred));
    m.insert("answer_fingerprint".into(), json!(check.answer_fingerprint));
    Value::Object(m)
}

/// The `attempts` table schema (documented in `schemas/corpus.md`).
pub fn attempts_schema() -> Arc<Schema> {
    let utf8 = |n: &str, nullable: bool| Field::new(n, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        utf8("run_id", false),
        utf8("conversation_id", false),
        Field::new("turn", DataType::UInt32, false),
        utf8("source", false),
        Field::new("attempt", DataType::UInt32, false),
        Field::new("iteration", DataType::UInt32, true),
        utf8("outcome", false),
        utf8("stage", true),
        utf8("error", true),
        utf8("path", true),
        utf8("corrective_message_hash", true),
        utf8("broken_by", true),
        utf8("stop_reason", true),
        Field::new("hash_joined", DataType::Boolean, true),
        Field::new("event_joined", DataType::Boolean, true),
        Field::new(
            "joins",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
            false,
        ),
        utf8("revalidated", true),
        utf8("revalidation_detail", true),
        utf8("ledger", false),
        Field::new("outcome_inferred", DataType::Boolean, false),
        utf8("answer_fingerprint", true),
    ]))
}

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
    /// made of the conversation's messages has tool messages without theirs.
    fn check_digested(
        &self,
        conversation: &Conversation,
        ctx: &PassContext,
    ) -> Option<Vec<RunOutcome>> {
        let needs_results = conversation.runs.iter().enumerate().any(|(i, run)| {
            run.events_of(EventKind::Context).next().is_none()
                && gather(conversation, i, ctx).is_some()
        });
        (!needs_results).then(|| self.check(conversation, ctx))
    }

    fn tables(&self) -> Vec<(&'static str, Arc<Schema>)> {
        vec![(TABLE, attempts_schema())]
    }
}

/// Judge one run.
pub fn check_run(conversation: &Conversation, index: usize, ctx: &PassContext) -> RunOutcome {
    let Some(facts) = gather(conversation, index, ctx) else {
        return RunOutcome::new(
            Disposition::NotApplicable,
            "no output contract: the recording shows none and the configuration gives no schema",
        );
    };
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
    let rebuilt = rebuild(&facts);
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
        f: &facts,
        findings: Vec::new(),
    };
    let mut checks = check_invariants(&mut checker, &ledger);
    rejudge(&mut checker, &mut ledger, &mut checks);
    unmet_findings(&mut checker, &ledger);
    let findings = checker.findings;

    let last = ledger.last().expect("non-empty ledger");
    let (disposition, reason) = if findings.is_empty() && last.outcome == "passed" {
        (
            Disposition::CheckedPass,
            format!(
                "{} attempt(s), every invariant holds, the last answer passed",
                ledger.len()
            ),
        )
    } else {
        let unmet = findings.iter().any(|f| f.kind == "contract-unmet");
        let broken = findings
            .iter()
            .filter(|f| f.kind == "schema-attempt")
            .count();
        let drift = findings
            .iter()
            .filter(|f| f.kind == "verdict-drift")
            .count();
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
    };
    let mut outcome = RunOutcome::new(disposition, reason);
    outcome.findings = findings;
    if let Some(recorded) = &facts.recorded {
        outcome.agreement = agreement(&rebuilt, recorded);
    }
    outcome.rows = ledger
        .iter()
        .zip(&checks)
        .map(|(row, check)| (TABLE, table_row(facts.run, row, check, source)))
        .collect();
    outcome
}

#[cfg(test)]
mod tests;
