//! OpenAI Codex CLI rollouts: `rollout-<time>-<id>.jsonl`, one JSON object per line.
//!
//! Two layouts, told apart line by line:
//! - the envelope (Codex 0.3x and later): `{"timestamp", "type", "payload"}` with `type`
//!   `session_meta` (the session's `id`), `turn_context` (the `model`), `response_item` (an item
//!   of the Responses API, below), `event_msg`, `compacted`, `world_state` and
//!   `inter_agent_communication_metadata`;
//! - the older bare layout: a first line holding the session meta itself (`id`, `timestamp`,
//!   and `instructions` when there were any), then response items one per line, and
//!   `{"record_type": "state"}` lines.
//!
//! A file is one conversation (the session id, else the file name). Response items read:
//! `message` (role `user`, `assistant`, `developer`/`system`; parts `input_text`,
//! `output_text`), `function_call` / `function_call_output`, `custom_tool_call` /
//! `custom_tool_call_output` and `local_shell_call`, joined to their outputs by `call_id`; a call
//! id seen again is read once. A user message is the person's prompt and starts a run, except the
//! texts Codex injects (`<environment_context>`, `<user_instructions>`, `# AGENTS.md
//! instructions`), which are system text. An output is its text, or its content items' `text`;
//! a shell output of the form `{"output", "metadata": {"exit_code"}}` with a non-zero exit code
//! is an error, as is a `success: false` output. `reasoning` items and `event_msg` entries (which
//! repeat the items as UI events) are not messages, except that a file holding no `message` item
//! at all is read from its `user_message` and `agent_message` events. `web_search_call`,
//! `image_generation_call` and `tool_search_call` / `tool_search_output` items (built-in tools
//! whose work is not a call of the agent's tools) and sub-agents' `agent_message` items are not
//! read. Token counts (`token_count` events) are not read: the run model has no place for them.
//! An unknown item or entry type is a partial note; a line that is not JSON is dropped with its
//! reason.

use std::collections::HashSet;
use std::io;

use serde_json::{Map, Value};

use crate::ingest::json_pick::{dropped, kind_of, non_empty_str, partial};
use crate::ingest::trajectory::{self, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Locator, Sink};
use crate::model::Role;

const FORMAT: &str = "codex";

/// Item types that are not messages: reasoning, snapshots, the built-in tools whose results
/// sit in the item itself or in no item (web search, image generation, tool search), and the
/// messages sub-agents send each other.
const NOT_MESSAGES: &[&str] = &[
    "reasoning",
    "web_search_call",
    "compaction",
    "ghost_snapshot",
    "image_generation_call",
    "tool_search_call",
    "tool_search_output",
    "agent_message",
];

/// Envelope types that carry no item: session state and the sub-agents' bookkeeping.
const NOT_ITEMS: &[&str] = &[
    "event_msg",
    "compacted",
    "world_state",
    "inter_agent_communication_metadata",
];

/// Does the head look like a Codex rollout? A first line that is a `session_meta` envelope, or
/// another envelope (`{timestamp, type, payload}` and nothing else, of a type Codex writes: a
/// rollout whose meta line was cut off), or the older bare session meta (`id`, `timestamp`, and
/// optionally `instructions` and `git`) followed by response items.
pub(crate) fn is_rollout(text: &str) -> bool {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    if !first.starts_with('{') {
        return false;
    }
    let parsed = serde_json::from_str::<Map<String, Value>>(first).ok();
    if let Some(entry) = &parsed {
        let envelope = entry.len() == 3
            && entry.get("timestamp").is_some_and(Value::is_string)
            && entry.get("payload").is_some_and(Value::is_object)
            && entry.get("type").and_then(Value::as_str).is_some_and(|t| {
                matches!(
                    t,
                    "session_meta" | "turn_context" | "response_item" | "event_msg"
                )
            });
        if envelope {
            return true;
        }
    }
    let compact = |l: &str| l.replace("\": ", "\":");
    let first = compact(first);
    if first.contains("\"type\":\"session_meta\"") && first.contains("\"payload\":") {
        return true;
    }
    let bare_meta = match &parsed {
        Some(entry) => {
            entry.get("id").is_some_and(Value::is_string)
                && entry.contains_key("timestamp")
                && entry
                    .keys()
                    .all(|k| matches!(k.as_str(), "id" | "timestamp" | "instructions" | "git"))
        }
        None => {
            first.contains("\"id\":")
                && first.contains("\"timestamp\":")
                && first.contains("\"instructions\":")
        }
    };
    bare_meta
        && lines.next().is_some_and(|second| {
            let second = compact(second);
            second.starts_with('{')
                && (second.contains("\"record_type\":\"state\"")
                    || second.contains("\"type\":\"message\"")
                    || second.contains("\"type\":\"function_call\"")
                    || second.contains("\"type\":\"reasoning\""))
        })
}

#[derive(Default)]
struct Rollout {
    id: Option<String>,
    model: Option<String>,
    agent: Option<String>,
    /// The messages in file order, each marked whether it comes from an `event_msg` (read only
    /// when the file holds no `message` item).
    messages: Vec<(bool, ChatMessage)>,
    message_items: bool,
    seen_calls: HashSet<String>,
    /// Partial notes, each once.
    unknown: Vec<String>,
}

pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut rollout = Rollout::default();
    let mut first = true;
    crate::ingest::jsonl::read_lines(input, sink, |line, value, sink| {
        let is_first = std::mem::take(&mut first);
        match value {
            Err(reason) => sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::Line(line),
                reason.to_string(),
            )),
            Ok(Value::Object(entry)) => rollout.line(is_first, &entry),
            Ok(other) => sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::Line(line),
                format!("the line is {}, not a rollout entry", kind_of(&other)),
            )),
        }
    })?;
    for note in &rollout.unknown {
        sink.quarantine(partial(input, FORMAT, Locator::File, note.clone()));
    }
    let from_events = !rollout.message_items;
    let messages: Vec<ChatMessage> = std::mem::take(&mut rollout.messages)
        .into_iter()
        .filter(|(event, _)| from_events || !event)
        .map(|(_, m)| m)
        .collect();
    if messages.is_empty() {
        sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            "the rollout holds no message and no tool call; no run is read".to_string(),
        ));
        return Ok(());
    }
    let id = rollout.id.clone().unwrap_or_else(|| {
        std::path::Path::new(input.name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| input.display.to_string())
    });
    let template = RunTemplate {
        format: FORMAT.to_string(),
        source: input.display.to_string(),
        agent: rollout.agent.clone().or_else(|| Some("codex".to_string())),
        model: rollout.model.clone(),
    };
    let conversation = trajectory::build(&id, messages, &template, sink, Locator::File);
    sink.conversation(conversation, 0);
    Ok(())
}

impl Rollout {
    fn line(&mut self, first: bool, entry: &Map<String, Value>) {
        let timestamp_ms = entry
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(trajectory::parse_iso_ms);
        match (
            entry.get("type").and_then(Value::as_str),
            entry.get("payload"),
        ) {
            (Some("session_meta"), Some(Value::Object(meta))) => self.meta(meta),
            (Some("turn_context"), Some(Value::Object(context))) => {
                if self.model.is_none() {
                    self.model = context.get("model").and_then(non_empty_str);
                }
            }
            (Some("response_item"), Some(Value::Object(item))) => self.item(item, timestamp_ms),
            (Some("event_msg"), Some(Value::Object(event))) => self.event(event, timestamp_ms),
            (Some(kind), Some(_)) if NOT_ITEMS.contains(&kind) => {}
            // The older layout: the first line is the session meta, the others bare items.
            (None, _) if first && entry.contains_key("id") => self.meta(entry),
            (None, _) if entry.contains_key("record_type") => {}
            (Some(_), None) => self.item(entry, timestamp_ms),
            (kind, _) => self.note(format!(
                "entries of the unknown type {:?} are not read; left out",
                kind.unwrap_or("(none)")
            )),
        }
    }

    /// The events that repeat a message: the person's prompt and the agent's reply, read when
    /// the file holds no `message` item (a rollout whose items were not kept).
    fn event(&mut self, event: &Map<String, Value>, timestamp_ms: Option<i64>) {
        let role = match event.get("type").and_then(Value::as_str) {
            Some("user_message") => Role::User,
            Some("agent_message") => Role::Assistant,
            _ => return,
        };
        let Some(text) = event.get("message").and_then(Value::as_str) else {
            return;
        };
        let mut chat = ChatMessage::new(role, text);
        chat.timestamp_ms = timestamp_ms;
        self.messages.push((true, chat));
    }

    fn meta(&mut self, meta: &Map<String, Value>) {
        if self.id.is_none() {
            self.id = meta.get("id").and_then(non_empty_str);
        }
        if self.agent.is_none() {
            self.agent = meta.get("originator").and_then(non_empty_str);
        }
    }

    fn note(&mut self, note: String) {
        if !self.unknown.contains(&note) {
            self.unknown.push(note);
        }
    }

    fn note_item(&mut self, kind: &str) {
        self.note(format!(
            "items of the unknown type {kind:?} are not read; left out"
        ));
    }

    fn item(&mut self, item: &Map<String, Value>, timestamp_ms: Option<i64>) {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("(none)");
        let mut chat = match kind {
            "message" => {
                let text = parts_text(item.get("content"));
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("user") if is_injected(&text) => Role::System,
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    Some("developer" | "system") => Role::System,
                    _ => return self.note_item("message of an unknown role"),
                };
                self.message_items = true;
                ChatMessage::new(role, text)
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let arguments = match kind {
                    "function_call" => item.get("arguments"),
                    "custom_tool_call" => item.get("input"),
                    _ => item.get("action"),
                };
                let arguments = match arguments {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => "{}".to_string(),
                    Some(other) => other.to_string(),
                };
                let name = match kind {
                    "local_shell_call" => Some("local_shell".to_string()),
                    _ => item.get("name").and_then(non_empty_str),
                };
                let id = item
                    .get("call_id")
                    .and_then(non_empty_str)
                    .or_else(|| item.get("id").and_then(non_empty_str));
                if let Some(id) = &id {
                    if !self.seen_calls.insert(id.clone()) {
                        return;
                    }
                }
                let mut chat = ChatMessage::new(Role::Assistant, String::new());
                chat.tool_calls.push(ChatToolCall {
                    id,
                    name: name.unwrap_or_default(),
                    arguments,
                });
                chat
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                let (text, error) = output(item.get("output"));
                ChatMessage::tool(
                    item.get("call_id").and_then(non_empty_str),
                    None,
                    text,
                    error,
                )
            }
            k if NOT_MESSAGES.contains(&k) => return,
            k => return self.note_item(k),
        };
        chat.timestamp_ms = timestamp_ms;
        self.messages.push((false, chat));
    }
}

/// The user-role texts Codex writes itself: the environment and the project's instructions.
fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<environment_context>")
        || t.starts_with("<user_instructions>")
        || t.starts_with("# AGENTS.md instructions")
}

/// A message's text: its string, or its parts' `text`, one per line.
fn parts_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A call's output and whether it failed: the text as written, or the `text` of its content
/// items one per line (a list, or an object's `content`); a shell result's non-zero
/// `metadata.exit_code`, or `success: false`, is a failure.
fn output(value: Option<&Value>) -> (String, bool) {
    let failed = |o: &Map<String, Value>| {
        o.get("metadata")
            .and_then(|m| m.get("exit_code"))
            .and_then(Value::as_i64)
            .is_some_and(|c| c != 0)
            || o.get("success").and_then(Value::as_bool) == Some(false)
    };
    match value {
        Some(Value::String(s)) => {
            let error = match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(o)) => failed(&o),
                _ => false,
            };
            (s.clone(), error)
        }
        Some(Value::Array(_)) => (parts_text(value), false),
        Some(Value::Object(o)) => {
            let text = match (o.get("content"), o.get("text")) {
                (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.clone(),
                (Some(parts @ Value::Array(_)), _) => parts_text(Some(parts)),
                _ => Value::Object(o.clone()).to_string(),
            };
            (text, failed(o))
        }
        None | Some(Value::Null) => (String::new(), false),
        Some(other) => (other.to_string(), false),
    }
}

/// OpenAI Codex CLI rollouts (`rollout-*.jsonl`).
pub struct CodexAdapter;

impl crate::ingest::Adapter for CodexAdapter {
    fn name(&self) -> &'static str {
        FORMAT
    }
    fn family(&self) -> &'static str {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "OpenAI Codex CLI rollouts (rollout-*.jsonl, with or without the envelope)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_rollout(head.text))
    }
    fn detect_past_head(
        &self,
        head: &crate::ingest::Head<'_>,
        path: &std::path::Path,
    ) -> crate::ingest::Match {
        // The older layout's session meta, cut short by long `instructions`: its members are
        // the meta's own and no others.
        let is_meta = |members: &[crate::ingest::json_pick::Member]| {
            let has = |key: &str| members.iter().any(|m| m.key == key);
            let only_meta = members
                .iter()
                .all(|m| matches!(m.key.as_str(), "id" | "timestamp" | "instructions" | "git"));
            only_meta && has("id") && has("timestamp") && has("instructions")
        };
        crate::ingest::Match::strong_if(
            !head.text.contains('\n')
                && crate::ingest::json_pick::skim_if_first_key(
                    head.text,
                    path,
                    crate::ingest::DETECT_LIMIT,
                    &["id"],
                    is_meta,
                ),
        )
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const Codex: crate::ingest::Format = crate::ingest::Format(&CodexAdapter);
}
