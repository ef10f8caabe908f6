//! pydantic-ai's structured output as the neutral rows the schema-attempt check reads (the same
//! rows the VCR adapter writes, see `schemas/store.md`).
//!
//! pydantic-ai declares its output in each model call's `model_request_parameters`: output tools
//! (`final_result`, or output functions) with their JSON Schemas, or an output object (native or
//! prompted output). The run's would-be-final answers are:
//! - each model call's first call of an output tool (its arguments are the attempted output);
//! - with an output object, each model call's text answer without tool calls.
//!
//! pydantic-ai ends a run as soon as an output is accepted, so an answer followed by another one
//! was rejected and asked again. The message that rejected it is the tool result answering the
//! output call (a pydantic error list, or the text of a `ModelRetry` raised by an output function
//! or validator), or for a text answer the `Validation feedback:` user message after it. The last
//! answer's fate is recorded too: rejected when its landing failed (the run then ends without an
//! output), accepted when the agent span holds the run's final result.
//!
//! What is written: one `output-contract` row (mode, schemas, `terminalVerdicts`,
//! `correctionHashes: false`, `contentOmitted`), an `answer` mark on the payload of each model
//! call that gave a would-be-final answer, a `schema-retry` verdict after each rejection that was
//! asked again, and a `contract-unmet` verdict when the last answer was rejected. pydantic-ai
//! defines no corrective-message hash, and its spans keep the rejection as a structured error
//! list rather than the text the model read, so no hash is written (hashing the rendered list
//! would name a message the model never saw). Without recorded content (`include_content=False`)
//! only the contract and the marks are written, flagged `contentOmitted`.

use super::messages::RETRY_FRAME;
use crate::js;
use crate::model::vocab;
use crate::model::{Event, EventKind, Role};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The text pydantic-ai ends a text retry prompt with.
const RETRY_SUFFIX: &str = "Fix the errors and try again.";

/// Where a rejected answer failed, from the message that rejected it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rejection {
    pub stage: &'static str,
    pub path: Option<String>,
}

/// Read a rejection message. A pydantic error list (bare, or in a ```json fence) fails at
/// `json-parse` when it reports `json_invalid`, else at `schema-validate` (path: the first
/// error's `loc`). Any other text was written by the application's own code (an output function
/// or validator raising `ModelRetry`) after the answer passed the schema: `custom-validate`, unless
/// the answer is not JSON at all (`json-parse`).
pub(super) fn rejection(text: &str, answer: Option<&str>) -> Rejection {
    let mut body = text.trim();
    body = body.strip_prefix(RETRY_FRAME).unwrap_or(body).trim_start();
    body = body.strip_suffix(RETRY_SUFFIX).unwrap_or(body).trim_end();
    let fenced = body.find("```json").and_then(|at| {
        let rest = &body[at + "```json".len()..];
        rest.find("```").map(|end| rest[..end].trim())
    });
    let listed = [Some(body), fenced]
        .into_iter()
        .flatten()
        .filter_map(|t| js::parse_json(t).ok())
        .find_map(|v| match v {
            Value::Array(items)
                if !items.is_empty()
                    && items
                        .iter()
                        .all(|i| i.get("loc").is_some() && i.get("msg").is_some()) =>
            {
                Some(items)
            }
            _ => None,
        });
    match listed {
        Some(items) => {
            let json_invalid = items
                .iter()
                .any(|i| i.get("type").and_then(Value::as_str) == Some("json_invalid"));
            let path = items[0]
                .get("loc")
                .and_then(Value::as_array)
                .map(|loc| {
                    loc.iter()
                        .map(|p| match p {
                            Value::String(s) => s.clone(),
                            other => js::stringify(other),
                        })
                        .collect::<Vec<_>>()
                        .join(".")
                })
                .filter(|p| !p.is_empty());
            Rejection {
                stage: if json_invalid {
                    "json-parse"
                } else {
                    "schema-validate"
                },
                path,
            }
        }
        None => {
            let is_json = answer.is_some_and(|a| js::parse_json(a).is_ok());
            Rejection {
                stage: if is_json {
                    "custom-validate"
                } else {
                    "json-parse"
                },
                path: None,
            }
        }
    }
}

/// One would-be-final answer of the run.
struct Attempt {
    /// The model call that produced it.
    call: usize,
    /// The landing (tool answers) or assistant message (text answers) holding it.
    at: usize,
    iteration: Option<u32>,
    tool: Option<String>,
    call_id: Option<String>,
    text: Option<String>,
}

/// The payload of a landing, as the adapter wrote it.
fn payload_of(e: &Event) -> Value {
    e.payload
        .as_deref()
        .and_then(|p| js::parse_json(p).ok())
        .unwrap_or(Value::Null)
}

/// Add the neutral output rows to a run's events (sorted, before the answer and context rows).
/// `accepted`: the run recorded its final result (the agent span's `final_result` or output) and
/// did not fail.
pub(super) fn add_rows(
    events: &mut Vec<Event>,
    decl: Option<&Value>,
    output_tools: &HashSet<String>,
    accepted: bool,
) {
    let object_schema = decl
        .and_then(|d| d.get("output_object"))
        .and_then(|o| o.get("json_schema"))
        .filter(|s| s.is_object());
    if output_tools.is_empty() && object_schema.is_none() {
        return;
    }
    let mode = decl
        .and_then(|d| d.get("output_mode"))
        .and_then(Value::as_str)
        .unwrap_or(if output_tools.is_empty() {
            "native"
        } else {
            "tool"
        })
        .to_string();
    let attempts = attempts_of(events, output_tools, object_schema.is_some());
    let rejections = rejections_of(events, &attempts);
    let judged = judge(events, &attempts, &rejections, accepted);
    record_answers(events, &attempts);
    let mut contract = Event::new(EventKind::Other);
    contract.source_type = Some(vocab::OUTPUT_CONTRACT.into());
    contract.text = Some(mode.clone());
    contract.payload = Some(js::stringify(&json!({
        "mode": mode,
        "schema": object_schema,
        "tools": declared_tools(decl),
        "terminalVerdicts": judged.terminal,
        "correctionHashes": false,
        "contentOmitted": judged.omitted,
    })));
    // Verdicts right after the message that rejected the answer; latest first, so indexes hold.
    let mut verdicts = judged.verdicts;
    verdicts.sort_by_key(|(j, _)| std::cmp::Reverse(*j));
    for (j, v) in verdicts {
        events.insert(j + 1, v);
    }
    let at = events
        .iter()
        .position(|e| e.source_type.as_deref() == Some("pydantic_ai.output"))
        .map_or(0, |i| i + 1);
    events.insert(at, contract);
}

/// The output tools the run declared, each with its parameters' schema.
fn declared_tools(decl: Option<&Value>) -> BTreeMap<String, Value> {
    let mut tools = BTreeMap::new();
    for t in decl
        .and_then(|d| d.get("output_tools"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(name), Some(schema)) = (
            t.get("name").and_then(Value::as_str),
            t.get("parameters_json_schema").filter(|s| s.is_object()),
        ) {
            tools.insert(name.to_string(), schema.clone());
        }
    }
    tools
}

/// The would-be-final answers, one per model call at most: a landing of an output tool, or
/// (when the run declared an output object) an assistant message with text.
fn attempts_of(events: &[Event], output_tools: &HashSet<String>, texts: bool) -> Vec<Attempt> {
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut calls: BTreeMap<u32, usize> = BTreeMap::new();
    // The model calls that have an attempt already: a run may hold 100,000 landings.
    let mut answered: HashSet<usize> = HashSet::new();
    for (i, e) in events.iter().enumerate() {
        match e.kind() {
            EventKind::ModelCall => {
                if let Some(it) = e.iteration {
                    calls.entry(it).or_insert(i);
                }
            }
            EventKind::Landing => {
                let is_output = e
                    .tool_name
                    .as_ref()
                    .is_some_and(|n| output_tools.contains(n));
                let Some(&call) = e.iteration.and_then(|it| calls.get(&it)) else {
                    continue;
                };
                if is_output && answered.insert(call) {
                    attempts.push(Attempt {
                        call,
                        at: i,
                        iteration: e.iteration,
                        tool: e.tool_name.clone(),
                        call_id: e.call_id.clone(),
                        text: e.arguments.clone(),
                    });
                }
            }
            EventKind::Message
                if texts && e.role == Some(Role::Assistant) && e.arguments.is_none() =>
            {
                let Some(&call) = e.iteration.and_then(|it| calls.get(&it)) else {
                    continue;
                };
                let empty = e.text.as_deref().is_some_and(|t| t.trim().is_empty());
                if !empty && answered.insert(call) {
                    attempts.push(Attempt {
                        call,
                        at: i,
                        iteration: e.iteration,
                        tool: None,
                        call_id: None,
                        text: e.text.clone(),
                    });
                }
            }
            _ => {}
        }
    }
    attempts
}

/// The message that rejected each answer, if any: (event index, text). A text answer's is the
/// retry prompt before the next model call; a tool answer's, the tool reply to its call id
/// after it (or the landing itself when it failed without one).
fn rejections_of(events: &[Event], attempts: &[Attempt]) -> Vec<Option<(usize, Option<String>)>> {
    // The tool messages answering each call id, in event order.
    let mut replies: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, m) in events.iter().enumerate() {
        if let (EventKind::Message, Some(Role::Tool), Some(id)) = (m.kind(), m.role, &m.call_id) {
            replies.entry(id.as_str()).or_default().push(j);
        }
    }
    attempts
        .iter()
        .map(|a| {
            if a.tool.is_none() {
                return (a.at + 1..events.len())
                    .take_while(|&j| events[j].kind() != EventKind::ModelCall)
                    .find(|&j| {
                        let m = &events[j];
                        m.kind() == EventKind::Message
                            && m.role == Some(Role::User)
                            && m.text
                                .as_deref()
                                .is_some_and(|t| t.starts_with(RETRY_FRAME))
                    })
                    .map(|j| (j, events[j].text.clone()));
            }
            let landing = &events[a.at];
            let reply = a.call_id.as_ref().and_then(|id| {
                let later = replies.get(id.as_str())?;
                later.get(later.partition_point(|&j| j <= a.at)).copied()
            });
            match reply {
                Some(j) => Some((j, events[j].text.clone().or(landing.text.clone()))),
                None if landing.error => Some((a.at, landing.text.clone())),
                None => None,
            }
        })
        .collect()
}

/// What the answers' fates say: the verdict rows to insert (after the event index given),
/// whether the last verdict is terminal, and whether a rejection's message was not recorded
/// (then no verdict is given at all).
struct Judged {
    verdicts: Vec<(usize, Event)>,
    terminal: bool,
    omitted: bool,
}

/// Judge each answer: one followed by another, or rejected, gets a verdict (a retry, or the
/// unmet contract for the last), and the rejected answer and its rejection are marked failed.
fn judge(
    events: &mut [Event],
    attempts: &[Attempt],
    rejections: &[Option<(usize, Option<String>)>],
    accepted: bool,
) -> Judged {
    let n = attempts.len();
    let mut omitted = attempts.iter().any(|a| a.text.is_none());
    let mut verdicts: Vec<(usize, Event)> = Vec::new();
    let mut terminal = n == 0 || accepted;
    for (k, a) in attempts.iter().enumerate() {
        let attempt = k as u32 + 1;
        let later = k + 1 < n;
        let landing_failed = a.tool.is_some() && events[a.at].error;
        let rejected_by = rejections[k].as_ref();
        // The landing's own reply on a passing output call ("Final result processed.") is no
        // rejection; only a failed landing, an error message or a later answer says so.
        let failed = later
            || landing_failed
            || rejected_by.is_some_and(|(j, _)| a.tool.is_none() || events[*j].error);
        if !failed {
            continue;
        }
        let Some((j, Some(message))) = rejected_by.cloned() else {
            // Rejected, but the message saying why was not recorded.
            omitted = true;
            continue;
        };
        if omitted {
            continue;
        }
        let (verdict, last) = verdict(events, a, attempt, later, j, &message);
        terminal |= last;
        verdicts.push((j, verdict));
        // The rejected answer and the message rejecting it are failures.
        events[a.at].error |= a.tool.is_some();
        if j != a.at && events[j].role == Some(Role::Tool) {
            events[j].error = true;
        }
    }
    if omitted {
        verdicts.clear();
        terminal = false;
    }
    Judged {
        verdicts,
        terminal,
        omitted,
    }
}

/// The verdict row on answer `a` (number `attempt`), rejected by event `j` with `message`: a
/// retry when a `later` answer follows, else the unmet contract (terminal: the second value).
fn verdict(
    events: &[Event],
    a: &Attempt,
    attempt: u32,
    later: bool,
    j: usize,
    message: &str,
) -> (Event, bool) {
    let r = rejection(message, a.text.as_deref());
    let mut p = Map::new();
    p.insert("attempt".into(), json!(attempt));
    p.insert("iteration".into(), json!(a.iteration));
    p.insert("stage".into(), json!(r.stage));
    p.insert("error".into(), json!(message));
    p.insert("path".into(), json!(r.path));
    let mut v = Event::new(EventKind::Verdict);
    v.iteration = a.iteration;
    v.call_id = a.call_id.clone();
    v.timestamp_ms = events[j].timestamp_ms;
    let source = if later {
        // The span's retry markers give the budget (output functions only).
        let max = payload_of(&events[a.at])
            .get("retry")
            .and_then(|r| r.get("max_retries"))
            .and_then(Value::as_u64);
        if let Some(remaining) = max.and_then(|m| m.checked_sub(u64::from(attempt))) {
            p.insert("retriesRemaining".into(), json!(remaining));
        }
        p.insert("correctiveMessageHash".into(), Value::Null);
        v.text = Some(vocab::SCHEMA_RETRY.into());
        "otel.retry_prompt"
    } else {
        p.insert("attempts".into(), json!(attempt));
        p.insert("retriesSpent".into(), json!(attempt - 1));
        p.remove("attempt");
        v.text = Some(vocab::CONTRACT_UNMET.into());
        "otel.output_unmet"
    };
    v.source_type = Some(source.into());
    v.payload = Some(js::stringify(
        &json!({"type": source, "payload": Value::Object(p)}),
    ));
    (v, !later)
}

/// Record each answer on the model call that produced it (its payload's `answer`).
fn record_answers(events: &mut [Event], attempts: &[Attempt]) {
    for a in attempts {
        let e = &mut events[a.call];
        let mut p = match e.payload.as_deref().and_then(|t| js::parse_json(t).ok()) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        p.insert("answer".into(), json!({"text": a.text, "tool": a.tool}));
        e.payload = Some(js::stringify(&Value::Object(p)));
    }
}

#[cfg(test)]
mod tests;
