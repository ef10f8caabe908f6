//! Bare message lists: a trajectory saved as a JSON list of chat messages, as older
//! mini-swe-agent versions and many scripts save one (`[{"role", "content", "tool_calls"}, ...]`).
//!
//! A file is one conversation (named as SWE-agent's are: [`swe_agent::conversation_id`]) and one
//! record, read whole. A message is `role` (`system`/`developer`, `user`, `assistant`, `tool`,
//! and the older `function`), `content` (a string or a list of parts: the `text` of `text`,
//! `input_text` and `output_text` parts), an assistant's `tool_calls` (`id`, `function.name`,
//! `function.arguments`) and a tool message's `tool_call_id`. In a chat-completions list every
//! user message is the person speaking, so each starts a run (under the shared trajectory rules:
//! a user message inside the agent's open turn is the harness's, see
//! [`trajectory`](crate::ingest::trajectory)). A message of an unknown role, or not an object,
//! is a partial note and left out.
//!
//! A list that early mini-swe-agent versions saved (no `tool_calls`; the commands are fenced
//! ```` ```bash ```` blocks in the assistant's text, each answered by a user message opening
//! with `<returncode>`) is read by mini-swe-agent's rules instead: each block a landing of the
//! command, the user message after it its result
//! ([`mini_swe_agent::is_bare_trajectory`](crate::ingest::mini_swe_agent::is_bare_trajectory)).

use crate::error::Error;
use std::io;

use serde_json::{Map, Value};

use crate::ingest::json_pick::{dropped, kind_of, non_empty_str, partial};
use crate::ingest::limits::{json_error, read_document};
use crate::ingest::swe_agent::conversation_id;
use crate::ingest::trajectory::{self, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Locator, Sink};
use crate::model::Role;

const FORMAT: &str = "message-list";

/// Does the head start a JSON list whose first item is a chat message (its first key `role` or
/// `content`)? Lists of other records (tau-bench's, tau2's) start with other keys and are
/// matched before this one (a weak match) in any case.
pub(crate) fn is_message_list(text: &str) -> bool {
    text.strip_prefix('[').is_some_and(|rest| {
        matches!(
            crate::ingest::json_pick::first_key(rest),
            Some("role" | "content")
        )
    })
}

pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    sink.records_read(1);
    let bytes = match read_document(input.path, &input.limits)? {
        Ok(bytes) => bytes,
        Err(reason) => {
            sink.quarantine(dropped(input, FORMAT, Locator::File, reason.to_string()));
            return Ok(());
        }
    };
    let list = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Array(list)) if !list.is_empty() => list,
        Ok(Value::Array(_)) => {
            sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::File,
                "the message list is empty",
            ));
            return Ok(());
        }
        Ok(other) => {
            let reason = format!("the document is {}, not a message list", kind_of(&other));
            sink.quarantine(dropped(input, FORMAT, Locator::File, reason));
            return Ok(());
        }
        Err(e) => {
            let reason = format!("not a readable message list: {}", json_error(&e));
            sink.quarantine(dropped(input, FORMAT, Locator::File, reason));
            return Ok(());
        }
    };
    if crate::ingest::mini_swe_agent::is_bare_trajectory(&list) {
        let conversation = crate::ingest::mini_swe_agent::conversation_of(
            input,
            &list,
            &Value::Null,
            FORMAT,
            sink,
        );
        sink.conversation(conversation, 0);
        return Ok(());
    }
    let mut messages = Vec::new();
    for (k, value) in list.iter().enumerate() {
        match value {
            Value::Object(m) => match message(m) {
                Ok(chat) => messages.push(chat),
                Err(why) => sink.quarantine(partial(
                    input,
                    FORMAT,
                    Locator::Record(k as u64),
                    format!("message {k} {why}; left out"),
                )),
            },
            other => sink.quarantine(partial(
                input,
                FORMAT,
                Locator::Record(k as u64),
                format!("message {k} is {}, not an object; left out", kind_of(other)),
            )),
        }
    }
    let template = RunTemplate {
        format: FORMAT.to_string(),
        source: input.display.to_string(),
        agent: None,
        model: None,
    };
    let id = conversation_id(std::path::Path::new(input.name));
    let conversation = trajectory::build(&id, messages, &template, sink, Locator::File);
    sink.conversation(conversation, 0);
    Ok(())
}

fn message(m: &Map<String, Value>) -> crate::error::Result<ChatMessage> {
    let text = parts_text(m.get("content"));
    let mut chat = match m.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => ChatMessage::new(Role::System, text),
        Some("user" | "human") => ChatMessage::new(Role::User, text),
        Some("assistant" | "ai") => {
            let mut chat = ChatMessage::new(Role::Assistant, text);
            if let Some(Value::Array(calls)) = m.get("tool_calls") {
                for (k, call) in calls.iter().enumerate() {
                    let function = call.get("function");
                    let name = function
                        .and_then(|f| f.get("name"))
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            Error::Malformed(format!("has a tool call {k} with no name"))
                        })?;
                    let arguments = match function.and_then(|f| f.get("arguments")) {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => "{}".to_string(),
                        Some(other) => other.to_string(),
                    };
                    chat.tool_calls.push(ChatToolCall {
                        id: call.get("id").and_then(non_empty_str),
                        name: name.to_string(),
                        arguments,
                    });
                }
            }
            chat
        }
        Some("tool" | "function") => ChatMessage::tool(
            m.get("tool_call_id").and_then(non_empty_str),
            m.get("name").and_then(non_empty_str),
            text,
            false,
        ),
        Some(role) => return Err(Error::Malformed(format!("has the unknown role {role:?}"))),
        None => return Err(Error::Malformed("has no role".to_string())),
    };
    chat.timestamp_ms = m
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(trajectory::parse_iso_ms);
    Ok(chat)
}

/// A message's text: its string, or its parts' text, one per line (images carry none).
fn parts_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                    None | Some("text" | "input_text" | "output_text") => {
                        o.get("text").and_then(Value::as_str)
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Bare chat message lists (`[{"role", "content", "tool_calls"}, ...]`).
pub struct MessageListAdapter;

impl crate::ingest::Adapter for MessageListAdapter {
    fn name(&self) -> &'static str {
        FORMAT
    }
    fn family(&self) -> &'static str {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "bare chat message lists (a JSON list of role/content/tool_calls messages)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        if is_message_list(head.text) {
            crate::ingest::Match::Weak
        } else {
            crate::ingest::Match::No
        }
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const MessageList: crate::ingest::Format = crate::ingest::Format(&MessageListAdapter);
}
