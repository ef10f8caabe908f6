//! agentfootprint recordings: NDJSON (one event envelope per line) and Recording documents
//! (`{snapshot, events, structure}`).
//!
//! Both shapes carry the same envelopes `{type, payload, meta}`; a run is `meta.runId`, a
//! conversation `meta.sessionId` (a run without a session is its own conversation). Every
//! envelope becomes one event row holding the original envelope as JSON text; the canonical
//! kinds are derived as follows:
//! - `stream.tool_start` becomes the landing row; its `stream.tool_end` (joined on `toolCallId`)
//!   fills in the result the model read (`modelResult` over `result`, objects written as
//!   `JSON.stringify` writes them), the error flag and the duration;
//! - the framework's verdicts (`tools.repeated_call`, `agent.output_schema_retry`,
//!   `agent.output_contract_unmet`, `agent.evidence_checked`, `integrity.*`) are verdict rows;
//! - `agent.turn_start` is the user message, `agent.turn_end` the answer;
//! - the history the model saw when it answered becomes context rows: the last
//!   `agent.iteration_end` that carries a `history`, else the `messages`-slot
//!   `context.injected` events of the last iteration, else the Recording's
//!   `snapshot.sharedState.history`.
//!
//! The turn is the number of user messages in that history (the `[evidence check` and
//! `[schema check` frames do not count): payload `turnIndex` fields are always 0.
//!
//! An NDJSON file is read as a stream: a run is handed on once its turn has ended
//! (`agent.turn_end`) and [`LATENESS_BYTES`] of input have followed its last line, so memory
//! holds the runs in progress, not the file. The library writes a run's last events (the
//! `integrity.disposition`) right after its `agent.turn_end`; a line that arrives for a run
//! already handed on is quarantined with that reason. Runs that never end are kept until the
//! end of the file. A conversation whose runs are handed on at different times reaches the store
//! as fragments, which it joins like fragments from different files.

use crate::error::Error;
use crate::ingest::limits::{json_error, read_document, read_line_bounded, strip_bom, Line};
use crate::ingest::{Input, Locator, Quarantined, Sink};
use crate::js;
use crate::model::vocab::{self, TURN_NEUTRAL_FRAMES};
use crate::model::{Conversation, Event, EventKind, LandingFlags, Role, Run};
use serde_json::Value;
// foldhash, not SipHash: these maps are looked up several times for every envelope read.
use hashbrown::{HashMap, HashSet};
use std::io::BufReader;

const PREFIX: &str = "agentfootprint.";

/// Input (in bytes) that must follow the last line of a run whose turn has ended before the run
/// is handed on.
pub const LATENESS_BYTES: u64 = 8 << 20;
/// How often (in bytes of input) ended runs are looked at.
const CLOSE_EVERY_BYTES: u64 = 1 << 20;

/// The canonical name of a framework verdict (written to the row's `text`), or `None` when the
/// event type is not one.
pub fn verdict_name(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "tools.repeated_call" => "repeated-call",
        "agent.output_schema_retry" => vocab::SCHEMA_RETRY,
        "agent.output_contract_unmet" => vocab::CONTRACT_UNMET,
        "agent.evidence_checked" => "evidence-checked",
        "integrity.context_error" => "context-error",
        "integrity.disposition" => "disposition",
        k if k.starts_with("integrity.") => "integrity",
        _ => return None,
    })
}

/// Where an envelope was read: its record (line or event index) and, for NDJSON, how much of
/// the input had been read at the end of its line.
#[derive(Debug, Clone, Copy)]
struct At {
    record: u64,
    offset: u64,
}

/// What became of one envelope.
enum Pushed {
    Stored,
    /// Stored as an event, but a tool result with no call to pair it with.
    OrphanResult,
    /// Not usable, with the reason.
    Dropped(String),
}

/// Builds the runs of one input file, envelope by envelope.
#[derive(Default)]
struct Assembler {
    /// Runs in progress by run id.
    open: HashMap<String, RunState>,
    /// Ids of open runs whose turn has ended (possibly listed twice, or since reopened).
    ended: Vec<String>,
    /// Runs already handed on: a later line of one of them cannot be stored.
    closed: HashSet<String>,
    /// Per conversation id, the first record of its runs seen so far, so that every fragment of
    /// a conversation carries the same record.
    conversation_first: HashMap<String, u64>,
}

/// How a run is finished into rows: the Recording document's fallbacks.
struct Finishing<'a> {
    format: &'a str,
    snapshot_history: Option<&'a Value>,
    injected_prompts: &'a [String],
}

#[derive(Default)]
struct RunState {
    run: Run,
    session: Option<String>,
    /// The first record (line or event index) of the run, for a stable order.
    first_record: u64,
    /// Where in the input its latest line ended (bytes; NDJSON only).
    last_offset: u64,
    /// Its turn has ended and no new turn has started.
    turn_ended: bool,
    iteration: Option<u32>,
    /// Open landings by call id: index into `run.events`.
    open_calls: HashMap<String, usize>,
    last_history: Option<Value>,
    /// `last_history` as rows, made when the run's turn ended: a parsed history is several
    /// times its text, and an ended run is held for the lateness window (or, in a Recording,
    /// until the end of the document).
    ended_history: Option<Vec<HistoryRow>>,
    /// `context.injected` messages-slot events of the latest iteration: (position, role, text, call id).
    injected: Vec<(u64, Role, String, Option<String>)>,
    injected_iteration: Option<u32>,
    /// `context.injected` system-prompt-slot contents of the latest iteration.
    prompt_injections: Vec<String>,
    prompt_iteration: Option<u32>,
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn u32_field(v: &Value, key: &str) -> Option<u32> {
    v.get(key)
        .and_then(Value::as_f64)
        .filter(|n| *n >= 0.0 && n.fract() == 0.0 && *n <= u32::MAX as f64)
        .map(|n| n as u32)
}

/// The text a model read for a recorded value: strings as they are, anything else as
/// `JSON.stringify` writes it.
fn model_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => js::stringify(other),
    }
}

impl Assembler {
    /// Take one envelope.
    fn push(&mut self, envelope: Envelope, raw: &str, at: At) -> Pushed {
        match self.push_inner(envelope, raw, at) {
            Ok(pushed) => pushed,
            Err(reason) => Pushed::Dropped(reason.to_string()),
        }
    }

    fn push_inner(
        &mut self,
        envelope: Envelope,
        raw: &str,
        At { record, offset }: At,
    ) -> crate::error::Result<Pushed> {
        let (kind, meta, mut payload) = envelope.checked()?;
        // The row keeps the envelope as recorded.
        let envelope_text = raw.to_string();
        let short = &kind[PREFIX.len()..];
        let Some(run_id) = meta.run_id() else {
            return Err(Error::Malformed(format!("{kind} event has no meta.runId")));
        };
        let new_run = !self.open.contains_key(run_id);
        if new_run {
            if self.closed.contains(run_id) {
                return Err(Error::Malformed(format!(
                    "{kind} event of run {run_id:?} arrives after the run ended and was stored \
                     ({} MiB of input after its last event); not stored",
                    LATENESS_BYTES >> 20
                )));
            }
            let mut state = RunState {
                first_record: record,
                ..RunState::default()
            };
            state.run.run_id = run_id.to_string();
            self.open.insert(run_id.to_string(), state);
        }
        let state = self.open.get_mut(run_id).expect("inserted above");
        state.last_offset = offset;
        let mut new_session = false;
        if state.session.is_none() {
            state.session = meta.session_id().map(str::to_string);
            new_session = state.session.is_some();
        }
        if new_run || new_session {
            let conversation = state.session.as_deref().unwrap_or(run_id);
            let first = self
                .conversation_first
                .entry(conversation.to_string())
                .or_insert(state.first_record);
            *first = (*first).min(state.first_record);
        }
        let timestamp = meta.wall_clock_ms().map(|t| t as i64);
        if let Some(ts) = timestamp {
            let run = &mut state.run;
            run.started_ms = Some(run.started_ms.map_or(ts, |s| s.min(ts)));
            run.ended_ms = Some(run.ended_ms.map_or(ts, |e| e.max(ts)));
        }

        let mut event = Event::new(EventKind::Other);
        event.source_type = Some(kind.clone());
        event.timestamp_ms = timestamp;
        event.payload = Some(envelope_text);
        let payload_iteration =
            u32_field(&payload, "iteration").or(u32_field(&payload, "iterIndex"));
        event.iteration = payload_iteration.or(state.iteration);

        let stored = read_event(
            short,
            &mut payload,
            payload_iteration,
            state,
            &mut event,
            &mut self.ended,
        );
        state.run.events.push(event);
        Ok(stored)
    }

    /// Hand on the runs whose turn ended and after whose last line `LATENESS_BYTES` of input
    /// have been read (`offset` is the input read so far).
    fn close_idle(
        &mut self,
        offset: u64,
        how: &Finishing<'_>,
        input: &Input<'_>,
    ) -> Vec<(Conversation, u64)> {
        let open = &self.open;
        let mut closing = Vec::new();
        self.ended.retain(|id| match open.get(id) {
            Some(state) if state.turn_ended => {
                let idle = state.last_offset + LATENESS_BYTES <= offset;
                if idle {
                    closing.push(id.clone());
                }
                !idle
            }
            // Closed already, or a new turn started (its end lists the run again).
            _ => false,
        });
        let states = closing
            .into_iter()
            .filter_map(|id| self.open.remove(&id))
            .collect();
        self.conversations(states, how, input)
    }

    /// Hand on every run still open (at the end of the input).
    fn finish(mut self, how: &Finishing<'_>, input: &Input<'_>) -> Vec<(Conversation, u64)> {
        let states = std::mem::take(&mut self.open).into_values().collect();
        self.conversations(states, how, input)
    }

    /// Finish runs (context rows, turn, renumbering) and group them by conversation, in order
    /// of their first records; each conversation carries its first record in the file.
    fn conversations(
        &mut self,
        mut states: Vec<RunState>,
        how: &Finishing<'_>,
        input: &Input<'_>,
    ) -> Vec<(Conversation, u64)> {
        states.sort_by_key(|s| s.first_record);
        let mut conversations: Vec<(Conversation, u64)> = Vec::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        for state in states {
            self.closed.insert(state.run.run_id.clone());
            let first_record = state.first_record;
            let run = finish_run(state, how, input);
            match by_id.get(&run.conversation_id) {
                Some(&i) => conversations[i].0.runs.push(run),
                None => {
                    let first = self
                        .conversation_first
                        .get(&run.conversation_id)
                        .map_or(first_record, |&f| f.min(first_record));
                    by_id.insert(run.conversation_id.clone(), conversations.len());
                    conversations.push((
                        Conversation {
                            id: run.conversation_id.clone(),
                            runs: vec![run],
                        },
                        first,
                    ));
                }
            }
        }
        conversations
    }
}

/// The members of an event envelope the assembler reads, taken out of it. An agentfootprint
/// event envelope is a JSON object whose `type` is one of agentfootprint's
/// ([`Envelope::checked`] refuses anything else).
#[derive(Debug, Clone, Default, PartialEq)]
struct Envelope {
    /// The record was a JSON object.
    object: bool,
    kind: Option<Value>,
    meta: Option<Meta>,
    payload: Option<Value>,
}

impl Envelope {
    /// The members read of a parsed record.
    fn of(record: Value) -> Envelope {
        match record {
            // What is left of the object is dropped unread, so its order need not be kept
            // (a swap removal is constant time, a shifting one moves every later member).
            Value::Object(mut obj) => Envelope {
                object: true,
                kind: obj.swap_remove("type"),
                meta: obj.swap_remove("meta").map(Meta::of),
                payload: obj.swap_remove("payload"),
            },
            _ => Envelope::default(),
        }
    }

    /// The event type (with its prefix), meta and payload (null when absent), or why the
    /// record is not an agentfootprint event envelope.
    fn checked(self) -> crate::error::Result<(String, Meta, Value)> {
        let why = match self.kind {
            _ if !self.object => "not an event envelope (expected a JSON object)".into(),
            Some(Value::String(kind)) if kind.starts_with(PREFIX) => {
                let payload = self.payload.unwrap_or(Value::Null);
                return Ok((kind, self.meta.unwrap_or_default(), payload));
            }
            Some(Value::String(kind)) => {
                format!("event type {kind:?} is not an agentfootprint event")
            }
            _ => "event envelope has no string `type`".into(),
        };
        Err(Error::Malformed(why))
    }
}

/// Read event `short` (its type without the prefix) of a run into `event` and the run's
/// state; a turn that ends is named in `ended`. `Pushed::OrphanResult` for a tool result no
/// tool call waits for (the caller stores the event either way).
fn read_event(
    short: &str,
    payload: &mut Value,
    payload_iteration: Option<u32>,
    state: &mut RunState,
    event: &mut Event,
    ended: &mut Vec<String>,
) -> Pushed {
    match short {
        "agent.run_configured" => {
            state.run.agent = str_field(payload, "agentId").map(str::to_string);
            state.run.model = payload
                .get("llm")
                .and_then(|l| str_field(l, "model"))
                .map(str::to_string);
        }
        "agent.turn_start" => {
            state.turn_ended = false;
            event.kind = Some(EventKind::Message);
            event.role = Some(Role::User);
            let prompt = str_field(payload, "userPrompt").map(str::to_string);
            event.text = prompt.clone();
            state.run.user_message = prompt;
        }
        "agent.turn_end" => {
            if !state.turn_ended {
                state.turn_ended = true;
                ended.push(state.run.run_id.clone());
            }
            event.kind = Some(EventKind::Answer);
            event.role = Some(Role::Assistant);
            let answer = payload.get("finalContent").map(model_text);
            event.text = answer.clone();
            state.run.answer = answer;
            if let Some(d) = payload.get("durationMs").and_then(Value::as_f64) {
                state.run.duration_ms = Some(d);
            }
            if let Some(Value::Array(items)) = state.last_history.take() {
                state.ended_history = Some(items.iter().filter_map(history_message).collect());
            }
        }
        "agent.iteration_start" => {
            state.iteration = payload_iteration;
            event.iteration = payload_iteration;
        }
        "agent.iteration_end" => {
            if let Some(history) = payload.get_mut("history").filter(|h| h.is_array()) {
                state.last_history = Some(history.take());
            }
        }
        "context.injected" => injected(payload, state, event),
        "stream.llm_start" | "stream.llm_end" => {
            event.kind = Some(EventKind::ModelCall);
            if short == "stream.llm_end" {
                event.text = payload.get("content").map(model_text);
                event.duration_ms = payload.get("durationMs").and_then(Value::as_f64);
            }
        }
        "stream.tool_start" => {
            event.kind = Some(EventKind::Landing);
            event.role = Some(Role::Assistant);
            event.tool_name = str_field(payload, "toolName").map(str::to_string);
            event.call_id = str_field(payload, "toolCallId").map(str::to_string);
            event.arguments = payload.get("args").map(js::stringify);
            event.flags = LandingFlags::UNANSWERED;
            if let Some(id) = &event.call_id {
                state.open_calls.insert(id.clone(), state.run.events.len());
            }
        }
        // Kept as an event either way; an orphan is reported by the caller as a partial problem.
        "stream.tool_end" if !tool_ended(payload, state, event) => return Pushed::OrphanResult,
        _ if verdict_name(short).is_some() => {
            event.kind = Some(EventKind::Verdict);
            event.text = verdict_name(short).map(str::to_string);
            event.tool_name = str_field(payload, "toolName").map(str::to_string);
            event.call_id = str_field(payload, "toolCallId").map(str::to_string);
        }
        _ => {}
    }
    Pushed::Stored
}

/// What `context.injected` says: by name (`output-schema` declares an output contract; checks
/// read it here, not from the envelope, which is archived), and what went into the system
/// prompt or the messages of the iteration.
fn injected(payload: &Value, state: &mut RunState, event: &mut Event) {
    // What was injected, by name (`output-schema` declares an output contract):
    // checks read it here, not from the envelope, which is archived.
    event.text = str_field(payload, "sourceId").map(str::to_string);
    if str_field(payload, "slot") == Some("system-prompt") {
        let iteration = u32_field(payload, "iteration").or(state.iteration);
        if state.prompt_iteration != iteration {
            state.prompt_injections.clear();
            state.prompt_iteration = iteration;
        }
        if let Some(text) = payload.get("rawContent").map(model_text) {
            state.prompt_injections.push(text);
        }
    }
    if str_field(payload, "slot") == Some("messages") {
        let iteration = u32_field(payload, "iteration").or(state.iteration);
        if state.injected_iteration != iteration {
            state.injected.clear();
            state.injected_iteration = iteration;
        }
        let role = str_field(payload, "asRole").and_then(Role::parse);
        if let Some(role) = role {
            let position = payload
                .get("position")
                .and_then(Value::as_u64)
                .unwrap_or(state.injected.len() as u64);
            let text = payload
                .get("rawContent")
                .map(model_text)
                .unwrap_or_default();
            let call = str_field(payload, "sourceId")
                .filter(|_| role == Role::Tool)
                .map(str::to_string);
            state.injected.push((position, role, text, call));
        }
    }
}

/// A tool's result, given to the landing that called it: `false` when no landing waits for
/// its call id.
fn tool_ended(payload: &Value, state: &mut RunState, event: &mut Event) -> bool {
    event.call_id = str_field(payload, "toolCallId").map(str::to_string);
    let landing_index = event
        .call_id
        .as_ref()
        .and_then(|id| state.open_calls.remove(id));
    match landing_index {
        Some(i) => {
            let landing = &mut state.run.events[i];
            event.tool_name = landing.tool_name.clone();
            landing.flags &= !LandingFlags::UNANSWERED;
            let (text, from_model) = match payload.get("modelResult") {
                Some(v) => (model_text(v), true),
                None => (
                    payload.get("result").map(model_text).unwrap_or_default(),
                    false,
                ),
            };
            landing.text = Some(text);
            if from_model {
                landing.flags |= LandingFlags::MODEL_RESULT;
            }
            landing.error = payload.get("error").and_then(Value::as_bool) == Some(true);
            landing.duration_ms = payload.get("durationMs").and_then(Value::as_f64);
            let rewritten = payload
                .get("changedArgKeys")
                .and_then(Value::as_array)
                .is_some_and(|keys| !keys.is_empty());
            if rewritten {
                landing.flags |= LandingFlags::ARGS_REWRITTEN;
            }
        }
        None => return false,
    }
    true
}

/// A run's rows once its events are all in: the history the model saw as context rows, the
/// turn, injected prompts, event numbers, and where it came from.
fn finish_run(mut state: RunState, how: &Finishing<'_>, input: &Input<'_>) -> Run {
    let history: Vec<HistoryRow> = if let Some(Value::Array(items)) = state.last_history.as_ref() {
        items.iter().filter_map(history_message).collect()
    } else if let Some(rows) = state.ended_history.take() {
        rows
    } else if !state.injected.is_empty() {
        state.injected.sort_by_key(|m| m.0);
        state
            .injected
            .drain(..)
            .map(|(_, role, text, call)| (role, text, None, call, None))
            .collect()
    } else if let Some(Value::Array(items)) = how.snapshot_history {
        items.iter().filter_map(history_message).collect()
    } else {
        Vec::new()
    };
    let turns = history
        .iter()
        .filter(|(role, text, ..)| {
            *role == Role::User && !TURN_NEUTRAL_FRAMES.iter().any(|f| text.starts_with(f))
        })
        .count() as u32;
    // A run with no recorded history still answers the user message it started with.
    state.run.turn = if history.is_empty() && state.run.user_message.is_some() {
        1
    } else {
        turns
    };
    for (role, text, tool_name, call_id, arguments) in history {
        let mut e = Event::new(EventKind::Context);
        e.role = Some(role);
        e.text = Some(text);
        e.tool_name = tool_name;
        e.call_id = call_id;
        e.arguments = arguments;
        state.run.events.push(e);
    }
    let prompts = if state.prompt_injections.is_empty() {
        how.injected_prompts.to_vec()
    } else {
        std::mem::take(&mut state.prompt_injections)
    };
    for prompt in prompts {
        let mut e = Event::new(EventKind::Context);
        e.role = Some(Role::System);
        e.source_type = Some("injected-prompt".into());
        e.text = Some(prompt);
        state.run.events.push(e);
    }
    let mut run = state.run;
    run.renumber();
    run.format = how.format.to_string();
    run.source = input.display.to_string();
    run.conversation_id = state.session.unwrap_or_else(|| run.run_id.clone());
    run
}

type HistoryRow = (Role, String, Option<String>, Option<String>, Option<String>);

/// One message of a recorded history: role, text, tool name, call id, tool calls as JSON.
fn history_message(m: &Value) -> Option<HistoryRow> {
    let role = str_field(m, "role").and_then(Role::parse)?;
    let text = m.get("content").map(model_text).unwrap_or_default();
    let tool_name = str_field(m, "toolName").map(str::to_string);
    let call_id = str_field(m, "toolCallId").map(str::to_string);
    let calls = m
        .get("toolCalls")
        .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        .map(js::stringify);
    Some((role, text, tool_name, call_id, calls))
}

/// The fields of an envelope's payload the assembler reads, by type (`short`: the type without
/// its prefix; see [`Assembler::push`] and [`read_event`]): every type's iteration, and what
/// its event takes. A field left out here is never seen by the assembler, so this list and
/// `read_event` change together (the equivalence tests over real recordings hold them to it).
fn payload_fields(short: &str) -> &'static [&'static str] {
    // Every event takes its iteration from one of these.
    const ITERATION: &[&str] = &["iteration", "iterIndex"];
    match short {
        "agent.run_configured" => &["iteration", "iterIndex", "agentId", "llm"],
        "agent.turn_start" => &["iteration", "iterIndex", "userPrompt"],
        "agent.turn_end" => &["iteration", "iterIndex", "finalContent", "durationMs"],
        "agent.iteration_end" => &["iteration", "iterIndex", "history"],
        "context.injected" => &[
            "iteration",
            "iterIndex",
            "sourceId",
            "slot",
            "rawContent",
            "asRole",
            "position",
        ],
        "stream.llm_end" => &["iteration", "iterIndex", "content", "durationMs"],
        "stream.tool_start" => &["iteration", "iterIndex", "toolName", "toolCallId", "args"],
        "stream.tool_end" => &[
            "iteration",
            "iterIndex",
            "toolCallId",
            "modelResult",
            "result",
            "error",
            "durationMs",
            "changedArgKeys",
        ],
        _ if verdict_name(short).is_some() => &["iteration", "iterIndex", "toolName", "toolCallId"],
        _ => ITERATION,
    }
}

/// The fields of an envelope's `meta` the assembler reads, as recorded (absent when not).
#[derive(Debug, Clone, Default, PartialEq)]
struct Meta {
    run_id: Option<Value>,
    session_id: Option<Value>,
    wall_clock_ms: Option<Value>,
}

/// The fields of an envelope's meta the assembler reads: run id, session id, wall clock.
const META_FIELDS: &[&str] = &["runId", "sessionId", "wallClockMs"];

/// A field of an envelope's meta, by name: its index in [`META_FIELDS`], if one read.
fn meta_field(name: &str) -> Option<usize> {
    META_FIELDS.iter().position(|n| *n == name)
}

impl Meta {
    /// The fields read of a parsed meta (none when it is not an object).
    fn of(meta: Value) -> Meta {
        let mut read = Meta::default();
        if let Value::Object(fields) = meta {
            for (name, value) in fields {
                if let Some(field) = meta_field(&name) {
                    *read.slot(field) = Some(value);
                }
            }
        }
        read
    }

    /// Where field `field` ([`meta_field`]) is kept.
    fn slot(&mut self, field: usize) -> &mut Option<Value> {
        match field {
            0 => &mut self.run_id,
            1 => &mut self.session_id,
            _ => &mut self.wall_clock_ms,
        }
    }

    fn run_id(&self) -> Option<&str> {
        self.run_id.as_ref().and_then(Value::as_str)
    }

    fn session_id(&self) -> Option<&str> {
        self.session_id.as_ref().and_then(Value::as_str)
    }

    fn wall_clock_ms(&self) -> Option<f64> {
        self.wall_clock_ms.as_ref().and_then(Value::as_f64)
    }
}

/// A meta's fields read, parsed in one pass: the others are skipped unbuilt. Anything but an
/// object is an error (the caller then parses the line whole).
impl<'de> serde::Deserialize<'de> for Meta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Meta, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Meta;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an envelope's meta")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
                let mut meta = Meta::default();
                // Of a field given twice, the last stands, as in a parse of the whole line.
                while let Some(field) = map.next_key_seed(js::Key(META_FIELDS))? {
                    match field {
                        Some(field) => *meta.slot(field) = Some(map.next_value()?),
                        None => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(meta)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A line's envelope as the assembler takes it, parsed in one pass: its `meta` keeps the
/// fields read ([`Meta`]), and its payload too when an agentfootprint type comes before it
/// ([`payload_fields`]; a payload read before its type is built whole); other members are
/// skipped unbuilt. Most of an NDJSON file's bytes are fields no step reads (composed slots,
/// tokens, evaluations, routes, dispositions, the meta's stage ids and paths), so building them
/// as values was most of the reader's time. Anything else, a line
/// that is not an object, a `meta` or payload that is not one, or a `type` given again after a
/// payload it decided, is an error, and the caller parses the line whole instead.
struct Skimmed(Envelope);

/// The members of an envelope the assembler reads, by their index: type, meta, payload.
const ENVELOPE_MEMBERS: &[&str] = &["type", "meta", "payload"];
const TYPE: Option<usize> = Some(0);
const META: Option<usize> = Some(1);
const PAYLOAD: Option<usize> = Some(2);

impl<'de> serde::Deserialize<'de> for Skimmed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Skimmed, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Skimmed;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event envelope")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Skimmed, A::Error> {
                let mut envelope = Envelope {
                    object: true,
                    ..Envelope::default()
                };
                // The fields of the payload the type seen so far reads (none before a type,
                // or after another framework's: the payload is then built whole).
                let mut fields: Option<&'static [&'static str]> = None;
                let mut skimmed = false;
                // Of a member given twice, the last stands, as in a parse of the whole line.
                while let Some(member) = map.next_key_seed(js::Key(ENVELOPE_MEMBERS))? {
                    match (member, fields) {
                        (PAYLOAD, Some(names)) => {
                            skimmed = true;
                            envelope.payload = Some(map.next_value_seed(js::Fields(names))?);
                        }
                        (PAYLOAD, None) => envelope.payload = Some(map.next_value()?),
                        (META, _) => envelope.meta = Some(map.next_value()?),
                        (TYPE, _) if skimmed => {
                            return Err(serde::de::Error::custom("type after a skimmed payload"))
                        }
                        (TYPE, _) => {
                            let kind: Value = map.next_value()?;
                            fields = kind
                                .as_str()
                                .and_then(|k| k.strip_prefix(PREFIX))
                                .map(payload_fields);
                            envelope.kind = Some(kind);
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(Skimmed(envelope))
            }
        }
        d.deserialize_map(Members)
    }
}

fn report_push(
    assembler: &mut Assembler,
    envelope: Envelope,
    raw: &str,
    at: At,
    locator: Locator,
    input: &Input<'_>,
    sink: &mut dyn Sink,
) {
    match assembler.push(envelope, raw, at) {
        Pushed::Stored => {}
        Pushed::OrphanResult => sink.quarantine(Quarantined::partial(
            input.display,
            locator,
            "stream.tool_end has no matching stream.tool_start in its run; kept as an event, \
             not as a landing",
        )),
        Pushed::Dropped(reason) => {
            sink.quarantine(Quarantined::dropped(input.display, locator, reason))
        }
    }
}

/// Read an NDJSON file: one envelope per line; each line is a record.
pub fn read_ndjson(input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
    let file = crate::source::HashingFile::open(input.path)?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut assembler = Assembler::default();
    let how = Finishing {
        format: "agentfootprint-ndjson",
        snapshot_history: None,
        injected_prompts: &[],
    };
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    let mut offset = 0u64;
    let mut next_close = CLOSE_EVERY_BYTES;
    loop {
        // Every line read so far has been taken, so a run idle since is complete.
        if offset >= next_close {
            for (conversation, record) in assembler.close_idle(offset, &how, input) {
                sink.conversation(conversation, record);
            }
            next_close = offset + CLOSE_EVERY_BYTES;
        }
        let n = match read_line_bounded(&mut reader, &mut buf, input.limits.record_bytes)? {
            Line::Held(0) => break,
            Line::Held(n) => n,
            Line::TooLong(n) => {
                offset += n;
                line_no += 1;
                sink.records_read(1);
                sink.quarantine(Quarantined::dropped(
                    input.display,
                    Locator::Line(line_no),
                    format!(
                        "line is {}; it was read through without being held",
                        input.limits.too_large(n)
                    ),
                ));
                continue;
            }
        };
        offset += n;
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let line = if line_no == 1 { strip_bom(&buf) } else { &buf };
        let line = trim_line(line);
        if line.is_empty() {
            continue;
        }
        sink.records_read(1);
        let locator = Locator::Line(line_no);
        let text = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(e) => {
                sink.quarantine(Quarantined::dropped(
                    input.display,
                    locator,
                    format!("line is not valid UTF-8 (byte {})", e.valid_up_to()),
                ));
                continue;
            }
        };
        let parsed = match serde_json::from_str::<Skimmed>(text) {
            Ok(Skimmed(envelope)) => Ok(envelope),
            Err(_) => js::parse_json(text).map(Envelope::of),
        };
        match parsed {
            Ok(envelope) => report_push(
                &mut assembler,
                envelope,
                text,
                At {
                    record: line_no,
                    offset,
                },
                locator,
                input,
                sink,
            ),
            Err(e) => {
                let what = if complete {
                    "line is not valid JSON"
                } else {
                    "last line is truncated or not valid JSON"
                };
                sink.quarantine(Quarantined::dropped(
                    input.display,
                    locator,
                    format!("{what}: {}", json_error(&e)),
                ));
            }
        }
    }
    for (conversation, record) in assembler.finish(&how, input) {
        sink.conversation(conversation, record);
    }
    if let Some(sha256) = reader.get_mut().finish() {
        sink.file_digest(sha256);
    }
    Ok(())
}

fn trim_line(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && matches!(buf[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    let mut start = 0;
    while start < end && matches!(buf[start], b' ' | b'\t') {
        start += 1;
    }
    &buf[start..end]
}

/// Read a Recording document. Each envelope of `events` is a record; a document that cannot
/// be read at all is one dropped record.
pub fn read_recording(input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
    let doc = read_document(input.path, &input.limits)?.and_then(|bytes| {
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            Error::Malformed(format!("document is not valid UTF-8 (byte {at})"))
        })?;
        js::parse_json(&text).map_err(|e| {
            Error::Malformed(format!("document is not valid JSON: {}", json_error(&e)))
        })
    });
    let mut doc = match doc {
        Ok(Value::Object(doc)) => doc,
        other => {
            let reason = other.err().map_or_else(
                || "a Recording must be a JSON object".to_string(),
                |e| e.to_string(),
            );
            sink.records_read(1);
            sink.quarantine(Quarantined::dropped(input.display, Locator::File, reason));
            return Ok(());
        }
    };
    // Taken out of the document, so each envelope is moved into the assembler, not copied.
    let Some(Value::Array(events)) = doc.swap_remove("events") else {
        sink.records_read(1);
        sink.quarantine(Quarantined::dropped(
            input.display,
            Locator::File,
            "Recording has no `events` list",
        ));
        return Ok(());
    };
    let shared = doc.get("snapshot").and_then(|s| s.get("sharedState"));
    let snapshot_history = shared.and_then(|s| s.get("history"));
    let injected: Vec<String> = shared
        .and_then(|s| s.get("systemPromptInjections"))
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("rawContent").map(model_text))
                .collect()
        })
        .unwrap_or_default();
    let mut assembler = Assembler::default();
    for (i, envelope) in events.into_iter().enumerate() {
        sink.records_read(1);
        // The row keeps the envelope as `JSON.stringify` writes it.
        let text = js::stringify(&envelope);
        report_push(
            &mut assembler,
            Envelope::of(envelope),
            &text,
            At {
                record: i as u64,
                offset: 0,
            },
            Locator::Record(i as u64),
            input,
            sink,
        );
    }
    let how = Finishing {
        format: "agentfootprint-recording",
        snapshot_history,
        injected_prompts: &injected,
    };
    let conversations = assembler.finish(&how, input);
    // The snapshot's ledger of schema attempts, kept as a verdict row on the run it belongs to.
    let attempts = shared.and_then(|s| s.get("outputAttempts"));
    for (mut conversation, record) in conversations {
        if let (Some(attempts), Some(run)) = (attempts, conversation.runs.last_mut()) {
            let mut e = Event::new(EventKind::Verdict);
            e.source_type = Some("agentfootprint.snapshot.outputAttempts".into());
            e.text = Some(vocab::OUTPUT_ATTEMPTS.into());
            e.payload = Some(js::stringify(&serde_json::json!({
                "type": "agentfootprint.snapshot.outputAttempts",
                "payload": attempts,
            })));
            e.seq = run.events.len() as u32;
            run.events.push(e);
        }
        sink.conversation(conversation, record);
    }
    Ok(())
}

/// agentfootprint NDJSON: one event envelope per line.
pub struct NdjsonAdapter;

impl crate::ingest::Adapter for NdjsonAdapter {
    fn name(&self) -> &'static str {
        "agentfootprint-ndjson"
    }
    fn family(&self) -> &'static str {
        "agentfootprint"
    }
    fn about(&self) -> &'static str {
        "agentfootprint NDJSON: one event envelope per line"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        // The first line is a complete object with a dotted agentfootprint type.
        let first_line = head.text.lines().next().unwrap_or("");
        crate::ingest::Match::strong_if(
            head.text.starts_with('{')
                && first_line.contains("\"type\"")
                && first_line.contains("\"agentfootprint.")
                && first_line.contains("\"meta\""),
        )
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read_ndjson(input, sink)
    }
    fn input_bytes_per_row(&self) -> Option<u64> {
        // The shared recordings hold 412 bytes a row (548,447 bytes, 23 runs and 1,308
        // events); an eighth less leaves room for denser logs.
        Some(360)
    }
}

/// agentfootprint Recording documents `{snapshot, events, structure}`.
pub struct RecordingAdapter;

impl crate::ingest::Adapter for RecordingAdapter {
    fn name(&self) -> &'static str {
        "agentfootprint-recording"
    }
    fn family(&self) -> &'static str {
        "agentfootprint"
    }
    fn about(&self) -> &'static str {
        "agentfootprint Recording document {snapshot, events, structure}"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        use crate::ingest::Match;
        let t = head.text;
        if !t.starts_with('{') || !t.contains("\"snapshot\"") {
            Match::No
        } else if t.contains("\"sharedState\"") {
            Match::Strong
        } else if t.contains("agentfootprint.") {
            // A snapshot naming agentfootprint events, without the state: another document
            // (a tau2 results file quoting one) may look like this too.
            Match::Weak
        } else {
            Match::No
        }
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read_recording(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const AgentfootprintNdjson: crate::ingest::Format = crate::ingest::Format(&NdjsonAdapter);
    #[allow(non_upper_case_globals)]
    pub const AgentfootprintRecording: crate::ingest::Format =
        crate::ingest::Format(&RecordingAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Collect;
    use std::io::Write;

    fn ndjson(lines: &[&str]) -> Collect {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for l in lines {
            f.write_all(l.as_bytes()).unwrap();
        }
        let mut sink = Collect::default();
        let display = "t.ndjson";
        read_ndjson(&Input::new(f.path(), display), &mut sink).unwrap();
        sink
    }

    const START: &str = r#"{"type":"agentfootprint.stream.tool_start","payload":{"toolName":"t","toolCallId":"c1","args":{"b":1,"a":2}},"meta":{"runId":"r1","sessionId":"s1","wallClockMs":10}}
"#;
    const END: &str = r#"{"type":"agentfootprint.stream.tool_end","payload":{"toolCallId":"c1","result":{"z":1,"a":[1.0,2]},"durationMs":3},"meta":{"runId":"r1","sessionId":"s1","wallClockMs":13}}
"#;

    #[test]
    fn landing_pairs_start_and_end() {
        let sink = ndjson(&[START, END]);
        assert_eq!(sink.records, 2);
        assert!(sink.quarantined.is_empty());
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.id, "s1");
        let l: Vec<_> = conv.runs[0].landings().collect();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].arguments.as_deref(), Some(r#"{"b":1,"a":2}"#));
        assert_eq!(l[0].text.as_deref(), Some(r#"{"z":1,"a":[1,2]}"#));
        assert_eq!(l[0].duration_ms, Some(3.0));
        assert!(!l[0].has_flag(LandingFlags::UNANSWERED));
    }

    #[test]
    fn payloads_read_for_their_iteration_only_are_skimmed_like_a_whole_parse() {
        let token = r#"{"type":"agentfootprint.stream.token","payload":{"iteration":2,"text":"x","deep":[1,{"a":[2.50,"\u00e9"]}]},"meta":{"runId":"r1","sessionId":"s1","wallClockMs":5}}
"#;
        // The type given again after a payload the first would skim: the line is read whole,
        // and the last type is the event's, with all of its payload.
        let twice = r#"{"type":"agentfootprint.stream.token","payload":{"toolName":"lookup","toolCallId":"c9","args":{"q":1}},"type":"agentfootprint.stream.tool_start","meta":{"runId":"r1","sessionId":"s1"}}
"#;
        // A payload before its type is read whole.
        let after = r#"{"payload":{"iterIndex":3,"other":{}},"type":"agentfootprint.agent.iteration_start","meta":{"runId":"r1","sessionId":"s1"}}
"#;
        // A payload that is not an object: the line is read whole, as before.
        let odd = r#"{"type":"agentfootprint.context.evaluated","payload":[1,2],"meta":{"runId":"r1","sessionId":"s1"}}
"#;
        let sink = ndjson(&[token, twice, after, odd]);
        assert_eq!(sink.records, 4);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let events = &sink.conversations[0].0.runs[0].events;
        assert_eq!(events.len(), 4);
        assert_eq!(
            events[0].source_type.as_deref(),
            Some("agentfootprint.stream.token")
        );
        assert_eq!(events[0].iteration, Some(2));
        assert_eq!(events[0].timestamp_ms, Some(5));
        assert_eq!(events[0].payload.as_deref(), Some(token.trim_end()));
        assert_eq!(events[1].kind(), EventKind::Landing);
        assert_eq!(events[1].tool_name.as_deref(), Some("lookup"));
        assert_eq!(events[1].call_id.as_deref(), Some("c9"));
        assert_eq!(events[1].arguments.as_deref(), Some(r#"{"q":1}"#));
        assert_eq!(events[2].iteration, Some(3));
        assert_eq!(
            events[3].source_type.as_deref(),
            Some("agentfootprint.context.evaluated")
        );
        assert_eq!(events[3].payload.as_deref(), Some(odd.trim_end()));
        // What the skim keeps of a meta or a payload is the fields the assembler reads of it.
        let injected = r#"{"type":"agentfootprint.context.injected","payload":{"contentSummary":"s","slot":"messages","rawContent":{"a":[1]},"asRole":"user","position":0,"reason":"r"},"meta":{"wallClockMs":7,"runtimeStageId":"x#1","subflowPath":["a"],"runId":"r1","sessionId":"s1"}}"#;
        // (A payload before its type is kept whole.)
        for (line, trimmed) in [
            (token.trim_end(), true),
            (after.trim_end(), false),
            (injected, true),
        ] {
            let Ok(Skimmed(skimmed)) = serde_json::from_str::<Skimmed>(line) else {
                panic!("{line} is an envelope");
            };
            let whole = js::parse_json(line).unwrap();
            assert!(skimmed.object);
            assert_eq!(skimmed.kind.as_ref(), Some(&whole["type"]));
            let short = whole["type"]
                .as_str()
                .unwrap()
                .strip_prefix(PREFIX)
                .unwrap();
            let only = |v: &Value, names: &[&str]| -> Value {
                let map = v.as_object().unwrap();
                Value::Object(
                    map.iter()
                        .filter(|(k, _)| names.contains(&k.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
            };
            assert_eq!(skimmed.meta, Some(Meta::of(whole["meta"].clone())));
            assert!(skimmed.meta.as_ref().unwrap().run_id().is_some());
            let names = payload_fields(short);
            let payload = if trimmed {
                only(&whole["payload"], names)
            } else {
                whole["payload"].clone()
            };
            assert_eq!(skimmed.payload, Some(payload));
        }
        // A field no step reads is skipped unbuilt, so a number beyond f64 or nesting deeper
        // than serde_json builds is stored there (JavaScript's JSON.parse takes both); in a
        // field that is read, the line is parsed whole and refused as before.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let unread = [
            r#"{"type":"agentfootprint.stream.token","payload":{"iteration":1,"big":1e400},"meta":{"runId":"r1","sessionId":"s1"}}"#.to_string(),
            format!(r#"{{"type":"agentfootprint.stream.token","payload":{{"deep":{deep}}},"meta":{{"runId":"r1","sessionId":"s1"}}}}"#),
            r#"{"type":"agentfootprint.stream.tool_start","payload":{"toolName":"t","toolCallId":"c","args":{"n":1e400}},"meta":{"runId":"r1","sessionId":"s1"}}"#.to_string(),
            // A member of the envelope beside its type, meta and payload is not read either.
            r#"{"type":"agentfootprint.stream.llm_end","extra":{"n":1e400},"payload":{"iteration":1},"meta":{"runId":"r1","sessionId":"s1"}}"#.to_string(),
        ];
        let lines: Vec<String> = unread.iter().map(|l| format!("{l}\n")).collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let sink = ndjson(&refs);
        assert_eq!(sink.conversations[0].0.runs[0].events.len(), 3);
        assert_eq!(sink.quarantined.len(), 1, "{:?}", sink.quarantined);
        assert!(sink.quarantined[0].reason.contains("number out of range"));
        assert!(serde_json::from_str::<Skimmed>(twice.trim_end()).is_err());
        assert!(serde_json::from_str::<Skimmed>("[1]").is_err());
    }

    /// Envelopes whose meta or members are odd give the same outcome skimmed (or, when the skim
    /// gives up, parsed whole) as parsed whole: what is stored, or why it is not.
    #[test]
    fn odd_envelopes_are_taken_alike_skimmed_and_parsed_whole() {
        let outcome = |p: Pushed| match p {
            Pushed::Stored => "stored".to_string(),
            Pushed::OrphanResult => "orphan".to_string(),
            Pushed::Dropped(reason) => reason,
        };
        let t = r#""type":"agentfootprint.stream.token""#;
        let lines = [
            format!(r#"{{{t},"meta":5}}"#),
            format!(r#"{{{t},"meta":{{"runId":7,"sessionId":"s"}}}}"#),
            format!(r#"{{{t},"meta":{{"runId":"a","runId":"b","wallClockMs":"x"}}}}"#),
            format!(r#"{{{t},"meta":{{"runId":"c"}},"meta":{{"sessionId":"s"}}}}"#),
            format!(r#"{{{t}}}"#),
            format!(r#"{{{t},"meta":{{"runId":"d","sessionId":5,"wallClockMs":1.7e12}}}}"#),
            r#"{"meta":{"runId":"e"}}"#.to_string(),
            r#"{"type":7,"meta":{"runId":"e"}}"#.to_string(),
            r#"{"type":"other.kind","meta":{"runId":"e"}}"#.to_string(),
            r#"[{"type":"agentfootprint.stream.token"}]"#.to_string(),
        ];
        let (mut skim, mut whole) = (Assembler::default(), Assembler::default());
        let mut stored = 0;
        for (i, line) in lines.iter().enumerate() {
            let at = At {
                record: i as u64,
                offset: 0,
            };
            let parsed = Envelope::of(js::parse_json(line).unwrap());
            let fast = match serde_json::from_str::<Skimmed>(line) {
                Ok(Skimmed(v)) => v,
                Err(_) => parsed.clone(),
            };
            let (a, b) = (
                outcome(skim.push(fast, line, at)),
                outcome(whole.push(parsed, line, at)),
            );
            assert_eq!(a, b, "{line}");
            stored += usize::from(a == "stored");
        }
        // Run ids "b" (the last of two), "d", and the meta given last (no run id): refused.
        assert_eq!(stored, 2);
        let how = Finishing {
            format: "agentfootprint-ndjson",
            snapshot_history: None,
            injected_prompts: &[],
        };
        let input = Input::new(std::path::Path::new("odd.ndjson"), "odd.ndjson");
        let (skim, whole) = (skim.finish(&how, &input), whole.finish(&how, &input));
        assert_eq!(skim, whole);
        let runs: Vec<&str> = skim
            .iter()
            .flat_map(|(c, _)| &c.runs)
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert!(runs.contains(&"b") && runs.contains(&"d"), "{runs:?}");
    }

    /// Every line of a real recording pushed as the reader skims it and as a whole parse gives
    /// it: the same outcome for each line, and the same conversations. This is what holds
    /// [`payload_fields`] and [`Meta`] to what the assembler reads.
    #[test]
    fn real_recordings_assemble_the_same_skimmed_and_parsed_whole() {
        let how = Finishing {
            format: "agentfootprint-ndjson",
            snapshot_history: None,
            injected_prompts: &[],
        };
        let outcome = |p: Pushed| match p {
            Pushed::Stored => "stored".to_string(),
            Pushed::OrphanResult => "orphan".to_string(),
            Pushed::Dropped(reason) => reason,
        };
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        for dir in [
            "testdata/agentfootprint/ndjson",
            "../shared/data/agentfootprint/ndjson",
        ] {
            if let Ok(entries) = std::fs::read_dir(dir) {
                files.extend(entries.map(|e| e.unwrap().path()));
            }
        }
        assert!(files.len() >= 5, "{files:?}");
        let mut skimmed_lines = 0;
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let input = Input::new(path, "t.ndjson");
            let (mut skim, mut whole) = (Assembler::default(), Assembler::default());
            for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                let at = At {
                    record: i as u64,
                    offset: 0,
                };
                let parsed = Envelope::of(js::parse_json(line).unwrap());
                let fast = match serde_json::from_str::<Skimmed>(line) {
                    Ok(Skimmed(v)) => {
                        skimmed_lines += usize::from(v != parsed);
                        v
                    }
                    Err(_) => parsed.clone(),
                };
                assert_eq!(
                    outcome(skim.push(fast, line, at)),
                    outcome(whole.push(parsed, line, at)),
                    "{} line {}",
                    path.display(),
                    i + 1
                );
            }
            assert_eq!(
                skim.finish(&how, &input),
                whole.finish(&how, &input),
                "{}",
                path.display()
            );
        }
        // The skim did trim most lines (every line carries meta fields no step reads).
        assert!(skimmed_lines > 100, "{skimmed_lines}");
    }

    #[test]
    fn an_injection_keeps_its_source_id_in_text() {
        let injected = |source: &str| {
            format!(
                "{{\"type\":\"agentfootprint.context.injected\",\"payload\":{{\"slot\":\"system-prompt\",\"sourceId\":\"{source}\",\"rawContent\":\"Answer as JSON 0xAB12\"}},\"meta\":{{\"runId\":\"r1\",\"sessionId\":\"s1\"}}}}\n"
            )
        };
        let no_id = "{\"type\":\"agentfootprint.context.injected\",\"payload\":{\"slot\":\"messages\",\"sourceId\":7},\"meta\":{\"runId\":\"r1\",\"sessionId\":\"s1\"}}\n";
        let sink = ndjson(&[
            &injected("output-schema"),
            &injected("facts"),
            no_id,
            START,
            END,
        ]);
        let run = &sink.conversations[0].0.runs[0];
        let texts: Vec<Option<&str>> = run
            .events
            .iter()
            .filter(|e| e.source_type.as_deref() == Some("agentfootprint.context.injected"))
            .map(|e| e.text.as_deref())
            .collect();
        assert_eq!(texts, [Some("output-schema"), Some("facts"), None]);
    }

    #[test]
    fn bad_lines_are_quarantined_and_the_rest_kept() {
        let sink = ndjson(&[
            START,
            "this is not json\n",
            "{\"type\":\"other.thing\",\"payload\":{},\"meta\":{\"runId\":\"r1\"}}\n",
            "{\"type\":\"agentfootprint.x\",\"payload\":{},\"meta\":{}}\n",
            "\n",
            END,
            "{\"type\":\"agentfootprint.agent.turn_end\",\"payl",
        ]);
        assert_eq!(sink.records, 6);
        let reasons: Vec<_> = sink.quarantined.iter().map(|q| q.reason.clone()).collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert!(reasons[0].starts_with("line is not valid JSON"));
        assert!(reasons[1].contains("not an agentfootprint event"));
        assert!(reasons[2].contains("no meta.runId"));
        assert!(reasons[3].starts_with("last line is truncated"));
        assert_eq!(sink.quarantined[3].locator, Locator::Line(7));
        assert_eq!(sink.conversations[0].0.runs[0].landings().count(), 1);
    }

    /// Read `bytes` as `format` under a record limit of `record_bytes`.
    fn read_as(bytes: &[u8], format: crate::ingest::Format, record_bytes: u64) -> Collect {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, bytes).unwrap();
        let mut input = Input::new(&path, "t.json");
        input.limits.record_bytes = record_bytes;
        let mut sink = Collect::default();
        crate::ingest::read_file(format, &input, &mut sink).unwrap();
        sink
    }

    #[test]
    fn a_byte_order_mark_changes_nothing() {
        use crate::ingest::Format;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/agentfootprint");
        for (rel, format) in [
            (
                "ndjson/a_repeated_identical_call.ndjson",
                Format::AgentfootprintNdjson,
            ),
            (
                "recordings/e-02-sess-e-1-turn2.json",
                Format::AgentfootprintRecording,
            ),
        ] {
            let bytes = std::fs::read(dir.join(rel)).unwrap();
            let plain = read_as(&bytes, format, 1 << 20);
            let marked = read_as(&[&b"\xEF\xBB\xBF"[..], &bytes].concat(), format, 1 << 20);
            assert!(!plain.conversations.is_empty());
            assert_eq!(marked.records, plain.records, "{rel}");
            assert_eq!(marked.quarantined, plain.quarantined, "{rel}");
            assert_eq!(marked.conversations, plain.conversations, "{rel}");
        }
    }

    #[test]
    fn lines_and_documents_over_the_record_limit() {
        use crate::ingest::Format;
        let long = format!(
            "{{\"type\":\"agentfootprint.agent.note\",\"payload\":\"{}\",\"meta\":{{\"runId\":\"r1\"}}}}\n",
            "x".repeat(5000)
        );
        let deep = format!("{}{}\n", "[".repeat(200), "]".repeat(200));
        let text = [START, &long, &deep, END].concat();
        let sink = read_as(text.as_bytes(), Format::AgentfootprintNdjson, 4096);
        assert_eq!(sink.records, 4);
        let reasons: Vec<_> = sink
            .quarantined
            .iter()
            .map(|q| (q.locator.clone(), q.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (
                    Locator::Line(2),
                    "line is 5.0 KiB (5072 bytes), over the 4 KiB record limit; it was read \
                     through without being held"
                ),
                (
                    Locator::Line(3),
                    "line is not valid JSON: the value nests lists and objects deeper than 127 \
                     levels at line 1 column 128"
                ),
            ]
        );
        assert_eq!(sink.conversations[0].0.runs[0].landings().count(), 1);

        let recording = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/agentfootprint/recordings/e-02-sess-e-1-turn2.json"),
        )
        .unwrap();
        let sink = read_as(&recording, Format::AgentfootprintRecording, 1024);
        assert_eq!(sink.records, 1);
        assert!(sink.conversations.is_empty());
        assert_eq!(sink.quarantined[0].locator, Locator::File);
        assert!(
            sink.quarantined[0]
                .reason
                .contains("over the 1 KiB record limit; a file of this format is read whole"),
            "{}",
            sink.quarantined[0].reason
        );
    }

    #[test]
    fn invalid_utf8_and_orphan_tool_end() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"{\"type\":\"agentfootprint.a\",\"payload\":\"\xff\xfe\",\"meta\":{\"runId\":\"r\"}}\n")
            .unwrap();
        f.write_all(END.as_bytes()).unwrap();
        let mut sink = Collect::default();
        read_ndjson(&Input::new(f.path(), "x"), &mut sink).unwrap();
        assert_eq!(sink.records, 2);
        assert_eq!(
            sink.quarantined[0].severity,
            crate::ingest::Severity::Dropped
        );
        assert!(sink.quarantined[0].reason.contains("UTF-8"));
        assert_eq!(
            sink.quarantined[1].severity,
            crate::ingest::Severity::Partial
        );
        // The orphan end is still stored as an event of its run.
        assert_eq!(sink.conversations.len(), 1);
        assert_eq!(sink.conversations[0].0.runs[0].landings().count(), 0);
    }

    fn envelope(kind: &str, run: &str, session: &str, payload: &str) -> String {
        format!(
            "{{\"type\":\"agentfootprint.{kind}\",\"payload\":{payload},\
             \"meta\":{{\"runId\":\"{run}\",\"sessionId\":\"{session}\"}}}}\n"
        )
    }

    /// One whole turn of a run: question, one landing, answer, the disposition after it.
    fn turn(run: &str, session: &str) -> Vec<String> {
        vec![
            envelope("agent.turn_start", run, session, r#"{"userPrompt":"q"}"#),
            envelope(
                "stream.tool_start",
                run,
                session,
                r#"{"toolName":"t","toolCallId":"c","args":{}}"#,
            ),
            envelope(
                "stream.tool_end",
                run,
                session,
                r#"{"toolCallId":"c","result":"r"}"#,
            ),
            envelope("agent.turn_end", run, session, r#"{"finalContent":"a"}"#),
            envelope("integrity.disposition", run, session, "{}"),
        ]
    }

    /// Lines of a run that never ends, `bytes` of them in all: more than the lateness window
    /// when it is to pass.
    fn filler(run: &str, bytes: u64) -> Vec<String> {
        let pad = "x".repeat(64 << 10);
        let line = envelope(
            "stream.llm_start",
            run,
            "s-filler",
            &format!("{{\"pad\":\"{pad}\"}}"),
        );
        let n = bytes.div_ceil(line.len() as u64);
        vec![line; n as usize]
    }

    fn read_lines(lines: &[String]) -> Collect {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        ndjson(&refs)
    }

    #[test]
    fn ended_runs_are_handed_on_while_the_file_is_read() {
        let mut lines = turn("r1", "s1");
        lines.extend(filler("r2", LATENESS_BYTES + 2 * CLOSE_EVERY_BYTES));
        lines.extend(turn("r3", "s1"));
        // Late: r1 was handed on long before.
        lines.push(envelope("integrity.disposition", "r1", "s1", "{}"));
        let sink = read_lines(&lines);
        assert_eq!(sink.records, lines.len() as u64);
        let got: Vec<(&str, Vec<&str>, u64)> = sink
            .conversations
            .iter()
            .map(|(c, record)| {
                let runs = c.runs.iter().map(|r| r.run_id.as_str()).collect();
                (c.id.as_str(), runs, *record)
            })
            .collect();
        // s1 comes in two fragments, both with the conversation's first line; the run that
        // never ended is handed on at the end of the file, in order of first line.
        assert_eq!(
            got,
            [
                ("s1", vec!["r1"], 1),
                ("s-filler", vec!["r2"], 6),
                ("s1", vec!["r3"], 1),
            ]
        );
        // The disposition right after the answer belongs to its run.
        let r1 = &sink.conversations[0].0.runs[0];
        assert_eq!(r1.events.len(), 5);
        assert_eq!(r1.turn, 1);
        assert_eq!(r1.landings().count(), 1);
        assert_eq!(sink.quarantined.len(), 1);
        let late = &sink.quarantined[0];
        assert_eq!(late.severity, crate::ingest::Severity::Dropped);
        assert_eq!(late.locator, Locator::Line(lines.len() as u64));
        assert!(
            late.reason
                .contains("run \"r1\" arrives after the run ended"),
            "{}",
            late.reason
        );
    }

    #[test]
    fn a_run_whose_turn_starts_again_stays_open() {
        let mut lines = turn("r1", "s1");
        lines.extend(turn("r1", "s1")[..2].iter().cloned());
        lines.extend(filler("r2", LATENESS_BYTES + 2 * CLOSE_EVERY_BYTES));
        lines.push(envelope(
            "stream.tool_end",
            "r1",
            "s1",
            r#"{"toolCallId":"c","result":"r"}"#,
        ));
        let sink = read_lines(&lines);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let r1 = &sink.conversations[0].0.runs[0];
        assert_eq!(r1.run_id, "r1");
        assert_eq!(r1.events.len(), 8);
        // Both landings answered: the last line found its call.
        assert_eq!(r1.landings().count(), 2);
        assert!(r1.landings().all(|l| !l.has_flag(LandingFlags::UNANSWERED)));
    }

    #[test]
    fn runs_within_the_window_are_handed_on_together() {
        // Two runs of one session, both ended, closed at the same look: one conversation.
        let mut lines = turn("r1", "s1");
        lines.extend(turn("r2", "s1"));
        lines.extend(filler("r3", LATENESS_BYTES + 2 * CLOSE_EVERY_BYTES));
        let sink = read_lines(&lines);
        let first = &sink.conversations[0];
        assert_eq!(first.0.id, "s1");
        assert_eq!(first.1, 1);
        let runs: Vec<&str> = first.0.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(runs, ["r1", "r2"]);
        assert_eq!(sink.conversations.len(), 2);
    }

    #[test]
    fn unanswered_call_is_kept() {
        let sink = ndjson(&[START]);
        let l: Vec<_> = sink.conversations[0].0.runs[0].landings().collect();
        assert!(l[0].has_flag(LandingFlags::UNANSWERED));
    }
}
