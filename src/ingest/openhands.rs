//! OpenHands trajectories, in the two shapes OpenHands writes them:
//! - an event stream (`openhands-events`): one JSON list of events, as the GUI's trajectory
//!   download and the replay fixtures keep it. The file is one record and one conversation
//!   (named as SWE-agent's are: [`swe_agent::conversation_id`]);
//! - `output.jsonl` (`openhands-output`): what the evaluation harness and the issue resolver
//!   write, one instance per line, its events under `history`. A line is one record and one
//!   conversation, named `<file's name>/<instance>` (the `instance_id`, else the resolver's
//!   `owner/repo#number`, else the line number).
//!
//! An event is an action (`action`: its type, `args`: its arguments) or an observation
//! (`observation`: its type, `content`: its text, `cause`: the `id` of the action it answers).
//! Events carry `id`, `timestamp`, `source` (`user`, `agent`, `environment`) and, when the model
//! asked for the action through a tool call, `tool_call_metadata` (`function_name`,
//! `tool_call_id`, the `model_response` holding the call). Older histories write each event
//! flat (the arguments beside `action`, no `id`, `source` or `cause`), or as `[action,
//! observation]` pairs; both are read.
//!
//! Mapping:
//! - a `message` action from the user starts a run; one from the agent is assistant text (a flat
//!   history has no `source`: its first message is the user's, later ones the agent's);
//!   `system` is system text;
//! - an action that runs a tool (the types in [`TOOL_ACTIONS`], or any other with
//!   `tool_call_metadata`, except `finish`) is a landing: the tool is the call's
//!   `function_name`, else the action type; the arguments are the call's own arguments from
//!   `model_response` when found there, else the action's `args` without `thought`; the call id
//!   is the `tool_call_id`, else `event-<id>`. The `thought` is the assistant text before it;
//! - the observation naming the action as its `cause` (else its `tool_call_id`; in a flat
//!   history, the next observation) is the result, its `content` the text; an `error`
//!   observation marks the landing failed. An observation whose cause is not in the file, or
//!   is an action that ran no tool, is left out with a note;
//! - `finish` is the answer (the event's `message`, else `final_thought`, else `thought`);
//!   `reject` is assistant text;
//! - tool actions by the user (commands typed in the terminal) are not the agent's: neither
//!   they nor their observations are in its history;
//! - bookkeeping events (agent state changes, condensation, memory recall, pauses) are left out
//!   silently; any other kind is left out with a partial note naming it.
//!
//! The model is the `model` of the first `model_response`, else (output.jsonl)
//! `metadata.llm_config.model`; the agent is `metadata.agent_class`.

use crate::error::Error;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufReader};

use serde::de::DeserializeSeed;
use serde_json::{Map, Value};

use crate::ingest::json_pick::{
    content_text, dropped, first_key, kind_of, non_empty, open_record_file, partial, scalar_text,
};
use crate::ingest::limits::{json_error, read_line_bounded, strip_bom, Line};
use crate::ingest::swe_agent::conversation_id;
use crate::ingest::trajectory::{self, parse_iso_ms, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Locator, Sink};
use crate::model::{Conversation, Role};

const EVENTS: &str = "openhands-events";
const OUTPUT: &str = "openhands-output";
const FAMILY: &str = "openhands";

/// Action types that run a tool in the agent's sandbox (or hand work to another agent).
pub(crate) const TOOL_ACTIONS: &[&str] = &[
    "run",
    "run_ipython",
    "read",
    "write",
    "edit",
    "browse",
    "browse_interactive",
    "mcp",
    "call_tool_mcp",
    "delegate",
    "think",
    "task_tracking",
    "push",
    "send_pr",
];

/// Action types that hold nothing for the audit: left out without a note.
const QUIET_ACTIONS: &[&str] = &[
    "change_agent_state",
    "null",
    "pause",
    "resume",
    "stop",
    "start",
    "recall",
    "condensation",
    "condensation_request",
    "loop_recovery",
];

/// Observation types that answer no tool call: left out without a note.
const QUIET_OBSERVATIONS: &[&str] = &[
    "agent_state_changed",
    "null",
    "recall",
    "condensate",
    "agent_condensation",
    "loop_detection",
];

/// Keys of a flat event that are not the action's arguments.
const FLAT_ENVELOPE: &[&str] = &[
    "action",
    "thought",
    "is_confirmed",
    "confirmation_state",
    "action_risk",
    "security_risk",
    "keep_prompt",
    "id",
    "timestamp",
    "source",
    "message",
    "timeout",
    "tool_call_metadata",
];

/// Does the head look like an OpenHands event stream? A list whose first object starts with an
/// event key and which names an event source, an action or observation, and an id or timestamp.
pub(crate) fn is_event_stream(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('[') else {
        return false;
    };
    let first_ok = matches!(
        first_key(rest),
        Some("id" | "timestamp" | "source" | "action" | "observation" | "message" | "cause")
    );
    let squeezed: String = text
        .chars()
        .take(16 * 1024)
        .filter(|c| !c.is_whitespace())
        .collect();
    let names_source = ["user", "agent", "environment"]
        .iter()
        .any(|s| squeezed.contains(&format!("\"source\":\"{s}\"")));
    first_ok
        && names_source
        && (squeezed.contains("\"action\":\"") || squeezed.contains("\"observation\":\""))
        && (squeezed.contains("\"id\":") || squeezed.contains("\"timestamp\":"))
}

/// Does the head look like an OpenHands `output.jsonl`? A line object starting with the
/// evaluation harness's `instance_id` (with a `history` or the harness's `agent_class`), or
/// with the resolver's `issue` (with its `issue_type` and `instruction`).
pub(crate) fn is_output_line(text: &str) -> bool {
    let line = text.lines().next().unwrap_or("");
    match first_key(line) {
        Some("instance_id") => line.contains("\"history\"") || line.contains("\"agent_class\""),
        Some("issue") => line.contains("\"issue_type\"") && line.contains("\"instruction\""),
        _ => false,
    }
}

/// Do the skimmed members of a file's first line ([`skim_members`]) make an `output.jsonl`
/// line? The same keys as [`is_output_line`] asks for, wherever they fall in the line: the
/// harness writes `test_result` (the whole patch) and `instruction` before `metadata` and
/// `history`.
///
/// [`skim_members`]: crate::ingest::json_pick::skim_members
fn is_skimmed_output_line(members: &[crate::ingest::json_pick::Member]) -> bool {
    let member = |key: &str| members.iter().find(|m| m.key == key);
    match members.first().map(|m| m.key.as_str()) {
        Some("instance_id") => {
            member("history").is_some()
                || member("metadata").is_some_and(|m| m.has_key("agent_class"))
        }
        Some("issue") => member("issue_type").is_some() && member("instruction").is_some(),
        _ => false,
    }
}

/// Read an event-stream file: one record.
pub fn read_events(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let Some(mut doc) = open_record_file(input, sink, EVENTS)? else {
        return Ok(());
    };
    let parsed = std::marker::PhantomData::<Value>
        .deserialize(&mut doc.de)
        .and_then(|v| doc.de.end().map(|()| v));
    let value = match parsed {
        Err(e) if e.is_io() => return Err(e.into()),
        Err(e) => {
            let reason = format!(
                "not a readable event stream: {e} (near byte {})",
                doc.offset()
            );
            sink.quarantine(dropped(input, EVENTS, Locator::File, reason));
            return Ok(());
        }
        Ok(value) => value,
    };
    let events = match value {
        Value::Array(list) if !list.is_empty() => list,
        Value::Array(_) => {
            let reason = "the event list is empty";
            sink.quarantine(dropped(input, EVENTS, Locator::File, reason));
            return Ok(());
        }
        other => {
            let reason = format!("the document is {}, not a list of events", kind_of(&other));
            sink.quarantine(dropped(input, EVENTS, Locator::File, reason));
            return Ok(());
        }
    };
    let id = conversation_id(std::path::Path::new(input.name));
    let conversation = convert(input, &id, &events, None, EVENTS, Locator::File, sink);
    sink.conversation(conversation, 0);
    Ok(())
}

/// Read an `output.jsonl` file: each non-blank line is a record.
pub fn read_output(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let file = crate::source::HashingFile::open(input.path)?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    let file_id = conversation_id(std::path::Path::new(input.name));
    loop {
        let n = read_line_bounded(&mut reader, &mut buf, input.limits.record_bytes)?;
        line_no += 1;
        let locator = Locator::Line(line_no);
        match n {
            Line::Held(0) => break,
            Line::Held(_) => {}
            Line::TooLong(n) => {
                sink.records_read(1);
                let reason = format!(
                    "line is {}; it was read through without being held",
                    input.limits.too_large(n)
                );
                sink.quarantine(dropped(input, OUTPUT, locator, reason));
                continue;
            }
        }
        let line = if line_no == 1 { strip_bom(&buf) } else { &buf };
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        sink.records_read(1);
        let value = match serde_json::from_slice::<Value>(line) {
            Ok(v) => v,
            Err(e) => {
                let reason = format!("line is not valid JSON: {}", json_error(&e));
                sink.quarantine(dropped(input, OUTPUT, locator, reason));
                continue;
            }
        };
        match instance(input, &file_id, line_no, value, sink) {
            Ok(conversation) => sink.conversation(conversation, line_no),
            Err(reason) => sink.quarantine(dropped(input, OUTPUT, locator, reason.to_string())),
        }
    }
    if let Some(sha256) = reader.get_mut().finish() {
        sink.file_digest(sha256);
    }
    Ok(())
}

/// One `output.jsonl` line as a conversation.
fn instance(
    input: &Input<'_>,
    file_id: &str,
    line_no: u64,
    value: Value,
    sink: &mut dyn Sink,
) -> crate::error::Result<Conversation> {
    let Value::Object(mut doc) = value else {
        return Err(Error::Malformed(format!(
            "the line is {}, not an instance object",
            kind_of(&value)
        )));
    };
    let history = match doc.remove("history") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => {
            return Err(Error::Malformed("the instance's history is empty".into()))
        }
        None | Some(Value::Null) => {
            return Err(Error::Malformed("the instance has no history list".into()))
        }
        Some(other) => {
            return Err(Error::Malformed(format!(
                "the instance's history is {}, not a list",
                kind_of(&other)
            )))
        }
    };
    let name = doc
        .get("instance_id")
        .and_then(scalar_text)
        .or_else(|| {
            let issue = doc.get("issue")?;
            let owner = non_empty(issue.get("owner"))?;
            let repo = non_empty(issue.get("repo"))?;
            let number = issue.get("number").and_then(scalar_text)?;
            Some(format!("{owner}/{repo}#{number}"))
        })
        .unwrap_or_else(|| format!("line-{line_no}"));
    let id = format!("{file_id}/{name}");
    let metadata = doc.get("metadata");
    let template = RunTemplate {
        agent: non_empty(metadata.and_then(|m| m.get("agent_class"))),
        model: non_empty(metadata.and_then(|m| m.pointer("/llm_config/model"))),
        ..RunTemplate::default()
    };
    Ok(convert(
        input,
        &id,
        &history,
        Some(template),
        OUTPUT,
        Locator::Line(line_no),
        sink,
    ))
}

/// Map a list of events and build its runs.
fn convert(
    input: &Input<'_>,
    id: &str,
    events: &[Value],
    template: Option<RunTemplate>,
    format: &'static str,
    locator: Locator,
    sink: &mut dyn Sink,
) -> Conversation {
    let mut mapper = Mapper::default();
    for (i, event) in events.iter().enumerate() {
        match event {
            // An `[action, observation]` pair.
            Value::Array(pair) => {
                for part in pair {
                    mapper.event(i, part);
                }
            }
            other => mapper.event(i, other),
        }
    }
    for note in &mapper.notes {
        sink.quarantine(partial(input, format, locator.clone(), note.clone()));
    }
    let given = template.unwrap_or_default();
    let template = RunTemplate {
        format: format.to_string(),
        source: input.display.to_string(),
        agent: given.agent,
        model: mapper.model.take().or(given.model),
    };
    trajectory::build(id, mapper.out, &template, sink, locator)
}

/// Turns OpenHands events into format-neutral messages.
#[derive(Default)]
struct Mapper {
    out: Vec<ChatMessage>,
    notes: Vec<String>,
    model: Option<String>,
    /// A message from the user has been seen (a flat history names no source).
    user_seen: bool,
    /// Per action id: the call id of its landing.
    calls: HashMap<String, String>,
    /// Action ids whose observations are left out with them (the user's own commands,
    /// bookkeeping actions).
    unanswerable: HashSet<String>,
    /// Ids of every action read.
    actions: HashSet<String>,
    /// A landing has been made (a flat error observation may answer it).
    called: bool,
}

impl Mapper {
    fn event(&mut self, index: usize, event: &Value) {
        let Value::Object(e) = event else {
            self.notes.push(format!(
                "event {index} is {}, not an object; left out",
                kind_of(event)
            ));
            return;
        };
        let timestamp_ms = e
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_iso_ms);
        if let Some(action) = e.get("action").and_then(Value::as_str) {
            self.action(index, action, e, timestamp_ms);
        } else if let Some(observation) = e.get("observation").and_then(Value::as_str) {
            self.observation(index, observation, e, timestamp_ms);
        } else if e.is_empty() {
            // An empty placeholder (an action that got no observation, in a pair).
        } else {
            self.notes.push(format!(
                "event {index} is neither an action nor an observation; left out"
            ));
        }
    }

    fn action(
        &mut self,
        index: usize,
        action: &str,
        e: &Map<String, Value>,
        timestamp_ms: Option<i64>,
    ) {
        let args = arguments(e);
        let source = e.get("source").and_then(Value::as_str);
        let event_id = e.get("id").and_then(scalar_text);
        if let Some(id) = &event_id {
            self.actions.insert(id.clone());
        }
        let metadata = e.get("tool_call_metadata").filter(|m| m.is_object());
        if let Some(model) = metadata.and_then(|m| non_empty(m.pointer("/model_response/model"))) {
            self.model.get_or_insert(model);
        }
        let thought = args
            .get("thought")
            .or_else(|| e.get("thought"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut chat = match action {
            "message" => {
                let text = content_text(args.get("content"));
                let text = if text.is_empty() {
                    non_empty(e.get("message")).unwrap_or_default()
                } else {
                    text
                };
                let role = match source {
                    Some("user") => Role::User,
                    Some("agent") => Role::Assistant,
                    Some(_) => Role::System,
                    None if !self.user_seen => Role::User,
                    None => Role::Assistant,
                };
                if role == Role::User {
                    self.user_seen = true;
                }
                ChatMessage::new(role, text)
            }
            "system" => ChatMessage::new(Role::System, content_text(args.get("content"))),
            "finish" => {
                let text = non_empty(e.get("message"))
                    .or_else(|| non_empty(args.get("final_thought")))
                    .or_else(|| Some(thought.trim().to_string()).filter(|t| !t.is_empty()))
                    .or_else(|| non_empty(args.get("outputs").and_then(|o| o.get("content"))))
                    .unwrap_or_default();
                ChatMessage::new(Role::Assistant, text)
            }
            "reject" => {
                let text = non_empty(args.get("reason"))
                    .or_else(|| non_empty(e.get("message")))
                    .unwrap_or(thought);
                ChatMessage::new(Role::Assistant, text)
            }
            kind if TOOL_ACTIONS.contains(&kind) || metadata.is_some() => {
                if source == Some("user") {
                    // A command the user ran in the sandbox: not the agent's.
                    if let Some(id) = event_id {
                        self.unanswerable.insert(id);
                    }
                    return;
                }
                let call = tool_call(kind, &args, metadata, event_id.as_deref());
                let mut chat = ChatMessage::new(Role::Assistant, thought);
                self.called = true;
                if let (Some(event), Some(call_id)) = (&event_id, &call.id) {
                    self.calls.insert(event.clone(), call_id.clone());
                }
                chat.tool_calls = vec![call];
                chat
            }
            kind if QUIET_ACTIONS.contains(&kind) => {
                if let Some(id) = event_id {
                    self.unanswerable.insert(id);
                }
                return;
            }
            kind => {
                self.notes.push(format!(
                    "event {index} is an action of the unknown kind {kind:?}; left out"
                ));
                if let Some(id) = event_id {
                    self.unanswerable.insert(id);
                }
                return;
            }
        };
        chat.timestamp_ms = timestamp_ms;
        self.out.push(chat);
    }

    fn observation(
        &mut self,
        index: usize,
        observation: &str,
        e: &Map<String, Value>,
        timestamp_ms: Option<i64>,
    ) {
        let cause = e.get("cause").and_then(scalar_text);
        let tool_call_id = e
            .get("tool_call_metadata")
            .and_then(|m| non_empty(m.get("tool_call_id")));
        if let Some(cause) = &cause {
            if self.unanswerable.contains(cause) {
                return;
            }
        }
        let call_id = cause
            .as_ref()
            .and_then(|c| self.calls.get(c).cloned())
            .or_else(|| tool_call_id.clone());
        let error = observation == "error";
        let text = match e.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => non_empty(e.get("message")).unwrap_or_default(),
            Some(other) => content_text(Some(other)),
        };
        let quiet = QUIET_OBSERVATIONS.contains(&observation);
        let result = match (&cause, call_id) {
            (_, Some(call_id)) => ChatMessage::tool(Some(call_id), None, text, error),
            (Some(cause), None) => {
                let what = if self.actions.contains(cause) {
                    "which ran no tool"
                } else {
                    "which is not in the file"
                };
                if !quiet {
                    self.notes.push(format!(
                        "event {index}: the {observation:?} observation answers event {cause}, \
                         {what}; left out"
                    ));
                }
                return;
            }
            // A flat history: the observation answers the action before it.
            (None, None) if quiet => return,
            (None, None) if error && !self.called => {
                let mut message = ChatMessage::new(Role::System, text);
                message.error = true;
                message.timestamp_ms = timestamp_ms;
                self.out.push(message);
                return;
            }
            (None, None) if !TOOL_OBSERVATIONS.contains(&observation) && !error => {
                self.notes.push(format!(
                    "event {index} is an observation of the unknown kind {observation:?}; left \
                     out"
                ));
                return;
            }
            (None, None) => ChatMessage::tool(None, None, text, error),
        };
        let mut result = result;
        result.timestamp_ms = timestamp_ms;
        self.out.push(result);
    }
}

/// Observation types that carry a tool's result.
const TOOL_OBSERVATIONS: &[&str] = &[
    "run",
    "run_ipython",
    "read",
    "write",
    "edit",
    "browse",
    "mcp",
    "delegate",
    "think",
    "task_tracking",
    "success",
    "user_rejected",
    "download",
    "file_download",
];

/// An action's arguments: its `args`, or, in a flat event, the event less its envelope.
fn arguments(e: &Map<String, Value>) -> Map<String, Value> {
    match e.get("args") {
        Some(Value::Object(args)) => args.clone(),
        _ => e
            .iter()
            .filter(|(k, _)| !FLAT_ENVELOPE.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The landing of a tool action.
fn tool_call(
    kind: &str,
    args: &Map<String, Value>,
    metadata: Option<&Value>,
    event_id: Option<&str>,
) -> ChatToolCall {
    let tool_call_id = metadata.and_then(|m| non_empty(m.get("tool_call_id")));
    let name = metadata
        .and_then(|m| non_empty(m.get("function_name")))
        .unwrap_or_else(|| kind.to_string());
    let recorded = tool_call_id
        .as_deref()
        .and_then(|id| model_arguments(metadata?, id));
    let arguments = recorded.unwrap_or_else(|| {
        let mut args = args.clone();
        args.remove("thought");
        Value::Object(args).to_string()
    });
    ChatToolCall {
        id: tool_call_id.or_else(|| event_id.map(|id| format!("event-{id}"))),
        name,
        arguments,
    }
}

/// The arguments of call `id` as the model wrote them, from the metadata's `model_response`.
fn model_arguments(metadata: &Value, id: &str) -> Option<String> {
    let choices = metadata.pointer("/model_response/choices")?.as_array()?;
    choices
        .iter()
        .filter_map(|c| c.pointer("/message/tool_calls")?.as_array())
        .flatten()
        .find(|call| call.get("id").and_then(Value::as_str) == Some(id))
        .and_then(|call| match call.pointer("/function/arguments")? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        })
}

/// OpenHands event streams (a JSON list of actions and observations).
pub struct OpenHandsEventsAdapter;

impl crate::ingest::Adapter for OpenHandsEventsAdapter {
    fn name(&self) -> &'static str {
        EVENTS
    }
    fn family(&self) -> &'static str {
        FAMILY
    }
    fn about(&self) -> &'static str {
        "OpenHands event streams (a JSON list of actions and observations)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_event_stream(head.text))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read_events(input, sink)
    }
}

/// OpenHands `output.jsonl` (evaluation harness and resolver: one instance and its history a
/// line).
pub struct OpenHandsOutputAdapter;

impl crate::ingest::Adapter for OpenHandsOutputAdapter {
    fn name(&self) -> &'static str {
        OUTPUT
    }
    fn family(&self) -> &'static str {
        FAMILY
    }
    fn about(&self) -> &'static str {
        "OpenHands output.jsonl (evaluation and resolver: an instance and its history a line)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_output_line(head.text))
    }
    fn detect_past_head(
        &self,
        head: &crate::ingest::Head<'_>,
        path: &std::path::Path,
    ) -> crate::ingest::Match {
        // Only a first line the head cuts short.
        crate::ingest::Match::strong_if(
            !head.text.contains('\n')
                && crate::ingest::json_pick::skim_if_first_key(
                    head.text,
                    path,
                    crate::ingest::DETECT_LIMIT,
                    &["instance_id", "issue"],
                    is_skimmed_output_line,
                ),
        )
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read_output(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const OpenHandsEvents: crate::ingest::Format =
        crate::ingest::Format(&OpenHandsEventsAdapter);
    #[allow(non_upper_case_globals)]
    pub const OpenHandsOutput: crate::ingest::Format =
        crate::ingest::Format(&OpenHandsOutputAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Collect, Severity};
    use crate::model::EventKind;
    use serde_json::json;

    fn read_list(value: &Value) -> Collect {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trajectory.json");
        std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
        let mut sink = Collect::default();
        read_events(&Input::new(&path, "trajectory.json"), &mut sink).unwrap();
        sink
    }

    #[test]
    fn an_unknown_event_kind_is_a_partial_note() {
        let events = json!([
            {"id": 0, "timestamp": "2025-01-01T00:00:00", "source": "user", "action": "message",
             "args": {"content": "list the files"}},
            {"id": 1, "source": "agent", "action": "teleport", "args": {"where": "mars"}},
            {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "look"}},
            {"id": 3, "source": "agent", "observation": "hologram", "cause": 1, "content": "?"},
            {"id": 4, "source": "agent", "observation": "run", "cause": 2, "content": "a.py"},
            {"id": 5, "source": "agent", "observation": "teleported", "content": "!"},
            {"id": 6, "source": "agent", "action": "finish", "args": {"final_thought": "a.py"}}
        ]);
        let sink = read_list(&events);
        assert_eq!(sink.records, 1);
        assert_eq!(sink.conversations.len(), 1);
        let notes: Vec<_> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert!(sink
            .quarantined
            .iter()
            .all(|q| q.severity == Severity::Partial));
        // The unknown action is named; its observation goes with it, silently; an unknown
        // observation answering nothing is named.
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("\"teleport\""), "{notes:?}");
        assert!(notes[1].contains("\"teleported\""), "{notes:?}");
        let run = &sink.conversations[0].0.runs[0];
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 1);
        assert_eq!(landings[0].tool_name.as_deref(), Some("run"));
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"command":"ls"}"#)
        );
        assert_eq!(landings[0].call_id.as_deref(), Some("event-2"));
        assert_eq!(landings[0].text.as_deref(), Some("a.py"));
        assert_eq!(run.answer.as_deref(), Some("a.py"));
    }

    #[test]
    fn errors_user_commands_and_missing_causes() {
        let events = json!([
            {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
            {"id": 1, "source": "user", "action": "run", "args": {"command": "whoami"}},
            {"id": 2, "source": "user", "observation": "run", "cause": 1, "content": "root"},
            {"id": 3, "source": "agent", "action": "run",
             "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"},
             "args": {"command": "make"}},
            {"id": 4, "source": "agent", "observation": "error", "cause": 3, "content": "boom"},
            {"id": 5, "source": "agent", "observation": "run", "cause": 99, "content": "lost"},
            {"id": 6, "source": "environment", "observation": "agent_state_changed", "content": ""},
            {"id": 7, "source": "agent", "action": "message", "args": {"content": "it failed"}},
            {"id": 8, "source": "agent", "observation": "run", "cause": 7, "content": "odd"}
        ]);
        let sink = read_list(&events);
        let notes: Vec<_> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("event 99, which is not in the file"),
            "{notes:?}"
        );
        assert!(notes[1].contains("event 7, which ran no tool"), "{notes:?}");
        let run = &sink.conversations[0].0.runs[0];
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 1);
        assert_eq!(landings[0].tool_name.as_deref(), Some("execute_bash"));
        assert_eq!(landings[0].call_id.as_deref(), Some("t1"));
        assert!(landings[0].error);
        assert_eq!(landings[0].text.as_deref(), Some("boom"));
        assert_eq!(run.answer.as_deref(), Some("it failed"));
        assert!(run
            .events
            .iter()
            .all(|e| e.text.as_deref() != Some("root") && e.kind.is_some()));
        assert!(run
            .events
            .iter()
            .any(|e| e.kind == Some(EventKind::Landing)));
    }

    #[test]
    fn flat_histories_pair_in_order() {
        let line = json!({
            "instance_id": "repo__1", "instruction": "fix it",
            "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "gpt-x"}},
            "history": [
                [{"action": "message", "content": "fix it"}, {}],
                {"action": "run", "command": "ls", "thought": "look", "is_confirmed": "confirmed"},
                {"observation": "run", "content": "a.py", "command": "ls", "exit_code": 0},
                {"action": "run_ipython", "code": "print(1)", "thought": ""},
                {"observation": "error", "content": "kernel died"},
                {"action": "finish", "outputs": {}, "thought": "done"}
            ]
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.jsonl");
        let text = format!("{line}\n\n{{\"instance_id\": 2}}\nnot json\n");
        std::fs::write(&path, text).unwrap();
        let mut sink = Collect::default();
        read_output(&Input::new(&path, "output.jsonl"), &mut sink).unwrap();
        assert_eq!(sink.records, 3);
        assert_eq!(sink.conversations.len(), 1);
        let dropped: Vec<_> = sink.quarantined.iter().map(|q| &q.locator).collect();
        assert_eq!(dropped, vec![&Locator::Line(3), &Locator::Line(4)]);
        let (conv, record) = &sink.conversations[0];
        assert_eq!(*record, 1);
        assert!(conv.id.ends_with("/repo__1"), "{}", conv.id);
        let run = &conv.runs[0];
        assert_eq!(run.agent.as_deref(), Some("CodeActAgent"));
        assert_eq!(run.model.as_deref(), Some("gpt-x"));
        assert_eq!(run.user_message.as_deref(), Some("fix it"));
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 2);
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"command":"ls"}"#)
        );
        assert_eq!(landings[0].text.as_deref(), Some("a.py"));
        assert_eq!(landings[1].tool_name.as_deref(), Some("run_ipython"));
        assert!(landings[1].error);
        assert_eq!(run.answer.as_deref(), Some("done"));
    }

    /// An evaluation line whose `test_result` holds a patch larger than the detection head, so
    /// that `metadata` and `history` fall past it, is still detected and read.
    #[test]
    fn a_large_patch_before_the_history_does_not_hide_the_line() {
        let patch = format!("diff --git a/x.py b/x.py\n{}", "+x = 1\n".repeat(20_000));
        let line = json!({
            "instance_id": "repo__big-1",
            "test_result": {"git_patch": patch},
            "instruction": "fix it",
            "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "gpt-x"}},
            "history": [
                {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
                {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
                {"id": 2, "source": "agent", "observation": "run", "cause": 1, "content": "x.py"},
                {"id": 3, "source": "agent", "action": "finish", "args": {"final_thought": "done"}}
            ]
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.jsonl");
        std::fs::write(&path, format!("{line}\n{line}\n")).unwrap();
        let head = crate::ingest::read_head(&path).unwrap();
        assert_eq!(crate::ingest::Format::detect(&head), None);
        assert_eq!(
            crate::ingest::Format::detect_file(&path, &head),
            Some(crate::ingest::Format::OpenHandsOutput)
        );
        let sink = crate::ingest::read_path(&path, None).unwrap();
        assert_eq!(sink.conversations.len(), 2);
        assert_eq!(sink.conversations[0].0.runs[0].landings().count(), 1);
    }

    #[test]
    fn detection() {
        assert!(is_event_stream(
            "[\n  {\n    \"id\": 0,\n    \"timestamp\": \"2025\",\n    \"source\": \"user\",\n    \"action\": \"message\""
        ));
        assert!(!is_event_stream("[{\"traj\": [], \"task_id\": 1}]"));
        assert!(!is_event_stream("[{\"id\": 1, \"role\": \"user\"}]"));
        assert!(is_output_line(
            "{\"instance_id\": \"a\", \"instruction\": \"x\", \"history\": []}\n"
        ));
        assert!(is_output_line(
            "{\"issue\": {}, \"issue_type\": \"issue\", \"instruction\": \"x\"}"
        ));
        assert!(!is_output_line(
            "{\"instance_id\": \"a\", \"model_patch\": \"diff\"}"
        ));
        assert!(!is_output_line("{\"history\": [{\"action\": \"ls\"}]}"));
        for (text, format) in [
            (
                "[{\"id\": 0, \"source\": \"user\", \"action\": \"message\"}]",
                crate::ingest::Format::OpenHandsEvents,
            ),
            (
                "{\"instance_id\": \"a\", \"history\": []}",
                crate::ingest::Format::OpenHandsOutput,
            ),
        ] {
            assert_eq!(crate::ingest::Format::detect(text.as_bytes()), Some(format));
        }
    }
}
