//! What one run recorded about its output contract: the framework's ledger and verdicts, the
//! judged answers, the corrections in the history, and the contract itself (as the recording or
//! the configuration states it).

use super::row::{u32_of, AttemptRow};
use crate::js;
use crate::model::vocab::{self, SCHEMA_FRAME_PREFIX, TURN_NEUTRAL_FRAMES};
use crate::model::{Conversation, Event, EventKind, HistoryMessage, Role, Run};
use crate::passes::PassContext;
use serde_json::Value;
use std::collections::BTreeMap;

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The `payload` member of a row's recorded envelope; the rest of the envelope (its `meta`,
/// as long as the payload in verdict and route rows) is skipped unbuilt.
fn envelope_payload(e: &Event) -> Option<Value> {
    js::parse_members(e.payload.as_deref()?, &["payload"])?.remove("payload")
}

/// The members `names` of a row's envelope's `payload` (`Null` when it has none, or none that
/// is an object): the rest, such as a model call's answer text, is skipped unbuilt.
fn envelope_payload_members(e: &Event, names: &'static [&'static str]) -> Value {
    e.payload
        .as_deref()
        .and_then(|t| js::parse_member_members(t, "payload", names))
        .map_or(Value::Null, Value::Object)
}

/// A retry verdict: the framework asked again after a failed answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RetryVerdict {
    pub(super) attempt: Option<u32>,
    pub(super) retries_remaining: Option<u32>,
    pub(super) iteration: Option<u32>,
    pub(super) stage: Option<String>,
    pub(super) error: Option<String>,
    pub(super) path: Option<String>,
    pub(super) hash: Option<String>,
}

impl RetryVerdict {
    /// Read a `schema-retry` verdict row.
    fn read(e: &Event) -> RetryVerdict {
        const READ: &[&str] = &[
            "attempt",
            "retriesRemaining",
            "iteration",
            "stage",
            "error",
            "path",
            "correctiveMessageHash",
        ];
        let p = envelope_payload_members(e, READ);
        RetryVerdict {
            attempt: u32_of(p.get("attempt")),
            retries_remaining: u32_of(p.get("retriesRemaining")),
            iteration: u32_of(p.get("iteration")).or(e.iteration),
            stage: str_of(&p, "stage"),
            error: str_of(&p, "error"),
            path: str_of(&p, "path"),
            hash: str_of(&p, "correctiveMessageHash"),
        }
    }
}

/// An unmet-contract verdict: the last answer failed and stands.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct UnmetVerdict {
    pub(super) attempts: Option<u32>,
    pub(super) retries_spent: Option<u32>,
    pub(super) iteration: Option<u32>,
    pub(super) stage: Option<String>,
    pub(super) error: Option<String>,
    pub(super) path: Option<String>,
    pub(super) broken_by: Option<String>,
}

impl UnmetVerdict {
    /// Read a `contract-unmet` verdict row.
    fn read(e: &Event) -> UnmetVerdict {
        const READ: &[&str] = &[
            "attempts",
            "retriesSpent",
            "iteration",
            "stage",
            "error",
            "path",
            "brokenBy",
        ];
        let p = envelope_payload_members(e, READ);
        UnmetVerdict {
            attempts: u32_of(p.get("attempts")),
            retries_spent: u32_of(p.get("retriesSpent")),
            iteration: u32_of(p.get("iteration")).or(e.iteration),
            stage: str_of(&p, "stage"),
            error: str_of(&p, "error"),
            path: str_of(&p, "path"),
            broken_by: str_of(&p, "brokenBy"),
        }
    }
}

/// A would-be-final answer the framework judged.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Candidate {
    pub(super) iteration: Option<u32>,
    pub(super) answer: Option<String>,
    pub(super) stop_reason: Option<String>,
    /// Tool-output contracts: the output tool the answer came through.
    pub(super) tool: Option<String>,
    /// The framework routed this answer to a re-ask (agentfootprint `output-retry`).
    pub(super) routed_retry: bool,
}

/// A correction found in the history.
#[derive(Debug, Clone)]
pub(super) struct Correction {
    pub(super) index: usize,
    pub(super) hash: String,
    /// `attempt A of T`, when the text says so.
    pub(super) attempt_of: Option<(u32, u32)>,
}

/// The output contract as the recording or the configuration states it.
#[derive(Debug, Clone, Default)]
pub(super) struct Contract {
    /// The recording shows an output contract (framework ledger, verdicts, instructions, or an
    /// ingest's `output-contract` row).
    pub(super) declared: bool,
    /// `tool`, `native`, `prompted` when the recording says.
    pub(super) mode: Option<String>,
    /// The schema every answer must satisfy, when known.
    pub(super) schema: Option<Value>,
    /// Where the schema came from: `config` or `recording`.
    pub(super) schema_source: Option<&'static str>,
    /// Tool-output contracts: the schema of each output tool.
    pub(super) tools: BTreeMap<String, Value>,
    /// False when the source records no terminal verdict (the last answer's fate is inferred).
    pub(super) terminal_verdicts: bool,
    /// False when the framework defines no corrective-message hash (pydantic-ai's spans): the
    /// correction-hash join does not apply, and a retried row carries no hash.
    pub(super) correction_hashes: bool,
    /// The source dropped the judged answers or the messages rejecting them
    /// (`include_content=False`): the ledger cannot be rebuilt.
    pub(super) content_omitted: bool,
    /// Configured retry budget.
    pub(super) retries: Option<u32>,
}

impl Contract {
    /// Read an ingest's `output-contract` row (a later row overrides what an earlier one said).
    fn read_row(&mut self, e: &Event) {
        self.declared = true;
        let p = e
            .payload
            .as_deref()
            .and_then(|t| js::parse_json(t).ok())
            .unwrap_or(Value::Null);
        self.mode = str_of(&p, "mode").or_else(|| e.text.clone());
        if let Some(schema) = p.get("schema").filter(|s| !s.is_null()) {
            self.schema = Some(schema.clone());
            self.schema_source = Some("recording");
        }
        if let Some(Value::Object(tools)) = p.get("tools") {
            for (name, schema) in tools {
                self.tools.insert(name.clone(), schema.clone());
            }
            if self.schema_source.is_none() && !self.tools.is_empty() {
                self.schema_source = Some("recording");
            }
        }
        if p.get("terminalVerdicts").and_then(Value::as_bool) == Some(false) {
            self.terminal_verdicts = false;
        }
        if p.get("correctionHashes").and_then(Value::as_bool) == Some(false) {
            self.correction_hashes = false;
        }
        if p.get("contentOmitted").and_then(Value::as_bool) == Some(true) {
            self.content_omitted = true;
        }
    }

    /// Apply the configuration's schema and retry budget for the run's agent and source.
    fn configure(&mut self, run: &Run, ctx: &PassContext) {
        if let Some(configured) = ctx.config.schema_for(run.agent.as_deref(), &run.source) {
            if let Some(schema) = &configured.resolved {
                // The configuration overrides what the recording carries.
                self.schema = Some(schema.clone());
                self.tools.clear();
                self.schema_source = Some("config");
            }
            self.retries = configured.retries;
        }
    }
}

/// Everything the pass reads from one run.
pub(super) struct Facts<'a> {
    pub(super) run: &'a Run,
    pub(super) recorded: Option<Vec<AttemptRow>>,
    pub(super) retries: Vec<RetryVerdict>,
    pub(super) unmet: Vec<UnmetVerdict>,
    pub(super) candidates: Vec<Candidate>,
    pub(super) history: Vec<HistoryMessage<'a>>,
    pub(super) corrections: Vec<Correction>,
    pub(super) contract: Contract,
    /// Set when the judgement fell back on the run's answer ([`Run::answer`]), which an audit
    /// of a store reads from digests without ([`super::SchemaAttempt`]'s `check_digested`).
    pub(super) read_run_answer: std::cell::Cell<bool>,
    /// [`Facts::history_hashes`], worked out when first asked for.
    history_hashes: std::cell::OnceCell<Vec<Option<u32>>>,
}

impl Facts<'_> {
    /// The FNV-1a hash ([`js::fnv1a`]) of each history message a corrective-message hash may
    /// name (a user or tool message; `None` for the others), in history order: every retried
    /// row of the ledger is joined to the history, twice, so a message is hashed once a run.
    pub(super) fn history_hashes(&self) -> &[Option<u32>] {
        self.history_hashes.get_or_init(|| {
            self.history
                .iter()
                .map(|m| matches!(m.role, Role::User | Role::Tool).then(|| js::fnv1a(m.text)))
                .collect()
        })
    }
}

/// What the run says about its output contract, or `None` when it shows none and the
/// configuration gives no schema (the history, corrections and answers are then not gathered:
/// that is most runs of most sources).
pub(super) fn gather<'a>(
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
                retries.push(RetryVerdict::read(e));
            }
            Some(vocab::CONTRACT_UNMET) => {
                contract.declared = true;
                unmet.push(UnmetVerdict::read(e));
            }
            _ => {}
        }
    }
    // Contract declarations among the other rows.
    for e in run.events_of(EventKind::Other) {
        match e.source_type.as_deref() {
            Some(vocab::OUTPUT_CONTRACT) => contract.read_row(e),
            // The ingest keeps an injection's `sourceId` in `text`.
            Some("agentfootprint.context.injected")
                if e.text.as_deref() == Some("output-schema") =>
            {
                contract.declared = true;
            }
            _ => {}
        }
    }
    contract.configure(run, ctx);
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
        read_run_answer: std::cell::Cell::new(false),
        history_hashes: std::cell::OnceCell::new(),
    })
}

/// The judged answers of a run, in order.
fn candidates_of(run: &Run) -> Vec<Candidate> {
    // agentfootprint: the route chosen after each iteration's model call.
    let mut routes: BTreeMap<u32, String> = BTreeMap::new();
    for e in run.events_of(EventKind::Other) {
        if e.source_type.as_deref() == Some("agentfootprint.agent.route_decided") {
            if let Some(i) = e.iteration {
                if let Some(chosen) = str_of(&envelope_payload_members(e, &["chosen"]), "chosen") {
                    routes.insert(i, chosen);
                }
            }
        }
    }
    let mut out = Vec::new();
    for e in run.events_of(EventKind::ModelCall) {
        if e.source_type.as_deref() == Some(vocab::AGENTFOOTPRINT_LLM_START) {
            // The request: the answer, if any, is its end's.
            continue;
        }
        if e.source_type.as_deref() == Some(vocab::AGENTFOOTPRINT_LLM_END) {
            let p = envelope_payload_members(e, &["toolCallCount", "stopReason"]);
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
        // Only the two members read are built: every model call's envelope comes this way.
        let Some(p) = e
            .payload
            .as_deref()
            .and_then(|t| js::parse_members(t, &["answer", "stopReason"]))
            .map(Value::Object)
        else {
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
pub(super) fn attempt_of(text: &str) -> Option<(u32, u32)> {
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

/// The retry budget and where it was read: configuration, the corrections' `attempt A of T`,
/// or the retry verdicts' `attempt + retriesRemaining`.
pub(super) fn retries_known(f: &Facts<'_>) -> Option<(u32, &'static str)> {
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
